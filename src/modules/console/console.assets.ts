import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { extname, join, relative, sep } from 'node:path'

/** Where `npm ci` (the `prepare` script) writes the console's build: `<repo>/dist/console`. */
export const DEFAULT_CONSOLE_DIR = new URL('../../../dist/console/', import.meta.url).pathname

/** The build is a few hundred KB; anything larger is not ours and is not loaded into memory. */
export const MAX_CONSOLE_BYTES = 8 * 1024 * 1024

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.txt': 'text/plain; charset=utf-8',
  '.woff2': 'font/woff2',
}

export interface ConsoleFile {
  body: Buffer
  type: string
  /** Vite names the files under `assets/` by their content hash: cacheable for ever. */
  immutable: boolean
}

export interface ConsoleAssets {
  index: Buffer
  /** By path below `/console/` (`assets/index-3f2a.js`). */
  files: ReadonlyMap<string, ConsoleFile>
}

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? walk(path) : [path]
  })
}

/**
 * Reads the built console once, at startup: each request is then a map lookup (no file system
 * access, so no path can reach outside the build). Null when it was not built.
 */
export function loadConsoleAssets(dir: string = DEFAULT_CONSOLE_DIR): ConsoleAssets | null {
  if (!existsSync(join(dir, 'index.html'))) return null
  const files = new Map<string, ConsoleFile>()
  let total = 0
  for (const path of walk(dir)) {
    const body = readFileSync(path)
    total += body.length
    if (total > MAX_CONSOLE_BYTES)
      throw new Error(`the console build in ${dir} is over ${MAX_CONSOLE_BYTES} bytes`)
    const name = relative(dir, path).split(sep).join('/')
    files.set(name, {
      body,
      type: TYPES[extname(name)] ?? 'application/octet-stream',
      immutable: name.startsWith('assets/'),
    })
  }
  return { index: readFileSync(join(dir, 'index.html')), files }
}

let loaded: { assets: ConsoleAssets | null } | undefined

/** The default build, read on the first call only (every app of a process shares it). */
export function defaultConsoleAssets(): ConsoleAssets | null {
  loaded ??= { assets: loadConsoleAssets() }
  return loaded.assets
}
