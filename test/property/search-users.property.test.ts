import fc from 'fast-check'
import type { LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import { type Admin, b64, buildTestApp, type TestApp, unb64 } from '../helpers/app.js'
import {
  evaluateUsers,
  fieldValues,
  OracleError,
  type OracleResult,
  type OracleUser,
} from '../helpers/search-oracle.js'
import {
  ALPHABET,
  contentArb,
  dateFrom,
  fieldsArb,
  type GenField,
  instantFrom,
  type Mistake,
  mistakeArb,
  optionArb,
  pointsNearCircle,
  poolsArb,
  stringFrom,
  withMistake,
} from './search-arbitraries.js'

/**
 * User search (docs/search.md) against the in-memory oracle, through the HTTP API only. Per case,
 * a new account (its admin is one of the users); its user schema set with
 * `PUT /v1/accounts/{id}/user_schema` before or after the users are written (write path and
 * re-index); up to 12 users with random usernames, statuses, creation times (a manual clock) and
 * attributes, then some attributes rewritten by the admin or by the user (`PUT /v1/auth/me`), some
 * set to JSON null (then not searchable at all), some renamed, re-statused or deactivated; then
 * 2-8 random options filtering and sorting on attributes and on `$sys.*` / `$tv.*`. The answer
 * must equal the oracle's for the admin and for a user whose group grants R on some `User::<id>`
 * (and maybe `User::$[id=self.id]`) only.
 *
 * SEARCH_PROPERTY_SEED and SEARCH_PROPERTY_RUNS (default 30) override the seed and the number of
 * cases. Usernames, statuses and creation times given to the oracle are read back from the users
 * table (renames to a taken name are refused, and that is fine).
 */

const RUNS = Number(process.env.SEARCH_PROPERTY_RUNS ?? 30)
const SEED = process.env.SEARCH_PROPERTY_SEED ? Number(process.env.SEARCH_PROPERTY_SEED) : undefined

interface UserCase {
  username: string
  status: 'ACTIVATED' | 'PENDING' | 'LOCKED'
  attributes: Record<string, unknown> | null
  /** Attributes written after creation, by the admin or by the user itself (`PUT /v1/auth/me`). */
  update: { value: Record<string, unknown> | null; by: 'admin' | 'self' } | undefined
  /** Appended to the username by an update (skipped if the new name is taken). */
  rename: string | undefined
  restatus: 'ACTIVATED' | 'PENDING' | 'LOCKED' | undefined
  deactivate: boolean
  createdAt: number
  readable: boolean
}

interface SearchCase {
  option: Record<string, unknown>
  mistake: Mistake | undefined
  transport: 'form' | 'multipart' | 'json'
}

interface Case {
  fields: GenField[]
  schemaFirst: boolean
  users: UserCase[]
  searcherName: string
  adminReadable: boolean
  selfReadable: boolean
  adminCreatedAt: number
  searcherCreatedAt: number
  searches: SearchCase[]
}

const usernameArb = fc.string({ unit: fc.constantFrom(...ALPHABET), minLength: 1, maxLength: 4 })
const STATUS_VALUES = fc.constantFrom(
  'ACTIVATED',
  'PENDING',
  'LOCKED',
  'DEACTIVATED',
  'activated',
  'Locked',
)
/** Ids are UUIDv7 made now: these prefixes and pieces match some, all or none. */
const ID_VALUES = fc.constantFrom('0', '01', '019', 'f', '8', '-', 'zz')

const alias = (name: string) =>
  name.startsWith('$sys.') ? fc.constantFrom(name, name, `$tv.${name.slice(5)}`) : fc.constant(name)

const caseArb: fc.Arbitrary<Case> = fc
  .tuple(
    fieldsArb,
    poolsArb,
    fc.uniqueArray(usernameArb, { maxLength: 13, selector: (u) => u.toLowerCase() }),
  )
  .chain(([fields, pools, names]) => {
    const attributes = contentArb(fields, pools)
    // Creation times come from the case's instants, so date filters meet them.
    const createdAt = instantFrom(pools)
    const usernames = names.length > 0 ? names : ['searcher']
    const system = [
      {
        name: '$sys.username',
        kind: 'string' as const,
        values: fc.oneof(fc.constantFrom(...usernames), stringFrom(pools)) as fc.Arbitrary<unknown>,
      },
      {
        name: '$sys.status',
        kind: 'string' as const,
        values: STATUS_VALUES as fc.Arbitrary<unknown>,
      },
      { name: '$sys.id', kind: 'string' as const, values: ID_VALUES as fc.Arbitrary<unknown> },
      {
        name: '$sys.created_at',
        kind: 'date' as const,
        values: dateFrom(pools) as fc.Arbitrary<unknown>,
      },
    ]
    const user = fc.record({
      status: fc.constantFrom('ACTIVATED' as const, 'PENDING' as const, 'LOCKED' as const),
      attributes: fc.oneof(
        { weight: 8, arbitrary: attributes },
        { weight: 1, arbitrary: fc.constant(null) },
      ),
      update: fc.oneof(
        { weight: 8, arbitrary: fc.constant(undefined) },
        {
          weight: 3,
          arbitrary: fc.record({
            value: attributes as fc.Arbitrary<Record<string, unknown> | null>,
            by: fc.constantFrom('admin' as const, 'self' as const),
          }),
        },
        { weight: 1, arbitrary: fc.constant({ value: null, by: 'admin' as const }) },
      ),
      rename: fc.oneof(
        { weight: 6, arbitrary: fc.constant(undefined) },
        { weight: 1, arbitrary: usernameArb },
      ),
      restatus: fc.oneof(
        { weight: 6, arbitrary: fc.constant(undefined) },
        {
          weight: 1,
          arbitrary: fc.constantFrom('ACTIVATED' as const, 'PENDING' as const, 'LOCKED' as const),
        },
      ),
      deactivate: fc.oneof(
        { weight: 6, arbitrary: fc.constant(false) },
        { weight: 1, arbitrary: fc.constant(true) },
      ),
      createdAt,
      readable: fc.boolean(),
    })
    const search: fc.Arbitrary<SearchCase> = fc.record({
      option: optionArb({ fields, pools, system, alias }),
      mistake: mistakeArb,
      transport: fc.constantFrom('form', 'form', 'multipart', 'json'),
    })
    return fc.record({
      fields: fc.constant(fields),
      schemaFirst: fc.boolean(),
      users: fc
        .tuple(...usernames.slice(1).map((n) => user.map((u) => ({ ...u, username: n }))))
        .map((us) => us as UserCase[]),
      // `~` is outside the alphabet: no rename can take the searcher's name.
      searcherName: fc.constant(`~${usernames[0] as string}`),
      adminReadable: fc.boolean(),
      selfReadable: fc.boolean(),
      adminCreatedAt: createdAt,
      searcherCreatedAt: createdAt,
      searches: fc.array(search, { minLength: 2, maxLength: 8 }),
    })
  })

interface Hit {
  id: string
  user_id: string
  username: string
  status: string
  attributes?: string
}

describe('user search agrees with the oracle (property)', () => {
  let t: TestApp
  const clock = new ManualClock('2021-01-01T00:00:00.000Z')

  beforeAll(async () => {
    t = await buildTestApp({ clock })
  })
  afterAll(async () => {
    await t?.close()
  })

  const ok = (res: LightMyRequestResponse, what: string) => {
    if (res.statusCode !== 200) throw new Error(`${what}: ${res.statusCode} ${res.body}`)
    return res.json()
  }

  function send(option: unknown, transport: SearchCase['transport'], auth: string) {
    const url = '/v1/users/search'
    if (transport === 'json') return t.api.post(url, { auth, json: option })
    if (transport === 'multipart')
      return t.api.post(url, { auth, multipart: { search_option: b64(option) } })
    return t.api.post(url, { auth, form: { search_option: b64(option) } })
  }

  function differences(
    res: LightMyRequestResponse,
    expected: OracleResult | OracleError,
    users: Map<string, OracleUser>,
    full: boolean,
  ): string[] {
    if (expected instanceof OracleError) {
      const parts = expected.parts.map((p) => `"${p}"`).join(' or ')
      if (res.statusCode !== 400) return [`expected 400 naming ${parts}, got ${res.statusCode}`]
      const message = String(res.json().error?.message ?? '')
      return expected.parts.some((p) => message.includes(p))
        ? []
        : [`400 message "${message}" names none of ${parts}`]
    }
    if (res.statusCode !== 200) return [`expected 200, got ${res.statusCode} ${res.body}`]
    const data = res.json().data as { documents: Hit[]; info: Record<string, number> }
    const out: string[] = []
    const want = {
      total_result_count: expected.total,
      num_pages: expected.numPages,
      per_page: expected.perPage,
      current_page: expected.page,
    }
    for (const [k, v] of Object.entries(want))
      if (data.info[k] !== v) out.push(`info.${k}: expected ${v}, got ${data.info[k]}`)
    const ids = data.documents.map((d) => d.id)
    if (JSON.stringify(ids) !== JSON.stringify(expected.ids))
      out.push(`ids: expected ${JSON.stringify(expected.ids)}, got ${JSON.stringify(ids)}`)
    for (const hit of data.documents) {
      const u = users.get(hit.id)
      if (!u) continue
      if (hit.user_id !== u.id || hit.username !== u.username || hit.status !== u.status)
        out.push(`user fields of ${hit.id}: ${JSON.stringify(hit)}`)
      if (full) {
        if (
          hit.attributes === undefined ||
          JSON.stringify(unb64(hit.attributes)) !== JSON.stringify(u.attributes)
        )
          out.push(`attributes of ${hit.id}: ${hit.attributes}`)
      } else if (hit.attributes !== undefined) out.push('attributes present without full_document')
    }
    return out
  }

  it(
    'results, totals and order equal the oracle, for the admin and a partial reader',
    async () => {
      let cases = 0
      let searches = 0
      let skipped = 0
      let errors400 = 0
      let nonEmpty = 0
      await fc.assert(
        fc.asyncProperty(caseArb, async (c) => {
          cases++
          clock.set(new Date(c.adminCreatedAt))
          const account: Admin = await t.newAccount()
          const auth = account.api_key
          const schemaWire = { name: 'user_schema', fields: c.fields.map((f) => f.wire) }
          const putSchema = async () =>
            ok(
              await t.api.put(`/v1/accounts/${account.account_id}/user_schema`, {
                auth,
                form: { schema: b64(schemaWire) },
              }),
              'user schema',
            )
          if (c.schemaFirst) await putSchema()

          const attributes = new Map<string, unknown>()
          const ids: string[] = []
          const keys: string[] = []
          for (const u of c.users) {
            clock.set(new Date(u.createdAt))
            const form: Record<string, string> = { username: u.username, status: u.status }
            if (u.attributes !== null) form.attributes = b64(u.attributes)
            const user = ok(await t.api.post('/v1/users', { auth, form }), 'user').user
            ids.push(user.id)
            keys.push(user.api_key)
            attributes.set(user.id, u.attributes ?? {})
          }
          if (!c.schemaFirst) await putSchema()
          for (const [i, u] of c.users.entries()) {
            const id = ids[i] as string
            // JSON null attributes can only be written by an update.
            const next =
              u.update ??
              (u.attributes === null ? { value: null, by: 'admin' as const } : undefined)
            if (next !== undefined) {
              const res =
                next.by === 'self' && u.status === 'ACTIVATED'
                  ? await t.api.put('/v1/auth/me', {
                      auth: keys[i] as string,
                      form: { attributes: b64(next.value) },
                    })
                  : await t.api.put(`/v1/users/${id}`, {
                      auth,
                      form: { attributes: b64(next.value) },
                    })
              ok(res, 'attributes')
              attributes.set(id, next.value)
            }
            if (u.rename !== undefined) {
              // A name another live user holds is refused: then nothing changed.
              const res = await t.api.put(`/v1/users/${id}`, {
                auth,
                form: { username: u.username + u.rename },
              })
              if (res.statusCode !== 200 && res.statusCode !== 409 && res.statusCode !== 400)
                throw new Error(`rename: ${res.statusCode} ${res.body}`)
            }
            if (u.restatus !== undefined) {
              const res = await t.api.put(`/v1/users/${id}`, { auth, form: { status: u.restatus } })
              if (res.statusCode !== 200 && res.statusCode !== 409 && res.statusCode !== 400)
                throw new Error(`status: ${res.statusCode} ${res.body}`)
            }
            if (u.deactivate) ok(await t.api.delete(`/v1/users/${id}`, { auth }), 'deactivate')
          }

          // The partial reader: R on some users (and maybe on itself), never on anything else.
          const readableIds = c.users.flatMap((u, i) => (u.readable ? [ids[i] as string] : []))
          if (c.adminReadable) readableIds.push(account.userId)
          const resources = readableIds.map((id) => `User::${id}`)
          if (c.selfReadable || resources.length === 0) resources.push('User::$[id=self.id]')
          const group = ok(
            await t.api.post('/v1/groups', {
              auth,
              form: { name: 'readers', policy: b64([{ Resources: resources, Activities: 'R' }]) },
            }),
            'group',
          ).group.id as string
          clock.set(new Date(c.searcherCreatedAt))
          const searcher = ok(
            await t.api.post('/v1/users', {
              auth,
              form: { username: c.searcherName, group_ids: group },
            }),
            'searcher',
          ).user as { id: string; api_key: string }
          attributes.set(searcher.id, {})
          if (resources.includes('User::$[id=self.id]')) readableIds.push(searcher.id)
          if (!attributes.has(account.userId)) {
            const me = ok(
              await t.api.get(`/v1/users/${account.userId}`, { auth, query: { full: 'true' } }),
              'admin',
            ).user
            attributes.set(account.userId, me.attributes ? unb64(me.attributes) : {})
          }

          // Usernames, statuses and creation times as stored.
          const rows = await t.deps.store.db
            .selectFrom('users')
            .select(['id', 'username', 'status', 'created_at'])
            .where('account_id', '=', account.account_id)
            .execute()
          const users = new Map<string, OracleUser>()
          for (const r of rows)
            users.set(r.id, {
              id: r.id,
              username: r.username,
              status: r.status,
              created_at: new Date(r.created_at).getTime(),
              attributes: attributes.get(r.id),
            })
          const all = [...users.values()]
          const readableSet = new Set(readableIds)

          const geo = c.fields.find((f) => f.type === 'geo_point')
          const points = geo
            ? all.flatMap(
                (u) =>
                  fieldValues('geo_point', u.attributes, geo.name) as {
                    lat: number
                    long: number
                  }[],
              )
            : []
          for (const s of c.searches) {
            if (pointsNearCircle(points, s.option)) {
              skipped++
              continue
            }
            const option = s.mistake ? withMistake(s.option, s.mistake, c.fields) : s.option
            const full = option.full_document === true || option.full_doc === true
            for (const [who, key, readable] of [
              ['admin', auth, undefined],
              ['partial reader', searcher.api_key, (u: OracleUser) => readableSet.has(u.id)],
            ] as const) {
              let expected: OracleResult | OracleError
              try {
                expected = evaluateUsers({
                  fields: schemaWire.fields,
                  users: all,
                  option,
                  ...(readable ? { readable } : {}),
                })
              } catch (e) {
                if (!(e instanceof OracleError)) throw e
                expected = e
                errors400++
              }
              if (!(expected instanceof OracleError) && expected.total > 1) nonEmpty++
              searches++
              const res = await send(option, s.transport, key)
              const diff = differences(res, expected, users, full)
              if (diff.length > 0) {
                const label = (id: string) =>
                  id === account.userId ? 'admin' : id === searcher.id ? 'searcher' : id
                throw new Error(
                  [
                    `user search disagrees with the oracle (caller ${who}, ${s.transport}):`,
                    ...diff.map((d) => `  - ${d}`),
                    `user schema fields: ${JSON.stringify(schemaWire.fields)}`,
                    `users (id order): ${JSON.stringify(
                      all
                        .sort((a, b) => (a.id < b.id ? -1 : 1))
                        .map((u) => ({
                          ...u,
                          who: label(u.id),
                          created_at: new Date(u.created_at).toISOString(),
                          readable: readableSet.has(u.id),
                        })),
                    )}`,
                    `option: ${JSON.stringify(option)}`,
                    `expected: ${JSON.stringify(expected instanceof OracleError ? expected.message : expected)}`,
                    `actual: ${res.statusCode} ${res.body}`,
                  ].join('\n'),
                )
              }
            }
          }
        }),
        { numRuns: RUNS, ...(SEED !== undefined ? { seed: SEED } : {}) },
      )
      console.info(
        `search-users property: ${cases} cases, ${searches} searches (${errors400} expected 400s, ${nonEmpty} with 2+ hits), ${skipped} skipped near a geo boundary`,
      )
      expect(cases).toBeGreaterThan(0)
    },
    30 * 60_000,
  )
})
