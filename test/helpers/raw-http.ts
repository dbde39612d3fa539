import { connect } from 'node:net'

export interface RawAnswer {
  status: number
  /** The header lines exactly as sent, `Name: value`, in order. */
  headerLines: string[]
  body: string
}

/**
 * Sends `request` (the exact bytes; `Connection: close` is added) over a new socket and reads
 * the whole answer, so a test sees the header bytes as a client would, not as a library
 * normalizes them.
 */
export function rawExchange(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body = '',
): Promise<RawAnswer> {
  const lines = [`${method} ${path} HTTP/1.1`, 'Host: 127.0.0.1', 'Connection: close']
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`)
  if (body !== '') lines.push(`Content-Length: ${Buffer.byteLength(body)}`)
  const request = `${lines.join('\r\n')}\r\n\r\n${body}`
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    const chunks: Buffer[] = []
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    socket.on('error', reject)
    socket.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8')
      const split = text.indexOf('\r\n\r\n')
      const [statusLine = '', ...headerLines] = text.slice(0, split).split('\r\n')
      resolve({
        status: Number(statusLine.split(' ')[1]),
        headerLines,
        body: dechunk(text.slice(split + 4), headerLines),
      })
    })
    socket.write(request)
  })
}

/** The body of a `Transfer-Encoding: chunked` answer (ASCII bodies, as the tests read). */
function dechunk(raw: string, headerLines: string[]): string {
  if (!headerLines.some((l) => /^transfer-encoding:\s*chunked$/i.test(l))) return raw
  let out = ''
  let rest = raw
  for (;;) {
    const eol = rest.indexOf('\r\n')
    const size = Number.parseInt(rest.slice(0, eol), 16)
    if (!size) return out
    out += rest.slice(eol + 2, eol + 2 + size)
    rest = rest.slice(eol + 2 + size + 2)
  }
}

/** The values of every header line with this name (case-insensitive), as sent. */
export function headerValues(answer: RawAnswer, name: string): string[] {
  const prefix = `${name.toLowerCase()}:`
  return answer.headerLines
    .filter((l) => l.toLowerCase().startsWith(prefix))
    .map((l) => l.slice(prefix.length).trim())
}
