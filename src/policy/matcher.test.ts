import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { ANY, type MatchOptions, matches, ownerSelector, SELF_ID, tokenize } from './matcher.js'
import { ownedItem, ownerScoped, resource, resourceText } from './resource.js'
import type { Caller, Resource } from './types.js'

// Ids as the service makes them: lowercase UUIDs.
const V1 = '0190f3a0-0000-7000-8000-00000000a001'
const V2 = '0190f3a0-0000-7000-8000-00000000a002'
const D1 = '0190f3a0-0000-7000-8000-00000000d001'
const D2 = '0190f3a0-0000-7000-8000-00000000d002'
const B1 = '0190f3a0-0000-7000-8000-00000000b001'
const G1 = '0190f3a0-0000-7000-8000-00000000c001'
const ALICE = '0190f3a0-0000-7000-8000-0000000000a1'
const BOB = '0190f3a0-0000-7000-8000-0000000000b2'

const alice: Caller = { userId: ALICE }
const bob: Caller = { userId: BOB }
const nobody: Caller = { userId: null }

const DOCS = ['Vault', V1, 'Document']
const BLOBS = ['Vault', V1, 'Blob']
const doc = (ownerId?: string | null, id = D1, vault = V1): Resource =>
  ownerId === undefined
    ? resource('Vault', vault, 'Document', id)
    : ownedItem(['Vault', vault, 'Document', id], ownerId)
const blob = (ownerId: string | null, id = B1): Resource => ownedItem([...BLOBS, id], ownerId)

interface Row {
  m: string
  r: Resource
  want: boolean
  who?: Caller
  opts?: MatchOptions
  why?: string
}

function title(row: Row): string {
  const owner = row.r.ownerId === undefined ? '' : ` (owner ${row.r.ownerId ?? 'none'})`
  const who = row.who ? ` as ${row.who.userId ?? 'no user'}` : ''
  const opts = row.opts ? ` ${JSON.stringify(row.opts)}` : ''
  const why = row.why ? ` — ${row.why}` : ''
  return `${row.m} ${row.want ? 'matches' : 'does not match'} ${resourceText(row.r)}${owner}${who}${opts}${why}`
}

function runTable(rows: Row[]): void {
  for (const row of rows) {
    it(title(row), () => {
      expect(matches(tokenize(row.m), row.r, row.who ?? alice, row.opts)).toBe(row.want)
    })
  }
}

describe('tokenize and resource helpers', () => {
  it.each([
    ['Vault::', ['Vault', '']],
    ['Vault::V', ['Vault', 'V']],
    ['Vault::V::Document::', ['Vault', 'V', 'Document', '']],
    ['User::U::Password', ['User', 'U', 'Password']],
    ['UserSchema::', ['UserSchema', '']],
    ['', ['']],
    ['Vault', ['Vault']],
    ['a:b', ['a:b']],
  ])('tokenize(%j) → %j', (text, tokens) => {
    expect(tokenize(text)).toEqual(tokens)
  })

  it('resource, ownedItem, ownerScoped and resourceText build the named resources', () => {
    expect(resource('Vault', '')).toEqual({ tokens: ['Vault', ''] })
    expect(resourceText(resource('Vault', V1, 'Document', ''))).toBe(`Vault::${V1}::Document::`)
    expect(ownedItem([...DOCS, D1], ALICE)).toEqual({ tokens: [...DOCS, D1], ownerId: ALICE })
    expect(ownedItem([...DOCS, D1], null).ownerId).toBeNull()
    expect(ownerScoped(DOCS, BOB)).toEqual({ tokens: [...DOCS, `$[Owner=${BOB}]`] })
    expect(resourceText(ownerScoped(BLOBS, BOB))).toBe(`Vault::${V1}::Blob::$[Owner=${BOB}]`)
  })

  it('ownerScoped does not alias the collection array', () => {
    const collection = [...DOCS]
    const scoped = ownerScoped(collection, ALICE)
    collection.push('x')
    expect(scoped.tokens).toHaveLength(4)
  })

  it('exports the keywords', () => {
    expect(ANY).toBe('.*')
    expect(SELF_ID).toBe('$[id=self.id]')
  })

  it.each([
    ['$[Owner=self]', 'self'],
    ['$[Owner=.*]', '.*'],
    [`$[Owner=${ALICE}]`, ALICE],
    ['$[Owner=]', undefined],
    ['$[owner=self]', undefined],
    ['$[OWNER=self]', undefined],
    ['x$[Owner=self]', undefined],
    ['$[Owner=self]x', undefined],
    ['$[Owner=self', undefined],
    ['Owner=self', undefined],
    [SELF_ID, undefined],
    ['.*', undefined],
    ['', undefined],
  ])('ownerSelector(%j) → %j', (token, owner) => {
    expect(ownerSelector(token)).toBe(owner)
  })
})

