import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  type Activity,
  type Caller,
  CompiledPolicy,
  Grants,
  type ItemScope,
  inScopes,
  ownedItem,
  ownerScoped,
  PolicyFormatError,
  type PolicyStatement,
  parsePolicy,
  type Requirement,
  type Resource,
  resource,
  resourceText,
} from './index.js'

const V1 = '0190f3a0-0000-7000-8000-00000000a001'
const V2 = '0190f3a0-0000-7000-8000-00000000a002'
const D1 = '0190f3a0-0000-7000-8000-00000000d001'
const D2 = '0190f3a0-0000-7000-8000-00000000d002'
const D3 = '0190f3a0-0000-7000-8000-00000000d003'
const B1 = '0190f3a0-0000-7000-8000-00000000b001'
const S1 = '0190f3a0-0000-7000-8000-00000000e001'
const G1 = '0190f3a0-0000-7000-8000-00000000c001'
const G2 = '0190f3a0-0000-7000-8000-00000000c002'
const F1 = '0190f3a0-0000-7000-8000-00000000f001'
const F2 = '0190f3a0-0000-7000-8000-00000000f002'
const ALICE = '0190f3a0-0000-7000-8000-0000000000a1'
const BOB = '0190f3a0-0000-7000-8000-0000000000b2'
const CAROL = '0190f3a0-0000-7000-8000-0000000000c3'

const alice: Caller = { userId: ALICE }
const bob: Caller = { userId: BOB }
const nobody: Caller = { userId: null }

const LETTERS: Activity[] = ['C', 'R', 'U', 'D']
const DOCS = ['Vault', V1, 'Document']
const BLOBS = ['Vault', V1, 'Blob']
const DOC_LIST = [...DOCS, '']
const doc = (ownerId: string | null, id = D1, vault = V1): Resource =>
  ownedItem(['Vault', vault, 'Document', id], ownerId)
const blob = (ownerId: string | null, id = B1): Resource => ownedItem([...BLOBS, id], ownerId)

const policy = (...statements: [string | string[], string][]): CompiledPolicy =>
  new CompiledPolicy(
    statements.map(([r, a]) => ({ Resources: typeof r === 'string' ? [r] : r, Activities: a })),
  )
const scope = (s: Partial<ItemScope> = {}): ItemScope => ({
  all: false,
  ids: new Set(),
  ownerIds: new Set(),
  anyOwner: false,
  ...s,
})
const describeRes = (r: Resource): string =>
  `${resourceText(r)}${r.ownerId === undefined ? '' : ` (owner ${r.ownerId ?? 'none'})`}`

