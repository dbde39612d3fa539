/**
 * A group policy checked as the server checks it (src/policy/policy.ts parsePolicy) before it is
 * sent, and each statement put into words. The server stays the judge: this only saves a round
 * trip and explains.
 */
export interface Statement {
  Resources: string[]
  Activities: string
}

/** The server's bound on one resource matcher (src/policy/policy.ts). */
export const MAX_MATCHER_LENGTH = 1024
const ACTIVITY_LETTERS = /^[CRUDA]*$/
// biome-ignore lint/suspicious/noControlCharactersInRegex: the server refuses control characters
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/

/** The problems the server would report, in its words; none for a valid policy. */
export function policyProblems(value: unknown): string[] {
  if (!Array.isArray(value)) return ['policy must be a JSON array of policy objects']
  const problems: string[] = []
  value.forEach((raw, i) => {
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
      problems.push(`policy[${i}] must be an object with Resources and Activities`)
      return
    }
    const item = raw as Record<string, unknown>
    const rawResources = item.Resources ?? item.Resource
    const resources = typeof rawResources === 'string' ? [rawResources] : rawResources
    if (!Array.isArray(resources) || resources.some((r) => typeof r !== 'string')) {
      problems.push(`policy[${i}].Resources must be an array of strings`)
    } else {
      for (const r of resources as string[]) {
        if (r.length === 0 || r.length > MAX_MATCHER_LENGTH || CONTROL.test(r))
          problems.push(`policy[${i}].Resources holds an invalid resource matcher: "${r}"`)
      }
    }
    if (
      typeof item.Activities !== 'string' ||
      !ACTIVITY_LETTERS.test(item.Activities.toUpperCase())
    ) {
      problems.push(`policy[${i}].Activities must be a string of the letters C, R, U, D`)
    }
  })
  return problems
}

const VERBS: Record<string, string> = { C: 'create', R: 'read', U: 'update', D: 'delete' }
const OWNER = /^\$\[Owner=(.+)\]$/
const SELF_ID = '$[id=self.id]'

function idWords(type: string, id: string | undefined, last: boolean): string {
  if (id === undefined) return `the ${type} collection`
  if (id === '') return last ? `the ${type} collection` : `${type} with an empty id`
  if (id === '.*') return `any ${type}`
  if (id === SELF_ID) {
    return type === 'User' || type === 'GroupMembership'
      ? `the signed-in user's own ${type}`
      : `${type} "${id}" (matches nothing: $[id=self.id] only works after User or GroupMembership)`
  }
  const owner = OWNER.exec(id)?.[1]
  if (owner !== undefined) {
    const who =
      owner === '.*' ? 'anyone' : owner === 'self' ? 'the signed-in user' : `user ${owner}`
    if (!last || (type !== 'Document' && type !== 'Blob'))
      return `${type} owned by ${who} (matches nothing: an owner selector must end a Document or Blob matcher)`
    return `any ${type} owned by ${who} (never unowned ones)`
  }
  return `${type} ${id}`
}

/** One resource matcher in words: `Vault::.*::Document::.*` → any Document in any Vault. */
export function matcherWords(matcher: string): string {
  const tokens = matcher.split('::')
  const parts: string[] = []
  for (let i = 0; i < tokens.length; i += 2) {
    const type = tokens[i] as string
    parts.push(idWords(type, tokens[i + 1], i + 2 >= tokens.length))
  }
  return parts.reverse().join(' in ')
}

/** A statement in words: "Allows read, update on: any Document in any Vault". */
export function statementWords(s: Statement): string {
  const letters = [...new Set(s.Activities.toUpperCase().split(''))].filter((l) => VERBS[l])
  const verbs = letters.map((l) => VERBS[l]).join(', ')
  const resources = (Array.isArray(s.Resources) ? s.Resources : [s.Resources]).map(matcherWords)
  if (!verbs) return `Grants nothing (no C, R, U or D) on: ${resources.join('; ')}`
  return `Allows ${verbs} on: ${resources.join('; ')}`
}
