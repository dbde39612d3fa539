import { useState } from 'preact/hooks'
import { api } from '../api'
import { policyProblems } from '../policy'
import {
  errorFor,
  FormError,
  jsonValid,
  Page,
  Pager,
  SelectField,
  TextField,
  useAction,
  useLoad,
} from '../ui'
import { PolicyEditor } from './groups'
import type { User } from './users'

/** A grant as `POST /v1/policy/explain` and `GET /v1/policy/access` name it. */
interface Grant {
  /** Null for a statement of a pasted policy. */
  group_id: string | null
  group_name: string | null
  statement_index: number
  resource_matcher: string
  activities: string
  condition?: string
}

interface Explanation {
  resource: string
  subject: unknown
  activities: { activity: string; allowed: boolean; granted_by: Grant[] }[]
}

interface AccessItem {
  user_id: string
  username: string
  status: string
  activities: string
  granted_by: Grant[]
}

interface AccessPage {
  data: {
    items: AccessItem[]
    info: { current_page: number; per_page: number; num_pages: number; total_result_count: number }
  }
}

const FIELDS = ['user_id', 'policy', 'resource', 'activities'] as const
const PER_PAGE = 20

function Grants({ grants }: { grants: Grant[] }) {
  if (grants.length === 0) return <span>no statement</span>
  return (
    <ul class="grants">
      {grants.map((g) => (
        <li key={`${g.group_id}:${g.statement_index}:${g.resource_matcher}`}>
          {g.group_id === null ? (
            'the pasted policy'
          ) : (
            <>
              group <strong>{g.group_name}</strong>
            </>
          )}
          , statement {g.statement_index + 1}: <code>{g.resource_matcher}</code> ({g.activities})
          {g.condition ? ` when ${g.condition}` : ''}
        </li>
      ))}
    </ul>
  )
}

function Explain() {
  const users = useLoad(() => api<{ users: User[] }>('GET', '/v1/users'), [])
  const [subject, setSubject] = useState<'user' | 'policy'>('user')
  const [userId, setUserId] = useState('')
  const [policy, setPolicy] = useState('[\n  { "Resources": ["Vault::.*"], "Activities": "R" }\n]')
  const [resource, setResource] = useState('')
  const [activities, setActivities] = useState('CRUD')
  const [answer, setAnswer] = useState<Explanation | null>(null)
  const { busy, error, run } = useAction()
  const choices = users.data?.users ?? []
  const chosen = userId || choices[0]?.id || ''
  return (
    <form
      class="card"
      aria-label="Explain a decision"
      noValidate
      onSubmit={(e) => {
        e.preventDefault()
        setAnswer(null)
        void run(async () => {
          const body = {
            ...(subject === 'user' ? { user_id: chosen } : { policy: JSON.parse(policy) }),
            resource: resource.trim(),
            activities: activities.trim() || 'CRUD',
          }
          const res = await api<{ explanation: Explanation }>('POST', '/v1/policy/explain', {
            json: body,
          })
          setAnswer(res.explanation)
        })
      }}
    >
      <h2>What may this subject do to a resource?</h2>
      <fieldset>
        <legend>Subject</legend>
        <label>
          <input
            type="radio"
            name="subject"
            checked={subject === 'user'}
            onChange={() => setSubject('user')}
          />{' '}
          a user (their groups' policies)
        </label>
        <label>
          <input
            type="radio"
            name="subject"
            checked={subject === 'policy'}
            onChange={() => setSubject('policy')}
          />{' '}
          a policy pasted here
        </label>
      </fieldset>
      {subject === 'user' ? (
        <SelectField
          label="User"
          name="user_id"
          value={chosen}
          options={choices.map((u) => [u.id, `${u.username} (${u.status})`] as [string, string])}
          onChange={setUserId}
          error={errorFor(error, 'user_id', FIELDS)}
        />
      ) : (
        <PolicyEditor
          label="Policy to try"
          value={policy}
          onInput={setPolicy}
          error={errorFor(error, 'policy', FIELDS)}
        />
      )}
      <TextField
        label="Resource"
        name="resource"
        value={resource}
        onInput={setResource}
        placeholder="Vault::<vault id>::Document::<document id>"
        required
        error={errorFor(error, 'resource', FIELDS)}
      />
      <TextField
        label="Activities"
        name="activities"
        value={activities}
        onInput={setActivities}
        hint="Letters C, R, U, D (default all four)"
        error={errorFor(error, 'activities', FIELDS)}
      />
      <FormError error={error} fields={FIELDS} />
      <button
        type="submit"
        disabled={busy || (subject === 'policy' && !jsonValid(policy, policyProblems))}
      >
        Explain
      </button>
      {answer && (
        <table aria-label="Decision per activity">
          <thead>
            <tr>
              <th scope="col">Activity</th>
              <th scope="col">Decision</th>
              <th scope="col">Granted by</th>
            </tr>
          </thead>
          <tbody>
            {answer.activities.map((a) => (
              <tr key={a.activity} data-activity={a.activity}>
                <th scope="row">{a.activity}</th>
                <td class={a.allowed ? 'allowed' : 'denied'}>{a.allowed ? 'allowed' : 'denied'}</td>
                <td>
                  <Grants grants={a.granted_by} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </form>
  )
}

function WhoHasAccess() {
  const [resource, setResource] = useState('')
  const [asked, setAsked] = useState<{ resource: string; page: number } | null>(null)
  const [answer, setAnswer] = useState<AccessPage['data'] | null>(null)
  const { busy, error, run } = useAction()
  const load = (resourceText: string, page: number) => {
    setAsked({ resource: resourceText, page })
    void run(async () => {
      const res = await api<AccessPage>('GET', '/v1/policy/access', {
        query: { resource: resourceText, page, per_page: PER_PAGE },
      })
      setAnswer(res.data)
    })
  }
  return (
    <form
      class="card"
      aria-label="Who has access"
      noValidate
      onSubmit={(e) => {
        e.preventDefault()
        load(resource.trim(), 1)
      }}
    >
      <h2>Who can read or change this?</h2>
      <TextField
        label="Resource (vault, document or BLOB)"
        name="resource"
        value={resource}
        onInput={setResource}
        placeholder="Vault::<vault id>::Blob::<blob id>"
        error={errorFor(error, 'resource', FIELDS)}
      />
      <FormError error={error} fields={FIELDS} />
      <button type="submit" disabled={busy}>
        Find users
      </button>
      {answer && asked && (
        <>
          <table aria-label="Users with access">
            <thead>
              <tr>
                <th scope="col">User</th>
                <th scope="col">Status</th>
                <th scope="col">Activities</th>
                <th scope="col">Granted by</th>
              </tr>
            </thead>
            <tbody>
              {answer.items.map((u) => (
                <tr key={u.user_id}>
                  <td>{u.username}</td>
                  <td>{u.status}</td>
                  <td>{u.activities}</td>
                  <td>
                    <Grants grants={u.granted_by} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          <Pager
            label="Users with access"
            page={answer.info.current_page}
            hasNext={answer.info.current_page < answer.info.num_pages}
            total={answer.info.total_result_count}
            onPage={(p) => load(asked.resource, p)}
          />
        </>
      )}
    </form>
  )
}

export function SimulatorPage() {
  return (
    <Page title="Policy simulator">
      <p>
        The server's own policy engine answers, for the signed-in user's account: nothing is
        changed.
      </p>
      <Explain />
      <WhoHasAccess />
    </Page>
  )
}