describe("the spec's resource table: each row grants its letters and nothing else", () => {
  interface SpecRow {
    matcher: string
    res: Resource
    letters: string
    /** A neighbouring resource the matcher must not cover, whatever the letters. */
    other: Resource
    who?: Caller
  }
  const rows: SpecRow[] = [
    { matcher: 'Vault::', res: resource('Vault', ''), letters: 'CR', other: resource('Vault', V1) },
    {
      matcher: `Vault::${V1}`,
      res: resource('Vault', V1),
      letters: 'RUD',
      other: resource('Vault', V2),
    },
    {
      matcher: `Vault::${V1}::Document::`,
      res: resource(...DOCS, ''),
      letters: 'CR',
      other: doc(null),
    },
    {
      matcher: `Vault::${V1}::Document::${D1}`,
      res: doc(null),
      letters: 'RUD',
      other: doc(null, D2),
    },
    {
      matcher: `Vault::${V1}::Blob::`,
      res: resource(...BLOBS, ''),
      letters: 'CR',
      other: resource('Vault', V2, 'Blob', ''),
    },
    {
      matcher: `Vault::${V1}::Blob::${B1}`,
      res: blob(ALICE),
      letters: 'RUD',
      other: doc(ALICE, B1),
    },
    {
      matcher: `Vault::${V1}::Schema::`,
      res: resource('Vault', V1, 'Schema', ''),
      letters: 'CR',
      other: resource('Vault', V1, 'Schema', S1),
    },
    {
      matcher: `Vault::${V1}::Schema::${S1}`,
      res: resource('Vault', V1, 'Schema', S1),
      letters: 'RUD',
      other: resource('Vault', V2, 'Schema', S1),
    },
    {
      matcher: `Vault::${V1}::Search::`,
      res: resource('Vault', V1, 'Search', ''),
      letters: 'R',
      other: resource('Vault', V2, 'Search', ''),
    },
    { matcher: 'User::', res: resource('User', ''), letters: 'CR', other: resource('User', ALICE) },
    {
      matcher: `User::${ALICE}`,
      res: resource('User', ALICE),
      letters: 'RUD',
      other: resource('User', BOB),
    },
    {
      matcher: `User::${ALICE}::Password`,
      res: resource('User', ALICE, 'Password'),
      letters: 'U',
      other: resource('User', BOB, 'Password'),
    },
    {
      matcher: `User::${ALICE}::Message`,
      res: resource('User', ALICE, 'Message'),
      letters: 'C',
      other: resource('User', ALICE, 'Password'),
    },
    {
      matcher: 'User::$[id=self.id]',
      res: resource('User', ALICE),
      letters: 'RUD',
      other: resource('User', BOB),
      who: alice,
    },
    {
      matcher: 'UserSchema::',
      res: resource('UserSchema', ''),
      letters: 'CRUD',
      other: resource('User', ''),
    },
    { matcher: 'Group::', res: resource('Group', ''), letters: 'CR', other: resource('Group', G1) },
    {
      matcher: `Group::${G1}`,
      res: resource('Group', G1),
      letters: 'RUD',
      other: resource('Group', G2),
    },
    {
      matcher: `Group::${G1}::GroupMembership::${ALICE}`,
      res: resource('Group', G1, 'GroupMembership', ALICE),
      letters: 'CD',
      other: resource('Group', G1, 'GroupMembership', BOB),
    },
    {
      matcher: 'PasswordResetFlow::',
      res: resource('PasswordResetFlow', ''),
      letters: 'CR',
      other: resource('PasswordResetFlow', F1),
    },
    {
      matcher: `PasswordResetFlow::${F1}`,
      res: resource('PasswordResetFlow', F1),
      letters: 'RD',
      other: resource('PasswordResetFlow', F2),
    },
    {
      matcher: `PasswordResetFlow::${F1}::Email::${ALICE}`,
      res: resource('PasswordResetFlow', F1, 'Email', ALICE),
      letters: 'CD',
      other: resource('PasswordResetFlow', F1, 'Email', BOB),
    },
    {
      matcher: `Vault::${V1}::Document::$[Owner=self]`,
      res: doc(ALICE),
      letters: 'CRUD',
      other: doc(BOB),
      who: alice,
    },
    {
      matcher: `Vault::${V1}::Document::$[Owner=${BOB}]`,
      res: doc(BOB),
      letters: 'CRUD',
      other: doc(null),
    },
    {
      matcher: `Vault::${V1}::Document::$[Owner=.*]`,
      res: doc(BOB),
      letters: 'CRUD',
      other: doc(null),
    },
    {
      matcher: `Vault::${V1}::Document::$[Owner=.*]`,
      res: ownerScoped(DOCS, CAROL),
      letters: 'CRUD',
      other: resource(...DOCS, ''),
    },
    {
      matcher: `Vault::${V1}::Blob::$[Owner=self]`,
      res: blob(ALICE),
      letters: 'CRUD',
      other: blob(null),
      who: alice,
    },
    {
      matcher: `Vault::${V1}::Blob::$[Owner=${BOB}]`,
      res: blob(BOB),
      letters: 'CRUD',
      other: blob(ALICE),
    },
    {
      matcher: `Vault::${V1}::Blob::$[Owner=.*]`,
      res: blob(CAROL),
      letters: 'CRUD',
      other: blob(null),
    },
    // wildcard forms of the same rows
    {
      matcher: 'Vault::.*',
      res: resource('Vault', V2),
      letters: 'RUD',
      other: resource(...DOCS, ''),
    },
    {
      matcher: 'Vault::.*::Document::.*',
      res: doc(null, D2, V2),
      letters: 'RUD',
      other: blob(null),
    },
    {
      matcher: 'Vault::.*::Search::',
      res: resource('Vault', V2, 'Search', ''),
      letters: 'R',
      other: resource('Vault', V2, 'Schema', ''),
    },
    {
      matcher: 'User::.*',
      res: resource('User', BOB),
      letters: 'RUD',
      other: resource('User', BOB, 'Password'),
    },
    {
      matcher: 'Group::.*::GroupMembership::.*',
      res: resource('Group', G2, 'GroupMembership', BOB),
      letters: 'CD',
      other: resource('Group', G2),
    },
  ]

  for (const row of rows) {
    const who = row.who ?? bob
    const label = `${row.matcher} [${row.letters}] on ${describeRes(row.res)}`
    it(`${label}: granted letters allowed, others denied`, () => {
      const p = policy([row.matcher, row.letters])
      for (const a of LETTERS) expect(p.allows(a, row.res, who), a).toBe(row.letters.includes(a))
    })
    it(`${label}: each letter alone grants only itself`, () => {
      for (const granted of row.letters) {
        const p = policy([row.matcher, granted])
        for (const a of LETTERS)
          expect(p.allows(a, row.res, who), `${granted}→${a}`).toBe(a === granted)
      }
    })
    it(`${label}: does not cover ${describeRes(row.other)} even with CRUD`, () => {
      const p = policy([row.matcher, 'CRUD'])
      for (const a of LETTERS) expect(p.allows(a, row.other, who), a).toBe(false)
    })
    it(`${label}: default deny without a statement`, () => {
      const p = policy([`${row.matcher}x`, 'CRUD'], [[], 'CRUD'], [row.matcher, ''])
      for (const a of LETTERS) expect(p.allows(a, row.res, who), a).toBe(false)
    })
  }

  it('the letter A grants nothing', () => {
    const p = policy(['Vault::.*', 'A'], ['User::.*', 'A'])
    for (const a of LETTERS) {
      expect(p.allows(a, resource('Vault', V1), alice)).toBe(false)
      expect(p.allows(a, resource('User', ALICE), alice)).toBe(false)
    }
  })

  it('letters do not leak between statements; statements and matchers are a union', () => {
    const p = policy([`Vault::${V1}`, 'R'], [[`Vault::${V2}`, `Group::${G1}`], 'UD'])
    expect(p.allows('R', resource('Vault', V1), alice)).toBe(true)
    expect(p.allows('U', resource('Vault', V1), alice)).toBe(false)
    expect(p.allows('R', resource('Vault', V2), alice)).toBe(false)
    expect(p.allows('U', resource('Vault', V2), alice)).toBe(true)
    expect(p.allows('D', resource('Group', G1), alice)).toBe(true)
    expect(p.allows('R', resource('Group', G1), alice)).toBe(false)
  })

  it('allowSelf: false disables `$[id=self.id]` only', () => {
    const p = policy(['User::$[id=self.id]', 'RU'])
    const me = resource('User', ALICE)
    expect(p.allows('U', me, alice)).toBe(true)
    expect(p.allows('U', me, alice, { allowSelf: false })).toBe(false)
    expect(policy(['User::.*', 'U']).allows('U', me, alice, { allowSelf: false })).toBe(true)
  })

  it('an empty policy denies everything', () => {
    const p = new CompiledPolicy([])
    for (const a of LETTERS) expect(p.allows(a, resource('Vault', ''), alice)).toBe(false)
  })
})

