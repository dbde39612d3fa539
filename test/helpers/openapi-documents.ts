import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { buildApp } from '../../src/app.js'
import { FsBlobStore } from '../../src/blob/fs-blob-store.js'
import { buildConsentApp } from '../../src/consent-app.js'
import { MasterKey } from '../../src/crypto/master-key.js'
import { createDeps } from '../../src/deps.js'
import type { OpenApiDocument } from '../../src/http/openapi/document.js'
import type { Store } from '../../src/store/db.js'

export const REPO_ROOT = new URL('../../', import.meta.url).pathname

export interface ServedDocuments {
  main: OpenApiDocument
  consent: OpenApiDocument
}

async function served(app: { inject(url: string): Promise<{ statusCode: number; body: string }> }) {
  const res = await app.inject('/openapi.json')
  if (res.statusCode !== 200) throw new Error(`/openapi.json answered ${res.statusCode}`)
  return JSON.parse(res.body) as OpenApiDocument
}

/** Both listeners' documents as they serve them, from apps built on `store`. */
export async function servedDocuments(store: Store): Promise<ServedDocuments> {
  const blobDir = mkdtempSync(join(tmpdir(), 'coffer-openapi-blobs-'))
  const deps = createDeps(store, {
    masterKey: MasterKey.generate(),
    blobStore: new FsBlobStore(blobDir),
  })
  const main = await buildApp(deps)
  const consent = await buildConsentApp(deps)
  try {
    return { main: await served(main), consent: await served(consent) }
  } finally {
    await main.close()
    await consent.close()
    rmSync(blobDir, { recursive: true, force: true })
  }
}

/** Writes `main.json` and `consent.json` into `dir`; returns their paths. */
export function writeDocuments(dir: string, docs: ServedDocuments): string[] {
  return Object.entries(docs).map(([name, doc]) => {
    const file = join(dir, `${name}.json`)
    writeFileSync(file, `${JSON.stringify(doc, null, 2)}\n`)
    return file
  })
}

export interface LintTotals {
  errors: number
  warnings: number
  ignored: number
}

export interface LintResult {
  totals: LintTotals
  /** Redocly's own report, to show when something is wrong. */
  report: string
}

/** `redocly lint` with the repository's redocly.yaml; JSON totals plus the readable report. */
export async function redoclyLint(files: string[]): Promise<LintResult> {
  if (files.length === 0) throw new Error('nothing to lint')
  const run = (format: string) =>
    promisify(execFile)(
      'npx',
      [
        '--no-install',
        'redocly',
        'lint',
        ...files,
        '--config',
        'redocly.yaml',
        `--format=${format}`,
      ],
      { cwd: REPO_ROOT, maxBuffer: 64 * 1024 * 1024 },
    ).catch((error: { stdout?: string; stderr?: string; code?: number }) => {
      // A failed lint exits 1 with its report on stdout; anything else is a broken run.
      if (error.code !== 1 || !error.stdout) throw error
      return { stdout: error.stdout, stderr: error.stderr ?? '' }
    })
  // The JSON format writes one object per file, end to end.
  const json = (await run('json')).stdout.replace(/\}\s*\{(?=\s*"totals")/g, '},{')
  const totals: LintTotals = { errors: 0, warnings: 0, ignored: 0 }
  const reports = JSON.parse(`[${json}]`) as { totals: LintTotals }[]
  if (reports.length !== files.length)
    throw new Error(`redocly reported on ${reports.length} files`)
  for (const one of reports) {
    totals.errors += one.totals.errors
    totals.warnings += one.totals.warnings
    totals.ignored += one.totals.ignored
  }
  const report = totals.errors + totals.warnings > 0 ? (await run('stylish')).stdout : 'no problems'
  return { totals, report }
}

/** A fresh temp folder (removed by the returned function). */
export function tempFolder(): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'coffer-openapi-'))
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) }
}
