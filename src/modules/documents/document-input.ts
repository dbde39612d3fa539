import { errors } from '../../lib/errors.js'
import { isUuid } from '../../lib/ids.js'

/**
 * An optional id field: `undefined` when absent; `null` for an explicit "none" — JSON null, an
 * empty form value, or the text "null" that FormData makes of a null (the SDK's
 * `updateDocumentOwner(v, d, null)`); otherwise a UUID (lowercased) or a 400 naming the field.
 */
export function optionalId(value: unknown, field: string): string | null | undefined {
  if (value === undefined) return undefined
  if (value === null || value === '' || value === 'null') return null
  if (typeof value !== 'string' || !isUuid(value.trim()))
    throw errors.invalidField(field, 'must be a valid UUID')
  return value.trim().toLowerCase()
}

/** The v1 (deprecated) `document` form field: base64 of JSON, required. */
export function requiredContent(
  value: unknown,
  decode: (v: unknown, f: string) => unknown,
): unknown {
  if (value === undefined || value === '') throw errors.invalidField('document', 'is required')
  return decode(value, 'document')
}
