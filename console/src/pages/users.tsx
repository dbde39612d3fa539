import { useState } from 'preact/hooks'
import { api, base64Json, fromBase64Json } from '../api'
import { BASE, navigate } from '../router'
import {
  confirmed,
  errorFor,
  FormError,
  JsonEditor,
  jsonValid,
  Loading,
  Page,
  Pager,
  SelectField,
  ShownOnce,
  TextField,
  useAction,
  useLoad,
} from '../ui'

export interface User {
  id: string
  username: string
  status: string
  mfa_enrolled: boolean
  attributes?: unknown
  group_ids?: string[]
}

const STATUSES = ['ACTIVATED', 'PENDING', 'LOCKED', 'DEACTIVATED'] as const
/** The v1 list answers every user at once: the console pages it here. */
export const PAGE_SIZE = 20

const CREATE_FIELDS = ['username', 'password', 'attributes', 'status'] as const

function CreateUser({ onCreated }: { onCreated: () => void }) {
  const [username, setUsername] = useState('')
  const [password, setPassword] = useState('')
  const [attributes, setAttributes] = useState('{}')
  const [status, setStatus] = useState('ACTIVATED')
  const [apiKey, setApiKey] = useState('')
  const { busy, error, run } = useAction()
  const submit = (e: Event) => {
    e.preventDefault()
    void run(async () => {
      const answer = await api<{ user: User & { api_key?: string } }>('POST', '/v1/users', {
        form: {
          username,
          ...(password ? { password } : {}),
          attributes: base64Json(JSON.parse(attributes)),
          status,
        },
      })
      setApiKey(answer.user.api_key ?? '')
      setUsername('')
      setPassword('')
      onCreated()
    })
  }
  return (
    <form class="card" onSubmit={submit} noValidate aria-label="Create a user">
      <h2>Create a user</h2>
      <TextField
        label="Username"
        name="username"
        value={username}
        onInput={setUsername}
        required
        error={errorFor(error, 'username', CREATE_FIELDS)}
      />
      <TextField
        label="Password (empty for a service account)"
        name="password"
        type="password"
        autoComplete="new-password"
        value={password}
        onInput={setPassword}
        error={errorFor(error, 'password', CREATE_FIELDS)}
      />
      <SelectField
        label="Status"
        name="status"
        value={status}
        options={STATUSES.slice(0, 3)}
        onChange={setStatus}
        error={errorFor(error, 'status', CREATE_FIELDS)}
      />
      <JsonEditor
        label="Attributes"
        name="attributes"
        value={attributes}
        onInput={setAttributes}
        rows={3}
        error={errorFor(error, 'attributes', CREATE_FIELDS)}
      />
      <FormError error={error} fields={CREATE_FIELDS} />
      <button type="submit" disabled={busy || !jsonValid(attributes)}>
        Create user
      </button>
      {apiKey && <ShownOnce label="The new user's API key" value={apiKey} />}
    </form>
  )
}

