import { randomUUID } from 'node:crypto'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import fc from 'fast-check'
import type { LightMyRequestResponse } from 'fastify'
import { FsBlobStore } from '../../src/blob/fs-blob-store.js'
import type { PolicyStatement } from '../../src/policy/index.js'
import { b64, errorOf, type TestApp } from './app.js'

/**
 * The spec's ownership rules ("Ownership change of a Document or BLOB", "Policy syntax") as a
 * small symbolic model, independent of src/policy: grants name matchers symbolically, users are
 * the letters A, B (owners) and C (a bystander caller), and `expected` says what a request must
 * answer. The ownership test files drive the real service with the same grants and compare.
 */

export type Kind = 'Document' | 'Blob'
export type Who = 'A' | 'B' | 'C'
export type Owner = Who | null
export type Act = 'C' | 'R' | 'U' | 'D'

/** A matcher's last token: `…::` / `…::.*` / `…::<item>` / another id / `…::$[Owner=…]`. */
export type Matcher =
  | { k: 'coll' }
  | { k: 'all' }
  | { k: 'item' }
  | { k: 'otherItem' }
  | { k: 'id'; i: number }
  | { k: 'owner'; who: Who | 'self' | 'any' }

export interface Grant {
  act: Act
  m: Matcher
}

/** What a rule is asked about: the collection, `…::$[Owner=X]`, or the item (with its owner). */
type Res = { k: 'coll' } | { k: 'scoped'; owner: Who } | { k: 'item'; owner: Owner; i?: number }

export interface PathSpec {
  name: string
  kind: Kind
  create: boolean
  /** The request also replaces the content (needs U on the item). */
  content: boolean
  /**
   * Activities of which some grant must exist for the route to run at all (decision 18: the
   * route's coarse check answers 401 before the item is loaded). Not used for creates.
   */
  gate: Act[]
}

export interface Variant {
  name: string
  caller: Who
  grants: Grant[]
}

const other = (w: Who): Who => (w === 'A' ? 'B' : 'A')

export function covers(m: Matcher, res: Res, caller: Who): boolean {
  switch (m.k) {
    case 'coll':
      return res.k === 'coll'
    case 'all':
      return true
    case 'item':
      return res.k === 'item' && res.i === undefined
    case 'otherItem':
      return false
    case 'id':
      return res.k === 'item' && res.i === m.i
    case 'owner': {
      // Owner matchers never apply to the collection nor to unowned items.
      const owner = res.k === 'coll' ? null : res.owner
      if (owner === null) return false
      return m.who === 'any' || m.who === owner || (m.who === 'self' && owner === caller)
    }
  }
}

export function can(grants: readonly Grant[], caller: Who, act: Act, res: Res): boolean {
  return grants.some((g) => g.act === act && covers(g.m, res, caller))
}

const item = (owner: Owner): Res => ({ k: 'item', owner })
const takeRes = (to: Owner): Res => (to === null ? { k: 'coll' } : { k: 'scoped', owner: to })

/** The spec's requirements of a request, as (activity, resource) pairs. */
function needs(path: PathSpec, from: Owner, to: Owner): [Act, Res][] {
  if (path.create) return [['C', takeRes(to)]]
  const out: [Act, Res][] = []
  if (path.content) out.push(['U', item(from)])
  if (from !== to) {
    out.push(['D', from === null ? item(null) : { k: 'scoped', owner: from }])
    out.push(['C', takeRes(to)])
  }
  // A request that changes nothing still must not confirm someone else's item exists.
  if (out.length === 0) out.push(['R', item(from)])
  return out
}

/** The status a request must answer: 200, 401 (denied, item readable) or 404 (not readable). */
export function expected(path: PathSpec, from: Owner, to: Owner, v: Variant): 200 | 401 | 404 {
  const ok = needs(path, from, to).every(([a, r]) => can(v.grants, v.caller, a, r))
  if (path.create) return ok ? 200 : 401
  if (!v.grants.some((g) => path.gate.includes(g.act))) return 401
  if (ok) return 200
  return can(v.grants, v.caller, 'R', item(from)) ? 401 : 404
}

const G = (act: Act, m: Matcher): Grant => ({ act, m })
const R_ITEM = G('R', { k: 'item' })
const U_ITEM = G('U', { k: 'item' })

/** Precisely the grants the spec's table asks of a bystander (plus the route's gate, if unmet). */
export function required(path: PathSpec, from: Owner, to: Owner): Grant[] {
  const taker = (o: Owner): Grant => G('C', o === null ? { k: 'coll' } : { k: 'owner', who: o })
  if (path.create) return [taker(to)]
  const out: Grant[] = []
  if (path.content) out.push(U_ITEM)
  if (from !== to) {
    out.push(G('D', from === null ? { k: 'item' } : { k: 'owner', who: from }))
    out.push(taker(to))
  }
  // Same owner through an owner-only path: reading the item is enough; the route's coarse
  // check wants some D (or U) grant, given here on an unrelated item.
  if (out.length === 0) out.push(R_ITEM, G('D', { k: 'otherItem' }))
  return out
}

