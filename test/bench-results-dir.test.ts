import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { resultsDir } from '../bench/results-dir.js'

describe('where npm run bench writes its reports', () => {
  const dir = '/repo/bench'

  it('writes the untracked bench/out/ by default, never the committed results', () => {
    expect(resultsDir(dir, [], {})).toBe(join(dir, 'out'))
    expect(resultsDir(dir, [], { BENCH_SAVE: '0' })).toBe(join(dir, 'out'))
    expect(resultsDir(dir, [], { BENCH_SAVE: ' ' })).toBe(join(dir, 'out'))
  })

  it('writes bench/results/ when asked: --save or BENCH_SAVE=1', () => {
    expect(resultsDir(dir, ['--save'], {})).toBe(join(dir, 'results'))
    expect(resultsDir(dir, [], { BENCH_SAVE: '1' })).toBe(join(dir, 'results'))
  })

  it('refuses other values and arguments before a long run starts', () => {
    expect(() => resultsDir(dir, [], { BENCH_SAVE: 'yes' })).toThrow(
      'BENCH_SAVE must be 1 or 0 (got yes)',
    )
    expect(() => resultsDir(dir, ['--sav'], {})).toThrow(
      'npm run bench takes only --save (got --sav)',
    )
  })
})
