import { errors } from '../../lib/errors.js'

/**
 * A value specifier (spec, Messaging endpoints): where one value of a message comes from. Kept in
 * TrueVault's own shape so it can be stored and shown back as given (password reset flows).
 */
export type ValueSpec =
  | { literal_value: string }
  | { user_attribute: string }
  | { system_field: SystemField }

/** The only system field the spec supports. */
export type SystemField = 'username'

/** The user a message is about: the values specifiers resolve against. */
export interface ValueSpecTarget {
  username: string
  /** The user's attributes as stored (any JSON value, often an object; null when unset). */
  attributes: unknown
}

const KINDS = ['literal_value', 'user_attribute', 'system_field'] as const
const MAX_LITERAL = 10_000
const MAX_ATTRIBUTE_NAME = 255

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v)

/**
 * Parses one specifier: exactly one of `literal_value`, `user_attribute` or `system_field`, a
 * string. `allowLiteral: false` for recipients (`to_email_address`, `to_number`): a caller may
 * only send to the user's own address, never to one of their choosing. Errors name `field`.
 */
export function parseValueSpec(
  input: unknown,
  field: string,
  options: { allowLiteral?: boolean } = {},
): ValueSpec {
  const shape = 'must be a value specifier: {literal_value}, {user_attribute} or {system_field}'
  if (!isObject(input)) throw errors.invalidField(field, shape)
  const keys = Object.keys(input)
  const unknown = keys.find((k) => !(KINDS as readonly string[]).includes(k))
  if (unknown !== undefined) throw errors.invalidField(field, shape)
  if (keys.length !== 1) {
    throw errors.invalidField(
      field,
      'must hold exactly one of literal_value, user_attribute or system_field',
    )
  }
  const kind = keys[0] as (typeof KINDS)[number]
  const value = input[kind]
  if (typeof value !== 'string') throw errors.invalidField(`${field}.${kind}`, 'must be a string')
  switch (kind) {
    case 'literal_value':
      if (options.allowLiteral === false) {
        throw errors.invalidField(
          field,
          'must not be a literal_value: use user_attribute or system_field',
        )
      }
      if (value.length > MAX_LITERAL)
        throw errors.invalidField(
          `${field}.literal_value`,
          `must be at most ${MAX_LITERAL} characters`,
        )
      return { literal_value: value }
    case 'user_attribute':
      if (value === '')
        throw errors.invalidField(`${field}.user_attribute`, 'must name an attribute')
      if (value.length > MAX_ATTRIBUTE_NAME) {
        throw errors.invalidField(
          `${field}.user_attribute`,
          `must be at most ${MAX_ATTRIBUTE_NAME} characters`,
        )
      }
      return { user_attribute: value }
    case 'system_field':
      if (value !== 'username')
        throw errors.invalidField(`${field}.system_field`, 'must be username')
      return { system_field: value }
  }
}

/**
 * The attribute a name refers to: the top-level key spelled exactly so (a key may contain dots),
 * else, for a dotted name, the path through nested objects (`contact.email`). Own properties
 * only, so `__proto__` or `constructor` never reach a prototype.
 */
export function attributeAt(attributes: unknown, name: string): unknown {
  if (!isObject(attributes)) return undefined
  if (Object.hasOwn(attributes, name)) return attributes[name]
  if (!name.includes('.')) return undefined
  let node: unknown = attributes
  for (const segment of name.split('.')) {
    if (typeof node !== 'object' || node === null || !Object.hasOwn(node, segment)) return undefined
    node = (node as Record<string, unknown>)[segment]
  }
  return node
}

/**
 * The text a specifier stands for. A missing attribute (or one holding null) is '' (spec);
 * numbers and booleans become their JSON text; an attribute holding an object or array is a
 * 400 naming `field` (no provider takes structured values, and dumping one as JSON would send
 * more of the user's data than asked for). Errors never show the attribute's value.
 */
export function resolveValueSpec(spec: ValueSpec, target: ValueSpecTarget, field: string): string {
  if ('literal_value' in spec) return spec.literal_value
  if ('system_field' in spec) return target.username
  const value = attributeAt(target.attributes, spec.user_attribute)
  if (value === undefined || value === null) return ''
  if (typeof value === 'string') return value
  if (typeof value === 'number' || typeof value === 'boolean') return String(value)
  throw errors.invalidField(
    field,
    'names an attribute holding an object or array; only text, numbers and booleans can be sent',
  )
}
