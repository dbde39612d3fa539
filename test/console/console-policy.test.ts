import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { matcherWords, policyProblems, statementWords } from '../../console/src/policy.js'
import { PolicyFormatError, parsePolicy } from '../../src/policy/policy.js'

/**
 * The console's policy editor checks a policy as the server does (src/policy/policy.ts
 * parsePolicy) before sending it: both must agree on every input, valid or not.
 */
function serverProblem(value: unknown): string | undefined {
  try {
    parsePolicy(value)
    return undefined
  } catch (e) {
    if (e instanceof PolicyFormatError) return e.message
    throw e
  }
}

const matcher = fc.oneof(
  fc.constantFrom('Vault::.*', 'Vault::.*::Document::.*', '', 'User::$[id=self.id]', 'a\u0007b'),
  fc.string({ maxLength: 20 }),
  fc.string({ minLength: 1020, maxLength: 1030 }),
)
const activities = fc.oneof(
  fc.constantFrom('R', 'crud', 'CRUDA', '', 'X', 'RW'),
  fc.string({ maxLength: 5 }),
)
const statement = fc.oneof(
  fc.record({ Resources: fc.array(matcher, { maxLength: 3 }), Activities: activities }),
  fc.record({ Resource: matcher, Activities: activities }),
  fc.record({
    Resources: fc.oneof(matcher, fc.integer(), fc.array(fc.integer())),
    Activities: fc.anything(),
  }),
  fc.anything(),
)
const policy = fc.oneof(fc.array(statement, { maxLength: 4 }), fc.anything())

describe("the console's policy checks", () => {
  it('agree with the server on every policy: valid for both, or refused by both', () => {
    fc.assert(
      fc.property(policy, (value) => {
        const server = serverProblem(value)
        const console = policyProblems(value)
        expect(console.length === 0, `${JSON.stringify(value)}: server says ${server}`).toBe(
          server === undefined,
        )
        // The first problem is the server's, in the server's words (the console may add more).
        if (server !== undefined) expect(console[0]).toContain(server)
      }),
      { numRuns: 2000 },
    )
  })

  it('say what each statement allows, in words', () => {
    expect(statementWords({ Resources: ['Vault::.*::Document::.*'], Activities: 'RU' })).toBe(
      'Allows read, update on: any Document in any Vault',
    )
    expect(matcherWords('Vault::v1::Document::$[Owner=self]')).toBe(
      'any Document owned by the signed-in user (never unowned ones) in Vault v1',
    )
    expect(matcherWords('User::$[id=self.id]')).toBe("the signed-in user's own User")
    expect(matcherWords('Vault::v1::Blob::')).toBe('the Blob collection in Vault v1')
    expect(statementWords({ Resources: ['Vault::.*'], Activities: 'A' })).toBe(
      'Grants nothing (no C, R, U or D) on: any Vault',
    )
    expect(matcherWords('Vault::$[Owner=self]')).toContain('matches nothing')
  })
})
