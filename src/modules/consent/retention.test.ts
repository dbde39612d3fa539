import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  afterLapse,
  CHOICE_LIFE_MS,
  isLapsed,
  isOptOut,
  lapsesAt,
  NO_PREFERENCES,
  PREFERENCE_FIELDS,
  type Preferences,
} from './retention.js'

const DAY = 86_400_000
const t0 = new Date('2026-03-01T12:00:00.000Z')

describe('the life of a choice', () => {
  it('is 180 days', () => {
    expect(CHOICE_LIFE_MS).toBe(180 * DAY)
    expect(lapsesAt(t0)?.toISOString()).toBe('2026-08-28T12:00:00.000Z')
  })

  it('is valid until the last millisecond before 180 days, lapsed from then on', () => {
    expect(isLapsed(t0, t0)).toBe(false)
    expect(isLapsed(t0, new Date(t0.getTime() + 180 * DAY - 1))).toBe(false)
    expect(isLapsed(t0, new Date(t0.getTime() + 180 * DAY))).toBe(true)
    expect(isLapsed(t0, new Date(t0.getTime() + 3 * 365 * DAY))).toBe(true)
  })

  it('never lapses without an explicit choice', () => {
    expect(lapsesAt(null)).toBeNull()
    expect(isLapsed(null, new Date('2100-01-01T00:00:00Z'))).toBe(false)
  })
})

describe('opt-outs', () => {
  it('are optedOut=true and consentTargetedAdvertising=false, nothing else', () => {
    expect(isOptOut('optedOut', true)).toBe(true)
    expect(isOptOut('consentTargetedAdvertising', false)).toBe(true)
    expect(isOptOut('optedOut', false)).toBe(false)
    expect(isOptOut('optedOut', null)).toBe(false)
    expect(isOptOut('consentTargetedAdvertising', true)).toBe(false)
    for (const field of [
      'consentAnalytics',
      'consentAdvertising',
      'consentPersonalization',
    ] as const) {
      for (const value of [true, false, null]) expect(isOptOut(field, value)).toBe(false)
    }
  })

  it('survive a lapse; every other value becomes unknown', () => {
    const all: Preferences = {
      consentAnalytics: false,
      consentAdvertising: true,
      consentPersonalization: true,
      consentTargetedAdvertising: false,
      optedOut: true,
    }
    expect(afterLapse(all)).toEqual({
      ...NO_PREFERENCES,
      consentTargetedAdvertising: false,
      optedOut: true,
    })
    expect(afterLapse({ ...all, consentTargetedAdvertising: true, optedOut: false })).toEqual(
      NO_PREFERENCES,
    )
  })

  it('afterLapse keeps exactly the opt-outs, for any preferences (property)', () => {
    const value = fc.constantFrom(true, false, null)
    const prefs = fc.record(
      Object.fromEntries(PREFERENCE_FIELDS.map((f) => [f, value])) as Record<
        keyof Preferences,
        typeof value
      >,
    )
    fc.assert(
      fc.property(prefs, (p) => {
        const after = afterLapse(p)
        for (const field of PREFERENCE_FIELDS) {
          expect(after[field]).toBe(isOptOut(field, p[field]) ? p[field] : null)
        }
        // A second lapse changes nothing.
        expect(afterLapse(after)).toEqual(after)
      }),
    )
  })
})
