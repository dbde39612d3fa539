import { FIELD_TYPES, type FieldType, type SchemaField } from '../../indexing/index-values.js'
import { errors } from '../../lib/errors.js'

export interface SchemaDefinition {
  name: string
  fields: SchemaField[]
}

const MAX_NAME = 255
const MAX_FIELDS = 200

function bad(problem: string): Error {
  return errors.invalidField('schema', problem)
}

/** `index` as clients send it: booleans, 1/0 (the SDK's test sends 1), "true"/"false". */
function indexFlag(value: unknown, at: string): boolean {
  if (value === undefined) return true
  if (value === true || value === 1 || value === 'true' || value === '1') return true
  if (value === false || value === 0 || value === 'false' || value === '0') return false
  throw bad(`${at}.index must be a boolean`)
}

function fieldName(value: unknown, at: string): string {
  if (typeof value !== 'string' || value.trim() === '') throw bad(`${at}.name is required`)
  if (value.length > MAX_NAME) throw bad(`${at}.name must be at most ${MAX_NAME} characters`)
  if (value.split('.').some((part) => part === ''))
    throw bad(`${at}.name must not have empty path segments`)
  if (/^\$(sys|tv)\./.test(value))
    throw bad(`${at}.name must not use the reserved prefix $sys. or $tv.`)
  return value
}

/**
 * Validates a schema as clients send it (`{name, fields}`, decoded from base64) with a 400 that
 * says what is wrong: types from the fixed list, at most one geo_point, field names unique
 * ignoring case, dotted names allowed.
 */
export function parseSchemaDefinition(value: unknown): SchemaDefinition {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw bad('must be a JSON object with name and fields')
  }
  const input = value as Record<string, unknown>
  if (typeof input.name !== 'string' || input.name.trim() === '') throw bad('name is required')
  if (input.name.length > MAX_NAME) throw bad(`name must be at most ${MAX_NAME} characters`)
  const rawFields = input.fields ?? []
  if (!Array.isArray(rawFields)) throw bad('fields must be an array')
  if (rawFields.length > MAX_FIELDS) throw bad(`fields may hold at most ${MAX_FIELDS} fields`)
  const seen = new Set<string>()
  let geo = 0
  const fields = rawFields.map((raw, i): SchemaField => {
    const at = `fields[${i}]`
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
      throw bad(`${at} must be an object`)
    const f = raw as Record<string, unknown>
    const name = fieldName(f.name, at)
    const type = (f.type ?? 'string') as FieldType
    if (!FIELD_TYPES.includes(type))
      throw bad(`${at}.type must be one of ${FIELD_TYPES.join(', ')}`)
    if (type === 'geo_point' && ++geo > 1) throw bad('may hold at most one geo_point field')
    const key = name.toLowerCase()
    if (seen.has(key))
      throw bad(`${at}.name "${name}" is used twice (names are unique ignoring case)`)
    seen.add(key)
    return { name, type, index: indexFlag(f.index, at) }
  })
  return { name: input.name, fields }
}
