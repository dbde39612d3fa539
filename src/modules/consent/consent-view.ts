import type { ConsentRecordRow, PreferenceColumns } from './consent.repo.js'
import { PREFERENCE_FIELDS, type PreferenceField, type Preferences } from './retention.js'

/** Mapping between the API's preference fields and their stored 0/1/null columns. */

/** The consent record as the spec shows it (the response of GET and POST). */
export interface ConsentView extends Preferences {
  jwt: string
  implicit: boolean
  isExisting: boolean
}

export const COLUMN_OF: Record<PreferenceField, keyof PreferenceColumns> = {
  consentAnalytics: 'consent_analytics',
  consentAdvertising: 'consent_advertising',
  consentPersonalization: 'consent_personalization',
  consentTargetedAdvertising: 'consent_targeted_advertising',
  optedOut: 'opted_out',
}

const bool = (value: number | null): boolean | null => (value === null ? null : value === 1)
const int = (value: boolean | null): number | null => (value === null ? null : value ? 1 : 0)

export function preferencesOf(row: PreferenceColumns): Preferences {
  const out = {} as Preferences
  for (const field of PREFERENCE_FIELDS) out[field] = bool(row[COLUMN_OF[field]])
  return out
}

export function columnsOf(preferences: Preferences): PreferenceColumns {
  const out = {} as PreferenceColumns
  for (const field of PREFERENCE_FIELDS) out[COLUMN_OF[field]] = int(preferences[field])
  return out
}

export function viewOf(row: ConsentRecordRow, jwt: string, isExisting: boolean): ConsentView {
  const preferences = preferencesOf(row)
  // Implicit: no explicit preference in force (a lapsed choice's kept opt-outs still are one).
  const explicit =
    row.choice_at !== null || PREFERENCE_FIELDS.some((field) => preferences[field] !== null)
  return { jwt, ...preferences, implicit: !explicit, isExisting }
}