describe('literal matchers', () => {
  runTable([
    { m: 'Vault::', r: resource('Vault', ''), want: true },
    { m: 'Vault::', r: resource('Vault', V1), want: false, why: 'a collection is not its items' },
    { m: `Vault::${V1}`, r: resource('Vault', V1), want: true },
    { m: `Vault::${V1}`, r: resource('Vault', V2), want: false },
    { m: `Vault::${V1}`, r: resource('Vault', ''), want: false, why: 'an item is not the list' },
    { m: `Vault::${V1}::Document::`, r: resource(...DOCS, ''), want: true },
    { m: `Vault::${V1}::Document::`, r: doc(), want: false },
    { m: `Vault::${V1}::Document::${D1}`, r: doc(), want: true },
    { m: `Vault::${V1}::Document::${D1}`, r: doc(null), want: true, why: 'unowned item' },
    { m: `Vault::${V1}::Document::${D1}`, r: doc(BOB), want: true, why: 'owned item' },
    { m: `Vault::${V1}::Document::${D2}`, r: doc(), want: false },
    { m: `Vault::${V2}::Document::${D1}`, r: doc(), want: false },
    { m: `Vault::${V1}::Blob::${D1}`, r: doc(), want: false, why: 'type differs' },
    { m: `Vault::${V1}::Schema::`, r: resource('Vault', V1, 'Schema', ''), want: true },
    { m: `Vault::${V1}::Search::`, r: resource('Vault', V1, 'Search', ''), want: true },
    { m: `Vault::${V1}::Search::`, r: resource('Vault', V1, 'Schema', ''), want: false },
    { m: 'UserSchema::', r: resource('UserSchema', ''), want: true },
    { m: 'UserSchema::', r: resource('User', ''), want: false },
    { m: 'User::', r: resource('UserSchema', ''), want: false },
    { m: `User::${ALICE}::Password`, r: resource('User', ALICE, 'Password'), want: true },
    { m: `User::${ALICE}::Password`, r: resource('User', ALICE, 'Message'), want: false },
    { m: `User::${ALICE}::Password`, r: resource('User', BOB, 'Password'), want: false },
    {
      m: `Group::${G1}::GroupMembership::${ALICE}`,
      r: resource('Group', G1, 'GroupMembership', ALICE),
      want: true,
    },
    {
      m: `PasswordResetFlow::${G1}::Email::${ALICE}`,
      r: resource('PasswordResetFlow', G1, 'Email', ALICE),
      want: true,
    },
    { m: '', r: resource('Vault', ''), want: false, why: 'empty matcher' },
    { m: 'Vault', r: resource('Vault', ''), want: false, why: 'missing id token' },
  ])
})

describe('the account settings resource `Account::<id>::Settings` (issue 13)', () => {
  const A1 = '0190f3a0-0000-7000-8000-00000000e001'
  const A2 = '0190f3a0-0000-7000-8000-00000000e002'
  const settings = (id: string) => resource('Account', id, 'Settings')
  runTable([
    { m: `Account::${A1}::Settings`, r: settings(A1), want: true },
    { m: `Account::${A1.toUpperCase()}::Settings`, r: settings(A1), want: true },
    { m: 'Account::.*::Settings', r: settings(A1), want: true },
    { m: `Account::${A2}::Settings`, r: settings(A1), want: false, why: 'another account' },
    { m: `Account::${A1}`, r: settings(A1), want: false, why: 'the account is not its settings' },
    { m: 'Account::.*', r: settings(A1), want: false, why: 'one token short' },
    { m: 'Account::.*::Settings::.*', r: settings(A1), want: false, why: 'one token long' },
    { m: 'Account::.*::settings', r: settings(A1), want: false, why: 'type names are exact' },
    { m: 'Account::$[id=self.id]::Settings', r: settings(A1), want: false },
    { m: 'User::.*::Settings', r: settings(A1), want: false, why: 'type differs' },
  ])
})

