import dns, { type LookupAddress } from 'node:dns'

/**
 * Makes `localhost` resolve, in this process, to the given addresses in this order, as a hosts
 * file listing it several times does (Debian, Ubuntu and Docker's own list `127.0.0.1` and
 * `::1`; the test machine only the first). Everything else resolves as before. Fastify's
 * `listen` and Node's `net` both resolve through `dns.lookup`, so both see it. Returns the undo.
 */
export function localhostResolvingTo(addresses: readonly string[]): () => void {
  const real = dns.lookup
  const answers: LookupAddress[] = addresses.map((address) => ({
    address,
    family: address.includes(':') ? 6 : 4,
  }))
  const fake = (host: string, options: unknown, callback?: unknown) => {
    const cb = (typeof options === 'function' ? options : callback) as (...a: unknown[]) => void
    const opts = (typeof options === 'object' && options !== null ? options : {}) as {
      all?: boolean
    }
    if (host !== 'localhost') return (real as (...a: unknown[]) => void)(host, options, callback)
    const first = answers[0] as LookupAddress
    if (opts.all) process.nextTick(cb, null, answers)
    else process.nextTick(cb, null, first.address, first.family)
  }
  ;(dns as { lookup: unknown }).lookup = fake
  return () => {
    ;(dns as { lookup: unknown }).lookup = real
  }
}