export function fmtMatcher(m: Matcher): string {
  switch (m.k) {
    case 'coll':
      return '::'
    case 'all':
      return '.*'
    case 'item':
      return 'ITEM'
    case 'otherItem':
      return 'OTHER'
    case 'id':
      return `ITEM${m.i}`
    case 'owner':
      return `$[Owner=${m.who === 'any' ? '.*' : m.who}]`
  }
}
export const fmtGrant = (g: Grant) => `${g.act} ${fmtMatcher(g.m)}`
const same = (a: Grant, b: Grant) => fmtGrant(a) === fmtGrant(b)

/** Other ways to write one grant, some equivalent for this caller and some not. */
function alternatives(g: Grant, from: Owner): { caller: Who; g: Grant }[] {
  const m = g.m
  const alt = (caller: Who, n: Matcher) => ({ caller, g: G(g.act, n) })
  switch (m.k) {
    case 'owner': {
      const x = m.who as Who
      return [
        alt('C', { k: 'owner', who: 'any' }),
        alt('C', { k: 'all' }),
        alt(x, { k: 'owner', who: 'self' }),
        alt('C', { k: 'owner', who: 'self' }),
        alt('C', { k: 'owner', who: other(x) }),
        alt('C', { k: 'coll' }),
      ]
    }
    case 'coll':
      return [
        alt('C', { k: 'all' }),
        alt('C', { k: 'owner', who: 'any' }),
        alt('C', { k: 'owner', who: 'self' }),
      ]
    case 'item': {
      const out = [
        alt('C', { k: 'all' }),
        alt('C', { k: 'otherItem' }),
        alt('C', { k: 'owner', who: 'any' }),
        alt('C', { k: 'coll' }),
      ]
      if (from !== null) out.push(alt(from, { k: 'owner', who: 'self' }))
      return out
    }
    default:
      return []
  }
}

/**
 * The callers of one matrix cell: exactly the required grants; each one missing (alone, and
 * with R on the item so the denial is a 401 rather than a 404); each one written another way
 * (`.*`, `$[Owner=.*]`, `$[Owner=self]` by the owner and by a bystander, the collection, …);
 * and only Update on the item (with and without Read).
 */
export function variants(path: PathSpec, from: Owner, to: Owner): Variant[] {
  const base = required(path, from, to)
  const out: Variant[] = [{ name: 'exactly the required grants', caller: 'C', grants: base }]
  base.forEach((g, i) => {
    const rest = base.filter((_, j) => j !== i)
    out.push({ name: `without ${fmtGrant(g)}`, caller: 'C', grants: rest })
    // (A create has no item to read: its denials are all 401.)
    if (!path.create && !rest.some((r) => same(r, R_ITEM)))
      out.push({
        name: `without ${fmtGrant(g)}, with R ITEM`,
        caller: 'C',
        grants: [...rest, R_ITEM],
      })
    for (const a of alternatives(g, from)) {
      const grants = base.map((b, j) => (j === i ? a.g : b))
      out.push({
        name: `${fmtGrant(g)} as ${fmtGrant(a.g)} by ${a.caller}`,
        caller: a.caller,
        grants,
      })
    }
  })
  if (path.create) {
    out.push({ name: 'only U .*', caller: 'C', grants: [G('U', { k: 'all' })] })
  } else {
    out.push({ name: 'only U ITEM', caller: 'C', grants: [U_ITEM] })
    out.push({ name: 'only U and R ITEM', caller: 'C', grants: [U_ITEM, R_ITEM] })
  }
  const seen = new Set<string>()
  return out.filter((v) => {
    const key = `${v.caller}|${v.grants.map(fmtGrant).sort().join(',')}`
    if (seen.has(key)) return false
    seen.add(key)
    return true
  })
}

export const OWNERS: Owner[] = [null, 'A']
export const NEW_OWNERS: Owner[] = [null, 'A', 'B']
export const ownerName = (o: Owner) => o ?? 'unowned'

/** Users A, B, C, each alone in a group whose policy each case sets; one vault. */
export class Fixture {
  readonly ids = {} as Record<Who, string>
  readonly keys = {} as Record<Who, string>
  readonly groups = {} as Record<Who, string>
  readonly otherItem = randomUUID()
  vault = ''

  constructor(readonly t: TestApp) {}

  get admin(): string {
    return this.t.admin.api_key
  }

