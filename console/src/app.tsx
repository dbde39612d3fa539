import { useEffect, useState } from 'preact/hooks'
import { api, whenSessionExpires } from './api'
import { AuditPage } from './pages/audit'
import { BackupsPage } from './pages/backups'
import { GroupPage, GroupsPage } from './pages/groups'
import { SearchPage } from './pages/search'
import { SignIn } from './pages/sign-in'
import { SimulatorPage } from './pages/simulator'
import { TokensPage } from './pages/tokens'
import { UsagePage, utcDay } from './pages/usage'
import { UserPage, UsersPage } from './pages/users'
import { VaultPage, VaultsPage } from './pages/vaults'
import { BASE, navigate, usePath } from './router'
import { type Session, session } from './session'

/** Optional features of the server: shown only where it answers them for this user. */
interface Features {
  audit: boolean
  usage: boolean
  backups: boolean
}

async function available(path: string): Promise<boolean> {
  try {
    await api('GET', path)
    return true
  } catch {
    return false
  }
}

const NAV: [path: string, label: string, feature?: keyof Features][] = [
  ['/users', 'Users'],
  ['/groups', 'Groups'],
  ['/simulator', 'Policy simulator'],
  ['/vaults', 'Vaults'],
  ['/search', 'Schemas & search'],
  ['/tokens', 'Scoped tokens'],
  ['/audit', 'Audit log', 'audit'],
  ['/usage', 'Usage', 'usage'],
  ['/backups', 'Backups', 'backups'],
]

function Route({ path, features }: { path: string; features: Features }) {
  const parts = path.split('/').filter(Boolean)
  const [top, id] = parts
  switch (top) {
    case undefined:
    case 'users':
      return id ? <UserPage id={id} /> : <UsersPage />
    case 'groups':
      return id ? <GroupPage id={id} /> : <GroupsPage />
    case 'simulator':
      return <SimulatorPage />
    case 'vaults':
      return id ? <VaultPage id={id} /> : <VaultsPage />
    case 'search':
      return <SearchPage />
    case 'tokens':
      return <TokensPage />
    case 'audit':
      return features.audit ? <AuditPage /> : <NotOffered />
    case 'usage':
      return features.usage ? <UsagePage /> : <NotOffered />
    case 'backups':
      return features.backups ? <BackupsPage /> : <NotOffered />
    default:
      return <NotOffered />
  }
}

function NotOffered() {
  return (
    <section class="page">
      <h1>Not available</h1>
      <p>This page does not exist, or this server does not offer it to you.</p>
    </section>
  )
}

export function App() {
  const [user, setUser] = useState<Session | null>(session.get())
  const [notice, setNotice] = useState('')
  const [features, setFeatures] = useState<Features>({
    audit: false,
    usage: false,
    backups: false,
  })
  const path = usePath()

  useEffect(() => {
    whenSessionExpires((message) => {
      setNotice(message)
      setUser(null)
    })
  }, [])

  useEffect(() => {
    if (!user) return
    void Promise.all([
      available('/v1/audit_events?per_page=1'),
      available(`/v1/accounts/${user.accountId}/usage?from=${utcDay()}&to=${utcDay()}`),
      available('/v1/backups/status'),
    ]).then(([audit, usage, backups]) => setFeatures({ audit, usage, backups }))
  }, [user])

  if (!user) {
    return (
      <SignIn
        notice={notice}
        onSignedIn={(s) => {
          session.set(s)
          setNotice('')
          setUser(s)
          if (path === '/') navigate('/users')
        }}
      />
    )
  }

  const signOut = async () => {
    // An access token is ended on the server; an API key is only forgotten here.
    if (user.kind === 'access_token') {
      try {
        await api('POST', '/v1/auth/logout')
      } catch {
        // Already ended on the server: the local session goes either way.
      }
    }
    session.clear()
    setNotice('You are signed out.')
    setUser(null)
  }

  return (
    <div class="layout">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <span class="brand">Coffer console</span>
        <span class="who">
          {user.username}
          {user.kind === 'api_key' ? ' (API key)' : ''} · account <code>{user.accountId}</code>
        </span>
        <button type="button" onClick={() => void signOut()}>
          Sign out
        </button>
      </header>
      <nav class="side" aria-label="Main">
        <ul>
          {NAV.filter(([, , f]) => !f || features[f]).map(([to, label]) => (
            <li key={to}>
              <a
                href={`${BASE}${to}`}
                aria-current={path.startsWith(to) ? 'page' : undefined}
                onClick={(e) => {
                  e.preventDefault()
                  navigate(to)
                }}
              >
                {label}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <main id="main">
        <Route path={path} features={features} />
      </main>
    </div>
  )
}
