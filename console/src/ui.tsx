import type { ComponentChildren } from 'preact'
import { useCallback, useEffect, useRef, useState } from 'preact/hooks'
import { ApiError, fieldOf } from './api'

/** The error a field shows: the API's message when it names this field. */
export function errorFor(
  error: unknown,
  name: string,
  fields: readonly string[],
): string | undefined {
  if (!(error instanceof ApiError)) return undefined
  return fieldOf(error.message, fields) === name ? error.message : undefined
}

/** A form's error that names none of its fields (or any other failure), above its button. */
export function FormError({ error, fields = [] }: { error: unknown; fields?: readonly string[] }) {
  if (!error) return null
  if (error instanceof ApiError && fieldOf(error.message, fields)) return null
  const message = error instanceof Error ? error.message : String(error)
  const code = error instanceof ApiError ? ` (${error.code})` : ''
  return (
    <p class="error" role="alert">
      {message}
      {code}
    </p>
  )
}

let ids = 0
function useId(prefix: string): string {
  const ref = useRef('')
  if (!ref.current) ref.current = `${prefix}-${++ids}`
  return ref.current
}

interface FieldProps {
  label: string
  name: string
  value: string
  onInput: (value: string) => void
  error?: string | undefined
  type?: string
  required?: boolean
  autoComplete?: string
  placeholder?: string
  hint?: string
  inputMode?: 'numeric' | 'text'
}

export function TextField(p: FieldProps) {
  const id = useId(p.name)
  const described = [p.hint ? `${id}-hint` : '', p.error ? `${id}-error` : '']
    .filter(Boolean)
    .join(' ')
  return (
    <div class="field">
      <label for={id}>{p.label}</label>
      <input
        id={id}
        name={p.name}
        type={p.type ?? 'text'}
        value={p.value}
        required={p.required}
        autoComplete={p.autoComplete ?? 'off'}
        placeholder={p.placeholder}
        inputMode={p.inputMode}
        aria-invalid={p.error ? 'true' : undefined}
        aria-describedby={described || undefined}
        onInput={(e) => p.onInput((e.target as HTMLInputElement).value)}
      />
      {p.hint && (
        <small id={`${id}-hint`} class="hint">
          {p.hint}
        </small>
      )}
      {p.error && (
        <p id={`${id}-error`} class="field-error" role="alert">
          {p.error}
        </p>
      )}
    </div>
  )
}

export function SelectField(p: {
  label: string
  name: string
  value: string
  options: readonly (string | [value: string, label: string])[]
  onChange: (value: string) => void
  error?: string | undefined
}) {
  const id = useId(p.name)
  return (
    <div class="field">
      <label for={id}>{p.label}</label>
      <select
        id={id}
        name={p.name}
        value={p.value}
        aria-invalid={p.error ? 'true' : undefined}
        aria-describedby={p.error ? `${id}-error` : undefined}
        onChange={(e) => p.onChange((e.target as HTMLSelectElement).value)}
      >
        {p.options.map((o) => {
          const [value, label] = typeof o === 'string' ? [o, o] : o
          return (
            <option key={value} value={value}>
              {label}
            </option>
          )
        })}
      </select>
      {p.error && (
        <p id={`${id}-error`} class="field-error" role="alert">
          {p.error}
        </p>
      )}
    </div>
  )
}

/** Parses JSON as the user types; `problem` says what is wrong before anything is sent. */
export function parseJsonText(text: string): { value?: unknown; problem?: string } {
  if (text.trim() === '') return { problem: 'is empty' }
  try {
    return { value: JSON.parse(text) }
  } catch (e) {
    return { problem: `is not valid JSON: ${(e as Error).message}` }
  }
}

