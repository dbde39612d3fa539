/**
 * How long a consent choice lasts (spec, Limits: "180 days for cookie consent; opt-outs never
 * expire"), as pure functions of the stored preferences and the time.
 *
 * - A choice is valid for 180 days from the record's last explicit change (any POST re-confirms
 *   the whole choice: the consumer saw and kept the other categories). From then on it reads as
 *   unknown again: the next GET starts the record afresh and tokens issued before are refused.
 * - Opt-outs survive: `optedOut: true` and `consentTargetedAdvertising: false` (the two fields of
 *   the CCPA sale/share opt-out, Cal. Civ. Code § 1798.120 and Cal. Code Regs. tit. 11 § 7025)
 *   are kept forever.
 * - Nothing here deletes history: the audit trail is kept apart from the choice's validity.
 */

export const PREFERENCE_FIELDS = [
  'consentAnalytics',
  'consentAdvertising',
  'consentPersonalization',
  'consentTargetedAdvertising',
  'optedOut',
] as const

export type PreferenceField = (typeof PREFERENCE_FIELDS)[number]
export type Preferences = Record<PreferenceField, boolean | null>

export const CHOICE_LIFE_DAYS = 180
export const CHOICE_LIFE_MS = CHOICE_LIFE_DAYS * 86_400_000

export const NO_PREFERENCES: Readonly<Preferences> = Object.freeze({
  consentAnalytics: null,
  consentAdvertising: null,
  consentPersonalization: null,
  consentTargetedAdvertising: null,
  optedOut: null,
})

/** True for the values that are opt-outs, which never expire. */
export function isOptOut(field: PreferenceField, value: boolean | null): boolean {
  return (
    (field === 'optedOut' && value === true) ||
    (field === 'consentTargetedAdvertising' && value === false)
  )
}

/** When a choice made at `choiceAt` stops being valid; null when no explicit choice is in force. */
export function lapsesAt(choiceAt: Date | null): Date | null {
  return choiceAt === null ? null : new Date(choiceAt.getTime() + CHOICE_LIFE_MS)
}

/** True once the 180 days have passed (the choice is valid strictly before `lapsesAt`). */
export function isLapsed(choiceAt: Date | null, now: Date): boolean {
  const end = lapsesAt(choiceAt)
  return end !== null && now.getTime() >= end.getTime()
}

/** The preferences once a choice has lapsed: unknown again, except the opt-outs. */
export function afterLapse(preferences: Preferences): Preferences {
  const kept = { ...NO_PREFERENCES }
  for (const field of PREFERENCE_FIELDS) {
    if (isOptOut(field, preferences[field])) kept[field] = preferences[field]
  }
  return kept
}
