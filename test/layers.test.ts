import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'

/**
 * Issue #20: the layering rules of .dependency-cruiser.cjs (run by `npm run lint`), each shown
 * to fail on a deliberately bad import, so the check cannot pass vacuously. Each case runs the
 * real configuration, through the same command line as the lint, over a small house in a
 * temporary folder: one that keeps every rule, plus one bad file.
 */
const REPO = new URL('../', import.meta.url).pathname
const CONFIG = join(REPO, '.dependency-cruiser.cjs')
const CLI = join(REPO, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs')

interface Violation {
  rule: string
  edge: string
}

/** Runs the check over `src` in `cwd`; every violation as `rule` and `from → to`. */
function cruise(cwd: string): Promise<Violation[]> {
  return new Promise((resolve, reject) => {
    // It exits with the number of errors: the report is read whatever the exit code.
    execFile(
      process.execPath,
      [CLI, 'src', '--config', CONFIG, '--output-type', 'json'],
      { cwd, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (stdout === '') {
          reject(new Error(`depcruise gave no report: ${stderr || error?.message}`))
          return
        }
        const report = JSON.parse(stdout) as {
          summary: { violations: { from: string; to: string; rule: { name: string } }[] }
        }
        resolve(
          report.summary.violations.map((v) => ({
            rule: v.rule.name,
            edge: `${v.from} → ${v.to}`,
          })),
        )
      },
    )
  })
}

const importing = (...specifiers: string[]) =>
  `${specifiers.map((s, i) => `import * as m${i} from '${s}'`).join('\n')}\nexport const used = [${specifiers.map((_, i) => `m${i}`).join(', ')}]\n`

/**
 * A house that keeps every rule: a kernel file, the glue (kernel below it), three features (one
 * using its own repo, each using the services of those before it), the composition root, and a
 * unit test beside the kernel that imports anything.
 */
const HOUSE: Record<string, string> = {
  'tsconfig.json': JSON.stringify({
    compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true },
    include: ['src'],
  }),
  'src/lib/util.ts': 'export const util = 1\n',
  'src/http/glue.ts': importing('../lib/util.js'),
  'src/modules/a/a.repo.ts': importing('../../lib/util.js'),
  'src/modules/a/a.service.ts': importing('./a.repo.js', '../../http/glue.js'),
  'src/modules/b/b.service.ts': importing('../a/a.service.js'),
  'src/modules/c/c.service.ts': importing('../a/a.service.js', '../b/b.service.js'),
  'src/deps.ts': importing('./modules/b/b.service.js', './modules/c/c.service.js'),
  'src/app.ts': importing('./deps.js', './http/glue.js', './modules/a/a.service.js'),
  'src/lib/util.test.ts': importing('../modules/a/a.repo.js', '../deps.js'),
}

/** Each rule, the bad file(s) that break it, and the import it must report. */
const BAD_IMPORTS: [rule: string, files: Record<string, string>, edge: string][] = [
  [
    'feature-imported-from-below',
    { 'src/http/bad.ts': importing('../modules/a/a.service.js') },
    'src/http/bad.ts → src/modules/a/a.service.ts',
  ],
  [
    'http-imported-from-kernel',
    { 'src/lib/bad.ts': importing('../http/glue.js') },
    'src/lib/bad.ts → src/http/glue.ts',
  ],
  [
    'composition-root-imported',
    { 'src/modules/c/bad.ts': importing('../../deps.js') },
    'src/modules/c/bad.ts → src/deps.ts',
  ],
  [
    'foreign-repo',
    { 'src/modules/b/bad.ts': importing('../a/a.repo.js') },
    'src/modules/b/bad.ts → src/modules/a/a.repo.ts',
  ],
  [
    'file-cycle',
    { 'src/lib/x.ts': importing('./y.js'), 'src/lib/y.ts': importing('./x.js') },
    'src/lib/x.ts → src/lib/y.ts',
  ],
  // No file cycle here (a/bad.ts → c.service → a.service), yet modules a and c import each other.
  [
    'module-cycle',
    { 'src/modules/a/bad.ts': importing('../c/c.service.js') },
    'src/modules/a → src/modules/c',
  ],
]

const folders: string[] = []
afterAll(() => {
  for (const folder of folders) rmSync(folder, { recursive: true, force: true })
})

function house(extra: Record<string, string> = {}): string {
  const root = mkdtempSync(join(tmpdir(), 'coffer-layers-'))
  folders.push(root)
  for (const [path, text] of Object.entries({ ...HOUSE, ...extra })) {
    mkdirSync(dirname(join(root, path)), { recursive: true })
    writeFileSync(join(root, path), text)
  }
  return root
}

describe('the layering check', () => {
  it('passes a house that keeps every rule', async () => {
    expect(await cruise(house())).toEqual([])
  })

  it.each(BAD_IMPORTS)('%s: fails on a deliberately bad import', async (rule, files, edge) => {
    const violations = await cruise(house(files))
    expect(violations.map((v) => v.edge)).toContain(edge)
    expect(new Set(violations.map((v) => v.rule))).toEqual(new Set([rule]))
  })

  it('has a case for every rule of the configuration', async () => {
    const { createRequire } = await import('node:module')
    const config = createRequire(import.meta.url)(CONFIG) as {
      forbidden: { name: string; comment: string }[]
    }
    expect(config.forbidden.map((r) => r.name).sort()).toEqual(BAD_IMPORTS.map(([r]) => r).sort())
    for (const rule of config.forbidden) expect(rule.comment, rule.name).toMatch(/\w{3,}.*\./)
  })

  it('passes the real tree', async () => {
    expect(await cruise(REPO)).toEqual([])
  })
})