describe("the spec's ownership-change table", () => {
  /** The permissions the spec requires to move an item from `oldOwner` to `newOwner`. */
  function mayChangeOwner(
    g: Grants,
    collection: string[],
    id: string,
    oldOwner: string | null,
    newOwner: string | null,
  ): boolean {
    const deleteOk =
      oldOwner === null
        ? g.can('D', ownedItem([...collection, id], null))
        : g.can('D', ownerScoped(collection, oldOwner))
    const createOk =
      newOwner === null
        ? g.can('C', resource(...collection, ''))
        : g.can('C', ownerScoped(collection, newOwner))
    return deleteOk && createOk
  }

  interface ChangeRow {
    name: string
    statements: [string | string[], string][]
    want: boolean
    who?: Caller
    collection?: string[]
  }
  const cases = (
    oldOwner: string | null,
    newOwner: string | null,
    rows: ChangeRow[],
  ): (() => void) => {
    return () => {
      for (const row of rows) {
        it(row.name, () => {
          const g = new Grants([policy(...row.statements)], row.who ?? alice)
          expect(mayChangeOwner(g, row.collection ?? DOCS, D1, oldOwner, newOwner)).toBe(row.want)
        })
      }
    }
  }

  const doc1 = `Vault::${V1}::Document::${D1}`
  const docs = `Vault::${V1}::Document::`
  const ownedBy = (x: string) => `Vault::${V1}::Document::$[Owner=${x}]`

  describe(
    'unowned → USERB: D on the item and C on `…::$[Owner=USERB]`',
    cases(null, BOB, [
      {
        name: 'D on the item + C on $[Owner=B]',
        statements: [
          [doc1, 'D'],
          [ownedBy(BOB), 'C'],
        ],
        want: true,
      },
      {
        name: 'D on the item + C on $[Owner=.*]',
        statements: [
          [doc1, 'D'],
          [ownedBy('.*'), 'C'],
        ],
        want: true,
      },
      {
        name: 'D on the item + C on $[Owner=self] when the caller is B',
        statements: [
          [doc1, 'D'],
          [ownedBy('self'), 'C'],
        ],
        who: bob,
        want: true,
      },
      {
        name: 'D on the item + C on $[Owner=self] when the caller is A',
        statements: [
          [doc1, 'D'],
          [ownedBy('self'), 'C'],
        ],
        want: false,
      },
      {
        name: 'CD on Document::.*',
        statements: [[`Vault::${V1}::Document::.*`, 'CD']],
        want: true,
      },
      {
        name: 'CD on Vault::.*::Document::.*',
        statements: [['Vault::.*::Document::.*', 'CD']],
        want: true,
      },
      { name: 'D on the item only', statements: [[doc1, 'D']], want: false },
      { name: 'C on $[Owner=B] only', statements: [[ownedBy(BOB), 'C']], want: false },
      {
        name: 'D on the item + C on the plain collection',
        statements: [
          [doc1, 'D'],
          [docs, 'C'],
        ],
        want: false,
      },
      {
        name: 'D on $[Owner=.*] does not reach the unowned item',
        statements: [[ownedBy('.*'), 'CD']],
        want: false,
      },
      {
        name: 'D on the item + C on $[Owner=A] (wrong new owner)',
        statements: [
          [doc1, 'D'],
          [ownedBy(ALICE), 'C'],
        ],
        want: false,
      },
      {
        name: 'Update does not replace Delete',
        statements: [
          [doc1, 'U'],
          [ownedBy(BOB), 'CU'],
        ],
        want: false,
      },
      {
        name: 'Blob equivalent: D on the blob + C on Blob::$[Owner=B]',
        statements: [
          [`Vault::${V1}::Blob::${D1}`, 'D'],
          [`Vault::${V1}::Blob::$[Owner=${BOB}]`, 'C'],
        ],
        collection: BLOBS,
        want: true,
      },
      {
        name: 'Blob: Document permissions do not apply',
        statements: [
          [doc1, 'D'],
          [ownedBy(BOB), 'C'],
        ],
        collection: BLOBS,
        want: false,
      },
    ]),
  )

  describe(
    'USERA → unowned: D on `…::$[Owner=USERA]` and C on the collection',
    cases(ALICE, null, [
      {
        name: 'D on $[Owner=A] + C on the collection',
        statements: [
          [ownedBy(ALICE), 'D'],
          [docs, 'C'],
        ],
        want: true,
      },
      {
        name: 'D on $[Owner=.*] + C on the collection',
        statements: [
          [ownedBy('.*'), 'D'],
          [docs, 'C'],
        ],
        want: true,
      },
      {
        name: 'D on $[Owner=self] as A + C on the collection',
        statements: [
          [ownedBy('self'), 'D'],
          [docs, 'C'],
        ],
        want: true,
      },
      {
        name: 'D on $[Owner=self] as B + C on the collection',
        statements: [
          [ownedBy('self'), 'D'],
          [docs, 'C'],
        ],
        who: bob,
        want: false,
      },
      {
        name: 'CD on Document::.*',
        statements: [[`Vault::${V1}::Document::.*`, 'CD']],
        want: true,
      },
      {
        name: 'D on the specific item does not cover $[Owner=A]',
        statements: [
          [doc1, 'D'],
          [docs, 'C'],
        ],
        want: false,
      },
      {
        name: 'D on $[Owner=A] + C on $[Owner=.*] (an owner matcher never covers the collection)',
        statements: [
          [ownedBy(ALICE), 'D'],
          [ownedBy('.*'), 'C'],
        ],
        want: false,
      },
      {
        name: 'D on $[Owner=B] (wrong old owner) + C on the collection',
        statements: [
          [ownedBy(BOB), 'D'],
          [docs, 'C'],
        ],
        want: false,
      },
      { name: 'D on the plain collection + C on it', statements: [[docs, 'CD']], want: false },
      {
        name: 'Update does not replace Delete',
        statements: [
          [ownedBy(ALICE), 'U'],
          [docs, 'CU'],
        ],
        want: false,
      },
    ]),
  )

  describe(
    'USERA → USERB: D on `…::$[Owner=USERA]` and C on `…::$[Owner=USERB]`',
    cases(ALICE, BOB, [
      {
        name: 'D on $[Owner=A] + C on $[Owner=B]',
        statements: [
          [ownedBy(ALICE), 'D'],
          [ownedBy(BOB), 'C'],
        ],
        want: true,
      },
      { name: 'CD on $[Owner=.*]', statements: [[ownedBy('.*'), 'CD']], want: true },
      {
        name: 'CD on Document::.*',
        statements: [[`Vault::${V1}::Document::.*`, 'CD']],
        want: true,
      },
      {
        name: 'D on $[Owner=self] as A + C on $[Owner=B]',
        statements: [
          [ownedBy('self'), 'D'],
          [ownedBy(BOB), 'C'],
        ],
        want: true,
      },
      {
        name: 'D on $[Owner=A] + C on $[Owner=A] (wrong new owner)',
        statements: [[ownedBy(ALICE), 'CD']],
        want: false,
      },
      {
        name: 'D on $[Owner=B] + C on $[Owner=B] (wrong old owner)',
        statements: [[ownedBy(BOB), 'CD']],
        want: false,
      },
      {
        name: 'D on the item + C on $[Owner=B]',
        statements: [
          [doc1, 'D'],
          [ownedBy(BOB), 'C'],
        ],
        want: false,
      },
      {
        name: 'D on $[Owner=A] + C on the plain collection',
        statements: [
          [ownedBy(ALICE), 'D'],
          [docs, 'C'],
        ],
        want: false,
      },
      {
        name: 'Update does not replace Create/Delete',
        statements: [[`Vault::${V1}::Document::.*`, 'RU']],
        want: false,
      },
      {
        name: 'permissions in another vault do not apply',
        statements: [[`Vault::${V2}::Document::.*`, 'CD']],
        want: false,
      },
    ]),
  )

  it('creating an owned item needs C on `…::$[Owner=X]`, an unowned one C on the collection', () => {
    const owned = ownerScoped(DOCS, BOB)
    const unowned = resource(...DOC_LIST)
    const byCollection = policy([`Vault::${V1}::Document::`, 'C'])
    expect(byCollection.allows('C', unowned, alice)).toBe(true)
    expect(byCollection.allows('C', owned, alice)).toBe(false)
    const byOwner = policy([`Vault::${V1}::Document::$[Owner=${BOB}]`, 'C'])
    expect(byOwner.allows('C', owned, alice)).toBe(true)
    expect(byOwner.allows('C', unowned, alice)).toBe(false)
    expect(byOwner.allows('C', ownerScoped(DOCS, CAROL), alice)).toBe(false)
    const byAny = policy([`Vault::${V1}::Document::.*`, 'C'])
    expect(byAny.allows('C', owned, alice)).toBe(true)
    expect(byAny.allows('C', unowned, alice)).toBe(true)
  })
})