describe('`.*` matches any one id token', () => {
  runTable([
    { m: 'Vault::.*', r: resource('Vault', V1), want: true },
    { m: 'Vault::.*', r: resource('Vault', ''), want: true, why: 'covers the empty last token' },
    { m: 'Vault::.*::Document::', r: resource(...DOCS, ''), want: true },
    { m: 'Vault::.*::Document::', r: doc(), want: false },
    { m: `Vault::${V1}::Document::.*`, r: doc(), want: true },
    { m: `Vault::${V1}::Document::.*`, r: doc(null), want: true, why: 'unowned items too' },
    { m: `Vault::${V1}::Document::.*`, r: doc(BOB), want: true, why: 'owned items too' },
    { m: `Vault::${V1}::Document::.*`, r: resource(...DOCS, ''), want: true },
    { m: `Vault::${V1}::Document::.*`, r: doc(null, D1, V2), want: false },
    { m: 'Vault::.*::Document::.*', r: doc(null, D2, V2), want: true, why: 'ids compose' },
    { m: 'Vault::.*::Document::.*', r: resource('Vault', V2, 'Document', ''), want: true },
    { m: 'Vault::.*::Document::.*', r: blob(null), want: false },
    { m: 'Vault::.*::Blob::.*', r: blob(ALICE), want: true },
    {
      m: 'Group::.*::GroupMembership::.*',
      r: resource('Group', G1, 'GroupMembership', BOB),
      want: true,
    },
    { m: 'User::.*::Password', r: resource('User', BOB, 'Password'), want: true },
    { m: 'User::.*::Password', r: resource('User', BOB, 'Message'), want: false },
    // never a type position
    { m: '.*::.*', r: resource('Vault', V1), want: false, why: 'type position' },
    { m: `.*::${V1}`, r: resource('Vault', V1), want: false, why: 'type position' },
    { m: '.*', r: resource('Vault'), want: false, why: 'type position' },
    { m: 'Vault::.*::.*::.*', r: doc(), want: false, why: 'type position' },
    { m: `Vault::${V1}::.*::${D1}`, r: doc(), want: false, why: 'type position' },
    // token counts must be equal
    { m: 'User::.*', r: resource('User', ALICE, 'Password'), want: false, why: 'count' },
    { m: 'User::.*', r: resource('User', ALICE, 'Message'), want: false, why: 'count' },
    { m: 'Vault::.*', r: resource(...DOCS, ''), want: false, why: 'count' },
    { m: 'Vault::.*', r: doc(), want: false, why: 'count' },
    { m: 'Vault::.*::Document::.*', r: resource('Vault', V1), want: false, why: 'count' },
    { m: '.*', r: resource('Vault', V1), want: false, why: 'count' },
    { m: 'Group::.*', r: resource('Group', G1, 'GroupMembership', ALICE), want: false },
    {
      m: 'PasswordResetFlow::.*',
      r: resource('PasswordResetFlow', G1, 'Email', ALICE),
      want: false,
    },
    // the owner-scoped resource of the ownership-change rules
    { m: `Vault::${V1}::Document::.*`, r: ownerScoped(DOCS, BOB), want: true },
    { m: 'Vault::.*::Document::.*', r: ownerScoped(DOCS, BOB), want: true },
  ])
})

