import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

/**
 * Every setting the code reads is documented: a row of the README's configuration table and a
 * line of `.env.example`. Settings are found in the source (`COFFER_X` names in non-test files);
 * a name the code builds from a prefix (`COFFER_S3_` + ...) is not a setting of its own.
 */
const root = join(import.meta.dirname, '..')

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return sourceFiles(path)
    return name.endsWith('.ts') && !name.endsWith('.test.ts') ? [path] : []
  })
}

function settingsReadByTheCode(): string[] {
  const names = new Set<string>()
  for (const file of sourceFiles(join(root, 'src'))) {
    for (const [name] of readFileSync(file, 'utf8').matchAll(
      /COFFER_[A-Z0-9_]*[A-Z0-9](?![A-Z0-9_])/g,
    )) {
      names.add(name)
    }
  }
  return [...names].sort()
}

/** The settings named in the first column of the README's `| Variable | Default | Meaning |` table. */
function readmeTableSettings(): Set<string> {
  const lines = readFileSync(join(root, 'README.md'), 'utf8').split('\n')
  const start = lines.findIndex((line) => line.startsWith('| Variable | Default | Meaning |'))
  expect(start, 'the README has its configuration table').toBeGreaterThan(-1)
  const named = new Set<string>()
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break
    const firstCell = line.split('|')[1] ?? ''
    for (const [name] of firstCell.matchAll(/COFFER_[A-Z0-9_]+/g)) named.add(name)
  }
  return named
}

describe('settings documentation', () => {
  const settings = settingsReadByTheCode()

  it('finds the settings the code reads', () => {
    expect(settings).toContain('COFFER_PORT')
    expect(settings.length).toBeGreaterThan(50)
  })

  it('has a README configuration-table row for every setting', () => {
    const table = readmeTableSettings()
    expect(settings.filter((name) => !table.has(name))).toEqual([])
  })

  it('has a .env.example line for every setting', () => {
    const example = readFileSync(join(root, '.env.example'), 'utf8')
    const lines = new Set(
      [...example.matchAll(/^#?\s*(COFFER_[A-Z0-9_]+)=/gm)].map((match) => match[1] as string),
    )
    // The one setting a settings file cannot hold: it names the file.
    const readBeforeTheFile = new Set(['COFFER_ENV_FILE'])
    const missing = settings.filter((name) => !lines.has(name) && !readBeforeTheFile.has(name))
    expect(missing).toEqual([])
  })

  it('documents no setting the code does not read', () => {
    const known = new Set(settings)
    expect([...readmeTableSettings()].filter((name) => !known.has(name))).toEqual([])
  })
})
