import { useEffect, useState } from 'preact/hooks'

/** The console's own paths, below /console (the server answers index.html for each). */
export const BASE = '/console'

function currentPath(): string {
  const path = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : '/'
  return path === '' ? '/' : path
}

const listeners = new Set<() => void>()

export function navigate(path: string): void {
  history.pushState(null, '', `${BASE}${path}`)
  for (const l of listeners) l()
}

export function usePath(): string {
  const [path, setPath] = useState(currentPath())
  useEffect(() => {
    const update = () => setPath(currentPath())
    listeners.add(update)
    addEventListener('popstate', update)
    return () => {
      listeners.delete(update)
      removeEventListener('popstate', update)
    }
  }, [])
  return path
}