describe('`$[id=self.id]` matches only the calling user, after User or GroupMembership', () => {
  const membership = (user: string) => resource('Group', G1, 'GroupMembership', user)
  runTable([
    { m: 'User::$[id=self.id]', r: resource('User', ALICE), who: alice, want: true },
    { m: 'User::$[id=self.id]', r: resource('User', ALICE), who: bob, want: false },
    { m: 'User::$[id=self.id]', r: resource('User', BOB), who: alice, want: false },
    { m: 'User::$[id=self.id]', r: resource('User', ALICE), who: nobody, want: false },
    { m: 'User::$[id=self.id]', r: resource('User', ''), who: alice, want: false, why: 'list' },
    { m: 'User::$[id=self.id]', r: resource('User', ''), who: nobody, want: false },
    {
      m: 'User::$[id=self.id]',
      r: resource('User', ALICE.toUpperCase()),
      who: alice,
      want: true,
      why: 'ids compare case-insensitively',
    },
    {
      m: 'User::$[id=self.id]',
      r: resource('User', ALICE),
      who: { userId: ALICE.toUpperCase() },
      want: true,
    },
    {
      m: 'User::$[id=self.id]',
      r: resource('User', ALICE),
      who: alice,
      opts: { allowSelf: false },
      want: false,
    },
    {
      m: 'User::$[id=self.id]',
      r: resource('User', ALICE),
      who: alice,
      opts: { allowSelf: true },
      want: true,
    },
    { m: 'User::$[id=self.id]', r: resource('User', ALICE), who: alice, opts: {}, want: true },
    {
      m: 'User::.*',
      r: resource('User', ALICE),
      who: alice,
      opts: { allowSelf: false },
      want: true,
      why: 'allowSelf only affects the self matcher',
    },
    {
      m: `User::${ALICE}`,
      r: resource('User', ALICE),
      who: alice,
      opts: { allowSelf: false },
      want: true,
    },
    {
      m: 'User::$[id=self.id]::Password',
      r: resource('User', ALICE, 'Password'),
      who: alice,
      want: true,
    },
    {
      m: 'User::$[id=self.id]::Password',
      r: resource('User', BOB, 'Password'),
      who: alice,
      want: false,
    },
    { m: 'User::$[id=self.id]', r: resource('User', ALICE, 'Password'), want: false },
    { m: `Group::${G1}::GroupMembership::$[id=self.id]`, r: membership(ALICE), want: true },
    { m: `Group::${G1}::GroupMembership::$[id=self.id]`, r: membership(BOB), want: false },
    {
      m: `Group::${G1}::GroupMembership::$[id=self.id]`,
      r: membership(ALICE),
      who: nobody,
      want: false,
    },
    {
      m: `Group::${G1}::GroupMembership::$[id=self.id]`,
      r: membership(ALICE),
      opts: { allowSelf: false },
      want: false,
    },
    { m: 'Group::.*::GroupMembership::$[id=self.id]', r: membership(ALICE), want: true },
    // not after other types
    { m: 'Vault::$[id=self.id]', r: resource('Vault', ALICE), want: false, why: 'after Vault' },
    { m: 'Group::$[id=self.id]', r: resource('Group', ALICE), want: false, why: 'after Group' },
    {
      m: `Vault::${V1}::Document::$[id=self.id]`,
      r: doc(ALICE, ALICE),
      want: false,
      why: 'after Document',
    },
    {
      m: 'PasswordResetFlow::.*::Email::$[id=self.id]',
      r: resource('PasswordResetFlow', G1, 'Email', ALICE),
      want: false,
      why: 'after Email',
    },
    // the keyword is exact and is not an id
    { m: 'User::$[ID=self.id]', r: resource('User', ALICE), want: false },
    { m: 'User::$[id=self.ID]', r: resource('User', ALICE), want: false },
    { m: 'User::$[id=self.id] ', r: resource('User', ALICE), want: false },
    {
      m: 'User::$[id=self.id]',
      r: resource('User', SELF_ID),
      who: alice,
      want: false,
      why: 'a resource id spelled like the keyword is not the caller',
    },
    { m: 'user::$[id=self.id]', r: resource('User', ALICE), want: false, why: 'type case' },
  ])
})

