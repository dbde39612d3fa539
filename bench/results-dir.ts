import { join } from 'node:path'

/**
 * Where `npm run bench` writes its Markdown reports. By default `bench/out/` (gitignored): a run
 * on a laptop must not rewrite the committed results, which record the reference machine.
 * `--save` (or BENCH_SAVE=1) writes `bench/results/`, for a run meant to be committed.
 */
export function resultsDir(
  benchDir: string,
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
): string {
  const unknown = argv.filter((a) => a !== '--save')
  if (unknown.length > 0)
    throw new Error(`npm run bench takes only --save (got ${unknown.join(' ')})`)
  const raw = (env.BENCH_SAVE ?? '').trim()
  if (!['', '0', '1'].includes(raw)) throw new Error(`BENCH_SAVE must be 1 or 0 (got ${raw})`)
  const save = argv.includes('--save') || raw === '1'
  return join(benchDir, save ? 'results' : 'out')
}
