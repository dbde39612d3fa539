import { isIPv4, isIPv6 } from 'node:net'

/**
 * The network a client address stands for in rate limits. An IPv4 address is itself (also when
 * written IPv4-mapped, `::ffff:a.b.c.d`); an IPv6 address stands for its /64, because one
 * subscriber routinely holds a whole /64 and could otherwise rotate through 2^64 addresses to
 * escape a per-address limit. Anything else (a test's made-up name) is used as given.
 */
export function clientNetwork(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
  if (mapped?.[1] && isIPv4(mapped[1])) return mapped[1]
  if (!isIPv6(address)) return address
  return `${expandIPv6(address).slice(0, 4).join(':')}::/64`
}

/** The eight 16-bit groups of an IPv6 address, lower-case hex without leading zeros. */
function expandIPv6(address: string): string[] {
  const bare = address.split('%')[0] as string
  const [head = '', tail] = bare.split('::') as [string, string | undefined]
  const groups = (part: string) => (part === '' ? [] : part.split(':'))
  const left = groups(head)
  const right = tail === undefined ? [] : groups(tail)
  // An embedded IPv4 tail (`::1.2.3.4` forms) counts as two groups; only the /64 is used anyway.
  const width = (gs: string[]) => gs.reduce((n, g) => n + (g.includes('.') ? 2 : 1), 0)
  const zeros = Array(Math.max(0, 8 - width(left) - width(right))).fill('0')
  return [...left, ...zeros, ...right].map((g) =>
    g.includes('.') ? g : Number.parseInt(g, 16).toString(16),
  )
}