describe('owner matchers `$[Owner=…]` as the last token after Document or Blob', () => {
  runTable([
    // $[Owner=self]
    { m: `Vault::${V1}::Document::$[Owner=self]`, r: doc(ALICE), who: alice, want: true },
    {
      m: `Vault::${V1}::Document::$[Owner=self]`,
      r: doc(ALICE.toUpperCase()),
      who: alice,
      want: true,
    },
    { m: `Vault::${V1}::Document::$[Owner=self]`, r: doc(ALICE), who: bob, want: false },
    { m: `Vault::${V1}::Document::$[Owner=self]`, r: doc(ALICE), who: nobody, want: false },
    { m: `Vault::${V1}::Document::$[Owner=self]`, r: doc(BOB), who: alice, want: false },
    { m: `Vault::${V1}::Document::$[Owner=self]`, r: doc(null), want: false, why: 'unowned' },
    { m: `Vault::${V1}::Document::$[Owner=self]`, r: doc(), want: false, why: 'owner unknown' },
    {
      m: `Vault::${V1}::Document::$[Owner=self]`,
      r: ownedItem([...DOCS, ''], ALICE),
      want: false,
      why: 'never the collection',
    },
    { m: `Vault::${V1}::Document::$[Owner=self]`, r: resource(...DOCS, ''), want: false },
    { m: `Vault::${V1}::Document::$[Owner=self]`, r: doc(ALICE, D1, V2), want: false },
    { m: 'Vault::.*::Document::$[Owner=self]', r: doc(ALICE, D2, V2), want: true },
    // $[Owner=<uuid>]
    { m: `Vault::${V1}::Document::$[Owner=${BOB}]`, r: doc(BOB), who: alice, want: true },
    { m: `Vault::${V1}::Document::$[Owner=${BOB}]`, r: doc(BOB), who: nobody, want: true },
    { m: `Vault::${V1}::Document::$[Owner=${BOB}]`, r: doc(ALICE), who: alice, want: false },
    { m: `Vault::${V1}::Document::$[Owner=${BOB}]`, r: doc(null), want: false, why: 'unowned' },
    {
      m: `Vault::${V1}::Document::$[Owner=${BOB.toUpperCase()}]`,
      r: doc(BOB),
      want: true,
      why: 'uppercase UUID',
    },
    { m: `Vault::${V1}::Document::$[Owner=${BOB}]`, r: resource(...DOCS, ''), want: false },
    { m: `Vault::${V1}::Document::$[Owner=${BOB}]`, r: ownedItem([...DOCS, ''], BOB), want: false },
    // $[Owner=.*]
    { m: `Vault::${V1}::Document::$[Owner=.*]`, r: doc(ALICE), want: true },
    { m: `Vault::${V1}::Document::$[Owner=.*]`, r: doc(BOB), want: true },
    { m: `Vault::${V1}::Document::$[Owner=.*]`, r: doc(BOB), who: nobody, want: true },
    { m: `Vault::${V1}::Document::$[Owner=.*]`, r: doc(null), want: false, why: 'unowned' },
    { m: `Vault::${V1}::Document::$[Owner=.*]`, r: doc(), want: false, why: 'owner unknown' },
    { m: `Vault::${V1}::Document::$[Owner=.*]`, r: resource(...DOCS, ''), want: false },
    { m: `Vault::${V1}::Document::$[Owner=.*]`, r: ownedItem([...DOCS, ''], BOB), want: false },
    { m: 'Vault::.*::Document::$[Owner=.*]', r: doc(BOB, D2, V2), want: true },
    // Blob equivalents
    { m: `Vault::${V1}::Blob::$[Owner=self]`, r: blob(ALICE), want: true },
    { m: `Vault::${V1}::Blob::$[Owner=self]`, r: blob(BOB), want: false },
    { m: `Vault::${V1}::Blob::$[Owner=${BOB}]`, r: blob(BOB), want: true },
    { m: `Vault::${V1}::Blob::$[Owner=.*]`, r: blob(BOB), want: true },
    { m: `Vault::${V1}::Blob::$[Owner=.*]`, r: blob(null), want: false, why: 'unowned' },
    { m: `Vault::${V1}::Blob::$[Owner=.*]`, r: resource(...BLOBS, ''), want: false },
    { m: `Vault::${V1}::Blob::$[Owner=.*]`, r: doc(BOB), want: false, why: 'Blob ≠ Document' },
    { m: `Vault::${V1}::Document::$[Owner=.*]`, r: blob(BOB), want: false },
    // only after Document or Blob
    {
      m: 'User::$[Owner=.*]',
      r: ownedItem(['User', ALICE], ALICE),
      want: false,
      why: 'after User',
    },
    { m: 'Vault::$[Owner=.*]', r: ownedItem(['Vault', V1], ALICE), want: false },
    { m: 'Vault::$[Owner=self]', r: ownedItem(['Vault', V1], ALICE), want: false },
    {
      m: `Vault::${V1}::Schema::$[Owner=.*]`,
      r: ownedItem(['Vault', V1, 'Schema', D1], ALICE),
      want: false,
    },
    {
      m: `Group::${G1}::GroupMembership::$[Owner=self]`,
      r: ownedItem(['Group', G1, 'GroupMembership', ALICE], ALICE),
      want: false,
    },
    // only as the last token
    {
      m: 'Vault::$[Owner=.*]::Document::.*',
      r: ownedItem([...DOCS, D1], ALICE),
      want: false,
      why: 'not last',
    },
    {
      m: `Vault::${V1}::Document::$[Owner=.*]::Blob::.*`,
      r: ownedItem([...DOCS, D1, 'Blob', B1], ALICE),
      want: false,
      why: 'not last',
    },
    // the keyword is exact
    { m: `Vault::${V1}::Document::$[owner=self]`, r: doc(ALICE), want: false },
    { m: `Vault::${V1}::Document::$[OWNER=.*]`, r: doc(ALICE), want: false },
    { m: `Vault::${V1}::Document::$[Owner=SELF]`, r: doc(ALICE), want: false },
    { m: `Vault::${V1}::Document::$[Owner=]`, r: doc(ALICE), want: false },
    { m: `Vault::${V1}::Document::$[Owner=.+]`, r: doc(ALICE), want: false },
    { m: `Vault::${V1}::Document::$[Owner=${ALICE.slice(0, 8)}]`, r: doc(ALICE), want: false },
  ])
})

