import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { grantingStatements, type PolicySource } from './explain.js'
import { CompiledPolicy } from './policy.js'
import type { Activity, Caller, PolicyStatement, Resource } from './types.js'

const V = '0190f3a0-0000-7000-8000-00000000a001'
const D = '0190f3a0-0000-7000-8000-00000000d001'
const ALICE = '0190f3a0-0000-7000-8000-0000000000a1'
const BOB = '0190f3a0-0000-7000-8000-0000000000b2'

const source = (statements: PolicyStatement[], groupId: string | null = 'g1'): PolicySource => ({
  groupId,
  groupName: groupId && `name of ${groupId}`,
  statements,
})

describe('grantingStatements names what grants', () => {
  it('every granting matcher of every statement of every source, with its index', () => {
    const sources = [
      source([
        { Resources: ['Vault::.*'], Activities: 'C' },
        { Resources: [`Vault::${V}`, 'Vault::.*'], Activities: 'RU' },
      ]),
      source([{ Resources: [`Vault::${V}`], Activities: 'R' }], 'g2'),
    ]
    const found = grantingStatements(
      'R',
      { tokens: ['Vault', V] },
      { userId: ALICE },
      sources,
      'item',
    )
    expect(found.map((f) => [f.source.groupId, f.statementIndex, f.matcher])).toEqual([
      ['g1', 1, `Vault::${V}`],
      ['g1', 1, 'Vault::.*'],
      ['g2', 0, `Vault::${V}`],
    ])
    expect(found.every((f) => f.condition === undefined)).toBe(true)
  })

  it.each<[string, Resource, Caller, string | null]>([
    [
      '$[Owner=self]',
      { tokens: ['Vault', V, 'Document', D], ownerId: ALICE },
      { userId: ALICE },
      'owner=self',
    ],
    [
      '$[Owner=self]',
      { tokens: ['Vault', V, 'Document', D], ownerId: BOB },
      { userId: ALICE },
      null,
    ],
    [
      '$[Owner=self]',
      { tokens: ['Vault', V, 'Document', D], ownerId: ALICE },
      { userId: null },
      null,
    ],
    [
      '$[Owner=.*]',
      { tokens: ['Vault', V, 'Document', D], ownerId: BOB },
      { userId: ALICE },
      'owner=any',
    ],
    [
      '$[Owner=.*]',
      { tokens: ['Vault', V, 'Document', D], ownerId: null },
      { userId: ALICE },
      null,
    ],
    [
      `$[Owner=${BOB}]`,
      { tokens: ['Vault', V, 'Document', D], ownerId: BOB },
      { userId: ALICE },
      `owner=${BOB}`,
    ],
    [
      `$[Owner=${BOB}]`,
      { tokens: ['Vault', V, 'Document', `$[Owner=${BOB}]`] },
      { userId: null },
      `owner=${BOB}`,
    ],
  ])('item: %s on %j as %j → %s', (last, res, caller, condition) => {
    const sources = [source([{ Resources: [`Vault::${V}::Document::${last}`], Activities: 'R' }])]
    const found = grantingStatements('R', res, caller, sources, 'item')
    expect(found.map((f) => f.condition ?? '')).toEqual(condition === null ? [] : [condition])
  })

  it('item: $[id=self.id] says id=self', () => {
    const sources = [source([{ Resources: ['User::$[id=self.id]::Password'], Activities: 'U' }])]
    const res = { tokens: ['User', ALICE, 'Password'] }
    expect(grantingStatements('U', res, { userId: ALICE }, sources, 'item')[0]?.condition).toBe(
      'id=self',
    )
    expect(grantingStatements('U', res, { userId: BOB }, sources, 'item')).toEqual([])
  })

  it.each<[string, string | null]>([
    ['', null],
    ['.*', null],
    [D, `list: only the item id=${D}`],
    ['$[Owner=self]', 'list: only items with owner=self'],
    ['$[Owner=.*]', 'list: only items with owner=any'],
  ])('list: matcher …::%s → %s', (last, condition) => {
    const sources = [source([{ Resources: [`Vault::${V}::Document::${last}`], Activities: 'R' }])]
    const res = { tokens: ['Vault', V, 'Document', ''] }
    const found = grantingStatements('R', res, { userId: ALICE }, sources, 'list')
    expect(found).toHaveLength(1)
    expect(found[0]?.condition).toBe(condition ?? undefined)
  })

  it('only statements holding the activity', () => {
    const sources = [source([{ Resources: ['Vault::.*'], Activities: 'CUD' }])]
    expect(
      grantingStatements('R', { tokens: ['Vault', V] }, { userId: ALICE }, sources, 'item'),
    ).toEqual([])
  })
})

