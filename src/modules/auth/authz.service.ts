import { CompiledPolicy, Grants } from '../../policy/index.js'
import type { GroupsService } from '../groups/groups.service.js'
import type { Principal } from './principal.js'

/**
 * Builds what a principal may do from its groups' current policies, on every request: a change
 * of membership or policy applies to the very next request. A SAT is bounded by its creator.
 */
export class AuthzService {
  constructor(private readonly groups: GroupsService) {}

  async grantsFor(principal: Principal): Promise<Grants> {
    if (principal.kind === 'user') {
      const statements = await this.groups.policiesOfUser(principal.accountId, principal.userId)
      return new Grants([new CompiledPolicy(statements)], { userId: principal.userId })
    }
    const creator = await this.groups.policiesOfUser(principal.accountId, principal.creatorId)
    return new Grants([new CompiledPolicy(principal.policy), new CompiledPolicy(creator)], {
      userId: principal.creatorId,
    })
  }
}
