import { useState } from 'preact/hooks'
import { api } from '../api'
import { Loading, Page, Pager, SelectField, TextField, useLoad } from '../ui'

interface AuditEvent {
  seq: number
  at: string
  actor_user_id: string | null
  credential_kind: string | null
  operation: string
  decision: string
  reason: string | null
  status: number
}

const PER_PAGE = 25

export function AuditPage() {
  const [page, setPage] = useState(1)
  const [operation, setOperation] = useState('')
  const [decision, setDecision] = useState('')
  const [filters, setFilters] = useState({ operation: '', decision: '' })
  const events = useLoad(
    () =>
      api<{ data: { items: AuditEvent[]; total: number } }>('GET', '/v1/audit_events', {
        query: { page, per_page: PER_PAGE, ...filters },
      }),
    [page, filters],
  )
  const d = events.data?.data
  return (
    <Page title="Audit log">
      <form
        class="filters"
        aria-label="Filter the audit log"
        onSubmit={(e) => {
          e.preventDefault()
          setPage(1)
          setFilters({ operation: operation.trim(), decision })
        }}
      >
        <TextField
          label="Operation"
          name="operation"
          value={operation}
          onInput={setOperation}
          placeholder="document.read"
        />
        <SelectField
          label="Decision"
          name="decision"
          value={decision}
          options={[['', 'any'], 'allowed', 'denied', 'error']}
          onChange={setDecision}
        />
        <button type="submit">Filter</button>
      </form>
      <Loading loaded={events} />
      <table>
        <caption class="visually-hidden">Audit events</caption>
        <thead>
          <tr>
            <th scope="col">#</th>
            <th scope="col">When</th>
            <th scope="col">Operation</th>
            <th scope="col">Actor</th>
            <th scope="col">Decision</th>
            <th scope="col">Status</th>
          </tr>
        </thead>
        <tbody>
          {(d?.items ?? []).map((e) => (
            <tr key={e.seq}>
              <td>{e.seq}</td>
              <td>{e.at}</td>
              <td>{e.operation}</td>
              <td>
                <code>{e.actor_user_id ?? '—'}</code> {e.credential_kind ?? ''}
              </td>
              <td>
                {e.decision}
                {e.reason ? ` (${e.reason})` : ''}
              </td>
              <td>{e.status}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <Pager
        label="Audit events"
        page={page}
        hasNext={d ? page * PER_PAGE < d.total : false}
        total={d?.total}
        onPage={setPage}
      />
    </Page>
  )
}