describe('parsePolicy', () => {
  const ok: [string, unknown, PolicyStatement[]][] = [
    [
      'Resources array',
      [{ Resources: ['Vault::.*', 'User::'], Activities: 'CRUD' }],
      [{ Resources: ['Vault::.*', 'User::'], Activities: 'CRUD' }],
    ],
    [
      'the account settings resource (issue 13)',
      [{ Resources: ['Account::.*::Settings'], Activities: 'RU' }],
      [{ Resources: ['Account::.*::Settings'], Activities: 'RU' }],
    ],
    [
      'Resource (singular) array',
      [{ Resource: ['Vault::.*'], Activities: 'R' }],
      [{ Resources: ['Vault::.*'], Activities: 'R' }],
    ],
    [
      'single string Resources',
      [{ Resources: 'Vault::.*', Activities: 'R' }],
      [{ Resources: ['Vault::.*'], Activities: 'R' }],
    ],
    [
      'single string Resource',
      [{ Resource: 'User::$[id=self.id]', Activities: 'RU' }],
      [{ Resources: ['User::$[id=self.id]'], Activities: 'RU' }],
    ],
    [
      'Resources wins over Resource',
      [{ Resources: ['A::'], Resource: ['B::'], Activities: 'R' }],
      [{ Resources: ['A::'], Activities: 'R' }],
    ],
    [
      'Resources null falls back to Resource',
      [{ Resources: null, Resource: ['B::'], Activities: 'R' }],
      [{ Resources: ['B::'], Activities: 'R' }],
    ],
    [
      'lowercase activities',
      [{ Resources: ['Vault::'], Activities: 'crud' }],
      [{ Resources: ['Vault::'], Activities: 'CRUD' }],
    ],
    [
      'mixed-case activities',
      [{ Resources: ['Vault::'], Activities: 'cRuD' }],
      [{ Resources: ['Vault::'], Activities: 'CRUD' }],
    ],
    [
      'the letter A',
      [{ Resources: ['Vault::.*'], Activities: 'CRUDA' }],
      [{ Resources: ['Vault::.*'], Activities: 'CRUDA' }],
    ],
    [
      'lowercase a',
      [{ Resources: ['X::'], Activities: 'a' }],
      [{ Resources: ['X::'], Activities: 'A' }],
    ],
    [
      'repeated letters',
      [{ Resources: ['X::'], Activities: 'RR' }],
      [{ Resources: ['X::'], Activities: 'RR' }],
    ],
    [
      'empty activities',
      [{ Resources: ['X::'], Activities: '' }],
      [{ Resources: ['X::'], Activities: '' }],
    ],
    ['empty Resources', [{ Resources: [], Activities: 'R' }], [{ Resources: [], Activities: 'R' }]],
    ['empty policy', [], []],
    [
      'extra keys dropped',
      [{ Resources: ['X::'], Activities: 'R', Effect: 'Allow' }],
      [{ Resources: ['X::'], Activities: 'R' }],
    ],
    [
      'several statements',
      [
        { Resources: ['Vault::'], Activities: 'C' },
        { Resource: 'Vault::.*', Activities: 'r' },
      ],
      [
        { Resources: ['Vault::'], Activities: 'C' },
        { Resources: ['Vault::.*'], Activities: 'R' },
      ],
    ],
    [
      'matcher of exactly 1024 characters',
      [{ Resources: ['x'.repeat(1024)], Activities: 'R' }],
      [{ Resources: ['x'.repeat(1024)], Activities: 'R' }],
    ],
    [
      'non-ASCII text and regex characters are just text',
      [{ Resources: ['Vault::ü(.+)[', 'Vault::a b'], Activities: 'R' }],
      [{ Resources: ['Vault::ü(.+)[', 'Vault::a b'], Activities: 'R' }],
    ],
  ]
  for (const [name, input, want] of ok) {
    it(`accepts ${name}`, () => {
      expect(parsePolicy(input)).toEqual(want)
    })
  }

  it('output keys are exactly Resources and Activities', () => {
    const [s] = parsePolicy([{ Resource: 'X::', Activities: 'r', Extra: 1 }])
    expect(Object.keys(s as object).sort()).toEqual(['Activities', 'Resources'])
  })

  it('a parsed policy compiles and evaluates', () => {
    const p = new CompiledPolicy(parsePolicy([{ Resource: `Vault::${V1}`, Activities: 'ru' }]))
    expect(p.allows('R', resource('Vault', V1), alice)).toBe(true)
    expect(p.allows('U', resource('Vault', V1), alice)).toBe(true)
    expect(p.allows('D', resource('Vault', V1), alice)).toBe(false)
  })

  const bad: [string, unknown, RegExp][] = [
    ['null', null, /array/],
    ['undefined', undefined, /array/],
    ['an object', { Resources: ['X::'], Activities: 'R' }, /array/],
    ['a string', '[{"Resources":["X::"],"Activities":"R"}]', /array/],
    ['a number', 1, /array/],
    ['a null item', [null], /^\[0\] must be an object/],
    ['a string item', ['Vault::.*'], /^\[0\] must be an object/],
    ['a number item', [7], /^\[0\] must be an object/],
    ['an array item', [['Vault::.*', 'R']], /^\[0\] must be an object/],
    [
      'the second item bad',
      [{ Resources: ['X::'], Activities: 'R' }, 'x'],
      /^\[1\] must be an object/,
    ],
    ['missing Resources', [{ Activities: 'R' }], /^\[0\]\.Resources/],
    ['lowercase resources key', [{ resources: ['X::'], Activities: 'R' }], /^\[0\]\.Resources/],
    ['Resources a number', [{ Resources: 5, Activities: 'R' }], /^\[0\]\.Resources/],
    ['Resources an object', [{ Resources: { a: 'X::' }, Activities: 'R' }], /^\[0\]\.Resources/],
    ['a number resource', [{ Resources: ['X::', 1], Activities: 'R' }], /^\[0\]\.Resources/],
    ['a null resource', [{ Resources: [null], Activities: 'R' }], /^\[0\]\.Resources/],
    ['a nested array resource', [{ Resources: [['X::']], Activities: 'R' }], /^\[0\]\.Resources/],
    ['an empty resource', [{ Resources: [''], Activities: 'R' }], /^\[0\]\.Resources/],
    ['an empty single string', [{ Resources: '', Activities: 'R' }], /^\[0\]\.Resources/],
    ['a newline', [{ Resources: ['Vault::\n'], Activities: 'R' }], /^\[0\]\.Resources/],
    ['a tab', [{ Resources: ['Vault::\t.*'], Activities: 'R' }], /^\[0\]\.Resources/],
    ['a NUL', [{ Resources: ['Vault::\u0000'], Activities: 'R' }], /^\[0\]\.Resources/],
    ['a DEL', [{ Resources: ['Vault::\u007f'], Activities: 'R' }], /^\[0\]\.Resources/],
    ['a C1 control', [{ Resources: ['Vault::\u0085'], Activities: 'R' }], /^\[0\]\.Resources/],
    [
      'a 1025-character matcher',
      [{ Resources: ['x'.repeat(1025)], Activities: 'R' }],
      /^\[0\]\.Resources/,
    ],
    [
      'a bad resource in the third item',
      [
        { Resources: ['X::'], Activities: 'R' },
        { Resources: ['Y::'], Activities: 'R' },
        { Resources: ['ok', ''], Activities: 'R' },
      ],
      /^\[2\]\.Resources/,
    ],
    ['missing Activities', [{ Resources: ['X::'] }], /^\[0\]\.Activities/],
    ['Activities null', [{ Resources: ['X::'], Activities: null }], /^\[0\]\.Activities/],
    ['Activities a number', [{ Resources: ['X::'], Activities: 1 }], /^\[0\]\.Activities/],
    ['Activities an array', [{ Resources: ['X::'], Activities: ['R'] }], /^\[0\]\.Activities/],
    ['Activities with X', [{ Resources: ['X::'], Activities: 'CRUDX' }], /^\[0\]\.Activities/],
    ['Activities with W', [{ Resources: ['X::'], Activities: 'RW' }], /^\[0\]\.Activities/],
    ['Activities with a space', [{ Resources: ['X::'], Activities: 'R U' }], /^\[0\]\.Activities/],
    ['Activities with a comma', [{ Resources: ['X::'], Activities: 'C,R' }], /^\[0\]\.Activities/],
    ['Activities spelt out', [{ Resources: ['X::'], Activities: 'read' }], /^\[0\]\.Activities/],
    ['Activities *', [{ Resources: ['X::'], Activities: '*' }], /^\[0\]\.Activities/],
    [
      'bad Activities in the second item',
      [
        { Resources: ['X::'], Activities: 'R' },
        { Resources: ['X::'], Activities: 'Z' },
      ],
      /^\[1\]\.Activities/,
    ],
  ]
  for (const [name, input, message] of bad) {
    it(`rejects ${name}`, () => {
      let error: unknown
      try {
        parsePolicy(input)
      } catch (e) {
        error = e
      }
      expect(error).toBeInstanceOf(PolicyFormatError)
      expect(error).toBeInstanceOf(Error)
      expect((error as Error).message).toMatch(message)
    })
  }
})