describe('owner-scoped resources `…::$[Owner=X]` (ownership changes)', () => {
  const scoped = (owner: string, collection = DOCS) => ownerScoped(collection, owner)
  runTable([
    { m: `Vault::${V1}::Document::$[Owner=${ALICE}]`, r: scoped(ALICE), want: true },
    { m: `Vault::${V1}::Document::$[Owner=${ALICE}]`, r: scoped(ALICE.toUpperCase()), want: true },
    { m: `Vault::${V1}::Document::$[Owner=${ALICE.toUpperCase()}]`, r: scoped(ALICE), want: true },
    { m: `Vault::${V1}::Document::$[Owner=${ALICE}]`, r: scoped(BOB), want: false },
    { m: `Vault::${V1}::Document::$[Owner=.*]`, r: scoped(ALICE), want: true },
    { m: `Vault::${V1}::Document::$[Owner=.*]`, r: scoped(BOB), who: nobody, want: true },
    { m: `Vault::${V1}::Document::$[Owner=self]`, r: scoped(ALICE), who: alice, want: true },
    { m: `Vault::${V1}::Document::$[Owner=self]`, r: scoped(ALICE), who: bob, want: false },
    { m: `Vault::${V1}::Document::$[Owner=self]`, r: scoped(ALICE), who: nobody, want: false },
    { m: `Vault::${V1}::Document::.*`, r: scoped(ALICE), want: true },
    { m: 'Vault::.*::Document::.*', r: scoped(BOB), want: true },
    { m: 'Vault::.*::Document::$[Owner=self]', r: scoped(ALICE), who: alice, want: true },
    {
      m: `Vault::${V1}::Document::${D1}`,
      r: scoped(ALICE),
      want: false,
      why: 'a specific document id',
    },
    { m: `Vault::${V1}::Document::${ALICE}`, r: scoped(ALICE), want: false },
    { m: `Vault::${V1}::Document::`, r: scoped(ALICE), want: false, why: 'the plain collection' },
    { m: `Vault::${V2}::Document::$[Owner=.*]`, r: scoped(ALICE), want: false },
    { m: `Vault::${V1}::Blob::$[Owner=.*]`, r: scoped(ALICE), want: false },
    { m: `Vault::${V1}::Blob::$[Owner=${ALICE}]`, r: scoped(ALICE, BLOBS), want: true },
    { m: `Vault::${V1}::Blob::.*`, r: scoped(ALICE, BLOBS), want: true },
    { m: `Vault::${V1}::Blob::`, r: scoped(ALICE, BLOBS), want: false },
    {
      m: `Vault::${V1}::Document::$[owner=${ALICE}]`,
      r: scoped(ALICE),
      want: false,
      why: 'a misspelt selector is not an owner matcher',
    },
    { m: `Vault::${V1}::Document::$[OWNER=${ALICE}]`, r: scoped(ALICE), want: false },
    { m: `User::$[Owner=${ALICE}]`, r: ownerScoped(['User'], ALICE), want: false },
  ])
})

