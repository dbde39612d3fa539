import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import type { PolicyStatement, Resource } from '../../policy/index.js'
import type { Group } from '../groups/groups.service.js'
import { accessItems } from './access-list.js'
import { ALL_ACTIVITIES, explainActivity, sourceOf, subjectOf } from './explain-activity.js'
import { parseSimulatedResource } from './simulated-resource.js'

const V = '0190f3a0-0000-7000-8000-00000000a001'
const D = '0190f3a0-0000-7000-8000-00000000d001'
const USERS = ['0190f3a0-0000-7000-8000-0000000000a1', '0190f3a0-0000-7000-8000-0000000000b2']
const [ALICE, BOB] = USERS as [string, string]

/** The straightforward answer: each user evaluated as themselves over all their groups. */
function naive(groups: Group[], text: string, ownerId: string | null | undefined) {
  const target = parseSimulatedResource(text)
  const res: Resource =
    ownerId === undefined ? { tokens: target.tokens } : { tokens: target.tokens, ownerId }
  return USERS.flatMap((id) => {
    const mine = groups.filter((g) => g.user_ids?.includes(id))
    const who = subjectOf(mine.map(sourceOf), { userId: id })
    const verdicts = ALL_ACTIVITIES.map((a) => explainActivity(a, target, res, who))
    const letters = verdicts
      .filter((v) => v.allowed)
      .map((v) => v.activity)
      .join('')
    return letters === '' ? [] : [{ id, letters }]
  })
}

describe('accessItems: each group once, the same answer as each user evaluated alone', () => {
  const idToken = fc.constantFrom(
    V,
    D,
    ALICE,
    BOB,
    '.*',
    '',
    '$[Owner=self]',
    '$[Owner=.*]',
    `$[Owner=${BOB}]`,
    '$[id=self.id]',
  )
  const matcher = fc.oneof(
    idToken.map((i) => `Vault::${i}`),
    fc
      .tuple(fc.constantFrom(V, '.*'), fc.constantFrom('Document', 'Blob'), idToken)
      .map(([v, k, i]) => `Vault::${v}::${k}::${i}`),
    idToken.map((i) => `User::${i}`),
  )
  const statement: fc.Arbitrary<PolicyStatement> = fc.record({
    Resources: fc.array(matcher, { minLength: 1, maxLength: 3 }),
    Activities: fc.subarray(['C', 'R', 'U', 'D']).map((a) => a.join('')),
  })
  const groups = fc
    .array(
      fc.record({ policy: fc.array(statement, { maxLength: 2 }), user_ids: fc.subarray(USERS) }),
      { maxLength: 4 },
    )
    .map((gs) => gs.map((g, i): Group => ({ id: `g${i}`, name: `g${i}`, ...g })))
  const target = fc.oneof(
    fc
      .tuple(fc.constantFrom('Document', 'Blob'), fc.constantFrom(ALICE, BOB, null))
      .map(([k, o]) => ({
        text: `Vault::${V}::${k}::${D}`,
        owner: o as string | null | undefined,
      })),
    fc.constantFrom(
      { text: `Vault::${V}::Document::`, owner: undefined },
      { text: `Vault::${V}::Document::$[Owner=${ALICE}]`, owner: undefined },
      { text: 'Vault::', owner: undefined },
      { text: `Vault::${V}`, owner: undefined },
      { text: 'User::', owner: undefined },
      { text: `User::${ALICE}`, owner: undefined },
      { text: `User::${BOB}`, owner: undefined },
    ),
  )

  it('agrees for random groups, memberships and resources', () => {
    fc.assert(
      fc.property(groups, target, (gs, { text, owner }) => {
        const t = parseSimulatedResource(text)
        const res: Resource =
          owner === undefined ? { tokens: t.tokens } : { tokens: t.tokens, ownerId: owner }
        const users = USERS.map((id) => ({ id, username: id, status: 'ACTIVATED' }))
        const got = accessItems(users, gs, t, res).map((i) => ({
          id: i.user_id,
          letters: i.activities,
        }))
        expect(got).toEqual(naive(gs, text, owner))
      }),
      { numRuns: 3000 },
    )
  })
})
