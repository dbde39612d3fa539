import { errors } from '../../lib/errors.js'

const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+"
/** `; name=value` with a token or quoted-string value (RFC 6266 §4.1, RFC 9110 §5.6.4). */
const PARAM = new RegExp(`;\\s*(${TOKEN})\\s*=\\s*("(?:[^"\\\\]|\\\\.)*"|[^;\\s]*)\\s*`, 'g')
/** RFC 8187 ext-value: charset'language'percent-encoded bytes. */
const EXT_VALUE =
  /^([A-Za-z0-9!#$%&+^_`{}~-]+)'[^']*'((?:%[0-9A-Fa-f]{2}|[A-Za-z0-9!#$&+.^_`|~-])*)$/
const FIELD = 'Content-Disposition'
const utf8 = new TextDecoder('utf-8', { fatal: true })

/**
 * The filename a `Content-Disposition` header names (RFC 6266): `filename*` (RFC 8187, UTF-8 or
 * ISO-8859-1) wins over `filename`, as the RFC asks; a `filename*` in another charset is ignored.
 * Undefined when the header names none. A malformed `filename*` is a 400 naming the header.
 */
export function dispositionFilename(header: string): string | undefined {
  const params = new Map<string, string>()
  const start = header.indexOf(';')
  if (start < 0) return undefined
  for (const m of header.slice(start).matchAll(PARAM)) {
    const name = (m[1] as string).toLowerCase()
    const raw = m[2] as string
    if (!params.has(name))
      params.set(name, raw.startsWith('"') ? raw.slice(1, -1).replace(/\\(.)/g, '$1') : raw)
  }
  const extended = params.get('filename*')
  if (extended !== undefined) {
    const decoded = decodeExtValue(extended)
    if (decoded !== undefined) return decoded
  }
  const plain = params.get('filename')
  return plain === undefined ? undefined : asUtf8(plain)
}

function decodeExtValue(value: string): string | undefined {
  const m = EXT_VALUE.exec(value)
  if (!m) throw errors.invalidField(FIELD, "filename* must be charset'language'percent-encoded")
  const charset = (m[1] as string).toLowerCase()
  const bytes = Buffer.from(
    (m[2] as string).replace(/%([0-9A-Fa-f]{2})|./gs, (c, hex: string | undefined) =>
      hex === undefined ? c : String.fromCharCode(Number.parseInt(hex, 16)),
    ),
    'latin1',
  )
  if (charset === 'iso-8859-1') return bytes.toString('latin1')
  if (charset !== 'utf-8') return undefined
  try {
    return utf8.decode(bytes)
  } catch {
    throw errors.invalidField(FIELD, 'filename* is not valid UTF-8')
  }
}

/**
 * Node reads header bytes as ISO-8859-1, but curl and many clients put raw UTF-8 in a quoted
 * `filename`: read such bytes as UTF-8 when they are valid UTF-8, else keep them as they came.
 */
function asUtf8(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: ASCII is the same in both readings
  if (/^[\x00-\x7f]*$/.test(text)) return text
  try {
    return utf8.decode(Buffer.from(text, 'latin1'))
  } catch {
    return text
  }
}