describe('anchoring: no regular expressions (R-4)', () => {
  runTable([
    { m: 'Vault::a.b', r: resource('Vault', 'a.b'), want: true },
    { m: 'Vault::a.b', r: resource('Vault', 'axb'), want: false },
    { m: 'Vault::.+', r: resource('Vault', V1), want: false },
    { m: 'Vault::.+', r: resource('Vault', '.+'), want: true },
    { m: 'Vault::[x]', r: resource('Vault', 'x'), want: false },
    { m: 'Vault::[x]', r: resource('Vault', '[x]'), want: true },
    { m: 'Vault::(', r: resource('Vault', '('), want: true, why: 'no regex compile error' },
    { m: 'Vault::(', r: resource('Vault', 'x'), want: false },
    { m: 'Vault::.*?', r: resource('Vault', V1), want: false },
    { m: 'Vault::.*.*', r: resource('Vault', V1), want: false },
    { m: 'Vault::^.*$', r: resource('Vault', V1), want: false },
    { m: `Vault::^${V1}$`, r: resource('Vault', V1), want: false },
    { m: `Vault::${V1}|${V2}`, r: resource('Vault', V2), want: false },
    { m: `Vault::${V1}.*`, r: resource('Vault', `${V1}0`), want: false },
    { m: `Vault::.*${V1.slice(4)}`, r: resource('Vault', V1), want: false },
    { m: 'Vault::\\w+', r: resource('Vault', 'abc'), want: false },
    { m: 'Vault::*', r: resource('Vault', V1), want: false },
    { m: 'Vault::.', r: resource('Vault', 'x'), want: false },
    { m: `Vault::${V1.slice(0, -1)}`, r: resource('Vault', V1), want: false, why: 'prefix' },
    { m: `Vault::${V1.slice(1)}`, r: resource('Vault', V1), want: false, why: 'suffix' },
    { m: `Vault::${V1}`, r: resource('Vault', V1.slice(0, -1)), want: false },
    { m: `Vault:: ${V1}`, r: resource('Vault', V1), want: false, why: 'whitespace' },
    { m: `Vault::${V1} `, r: resource('Vault', V1), want: false, why: 'whitespace' },
    // `::` inside a resource id cannot forge extra tokens
    {
      m: `Vault::${V1}::Document::${D1}`,
      r: resource('Vault', `${V1}::Document::${D1}`),
      want: false,
      why: '`::` injection',
    },
    { m: `Vault::${V1}`, r: resource('Vault', `${V1}::Document::${D1}`), want: false },
    {
      m: `Vault::${V1}::Document::.*`,
      r: resource('Vault', `${V1}::Document::${D1}`),
      want: false,
    },
    { m: `User::${ALICE}::Password`, r: resource('User', `${ALICE}::Password`), want: false },
    { m: `User::${ALICE}`, r: resource('User', `${ALICE}::Password`), want: false },
    // type names are case-sensitive
    { m: 'vault::', r: resource('Vault', ''), want: false },
    { m: 'VAULT::.*', r: resource('Vault', V1), want: false },
    { m: `Vault::${V1}::document::.*`, r: doc(), want: false },
    { m: `Vault::${V1}::DOCUMENT::${D1}`, r: doc(), want: false },
    { m: 'user::.*', r: resource('User', ALICE), want: false },
    { m: 'userSchema::', r: resource('UserSchema', ''), want: false },
    { m: 'group::.*', r: resource('Group', G1), want: false },
    { m: 'Vault::', r: resource('vault', ''), want: false },
    // ids (UUIDs) are case-insensitive
    { m: `Vault::${V1.toUpperCase()}`, r: resource('Vault', V1), want: true },
    { m: `Vault::${V1}`, r: resource('Vault', V1.toUpperCase()), want: true },
    { m: `Vault::${V1.toUpperCase()}::Document::${D1.toUpperCase()}`, r: doc(), want: true },
    {
      m: `User::${ALICE.toUpperCase()}::Password`,
      r: resource('User', ALICE, 'Password'),
      want: true,
    },
  ])
})

