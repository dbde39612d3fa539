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
    </main>
  )
}