describe('property: the explanation agrees with the engine', () => {
  // Small alphabets so matches are frequent: two vaults, two items, two users.
  const id = fc.constantFrom(V, D, ALICE, BOB)
  const idToken = fc.oneof(
    id,
    fc.constantFrom('.*', '', '$[Owner=self]', '$[Owner=.*]', `$[Owner=${BOB}]`, '$[id=self.id]'),
  )
  const matcher = fc.oneof(
    fc.tuple(fc.constantFrom('Vault'), idToken).map((t) => t.join('::')),
    fc
      .tuple(idToken, fc.constantFrom('Document', 'Blob'), idToken)
      .map(([v, k, i]) => `Vault::${v}::${k}::${i}`),
    fc.tuple(fc.constantFrom('User', 'Group'), idToken).map((t) => t.join('::')),
  )
  const statement = fc.record({
    Resources: fc.array(matcher, { minLength: 1, maxLength: 3 }),
    Activities: fc.subarray(['C', 'R', 'U', 'D']).map((a) => a.join('')),
  })
  const sources = fc
    .array(fc.array(statement, { maxLength: 3 }), { maxLength: 3 })
    .map((groups) => groups.map((s, i) => source(s, `g${i}`)))
  const concrete = fc.constantFrom(V, D, ALICE, BOB)
  const resource: fc.Arbitrary<Resource> = fc.oneof(
    concrete.map((v) => ({ tokens: ['Vault', v] })),
    fc.constant({ tokens: ['Vault', ''] }),
    fc
      .tuple(
        concrete,
        fc.constantFrom('Document', 'Blob'),
        concrete,
        fc.constantFrom(ALICE, BOB, null),
      )
      .map(([v, k, i, owner]) => ({ tokens: ['Vault', v, k, i], ownerId: owner })),
    fc
      .tuple(concrete, fc.constantFrom('Document', 'Blob'))
      .map(([v, k]) => ({ tokens: ['Vault', v, k, ''] })),
    fc
      .tuple(concrete, fc.constantFrom(ALICE, BOB))
      .map(([v, owner]) => ({ tokens: ['Vault', v, 'Document', `$[Owner=${owner}]`] })),
    fc.tuple(fc.constantFrom('User', 'Group'), concrete).map(([k, i]) => ({ tokens: [k, i] })),
  )
  const caller = fc.constantFrom<Caller>({ userId: ALICE }, { userId: BOB }, { userId: null })
  const activity = fc.constantFrom<Activity>('C', 'R', 'U', 'D')

  it('item: some statement is named exactly when the engine allows', () => {
    fc.assert(
      fc.property(sources, resource, caller, activity, (srcs, res, who, act) => {
        const engine = new CompiledPolicy(srcs.flatMap((s) => s.statements))
        const named = grantingStatements(act, res, who, srcs, 'item')
        expect(named.length > 0).toBe(engine.allows(act, res, who))
      }),
      { numRuns: 2000 },
    )
  })

  it('list: some statement is named exactly when the engine lets the collection be listed', () => {
    const collection = fc.oneof(
      fc.constant(['Vault', '']),
      concrete.map((v) => ['Vault', v, 'Document', '']),
      concrete.map((v) => ['Vault', v, 'Blob', '']),
    )
    fc.assert(
      fc.property(sources, collection, caller, (srcs, tokens, who) => {
        const engine = new CompiledPolicy(srcs.flatMap((s) => s.statements))
        const named = grantingStatements('R', { tokens }, who, srcs, 'list')
        expect(named.length > 0).toBe(engine.readScope(tokens, who) !== null)
      }),
      { numRuns: 2000 },
    )
  })
})