describe('CompiledPolicy.readScope', () => {
  const rows: {
    name: string
    statements: [string | string[], string][]
    collection?: string[]
    who?: Caller
    want: ItemScope | null
  }[] = [
    { name: 'no statements', statements: [], want: null },
    {
      name: 'R on another collection type',
      statements: [[`Vault::${V1}::Blob::.*`, 'R']],
      want: null,
    },
    {
      name: 'R on another vault',
      statements: [[`Vault::${V1}::Document::.*`, 'R']],
      collection: ['Vault', V2, 'Document', ''],
      want: null,
    },
    { name: 'R on the vault itself', statements: [[`Vault::${V1}`, 'R']], want: null },
    {
      name: 'R on a longer resource',
      statements: [[`Vault::${V1}::Document::${D1}::X`, 'R']],
      want: null,
    },
    { name: 'CUD on .*', statements: [[`Vault::${V1}::Document::.*`, 'CUD']], want: null },
    { name: 'A on .*', statements: [[`Vault::${V1}::Document::.*`, 'A']], want: null },
    {
      name: 'R on .*',
      statements: [[`Vault::${V1}::Document::.*`, 'R']],
      want: scope({ all: true }),
    },
    {
      name: 'CRUD on .*',
      statements: [[`Vault::${V1}::Document::.*`, 'CRUD']],
      want: scope({ all: true }),
    },
    {
      name: 'R on Vault::.*::Document::.*',
      statements: [['Vault::.*::Document::.*', 'R']],
      collection: ['Vault', V2, 'Document', ''],
      want: scope({ all: true }),
    },
    {
      name: 'upper-case vault id in the matcher',
      statements: [[`Vault::${V1.toUpperCase()}::Document::.*`, 'R']],
      want: scope({ all: true }),
    },
    {
      name: 'R on specific ids (lowercased)',
      statements: [
        [[`Vault::${V1}::Document::${D1}`, `Vault::${V1}::Document::${D2.toUpperCase()}`], 'R'],
      ],
      want: scope({ ids: new Set([D1, D2]) }),
    },
    {
      name: 'only statements with R count',
      statements: [
        [`Vault::${V1}::Document::${D1}`, 'R'],
        [`Vault::${V1}::Document::${D2}`, 'UD'],
        [`Vault::${V1}::Document::.*`, 'C'],
      ],
      want: scope({ ids: new Set([D1]) }),
    },
    {
      name: 'R on the collection alone: covered, no items',
      statements: [[`Vault::${V1}::Document::`, 'R']],
      want: scope(),
    },
    {
      name: 'R on $[Owner=self]',
      statements: [[`Vault::${V1}::Document::$[Owner=self]`, 'R']],
      want: scope({ ownerIds: new Set([ALICE]) }),
    },
    {
      name: 'R on $[Owner=self] for an upper-case caller id',
      statements: [[`Vault::${V1}::Document::$[Owner=self]`, 'R']],
      who: { userId: ALICE.toUpperCase() },
      want: scope({ ownerIds: new Set([ALICE]) }),
    },
    {
      name: 'R on $[Owner=<uuid>]',
      statements: [[`Vault::${V1}::Document::$[Owner=${BOB.toUpperCase()}]`, 'R']],
      want: scope({ ownerIds: new Set([BOB]) }),
    },
    {
      name: 'R on $[Owner=.*]',
      statements: [[`Vault::${V1}::Document::$[Owner=.*]`, 'R']],
      want: scope({ anyOwner: true }),
    },
    {
      name: 'R on blobs by owner',
      statements: [[`Vault::${V1}::Blob::$[Owner=self]`, 'R']],
      collection: [...BLOBS, ''],
      want: scope({ ownerIds: new Set([ALICE]) }),
    },
    {
      name: 'a mixture',
      statements: [
        [[`Vault::${V1}::Document::${D1}`, `Vault::${V1}::Document::$[Owner=${BOB}]`], 'R'],
        [[`Vault::${V1}::Document::$[Owner=self]`, `Vault::${V1}::Document::$[Owner=.*]`], 'RU'],
        [`Vault::${V1}::Document::`, 'R'],
      ],
      want: scope({ ids: new Set([D1]), ownerIds: new Set([ALICE, BOB]), anyOwner: true }),
    },
    {
      name: 'vaults: R on Vault::.*',
      statements: [['Vault::.*', 'R']],
      collection: ['Vault', ''],
      want: scope({ all: true }),
    },
    {
      name: 'vaults: R on Vault::V1',
      statements: [[`Vault::${V1}`, 'R']],
      collection: ['Vault', ''],
      want: scope({ ids: new Set([V1]) }),
    },
    {
      name: 'vaults: R on Vault::',
      statements: [['Vault::', 'R']],
      collection: ['Vault', ''],
      want: scope(),
    },
    {
      name: 'users: R on User::.*',
      statements: [['User::.*', 'R']],
      collection: ['User', ''],
      want: scope({ all: true }),
    },
    {
      name: 'users: R on User::$[id=self.id]',
      statements: [['User::$[id=self.id]', 'R']],
      collection: ['User', ''],
      want: scope({ ids: new Set([ALICE]) }),
    },
    {
      name: 'users: R on User::BOB',
      statements: [[`User::${BOB}`, 'R']],
      collection: ['User', ''],
      want: scope({ ids: new Set([BOB]) }),
    },
    {
      name: 'users: R on User::BOB::Password',
      statements: [[`User::${BOB}::Password`, 'R']],
      collection: ['User', ''],
      want: null,
    },
    {
      name: 'users: R on documents',
      statements: [['Vault::.*::Document::.*', 'R']],
      collection: ['User', ''],
      want: null,
    },
    {
      name: 'memberships: R on $[id=self.id]',
      statements: [[`Group::${G1}::GroupMembership::$[id=self.id]`, 'R']],
      collection: ['Group', G1, 'GroupMembership', ''],
      want: scope({ ids: new Set([ALICE]) }),
    },
    {
      name: 'memberships of another group',
      statements: [[`Group::${G1}::GroupMembership::.*`, 'R']],
      collection: ['Group', G2, 'GroupMembership', ''],
      want: null,
    },
    // matchers that can cover no item and not the collection are refused like no matcher at all
    {
      name: 'users: R on User::$[Owner=.*] (owner matcher after User)',
      statements: [['User::$[Owner=.*]', 'R']],
      collection: ['User', ''],
      want: null,
    },
    {
      name: 'vaults: R on Vault::$[id=self.id]',
      statements: [['Vault::$[id=self.id]', 'R']],
      collection: ['Vault', ''],
      want: null,
    },
    {
      name: 'documents: R on $[id=self.id] after Document',
      statements: [[`Vault::${V1}::Document::$[id=self.id]`, 'R']],
      want: null,
    },
    {
      name: 'users: R on User::$[id=self.id] without a calling user',
      statements: [['User::$[id=self.id]', 'R']],
      collection: ['User', ''],
      who: nobody,
      want: null,
    },
    {
      name: 'documents: R on $[Owner=self] without a calling user',
      statements: [[`Vault::${V1}::Document::$[Owner=self]`, 'R']],
      who: nobody,
      want: null,
    },
    {
      name: 'a useless matcher does not hide a useful one',
      statements: [[['User::$[Owner=.*]', `User::${BOB}`], 'R']],
      collection: ['User', ''],
      want: scope({ ids: new Set([BOB]) }),
    },
  ]
  for (const row of rows) {
    it(row.name, () => {
      const p = policy(...row.statements)
      expect(p.readScope(row.collection ?? DOC_LIST, row.who ?? alice)).toEqual(row.want)
    })
  }
})