export function UsersPage() {
  const [status, setStatus] = useState('ACTIVATED')
  const [query, setQuery] = useState('')
  const [page, setPage] = useState(1)
  const users = useLoad(
    () => api<{ users: User[] }>('GET', '/v1/users', { query: { status } }),
    [status],
  )
  const matching = (users.data?.users ?? []).filter((u) =>
    u.username.toLowerCase().includes(query.trim().toLowerCase()),
  )
  const shown = matching.slice((page - 1) * PAGE_SIZE, page * PAGE_SIZE)
  return (
    <Page title="Users">
      <search class="filters">
        <TextField
          label="Search by username"
          name="q"
          value={query}
          onInput={(v) => {
            setQuery(v)
            setPage(1)
          }}
        />
        <SelectField
          label="Status"
          name="status-filter"
          value={status}
          options={[...STATUSES, ['ACTIVATED,PENDING,LOCKED,DEACTIVATED', 'any']]}
          onChange={(v) => {
            setStatus(v)
            setPage(1)
          }}
        />
      </search>
      <Loading loaded={users} />
      <table>
        <caption class="visually-hidden">Users</caption>
        <thead>
          <tr>
            <th scope="col">Username</th>
            <th scope="col">Status</th>
            <th scope="col">MFA</th>
            <th scope="col">Id</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((u) => (
            <tr key={u.id}>
              <td>
                <a
                  href={`${BASE}/users/${u.id}`}
                  onClick={(e) => {
                    e.preventDefault()
                    navigate(`/users/${u.id}`)
                  }}
                >
                  {u.username}
                </a>
              </td>
              <td>{u.status}</td>
              <td>{u.mfa_enrolled ? 'enrolled' : 'no'}</td>
              <td>
                <code>{u.id}</code>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <Pager
        label="Users"
        page={page}
        hasNext={page * PAGE_SIZE < matching.length}
        total={matching.length}
        onPage={setPage}
      />
      <CreateUser onCreated={users.reload} />
    </Page>
  )
}

const EDIT_FIELDS = ['status', 'attributes'] as const

export function UserPage({ id }: { id: string }) {
  const user = useLoad(
    () => api<{ user: User }>('GET', `/v1/users/${id}`, { query: { full: 'true' } }),
    [id],
  )
  const u = user.data?.user
  return (
    <Page title={u ? `User ${u.username}` : 'User'}>
      <Loading loaded={user} />
      {u && <UserEditor key={u.id} user={u} onSaved={user.reload} />}
    </Page>
  )
}

function attributesText(u: User): string {
  if (typeof u.attributes !== 'string' || u.attributes === '') return '{}'
  return JSON.stringify(fromBase64Json(u.attributes), null, 2)
}

function UserEditor({ user, onSaved }: { user: User; onSaved: () => void }) {
  const [status, setStatus] = useState(user.status)
  const [attributes, setAttributes] = useState(attributesText(user))
  const [saved, setSaved] = useState('')
  const [apiKey, setApiKey] = useState('')
  const save = useAction()
  const key = useAction()
  const remove = useAction()
  return (
    <>
      <dl class="facts">
        <dt>Id</dt>
        <dd>
          <code>{user.id}</code>
        </dd>
        <dt>MFA</dt>
        <dd>{user.mfa_enrolled ? 'enrolled' : 'not enrolled'}</dd>
        <dt>Groups</dt>
        <dd>
          {(user.group_ids ?? []).length === 0
            ? 'none'
            : (user.group_ids ?? []).map((g) => (
                <a
                  key={g}
                  href={`${BASE}/groups/${g}`}
                  onClick={(e) => {
                    e.preventDefault()
                    navigate(`/groups/${g}`)
                  }}
                >
                  <code>{g}</code>{' '}
                </a>
              ))}
        </dd>
      </dl>
      <form
        class="card"
        aria-label="Edit the user"
        noValidate
        onSubmit={(e) => {
          e.preventDefault()
          setSaved('')
          void save.run(async () => {
            await api('PUT', `/v1/users/${user.id}`, {
              form: { status, attributes: base64Json(JSON.parse(attributes)) },
            })
            setSaved('Saved.')
            onSaved()
          })
        }}
      >
        <h2>Status and attributes</h2>
        <SelectField
          label="Status"
          name="status"
          value={status}
          options={STATUSES}
          onChange={setStatus}
          error={errorFor(save.error, 'status', EDIT_FIELDS)}
        />
        <JsonEditor
          label="Attributes"
          name="attributes"
          value={attributes}
          onInput={setAttributes}
          error={errorFor(save.error, 'attributes', EDIT_FIELDS)}
        />
        <FormError error={save.error} fields={EDIT_FIELDS} />
        <button type="submit" disabled={save.busy || !jsonValid(attributes)}>
          Save
        </button>
        {saved && <p role="status">{saved}</p>}
      </form>
      <div class="card">
        <h2>Credentials and removal</h2>
        <p class="hint">
          A new API key replaces the old one at once. The API vends keys only to a caller signed in
          with an API key.
        </p>
        <button
          type="button"
          disabled={key.busy}
          onClick={() => {
            if (!confirmed(`Replace ${user.username}'s API key? The old one stops working.`)) return
            void key.run(async () => {
              const answer = await api<{ api_key: string }>('POST', `/v1/users/${user.id}/api_key`)
              setApiKey(answer.api_key)
            })
          }}
        >
          Reset API key
        </button>
        <FormError error={key.error} />
        {apiKey && <ShownOnce label="The new API key" value={apiKey} />}
        <button
          type="button"
          class="danger"
          disabled={remove.busy || user.status === 'DEACTIVATED'}
          onClick={() => {
            if (!confirmed(`Deactivate ${user.username}? Their credentials stop working.`)) return
            void remove.run(async () => {
              await api('DELETE', `/v1/users/${user.id}`)
              onSaved()
            })
          }}
        >
          Deactivate
        </button>
        <FormError error={remove.error} />
      </div>
    </>
  )
}
