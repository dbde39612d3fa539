import { useRef, useState } from 'preact/hooks'
import { ApiError, api } from '../api'
import type { Session } from '../session'
import { errorFor, FormError, TextField, useAction } from '../ui'

const FIELDS = ['account_id', 'username', 'password', 'mfa_code'] as const

interface LoginAnswer {
  user: { id: string; username: string; account_id: string; access_token: string }
}

/** The API's login (POST /v1/auth/login); an MFA code is asked for when the API says so. */
export function SignIn({
  notice,
  onSignedIn,
}: {
  notice: string
  onSignedIn: (s: Session) => void
}) {
  const [accountId, setAccountId] = useState('')
  const [username, setUsername] = useState('')
  const [password, setPassword] = useState('')
  const [mfaCode, setMfaCode] = useState('')
  const [needsMfa, setNeedsMfa] = useState(false)
  const [withKey, setWithKey] = useState(false)
  const form = useRef<HTMLFormElement>(null)
  const { busy, error, run, setError } = useAction()

  const submit = (e: Event) => {
    e.preventDefault()
    void run(async () => {
      try {
        const answer = await api<LoginAnswer>('POST', '/v1/auth/login', {
          anonymous: true,
          form: {
            account_id: accountId.trim(),
            username,
            password,
            ...(needsMfa ? { mfa_code: mfaCode.trim() } : {}),
          },
        })
        setPassword('')
        onSignedIn({
          token: answer.user.access_token,
          kind: 'access_token',
          accountId: answer.user.account_id,
          userId: answer.user.id,
          username: answer.user.username,
        })
      } catch (err) {
        if (err instanceof ApiError && err.code === 'MFA_CODE_REQUIRED') {
          setNeedsMfa(true)
          setError(err)
          queueMicrotask(() =>
            form.current?.querySelector<HTMLInputElement>('[name=mfa_code]')?.focus(),
          )
          return
        }
        throw err
      }
    })
  }

  const mfaError =
    error instanceof ApiError && error.code === 'MFA_CODE_REQUIRED'
      ? 'Enter the current code of your authenticator app (MFA is enrolled for this user).'
      : errorFor(error, 'mfa_code', FIELDS)
  if (withKey)
    return <KeySignIn notice={notice} onSignedIn={onSignedIn} onBack={() => setWithKey(false)} />
  return (
    <main class="sign-in">
      <h1>Coffer console</h1>
      <p>
        Sign in with your Coffer user. Everything you do here is an API call made with your own
        rights.
      </p>
      {notice && (
        <p class="notice" role="status">
          {notice}
        </p>
      )}
      <form ref={form} onSubmit={submit} noValidate aria-label="Sign in">
        <TextField
          label="Account id"
          name="account_id"
          value={accountId}
          onInput={setAccountId}
          required
          autoComplete="organization"
          error={errorFor(error, 'account_id', FIELDS)}
        />
        <TextField
          label="Username"
          name="username"
          value={username}
          onInput={setUsername}
          required
          autoComplete="username"
          error={errorFor(error, 'username', FIELDS)}
        />
        <TextField
          label="Password"
          name="password"
          type="password"
          value={password}
          onInput={setPassword}
          required
          autoComplete="current-password"
          error={errorFor(error, 'password', FIELDS)}
        />
        {needsMfa && (
          <TextField
            label="MFA code"
            name="mfa_code"
            value={mfaCode}
            onInput={setMfaCode}
            inputMode="numeric"
            autoComplete="one-time-code"
            required
            error={mfaError}
          />
        )}
        {!(error instanceof ApiError && error.code === 'MFA_CODE_REQUIRED') && (
          <FormError error={error} fields={FIELDS} />
        )}
        <button type="submit" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
      <p>
        <button type="button" class="link" onClick={() => setWithKey(true)}>
          Sign in with an API key instead
        </button>{' '}
        (needed to vend credentials, e.g. reset an API key)
      </p>
    </main>
  )
}

interface MeAnswer {
  user: { id: string; username: string; account_id: string }
}

/**
 * An admin's API key, for the API-key-only actions (decision 49): checked with GET /v1/auth/me,
 * then kept like an access token (memory and sessionStorage only).
 */
function KeySignIn(p: { notice: string; onSignedIn: (s: Session) => void; onBack: () => void }) {
  const [key, setKey] = useState('')
  const { busy, error, run } = useAction()
  return (
    <main class="sign-in">
      <h1>Coffer console</h1>
      <p>Sign in with an API key. It stays in this tab only and is forgotten when you sign out.</p>
      {p.notice && (
        <p class="notice" role="status">
          {p.notice}
        </p>
      )}
      <form
        noValidate
        aria-label="Sign in with an API key"
        onSubmit={(e) => {
          e.preventDefault()
          void run(async () => {
            const me = await api<MeAnswer>('GET', '/v1/auth/me', {
              anonymous: true,
              token: key.trim(),
            })
            p.onSignedIn({
              token: key.trim(),
              kind: 'api_key',
              accountId: me.user.account_id,
              userId: me.user.id,
              username: me.user.username,
            })
          })
        }}
      >
        <TextField
          label="API key"
          name="api_key"
          type="password"
          value={key}
          onInput={setKey}
          required
          autoComplete="off"
        />
        <FormError error={error} />
        <button type="submit" disabled={busy || key.trim() === ''}>
          Sign in with the key
        </button>
      </form>
      <p>
        <button type="button" class="link" onClick={p.onBack}>
          Sign in with a password instead
        </button>
      </p>
    </main>
  )
}