describe('CompiledPolicy.isEmpty', () => {
  it.each<[string, [string | string[], string][], boolean]>([
    ['no statements', [], true],
    ['a statement without resources', [[[], 'CRUD']], true],
    ['a statement without activities', [['Vault::.*', '']], true],
    [
      'only useless statements',
      [
        [[], 'R'],
        ['Vault::.*', ''],
      ],
      true,
    ],
    ['one statement', [['Vault::', 'C']], false],
    [
      'one useful statement among useless ones',
      [
        [[], 'R'],
        ['Vault::', 'C'],
      ],
      false,
    ],
  ])('%s → %s', (_name, statements, want) => {
    expect(policy(...statements).isEmpty).toBe(want)
  })
})

describe('inScopes', () => {
  const rows: [string, ItemScope[], { id: string; ownerId?: string | null }, boolean][] = [
    ['all', [scope({ all: true })], { id: D1 }, true],
    ['all, unowned', [scope({ all: true })], { id: D1, ownerId: null }, true],
    ['by id', [scope({ ids: new Set([D1]) })], { id: D1 }, true],
    ['by id, upper-case item id', [scope({ ids: new Set([D1]) })], { id: D1.toUpperCase() }, true],
    ['another id', [scope({ ids: new Set([D1]) })], { id: D2 }, false],
    ['by owner', [scope({ ownerIds: new Set([ALICE]) })], { id: D1, ownerId: ALICE }, true],
    [
      'by owner, upper-case',
      [scope({ ownerIds: new Set([ALICE]) })],
      { id: D1, ownerId: ALICE.toUpperCase() },
      true,
    ],
    ['another owner', [scope({ ownerIds: new Set([ALICE]) })], { id: D1, ownerId: BOB }, false],
    [
      'owner scope, unowned item',
      [scope({ ownerIds: new Set([ALICE]) })],
      { id: D1, ownerId: null },
      false,
    ],
    ['anyOwner, owned', [scope({ anyOwner: true })], { id: D1, ownerId: CAROL }, true],
    ['anyOwner, unowned', [scope({ anyOwner: true })], { id: D1, ownerId: null }, false],
    ['anyOwner, owner unknown', [scope({ anyOwner: true })], { id: D1 }, false],
    ['empty scope', [scope()], { id: D1, ownerId: ALICE }, false],
    [
      'an owner id is not an item id',
      [scope({ ids: new Set([ALICE]) })],
      { id: D1, ownerId: ALICE },
      false,
    ],
    [
      'an item id is not an owner id',
      [scope({ ownerIds: new Set([D1]) })],
      { id: D1, ownerId: ALICE },
      false,
    ],
    [
      'two layers, both pass (id and owner)',
      [scope({ ids: new Set([D1, D2]) }), scope({ ownerIds: new Set([ALICE]) })],
      { id: D1, ownerId: ALICE },
      true,
    ],
    [
      'two layers, owner layer fails',
      [scope({ ids: new Set([D1, D2]) }), scope({ ownerIds: new Set([ALICE]) })],
      { id: D1, ownerId: null },
      false,
    ],
    [
      'two layers, id layer fails',
      [scope({ ids: new Set([D1, D2]) }), scope({ ownerIds: new Set([ALICE]) })],
      { id: D3, ownerId: ALICE },
      false,
    ],
    [
      'two layers, all and none',
      [scope({ all: true }), scope()],
      { id: D1, ownerId: ALICE },
      false,
    ],
    // Vacuous: callers must pass a non-null `readScopes` result, never an empty list.
    ['no layers (vacuously true)', [], { id: D1 }, true],
  ]
  for (const [name, scopes, item, want] of rows) {
    it(`${name} → ${want}`, () => {
      expect(inScopes(scopes, item)).toBe(want)
    })
  }
})

