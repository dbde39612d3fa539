import { useState } from 'preact/hooks'
import { api, base64Json } from '../api'
import { policyProblems, type Statement, statementWords } from '../policy'
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
  parseJsonText,
  TextField,
  useAction,
  useLoad,
} from '../ui'
import { PAGE_SIZE } from './users'

interface Group {
  id: string
  name: string
  policy: Statement[]
  user_ids?: string[]
}

const FIELDS = ['name', 'policy', 'user_ids'] as const
const EXAMPLE = '[\n  { "Resources": ["Vault::.*::Document::.*"], "Activities": "R" }\n]'

/** A policy's JSON editor with the server's checks and each statement in words below it. */
export function PolicyEditor(p: {
  value: string
  onInput: (v: string) => void
  error?: string | undefined
  label?: string
}) {
  const parsed = parseJsonText(p.value)
  const valid = !parsed.problem && policyProblems(parsed.value).length === 0
  return (
    <>
      <JsonEditor
        label={p.label ?? 'Policy'}
        name="policy"
        value={p.value}
        onInput={p.onInput}
        validate={policyProblems}
        error={p.error}
      />
      {valid && (
        <ol class="explained" aria-label="The policy in words">
          {(parsed.value as Statement[]).map((s, i) => (
            <li key={i}>{statementWords(s)}</li>
          ))}
        </ol>
      )}
    </>
  )
}

export function GroupsPage() {
  const [page, setPage] = useState(1)
  const groups = useLoad(() => api<{ groups: Group[] }>('GET', '/v1/groups'), [])
  const all = groups.data?.groups ?? []
  const [name, setName] = useState('')
  const [policy, setPolicy] = useState(EXAMPLE)
  const create = useAction()
  return (
    <Page title="Groups">
      <Loading loaded={groups} />
      <table>
        <caption class="visually-hidden">Groups</caption>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Statements</th>
            <th scope="col">Id</th>
          </tr>
        </thead>
        <tbody>
          {all.slice((page - 1) * PAGE_SIZE, page * PAGE_SIZE).map((g) => (
            <tr key={g.id}>
              <td>
                <a
                  href={`${BASE}/groups/${g.id}`}
                  onClick={(e) => {
                    e.preventDefault()
                    navigate(`/groups/${g.id}`)
                  }}
                >
                  {g.name}
                </a>
              </td>
              <td>{g.policy.length}</td>
              <td>
                <code>{g.id}</code>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <Pager
        label="Groups"
        page={page}
        hasNext={page * PAGE_SIZE < all.length}
        total={all.length}
        onPage={setPage}
      />
      <form
        class="card"
        aria-label="Create a group"
        noValidate
        onSubmit={(e) => {
          e.preventDefault()
          void create.run(async () => {
            const answer = await api<{ group: Group }>('POST', '/v1/groups', {
              form: { name, policy: base64Json(JSON.parse(policy)) },
            })
            navigate(`/groups/${answer.group.id}`)
          })
        }}
      >
        <h2>Create a group</h2>
        <TextField
          label="Name"
          name="name"
          value={name}
          onInput={setName}
          required
          error={errorFor(create.error, 'name', FIELDS)}
        />
        <PolicyEditor
          value={policy}
          onInput={setPolicy}
          error={errorFor(create.error, 'policy', FIELDS)}
        />
        <FormError error={create.error} fields={FIELDS} />
        <button type="submit" disabled={create.busy || !jsonValid(policy, policyProblems)}>
          Create group
        </button>
      </form>
    </Page>
  )
}

export function GroupPage({ id }: { id: string }) {
  const group = useLoad(
    () => api<{ group: Group }>('GET', `/v1/groups/${id}`, { query: { full: 'true' } }),
    [id],
  )
  const g = group.data?.group
  return (
    <Page title={g ? `Group ${g.name}` : 'Group'}>
      <Loading loaded={group} />
      {g && <GroupEditor key={`${g.id}:${g.name}`} group={g} onSaved={group.reload} />}
    </Page>
  )
}

/** Usernames by id, when the signed-in user may list users (else the ids are shown). */
function useUsernames(): Map<string, string> {
  const users = useLoad(
    () =>
      api<{ users: { id: string; username: string }[] }>('GET', '/v1/users', {
        query: { status: 'ACTIVATED,PENDING,LOCKED,DEACTIVATED' },
      }).catch(() => ({ users: [] })),
    [],
  )
  return new Map((users.data?.users ?? []).map((u) => [u.id, u.username]))
}

function GroupEditor({ group, onSaved }: { group: Group; onSaved: () => void }) {
  const usernames = useUsernames()
  const [name, setName] = useState(group.name)
  const [policy, setPolicy] = useState(JSON.stringify(group.policy, null, 2))
  const [member, setMember] = useState('')
  const [saved, setSaved] = useState('')
  const save = useAction()
  const members = useAction()
  const remove = useAction()
  return (
    <>
      <form
        class="card"
        aria-label="Rename the group and edit its policy"
        noValidate
        onSubmit={(e) => {
          e.preventDefault()
          setSaved('')
          void save.run(async () => {
            await api('PUT', `/v1/groups/${group.id}`, {
              json: { name, policy: JSON.parse(policy) },
            })
            setSaved('Saved.')
            onSaved()
          })
        }}
      >
        <h2>Name and policy</h2>
        <TextField
          label="Name"
          name="name"
          value={name}
          onInput={setName}
          error={errorFor(save.error, 'name', FIELDS)}
        />
        <PolicyEditor
          value={policy}
          onInput={setPolicy}
          error={errorFor(save.error, 'policy', FIELDS)}
        />
        <FormError error={save.error} fields={FIELDS} />
        <button type="submit" disabled={save.busy || !jsonValid(policy, policyProblems)}>
          Save group
        </button>
        {saved && <p role="status">{saved}</p>}
      </form>
      <div class="card">
        <h2>Members</h2>
        <ul>
          {(group.user_ids ?? []).map((u) => (
            <li key={u}>
              <a
                href={`${BASE}/users/${u}`}
                onClick={(e) => {
                  e.preventDefault()
                  navigate(`/users/${u}`)
                }}
              >
                {usernames.get(u) ?? <code>{u}</code>}
              </a>{' '}
              <button
                type="button"
                aria-label={`Remove member ${u}`}
                onClick={() =>
                  void members.run(async () => {
                    await api('DELETE', `/v1/groups/${group.id}/membership/${u}`)
                    onSaved()
                  })
                }
              >
                Remove
              </button>
            </li>
          ))}
        </ul>
        <form
          noValidate
          aria-label="Add a member"
          onSubmit={(e) => {
            e.preventDefault()
            void members.run(async () => {
              await api('POST', `/v1/groups/${group.id}/membership`, {
                json: { user_ids: [member.trim()] },
              })
              setMember('')
              onSaved()
            })
          }}
        >
          <TextField
            label="User id to add"
            name="user_ids"
            value={member}
            onInput={setMember}
            error={errorFor(members.error, 'user_ids', FIELDS)}
          />
          <FormError error={members.error} fields={FIELDS} />
          <button type="submit" disabled={members.busy}>
            Add member
          </button>
        </form>
      </div>
      <div class="card">
        <button
          type="button"
          class="danger"
          disabled={remove.busy}
          onClick={() => {
            if (!confirmed(`Delete group ${group.name}? Its members lose what it grants.`)) return
            void remove.run(async () => {
              await api('DELETE', `/v1/groups/${group.id}`)
              navigate('/groups')
            })
          }}
        >
          Delete group
        </button>
        <FormError error={remove.error} />
      </div>
    </>
  )
}
