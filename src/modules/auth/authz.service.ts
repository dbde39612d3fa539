import type { GrantsBuilder, Principal } from '../../access/principal.js'
import { CompiledPolicy, Grants, type PolicyStatement } from '../../policy/index.js'
import type { GroupsService } from '../groups/groups.service.js'

const CACHE_SIZE = 1000

/**
 * Builds what a principal may do from its groups' current policies, on every request: a change
 * of membership or policy applies to the very next request. Only the compilation is cached,
 * keyed by the policies' exact text, so a changed policy is simply a new key.
 */
export class AuthzService implements GrantsBuilder {
  readonly #compiled = new Map<string, CompiledPolicy>()
  /**
   * A user principal's grants, by the principal: the auth hooks hand out one frozen principal
   * per cached credential (read with its policies), so a repeat caller's grants are built once.
   * A principal built from a fresh read is a new key: nothing is reused across a change.
   */
  readonly #granted = new WeakMap<Principal, Grants>()

  constructor(private readonly groups: GroupsService) {}

  async grantsFor(principal: Principal): Promise<Grants> {
    const known = this.#granted.get(principal)
    if (known) return known
    const userId = principal.kind === 'user' ? principal.userId : principal.creatorId
    // Policy-checked routes read the policies with the credential; others query them now.
    const texts =
      (principal.kind === 'user' ? principal.groupPolicies : undefined) ??
      (await this.groups.policyTextsOfUser(principal.accountId, userId))
    const userPolicy = this.#compile(texts)
    if (principal.kind === 'user') {
      const grants = new Grants([userPolicy], { userId })
      // Only when the policies came with the principal: otherwise they were read just now.
      if (principal.groupPolicies) this.#granted.set(principal, grants)
      return grants
    }
    // A SAT is bounded by every SAT that minted it and by its creator: every layer must allow.
    const layers = [principal.policy, ...principal.ancestorPolicies].map((p) => this.#compile([p]))
    return new Grants([...layers, userPolicy], { userId })
  }

  #compile(texts: string[]): CompiledPolicy {
    const key = texts.join('\n')
    let policy = this.#compiled.get(key)
    if (!policy) {
      policy = new CompiledPolicy(texts.flatMap((t) => JSON.parse(t) as PolicyStatement[]))
      if (this.#compiled.size >= CACHE_SIZE)
        this.#compiled.delete(this.#compiled.keys().next().value as string)
      this.#compiled.set(key, policy)
    }
    return policy
  }
}