describe('Grants', () => {
  const V1DOCS = `Vault::${V1}::Document::.*`
  const d1 = doc(null, D1)
  const d2 = doc(null, D2)

  describe('can', () => {
    const rows: {
      name: string
      layers: CompiledPolicy[]
      activity: Activity
      res: Resource
      want: boolean
      who?: Caller
    }[] = [
      {
        name: 'user: granted',
        layers: [policy([V1DOCS, 'R'])],
        activity: 'R',
        res: d1,
        want: true,
      },
      {
        name: 'user: other letter',
        layers: [policy([V1DOCS, 'R'])],
        activity: 'U',
        res: d1,
        want: false,
      },
      {
        name: 'user: two groups are one union layer',
        layers: [policy([V1DOCS, 'R'], [V1DOCS, 'U'])],
        activity: 'U',
        res: d1,
        want: true,
      },
      { name: 'no layers', layers: [], activity: 'R', res: d1, want: false },
      {
        name: 'an empty layer',
        layers: [new CompiledPolicy([])],
        activity: 'R',
        res: d1,
        want: false,
      },
      {
        name: 'SAT within its creator',
        layers: [policy(['Vault::.*::Document::.*', 'CRUD']), policy([V1DOCS, 'R'])],
        activity: 'R',
        res: d1,
        want: true,
      },
      {
        name: 'SAT cannot exceed its creator (letter)',
        layers: [policy(['Vault::.*::Document::.*', 'CRUD']), policy([V1DOCS, 'R'])],
        activity: 'U',
        res: d1,
        want: false,
      },
      {
        name: 'SAT cannot exceed its creator (vault)',
        layers: [policy(['Vault::.*::Document::.*', 'CRUD']), policy([V1DOCS, 'R'])],
        activity: 'R',
        res: doc(null, D1, V2),
        want: false,
      },
      {
        name: "the creator's wider rights do not widen the SAT (id)",
        layers: [
          policy([`Vault::${V1}::Document::${D1}`, 'R']),
          policy(['Vault::.*', 'CRUD'], ['Vault::.*::Document::.*', 'CRUD']),
        ],
        activity: 'R',
        res: d2,
        want: false,
      },
      {
        name: "the creator's wider rights do not widen the SAT (letter)",
        layers: [
          policy([`Vault::${V1}::Document::${D1}`, 'R']),
          policy(['Vault::.*::Document::.*', 'CRUD']),
        ],
        activity: 'D',
        res: d1,
        want: false,
      },
      {
        name: 'SAT: the granted item within both',
        layers: [
          policy([`Vault::${V1}::Document::${D1}`, 'R']),
          policy(['Vault::.*::Document::.*', 'CRUD']),
        ],
        activity: 'R',
        res: d1,
        want: true,
      },
      {
        name: 'SAT: $[Owner=self] is the creator (caller)',
        layers: [policy([`Vault::${V1}::Document::$[Owner=self]`, 'R']), policy([V1DOCS, 'R'])],
        activity: 'R',
        res: doc(ALICE),
        want: true,
      },
      {
        name: "SAT: $[Owner=self] does not cover others' items",
        layers: [policy([`Vault::${V1}::Document::$[Owner=self]`, 'R']), policy([V1DOCS, 'R'])],
        activity: 'R',
        res: doc(BOB),
        want: false,
      },
      {
        name: 'SAT: every layer must allow, whichever order',
        layers: [policy([V1DOCS, 'R']), policy(['Vault::.*::Document::.*', 'CRUD'])],
        activity: 'U',
        res: d1,
        want: false,
      },
      {
        name: 'three layers: one denies',
        layers: [policy([V1DOCS, 'R']), policy([V1DOCS, 'R']), policy([V1DOCS, 'U'])],
        activity: 'R',
        res: d1,
        want: false,
      },
    ]
    for (const row of rows) {
      it(`${row.name} → ${row.want}`, () => {
        expect(new Grants(row.layers, row.who ?? alice).can(row.activity, row.res)).toBe(row.want)
      })
    }

    it('passes allowSelf through to every layer', () => {
      const me = resource('User', ALICE)
      const self = new Grants([policy(['User::$[id=self.id]', 'U'])], alice)
      expect(self.can('U', me)).toBe(true)
      expect(self.can('U', me, { allowSelf: false })).toBe(false)
      const sat = new Grants(
        [policy(['User::.*', 'U']), policy(['User::$[id=self.id]', 'U'])],
        alice,
      )
      expect(sat.can('U', me)).toBe(true)
      expect(sat.can('U', me, { allowSelf: false })).toBe(false)
    })
  })

  describe('isEmpty', () => {
    it.each<[string, CompiledPolicy[], boolean]>([
      ['no layers', [], true],
      ['one empty layer', [new CompiledPolicy([])], true],
      ['a layer of statements without resources', [policy([[], 'CRUD'])], true],
      ['a layer of statements without activities', [policy(['Vault::.*', ''])], true],
      ['a user with a grant', [policy(['Vault::', 'C'])], false],
      ['a SAT with both layers', [policy(['Vault::', 'C']), policy(['Vault::.*', 'R'])], false],
      [
        'a SAT whose own policy is empty',
        [new CompiledPolicy([]), policy(['Vault::.*', 'R'])],
        true,
      ],
      [
        'a SAT whose creator has nothing',
        [policy(['Vault::.*', 'R']), new CompiledPolicy([])],
        true,
      ],
    ])('%s → %s', (_name, layers, want) => {
      expect(new Grants(layers, alice).isEmpty).toBe(want)
    })
  })

  describe('satisfies', () => {
    const g = new Grants(
      [
        policy(
          [V1DOCS, 'R'],
          [`Vault::${V1}::Search::`, 'R'],
          [`Vault::${V1}`, 'U'],
          [`Vault::${V1}::Blob::$[Owner=self]`, 'R'],
        ),
      ],
      alice,
    )
    const R = (res: Resource): Requirement => ({ activity: 'R', resource: res })
    const U = (res: Resource): Requirement => ({ activity: 'U', resource: res })
    const search = R(resource('Vault', V1, 'Search', ''))
    const rows: [string, Requirement, boolean][] = [
      ['a granted permission', R(d1), true],
      ['a denied permission', U(d1), false],
      ['allOf: [] (vacuously true)', { allOf: [] }, true],
      ['anyOf: [] (vacuously false)', { anyOf: [] }, false],
      ['allOf all granted', { allOf: [R(d1), search, U(resource('Vault', V1))] }, true],
      ['allOf one denied', { allOf: [R(d1), U(d1)] }, false],
      ['anyOf one granted', { anyOf: [U(d1), R(d1)] }, true],
      ['anyOf none granted', { anyOf: [U(d1), R(resource('Vault', V2))] }, false],
      ['readAny on a readable collection', { readAny: resource(...DOC_LIST) }, true],
      ['readAny by owner only (blobs)', { readAny: resource(...BLOBS, '') }, true],
      [
        'readAny on an unreadable collection',
        { readAny: resource('Vault', V2, 'Document', '') },
        false,
      ],
      ['readAny on users', { readAny: resource('User', '') }, false],
      [
        'search: readAny on documents and R on Search::',
        { allOf: [{ readAny: resource(...DOC_LIST) }, search] },
        true,
      ],
      [
        'search in another vault',
        {
          allOf: [
            { readAny: resource('Vault', V2, 'Document', '') },
            R(resource('Vault', V2, 'Search', '')),
          ],
        },
        false,
      ],
      [
        'nested: allOf [anyOf [denied, granted], readAny]',
        { allOf: [{ anyOf: [U(d1), R(d2)] }, { readAny: resource(...DOC_LIST) }] },
        true,
      ],
      [
        'nested: anyOf [allOf [granted, denied], allOf []]',
        { anyOf: [{ allOf: [R(d1), U(d1)] }, { allOf: [] }] },
        true,
      ],
      [
        'nested: anyOf [allOf [granted, denied], anyOf []]',
        { anyOf: [{ allOf: [R(d1), U(d1)] }, { anyOf: [] }] },
        false,
      ],
      [
        'nested: allOf [allOf [allOf [denied]]]',
        { allOf: [{ allOf: [{ allOf: [U(d1)] }] }] },
        false,
      ],
    ]
    for (const [name, req, want] of rows) {
      it(`${name} → ${want}`, () => {
        expect(g.satisfies(req)).toBe(want)
      })
    }

    it('with no layers only the vacuous allOf holds', () => {
      const none = new Grants([], alice)
      expect(none.satisfies({ allOf: [] })).toBe(true)
      expect(none.satisfies({ anyOf: [] })).toBe(false)
      expect(none.satisfies(R(d1))).toBe(false)
      expect(none.satisfies({ readAny: resource(...DOC_LIST) })).toBe(false)
    })

    it('readAny for a SAT needs a read in every layer', () => {
      const sat = new Grants(
        [policy(['Vault::.*::Document::.*', 'R']), policy([`Vault::${V1}`, 'R'])],
        alice,
      )
      expect(sat.satisfies({ readAny: resource(...DOC_LIST) })).toBe(false)
      const sat2 = new Grants(
        [policy(['Vault::.*::Document::.*', 'R']), policy([`Vault::${V1}::Document::${D1}`, 'R'])],
        alice,
      )
      expect(sat2.satisfies({ readAny: resource(...DOC_LIST) })).toBe(true)
    })
  })

  describe('readScopes', () => {
    it('one scope per layer', () => {
      const g = new Grants(
        [
          policy([[`Vault::${V1}::Document::${D1}`, `Vault::${V1}::Document::${D2}`], 'R']),
          policy([`Vault::${V1}::Document::$[Owner=self]`, 'R']),
        ],
        alice,
      )
      const scopes = g.readScopes(DOC_LIST)
      expect(scopes).toEqual([
        scope({ ids: new Set([D1, D2]) }),
        scope({ ownerIds: new Set([ALICE]) }),
      ])
      const list = [
        { id: D1, ownerId: ALICE },
        { id: D2, ownerId: null },
        { id: D2, ownerId: BOB },
        { id: D3, ownerId: ALICE },
      ]
      expect(list.filter((item) => inScopes(scopes ?? [], item))).toEqual([
        { id: D1, ownerId: ALICE },
      ])
    })

    it('null when any layer grants no read', () => {
      expect(new Grants([], alice).readScopes(DOC_LIST)).toBeNull()
      expect(
        new Grants([policy([V1DOCS, 'R']), policy([V1DOCS, 'U'])], alice).readScopes(DOC_LIST),
      ).toBeNull()
      expect(
        new Grants([policy([V1DOCS, 'U']), policy([V1DOCS, 'R'])], alice).readScopes(DOC_LIST),
      ).toBeNull()
      expect(
        new Grants([policy([V1DOCS, 'R'])], alice).readScopes(['Vault', V2, 'Document', '']),
      ).toBeNull()
    })

    it('uses the caller for self in every layer', () => {
      const g = new Grants([policy(['User::$[id=self.id]', 'R']), policy(['User::.*', 'R'])], bob)
      expect(g.readScopes(['User', ''])).toEqual([
        scope({ ids: new Set([BOB]) }),
        scope({ all: true }),
      ])
    })
  })
})