describe('properties', () => {
  // Tokens without ':' (so joining with `::` round-trips) and without '=' (so no `$[…=…]`
  // keyword can appear), rich in regex metacharacters.
  const alphabet = 'abcXYZ019.*+?^$|\\()[]{}- _'.split('')
  const tokenArb = fc.string({ unit: fc.constantFrom(...alphabet), maxLength: 8 })
  const tokensArb = fc.array(tokenArb, { minLength: 1, maxLength: 8 })
  const callerArb = fc.constantFrom(alice, bob, nobody)

  it('a matcher built from the resource itself matches it', () => {
    fc.assert(
      fc.property(tokensArb, callerArb, (tokens, caller) => {
        const matcher = tokenize(resourceText({ tokens }))
        expect(matcher).toEqual(tokens)
        expect(matches(matcher, { tokens }, caller)).toBe(true)
      }),
    )
  })

  it('changing any type token (even position) makes it not match', () => {
    fc.assert(
      fc.property(
        tokensArb,
        fc.nat(),
        fc.string({ unit: fc.constantFrom(...alphabet), minLength: 1, maxLength: 3 }),
        fc.boolean(),
        (tokens, pick, extra, onMatcher) => {
          const typeIndexes = tokens.map((_, i) => i).filter((i) => i % 2 === 0)
          const i = typeIndexes[pick % typeIndexes.length] as number
          const changed = [...tokens]
          changed[i] = `${tokens[i]}${extra}`
          const [m, r] = onMatcher ? [changed, tokens] : [tokens, changed]
          expect(matches(m, { tokens: r }, alice)).toBe(false)
        },
      ),
    )
  })

  it('changing the case of a type token makes it not match', () => {
    fc.assert(
      fc.property(tokensArb, fc.nat(), (tokens, pick) => {
        const i = (pick % Math.ceil(tokens.length / 2)) * 2
        const t = tokens[i] as string
        const flipped = t.toUpperCase() === t ? t.toLowerCase() : t.toUpperCase()
        fc.pre(flipped !== t)
        const changed = [...tokens]
        changed[i] = flipped
        expect(matches(changed, { tokens }, alice)).toBe(false)
      }),
    )
  })

  it('changing the token count makes it not match', () => {
    fc.assert(
      fc.property(tokensArb, tokenArb, (tokens, extra) => {
        expect(matches([...tokens, extra], { tokens }, alice)).toBe(false)
        expect(matches(tokens, { tokens: [...tokens, extra] }, alice)).toBe(false)
      }),
    )
  })

  it('an id token matches exactly itself (case-insensitively) or anything for `.*`', () => {
    fc.assert(
      fc.property(tokenArb, tokenArb, callerArb, (m, r, caller) => {
        const want = m === '.*' || m.toLowerCase() === r.toLowerCase()
        expect(matches(['Vault', m], resource('Vault', r), caller)).toBe(want)
        expect(matches(['Vault', V1, 'Document', m], doc(ALICE, r), caller)).toBe(want)
      }),
    )
  })

  it('`.*` is special only as a whole token', () => {
    fc.assert(
      fc.property(tokenArb, tokenArb, tokenArb, (x, y, z) => {
        const id = `${x}${z}`
        for (const m of [`${x}.*`, `.*${x}`, `${x}.*${y}`]) {
          if (m === '.*') continue
          const want = m.toLowerCase() === id.toLowerCase()
          expect(matches(['Vault', m], resource('Vault', id), alice)).toBe(want)
        }
      }),
    )
  })

  it('`x.*` never matches `xyz`', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom(...alphabet), minLength: 1, maxLength: 6 }),
        tokenArb,
        (x, y) => {
          fc.pre(y.toLowerCase() !== '.*')
          expect(matches(['Vault', `${x}.*`], resource('Vault', `${x}${y}`), alice)).toBe(false)
        },
      ),
    )
  })
})
