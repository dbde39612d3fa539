/**
 * The signed-in session: in memory, mirrored in sessionStorage so a reload keeps it. Never in
 * localStorage, a cookie or a URL: it ends with the tab.
 */
export interface Session {
  token: string
  /** An access token from the login (signed out with logout) or an API key pasted by an admin. */
  kind: 'access_token' | 'api_key'
  accountId: string
  userId: string
  username: string
}

const KEY = 'coffer.console.session'
let current: Session | null = null

function read(): Session | null {
  try {
    const text = sessionStorage.getItem(KEY)
    return text ? (JSON.parse(text) as Session) : null
  } catch {
    return null
  }
}

export const session = {
  get(): Session | null {
    current ??= read()
    return current
  },
  set(value: Session): void {
    current = value
    sessionStorage.setItem(KEY, JSON.stringify(value))
  },
  clear(): void {
    current = null
    sessionStorage.removeItem(KEY)
  },
}
