/**
 * Browser origins allowed to read Coffer's answers (CORS). Pure: config.ts validates the
 * settings with `parseOriginList`, http/cors.ts matches request `Origin` headers with
 * `originMatcher`. An origin is compared as the exact text a browser sends
 * (`scheme://host[:port]`, lowercase host, no default port, no path), so a setting is refused
 * at start unless it is already in that form: a near miss would silently never match.
 */

/** Subdomain patterns (`https://*.example.com`): allowed only where a setting says so. */
export interface OriginListOptions {
  wildcardSubdomains: boolean
}

/** One DNS label, as a wildcard may stand for (no dot: `*` never spans several labels). */
const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/

/** The canonical origin of an http(s) URL text, or undefined when it is not exactly one. */
function canonicalOrigin(text: string): string | undefined {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return undefined
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return undefined
  return url.origin === text ? text : undefined
}

function checkEntry(name: string, entry: string, options: OriginListOptions): string | undefined {
  if (entry === '*' || entry === 'null') {
    return `${name} must list origins one by one: "${entry}" would let any web page read the answers`
  }
  const wildcard = /^(https?:\/\/)\*\.(.+)$/.exec(entry)
  if (wildcard) {
    if (!options.wildcardSubdomains) return `${name} does not accept patterns ("${entry}")`
    const [, scheme, rest = ''] = wildcard
    const host = rest.split(':')[0] ?? ''
    // `*.com` would take a whole top-level domain: at least two labels after the `*`.
    if (!host.includes('.')) return `${name} pattern "${entry}" must name a domain under the *`
    if (!/^[a-z0-9.-]+$/.test(host) || canonicalOrigin(`${scheme}x.${rest}`) === undefined)
      return `${name} pattern "${entry}" must be scheme://*.domain[:port] (lowercase, no path)`
    return undefined
  }
  if (canonicalOrigin(entry) === undefined) {
    return `${name} entry "${entry}" must be an origin: scheme://host[:port] (http or https, lowercase, no default port, no path or trailing slash)`
  }
  return undefined
}

/**
 * A comma-separated list of origins (empty: none). Each problem is pushed with the setting's
 * name; the valid entries are returned, de-duplicated.
 */
export function parseOriginList(
  name: string,
  raw: string | undefined,
  options: OriginListOptions,
  problems: string[],
): readonly string[] {
  const entries = (raw ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '')
  const valid: string[] = []
  for (const entry of entries) {
    const problem = checkEntry(name, entry, options)
    if (problem) problems.push(problem)
    else if (!valid.includes(entry)) valid.push(entry)
  }
  return Object.freeze(valid)
}

/**
 * A predicate over request `Origin` headers for validated entries: exact origins by set
 * membership, patterns by prefix, suffix and one label between (linear in the header, no
 * regular expression built from configuration).
 */
export function originMatcher(entries: readonly string[]): (origin: string) => boolean {
  const exact = new Set<string>()
  const patterns: { prefix: string; suffix: string }[] = []
  for (const entry of entries) {
    const star = entry.indexOf('://*.')
    if (star === -1) exact.add(entry)
    else patterns.push({ prefix: entry.slice(0, star + 3), suffix: entry.slice(star + 4) })
  }
  return (origin) => {
    if (exact.has(origin)) return true
    for (const { prefix, suffix } of patterns) {
      if (origin.length <= prefix.length + suffix.length) continue
      if (!origin.startsWith(prefix) || !origin.endsWith(suffix)) continue
      if (LABEL.test(origin.slice(prefix.length, origin.length - suffix.length))) return true
    }
    return false
  }
}
