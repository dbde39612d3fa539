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
  // Through a third module: d → e → f → d, no two of them importing each other directly, no
  // file cycle (f reaches d's x.ts, which imports nothing).
  [
    'module-cycle',
    {
      'src/modules/d/x.ts': 'export const x = 1\n',
      'src/modules/d/d.service.ts': importing('../e/e.service.js'),
      'src/modules/e/e.service.ts': importing('../f/f.service.js'),
      'src/modules/f/f.service.ts': importing('../d/x.js'),
    },
    'src/modules/d → src/modules/e',
  ],
  [
    'foreign-module-subfolder',
    {
      'src/modules/c/sub/deep.ts': importing('../../../lib/util.js'),
      'src/modules/b/bad.ts': importing('../c/sub/deep.js'),
    },
    'src/modules/b/bad.ts → src/modules/c/sub/deep.ts',
  ],
  // A module cycle the folder graph cannot see: a imports c's subfolder (a → c/sub, a dead
  // end in that graph), c imports a. This rule is what reports it.
  [
    'foreign-module-subfolder',
    {
      'src/modules/c/sub/deep.ts': 'export const deep = 1\n',
      'src/modules/a/bad.ts': importing('../c/sub/deep.js'),
    },
    'src/modules/a/bad.ts → src/modules/c/sub/deep.ts',
  ],
  [
    'foreign-module-subfolder',
    {
      'src/modules/loose.ts': 'export const loose = 1\n',
      'src/modules/b/bad.ts': importing('../loose.js'),
    },
    'src/modules/b/bad.ts → src/modules/loose.ts',
  ],
]

/**
 * What a module may do inside its own folder: a subfolder importing the module's files and
 * each other, and the module's files importing it (no rule fires); its subfolder's imports of
 * other modules count as the module's (module-cycle sees them).
 */
const OWN_SUBFOLDER: Record<string, string> = {
  'src/modules/a/sub/one.ts': importing('../a.repo.js', './two.js'),
  'src/modules/a/sub/two.ts': importing('../../../lib/util.js'),
  'src/modules/a/uses-sub.ts': importing('./sub/one.js'),
}

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

  it('lets a module have subfolders of its own; their imports of other modules are its own', async () => {
    expect(await cruise(house(OWN_SUBFOLDER))).toEqual([])
    // a's subfolder imports c, which imports a: a module cycle, with no file cycle.
    const cycle = await cruise(
      house({ ...OWN_SUBFOLDER, 'src/modules/a/sub/bad.ts': importing('../../c/c.service.js') }),
    )
    expect(new Set(cycle.map((v) => v.rule))).toEqual(new Set(['module-cycle']))
    expect(cycle.map((v) => v.edge)).toContain('src/modules/a → src/modules/c')
  }, 60_000)

  it('has a case for every rule of the configuration', async () => {
    const { createRequire } = await import('node:module')
    const config = createRequire(import.meta.url)(CONFIG) as {
      forbidden: { name: string; comment: string }[]
    }
    expect(config.forbidden.map((r) => r.name).sort()).toEqual(
      [...new Set(BAD_IMPORTS.map(([r]) => r))].sort(),
    )
    for (const rule of config.forbidden) expect(rule.comment, rule.name).toMatch(/\w{3,}.*\./)
  })

  // The whole of src/ (about 3 s on an idle machine; far more on a loaded one).
  it('passes the real tree', async () => {
    expect(await cruise(REPO)).toEqual([])
  }, 60_000)
})
