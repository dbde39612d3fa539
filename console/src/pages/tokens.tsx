import { useState } from 'preact/hooks'
import { api } from '../api'
import { policyProblems } from '../policy'
import {
  confirmed,
  errorFor,
  FormError,
  jsonValid,
  Loading,
  Page,
  Pager,
  ShownOnce,
  TextField,
  useAction,
  useLoad,
} from '../ui'
import { PolicyEditor } from './groups'

interface Sat {
  id: string
  name: string
  not_valid_after: string
  allowed_uses: number | null
  consumed_uses: number
}

const FIELDS = ['name', 'policy', 'not_valid_after', 'allowed_uses'] as const
const PER_PAGE = 20

function inAnHour(): string {
  return new Date(Date.now() + 3_600_000).toISOString().replace(/\.\d{3}Z$/, 'Z')
}

export function TokensPage() {
  const [page, setPage] = useState(1)
  const sats = useLoad(
    () =>
      api<{ data: { items: Sat[]; total: number } }>('GET', '/v1/scoped_access_tokens', {
        query: { page, per_page: PER_PAGE },
      }),
    [page],
  )
  const [name, setName] = useState('')
  const [policy, setPolicy] = useState('[\n  { "Resources": ["Vault::.*"], "Activities": "R" }\n]')
  const [expiry, setExpiry] = useState(inAnHour())
  const [uses, setUses] = useState('')
  const [secret, setSecret] = useState('')
  const create = useAction()
  const revoke = useAction()
  const d = sats.data?.data
  return (
    <Page title="Scoped access tokens">
      <Loading loaded={sats} />
      <table>
        <caption class="visually-hidden">Scoped access tokens</caption>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Valid until</th>
            <th scope="col">Uses</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {(d?.items ?? []).map((s) => (
            <tr key={s.id}>
              <td>{s.name}</td>
              <td>{s.not_valid_after}</td>
              <td>
                {s.consumed_uses}
                {s.allowed_uses === null ? ' (no limit)' : ` of ${s.allowed_uses}`}
              </td>
              <td>
                <button
                  type="button"
                  class="danger"
                  aria-label={`Revoke ${s.name}`}
                  onClick={() => {
                    if (!confirmed(`Revoke ${s.name}? It and every token it minted stop working.`))
                      return
                    void revoke.run(async () => {
                      await api('DELETE', `/v1/scoped_access_tokens/${s.id}`)
                      sats.reload()
                    })
                  }}
                >
                  Revoke
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <FormError error={revoke.error} />
      <Pager
        label="Scoped access tokens"
        page={page}
        hasNext={d ? page * PER_PAGE < d.total : false}
        total={d?.total}
        onPage={setPage}
      />
      <form
        class="card"
        aria-label="Create a scoped access token"
        noValidate
        onSubmit={(e) => {
          e.preventDefault()
          setSecret('')
          void create.run(async () => {
            const answer = await api<{
              scoped_access_token: { http_auth: { username: string; password: string } }
            }>('POST', '/v1/scoped_access_tokens', {
              json: {
                name,
                policy: JSON.parse(policy),
                not_valid_after: expiry.trim(),
                allowed_uses: uses.trim() === '' ? null : Number(uses),
              },
            })
            const auth = answer.scoped_access_token.http_auth
            setSecret(`${auth.username}:${auth.password}`)
            sats.reload()
          })
        }}
      >
        <h2>Create a scoped access token</h2>
        <TextField
          label="Name"
          name="name"
          value={name}
          onInput={setName}
          error={errorFor(create.error, 'name', FIELDS)}
        />
        <PolicyEditor
          value={policy}
          onInput={setPolicy}
          error={errorFor(create.error, 'policy', FIELDS)}
        />
        <TextField
          label="Valid until (ISO 8601, UTC)"
          name="not_valid_after"
          value={expiry}
          onInput={setExpiry}
          error={errorFor(create.error, 'not_valid_after', FIELDS)}
        />
        <TextField
          label="Allowed uses (empty: no limit)"
          name="allowed_uses"
          value={uses}
          onInput={setUses}
          inputMode="numeric"
          error={errorFor(create.error, 'allowed_uses', FIELDS)}
        />
        <FormError error={create.error} fields={FIELDS} />
        <button type="submit" disabled={create.busy || !jsonValid(policy, policyProblems)}>
          Create token
        </button>
        {secret && <ShownOnce label="The token's HTTP Basic pair (user:password)" value={secret} />}
      </form>
    </Page>
  )
}