describe('property: a list shows exactly what a direct read allows', () => {
  const docVocab = [
    `Vault::${V1}::Document::.*`,
    'Vault::.*::Document::.*',
    `Vault::${V1}::Document::`,
    `Vault::${V1}::Document::${D1}`,
    `Vault::${V1}::Document::${D2.toUpperCase()}`,
    `Vault::${V1}::Document::$[Owner=self]`,
    `Vault::${V1}::Document::$[Owner=${ALICE}]`,
    `Vault::${V1}::Document::$[Owner=${BOB.toUpperCase()}]`,
    `Vault::${V1}::Document::$[Owner=.*]`,
    `Vault::${V1}::Document::$[owner=.*]`,
    `Vault::${V1}::Document::$[id=self.id]`,
    `Vault::${V2}::Document::.*`,
    `Vault::${V1}::Blob::.*`,
    'Vault::$[Owner=.*]::Document::.*',
    `Vault::${V1}`,
    'Vault::.*',
  ]
  const userVocab = [
    'User::.*',
    'User::',
    `User::${ALICE}`,
    `User::${BOB.toUpperCase()}`,
    'User::$[id=self.id]',
    'User::$[Owner=.*]',
    'User::$[Owner=self]',
    `User::${ALICE}::Password`,
    'Vault::.*',
  ]
  const owners = [ALICE, BOB, CAROL, null]
  const statementsArb = (vocab: string[]) =>
    fc.array(
      fc.record({
        Resources: fc.array(fc.constantFrom(...vocab), { maxLength: 3 }),
        Activities: fc.constantFrom('R', 'CRUD', 'U', 'CD', ''),
      }),
      { maxLength: 4 },
    )
  const callerArb = fc.constantFrom(alice, bob, nobody)

  function check(
    collection: string[],
    items: { id: string; ownerId: string | null }[],
    layers: PolicyStatement[][],
    caller: Caller,
  ): void {
    const g = new Grants(
      layers.map((s) => new CompiledPolicy(s)),
      caller,
    )
    const scopes = g.readScopes(collection)
    const prefix = collection.slice(0, -1)
    const itemResource = (item: { id: string; ownerId: string | null }) =>
      ownedItem([...prefix, item.id], item.ownerId)
    for (const item of items) {
      const direct = g.can('R', itemResource(item))
      expect(scopes !== null && inScopes(scopes, item), JSON.stringify(item)).toBe(direct)
    }
    // Each layer refuses exactly when none of its R matchers covers the collection or an item;
    // the principal is refused when some layer refuses.
    const covers = g.layers.map(
      (p) =>
        p.allows('R', resource(...collection), caller) ||
        items.some((item) => p.allows('R', itemResource(item), caller)),
    )
    g.layers.forEach((p, i) => {
      expect(p.readScope(collection, caller) !== null, `layer ${i}`).toBe(covers[i])
    })
    expect(scopes !== null).toBe(covers.every(Boolean))
  }

  // `$[owner=.*]` is no owner matcher, just a literal (if odd) item id, so it is in the universe.
  const docItems = [D1, D2, D3, '$[owner=.*]'].flatMap((id) =>
    owners.map((ownerId) => ({ id, ownerId })),
  )
  const userItems = [ALICE, BOB, CAROL].map((id) => ({ id, ownerId: null }))

  it('documents, one layer (a user)', () => {
    fc.assert(
      fc.property(statementsArb(docVocab), callerArb, (s, caller) =>
        check(DOC_LIST, docItems, [s], caller),
      ),
      { numRuns: 500 },
    )
  })

  it('documents, two layers (a SAT)', () => {
    fc.assert(
      fc.property(
        statementsArb(docVocab),
        statementsArb(docVocab),
        callerArb,
        (sat, creator, caller) => check(DOC_LIST, docItems, [sat, creator], caller),
      ),
      { numRuns: 500 },
    )
  })

  it('users, one and two layers', () => {
    fc.assert(
      fc.property(
        statementsArb(userVocab),
        statementsArb(userVocab),
        fc.boolean(),
        callerArb,
        (a, b, two, caller) => check(['User', ''], userItems, two ? [a, b] : [a], caller),
      ),
      { numRuns: 500 },
    )
  })
})