export function JsonEditor(p: {
  label: string
  name: string
  value: string
  onInput: (value: string) => void
  /** Extra checks on the parsed value (a policy's rules); a message per problem. */
  validate?: (value: unknown) => string[]
  error?: string | undefined
  rows?: number
}) {
  const id = useId(p.name)
  const parsed = parseJsonText(p.value)
  const problems = parsed.problem
    ? [`${p.label} ${parsed.problem}`]
    : (p.validate?.(parsed.value) ?? [])
  const messages = [...problems, ...(p.error ? [p.error] : [])]
  return (
    <div class="field">
      <label for={id}>{p.label}</label>
      <textarea
        id={id}
        name={p.name}
        class="json"
        rows={p.rows ?? 8}
        spellcheck={false}
        value={p.value}
        aria-invalid={messages.length > 0 ? 'true' : undefined}
        aria-describedby={messages.length > 0 ? `${id}-error` : undefined}
        onInput={(e) => p.onInput((e.target as HTMLTextAreaElement).value)}
      />
      {messages.length > 0 && (
        <ul id={`${id}-error`} class="field-error" role="alert">
          {messages.map((m) => (
            <li key={m}>{m}</li>
          ))}
        </ul>
      )}
    </div>
  )
}

/** Is this JSON editor's text acceptable (to disable its form's submit button)? */
export function jsonValid(text: string, validate?: (value: unknown) => string[]): boolean {
  const parsed = parseJsonText(text)
  return !parsed.problem && (validate?.(parsed.value) ?? []).length === 0
}

export function Pager(p: {
  page: number
  hasNext: boolean
  onPage: (page: number) => void
  label: string
  total?: number | undefined
}) {
  return (
    <nav class="pager" aria-label={`${p.label} pages`}>
      <button type="button" disabled={p.page <= 1} onClick={() => p.onPage(p.page - 1)}>
        Previous
      </button>
      <span aria-live="polite">
        Page {p.page}
        {p.total !== undefined ? ` · ${p.total} in all` : ''}
      </span>
      <button type="button" disabled={!p.hasNext} onClick={() => p.onPage(p.page + 1)}>
        Next
      </button>
    </nav>
  )
}

/** A credential the API shows once: displayed until dismissed, never stored. */
export function ShownOnce({ label, value }: { label: string; value: string }) {
  return (
    <div class="secret" role="status">
      <p>
        <strong>{label}</strong> (shown once, copy it now):
      </p>
      <code data-secret>{value}</code>
    </div>
  )
}

/** A page: its heading takes the focus when the page opens (screen readers hear where they are). */
export function Page(p: {
  title: string
  children: ComponentChildren
  actions?: ComponentChildren
}) {
  const heading = useRef<HTMLHeadingElement>(null)
  useEffect(() => {
    document.title = `${p.title} · Coffer console`
    heading.current?.focus()
  }, [p.title])
  return (
    <section class="page">
      <header class="page-head">
        <h1 tabIndex={-1} ref={heading}>
          {p.title}
        </h1>
        {p.actions}
      </header>
      {p.children}
    </section>
  )
}

export interface Loaded<T> {
  data: T | undefined
  error: unknown
  loading: boolean
  reload: () => void
}

/** Runs `load` now and whenever `deps` change; the latest answer wins. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({
    loading: true,
  })
  const [tick, setTick] = useState(0)
  const reload = useCallback(() => setTick((t) => t + 1), [])
  useEffect(() => {
    let live = true
    setState((s) => ({ ...s, loading: true }))
    load().then(
      (data) => live && setState({ data, loading: false }),
      (error: unknown) => live && setState({ error, loading: false }),
    )
    return () => {
      live = false
    }
  }, [...deps, tick])
  return { data: state.data, error: state.error, loading: state.loading, reload }
}

/** Runs a form's action: `busy` while it runs, the API's error kept for the fields to show. */
export function useAction() {
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(null)
  const run = useCallback(async (work: () => Promise<void>) => {
    setBusy(true)
    setError(null)
    try {
      await work()
    } catch (e) {
      setError(e)
    } finally {
      setBusy(false)
    }
  }, [])
  return { busy, error, run, setError }
}

export function Loading({ loaded }: { loaded: Loaded<unknown> }) {
  if (loaded.error) return <FormError error={loaded.error} />
  if (loaded.loading && loaded.data === undefined) return <p aria-live="polite">Loading…</p>
  return null
}

/** Asks before a destructive action (the browser's own dialog: keyboard and screen-reader ready). */
export function confirmed(question: string): boolean {
  return window.confirm(question)
}