  async setup(): Promise<void> {
    const v = await this.t.api.post('/v1/vaults', {
      auth: this.admin,
      form: { name: `vault-${randomUUID()}` },
    })
    if (v.statusCode !== 200) throw new Error(`vault create failed: ${v.body}`)
    this.vault = v.json().vault.id
    for (const who of ['A', 'B', 'C'] as const) {
      const u = await this.t.api.post('/v1/users', {
        auth: this.admin,
        form: { username: `owner-${who}-${randomUUID()}` },
      })
      if (u.statusCode !== 200) throw new Error(`user create failed: ${u.body}`)
      this.ids[who] = u.json().user.id
      this.keys[who] = u.json().user.api_key
      const g = await this.t.api.post('/v1/groups', {
        auth: this.admin,
        form: { name: `g-${who}-${randomUUID()}`, policy: b64([]), user_ids: this.ids[who] },
      })
      if (g.statusCode !== 200) throw new Error(`group create failed: ${g.body}`)
      this.groups[who] = g.json().group.id
    }
  }

  ownerId(o: Owner): string | null {
    return o === null ? null : this.ids[o]
  }

  matcher(kind: Kind, m: Matcher, itemId: string | undefined, ids: readonly string[] = []): string {
    const prefix = `Vault::${this.vault}::${kind}::`
    switch (m.k) {
      case 'coll':
        return prefix
      case 'all':
        return `${prefix}.*`
      case 'item':
        if (itemId === undefined) throw new Error('no item for an ITEM grant')
        return prefix + itemId
      case 'otherItem':
        return prefix + this.otherItem
      case 'id':
        return prefix + (ids[m.i] as string)
      case 'owner': {
        const who = m.who === 'any' ? '.*' : m.who === 'self' ? 'self' : this.ids[m.who]
        return `${prefix}$[Owner=${who}]`
      }
    }
  }

  /** Replaces the caller's only policy with one statement per grant. */
  async grant(
    caller: Who,
    kind: Kind,
    grants: readonly Grant[],
    itemId?: string,
    ids?: readonly string[],
  ): Promise<void> {
    const policy: PolicyStatement[] = grants.map((g) => ({
      Resources: [this.matcher(kind, g.m, itemId, ids)],
      Activities: g.act,
    }))
    const res = await this.t.api.put(`/v1/groups/${this.groups[caller]}`, {
      auth: this.admin,
      json: { policy },
    })
    if (res.statusCode !== 200) throw new Error(`policy update failed: ${res.body}`)
  }
}

/** Checks status and error type; returns a description of the mismatch, or null. */
export function statusMismatch(res: LightMyRequestResponse, want: number): string | null {
  if (res.statusCode !== want) return `status ${res.statusCode}, expected ${want}: ${res.body}`
  if (want === 200) return null
  const type = errorOf(res).type
  const wantType = want === 401 ? 'authorization_error' : 'not_found_error'
  return type === wantType ? null : `error type ${type}, expected ${wantType}`
}

/** Every object file under the test app's filesystem blob store. */
export function blobFiles(t: TestApp): string[] {
  const store = t.deps.blobs
  if (!(store instanceof FsBlobStore)) throw new Error('the test app must use a FsBlobStore')
  const walk = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? walk(join(dir, e.name)) : [join(dir, e.name)],
    )
  return walk(store.root)
}

/** A multipart body with text fields and optionally a file part, in the given order. */
export function multipart(
  parts: ({ name: string; value: string } | { file: string; filename: string; type: string })[],
): { payload: string; contentType: string } {
  const boundary = `----ownership${randomUUID()}`
  const text = parts.map((p) =>
    'file' in p
      ? `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${p.filename}"\r\n` +
        `Content-Type: ${p.type}\r\n\r\n${p.file}\r\n`
      : `--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"\r\n\r\n${p.value}\r\n`,
  )
  return {
    payload: `${text.join('')}--${boundary}--\r\n`,
    contentType: `multipart/form-data; boundary=${boundary}`,
  }
}

/** A random grant for the list check: any activity but C, any matcher form. */
export function randomGrant(n: number): fc.Arbitrary<Grant> {
  const matcher: fc.Arbitrary<Matcher> = fc.oneof(
    fc.constant<Matcher>({ k: 'coll' }),
    fc.constant<Matcher>({ k: 'all' }),
    fc.integer({ min: 0, max: n - 1 }).map((i): Matcher => ({ k: 'id', i })),
    fc
      .constantFrom<Who | 'self' | 'any'>('A', 'B', 'C', 'self', 'any')
      .map((who): Matcher => ({ k: 'owner', who })),
  )
  return fc.record({ act: fc.constantFrom<Act>('R', 'R', 'U', 'D'), m: matcher })
}

/** Whether the grants let `caller` read item number `i` owned by `owner` (the model). */
export function readsItem(grants: readonly Grant[], caller: Who, i: number, owner: Owner): boolean {
  return can(grants, caller, 'R', { k: 'item', owner, i })
}
