import { describe, expect, it } from 'vitest'
import { growthGiven } from './startup-heap.js'

describe('startup heap hold: an operator’s own growth factor is left alone', () => {
  it('sees the flag in either spelling, as a node flag or in NODE_OPTIONS', () => {
    expect(growthGiven(['--semi-space-growth-factor=4'], '')).toBe(true)
    expect(growthGiven([], '--max-old-space-size=512 --semi_space_growth_factor=3')).toBe(true)
    expect(growthGiven(['--import', 'tsx'], '--max-semi-space-size=8')).toBe(false)
    expect(growthGiven([], '')).toBe(false)
  })
})
