import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse } from 'yaml'
import { loadConfig } from '../../src/config.js'

/** Readers of the deploy recipe (Dockerfile, deploy/): no Docker engine is needed to check it. */

export const ROOT = join(import.meta.dirname, '..', '..')
export const read = (path: string) => readFileSync(join(ROOT, path), 'utf8')

// --- settings ---

/**
 * Every environment variable `loadConfig` reads: recorded through a proxy, with the S3 store
 * chosen so that its settings are read too. A name outside this set is ignored by Coffer.
 */
export function settingsReadByConfig(): Set<string> {
  const read = new Set<string>()
  const base: Record<string, string> = { COFFER_BLOB_STORE: 's3', COFFER_S3_BUCKET: 'coffer-blobs' }
  const env = new Proxy(base, {
    get(target, name) {
      if (typeof name === 'string') read.add(name)
      return typeof name === 'string' ? target[name] : undefined
    },
  })
  loadConfig(env)
  return read
}

// --- env files and compose interpolation ---

/** KEY=VALUE lines of an env file (comments and blank lines skipped), in order. */
export function parseEnvFile(text: string): Map<string, string> {
  const out = new Map<string, string>()
  for (const raw of text.split('\n')) {
    const line = raw.trim()
    if (line === '' || line.startsWith('#')) continue
    const eq = line.indexOf('=')
    if (eq <= 0) throw new Error(`not KEY=VALUE: ${line}`)
    out.set(line.slice(0, eq), line.slice(eq + 1))
  }
  return out
}

/** A value for each empty secret of cluster.env.example, made as its comments say. */
export function fillSecrets(example: Map<string, string>): Record<string, string> {
  const made: Record<string, string> = {
    COFFER_MASTER_KEY: randomBytes(32).toString('base64'),
    COFFER_CONSENT_JWT_SECRET: randomBytes(48).toString('base64'),
    MINIO_ROOT_USER: 'minio-admin',
  }
  const out: Record<string, string> = {}
  for (const [key, value] of example) {
    if (value !== '' || key === 'COFFER_STOREFRONT_SECRET') out[key] = value
    else out[key] = made[key] ?? randomBytes(24).toString('hex')
  }
  return out
}

const REFERENCE = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}/g

/** Names a compose value refers to (`${NAME}`, `${NAME:-default}`, `${NAME:?message}`). */
export function references(value: string): string[] {
  return [...value.matchAll(REFERENCE)].map((m) => m[1] as string)
}

/** Compose's interpolation: defaults for unset/empty names, an error for required ones. */
export function interpolate(value: string, env: Record<string, string>): string {
  return value.replace(REFERENCE, (_, name: string, op: string | undefined, arg: string) => {
    const v = env[name]
    const empty = v === undefined || (op?.startsWith(':') && v === '')
    if (op?.endsWith('?') && empty) throw new Error(`required: ${name} (${arg})`)
    if (op?.endsWith('-') && empty) return arg
    return v ?? ''
  })
}

// --- compose.yaml ---

export interface ComposeService {
  image?: string
  build?: { context: string; dockerfile: string }
  environment?: Record<string, string>
  depends_on?: Record<string, { condition: string }> | string[]
  volumes?: string[]
  ports?: string[]
  stop_grace_period?: string
  networks?: string[] | Record<string, { ipv4_address?: string }>
  healthcheck?: { test: string[] }
  entrypoint?: string[]
}

export interface Compose {
  services: Record<string, ComposeService>
  networks: Record<string, { ipam?: { config: { subnet: string }[] } }>
}

export function readCompose(): Compose {
  // `merge`: the nodes share one block through `<<: *coffer-node`.
  return parse(read('deploy/compose.yaml'), { merge: true }) as Compose
}

/** The image's ENV (its last stage). */
export function imageEnv(): Record<string, string> {
  return dockerEnv(dockerStages(read('Dockerfile')).at(-1)?.instructions ?? [])
}

/**
 * What a node's process sees: the image's ENV, then compose's `environment` of `coffer-1`
 * interpolated from `.env` (`env`, as compose reads deploy/.env).
 */
export function nodeSettings(env: Record<string, string>): Record<string, string> {
  const service = readCompose().services['coffer-1']
  const given = Object.entries(service?.environment ?? {}).map(([k, v]) => [k, interpolate(v, env)])
  return { ...imageEnv(), ...Object.fromEntries(given) }
}

/** A compose duration (`30s`, `1m30s`) in milliseconds. */
export function durationMs(text: string): number {
  const parts = [...text.matchAll(/(\d+)(ms|s|m|h)/g)]
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== text) {
    throw new Error(`not a duration: ${text}`)
  }
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }
  return parts.reduce((sum, p) => sum + Number(p[1]) * unit[p[2] as keyof typeof unit], 0)
}

// --- Dockerfile ---

export interface Instruction {
  keyword: string
  args: string
}

/** Instructions per stage (continuation lines joined, comments dropped); the last is the image. */
export function dockerStages(text: string): { name: string; instructions: Instruction[] }[] {
  const logical: string[] = []
  let current = ''
  for (const raw of text.split('\n')) {
    if (/^\s*#/.test(raw)) continue
    const line = raw.replace(/\s+$/, '')
    if (line.endsWith('\\')) {
      current += `${line.slice(0, -1)} `
      continue
    }
    current += line
    if (current.trim() !== '') logical.push(current.trim())
    current = ''
  }
  const stages: { name: string; instructions: Instruction[] }[] = []
  for (const line of logical) {
    const [, keyword = '', args = ''] = /^(\S+)\s*(.*)$/.exec(line) ?? []
    const instruction = { keyword: keyword.toUpperCase(), args: args.replace(/\s+/g, ' ') }
    if (instruction.keyword === 'FROM') {
      const name = / AS (\S+)$/i.exec(instruction.args)?.[1] ?? String(stages.length)
      stages.push({ name, instructions: [] })
    }
    stages.at(-1)?.instructions.push(instruction)
  }
  return stages
}

/** `ENV A=1 B=2` instructions of a stage, as one map. */
export function dockerEnv(instructions: Instruction[]): Record<string, string> {
  const env: Record<string, string> = {}
  for (const i of instructions.filter((i) => i.keyword === 'ENV')) {
    for (const m of i.args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=(\S*)/g))
      env[m[1] as string] = m[2] ?? ''
  }
  return env
}

/** The JSON (exec) form of HEALTHCHECK … CMD [...]. */
export function healthcheckCommand(instructions: Instruction[]): string[] {
  const args = instructions.find((i) => i.keyword === 'HEALTHCHECK')?.args ?? ''
  const json = /\bCMD (\[.*\])$/.exec(args)?.[1]
  if (!json) throw new Error(`HEALTHCHECK without an exec-form CMD: ${args}`)
  return JSON.parse(json)
}

// --- haproxy.cfg ---

/** Sections (`backend coffer_api` → its lines), in order. */
export function haproxySections(text: string): Map<string, string[]> {
  const sections = new Map<string, string[]>()
  let current: string[] | undefined
  for (const raw of text.split('\n')) {
    const line = raw.replace(/#.*$/, '').trimEnd()
    if (line.trim() === '') continue
    if (/^\S/.test(line)) {
      current = []
      sections.set(line.trim(), current)
    } else current?.push(line.trim().replace(/\s+/g, ' '))
  }
  return sections
}
