import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyInstance } from 'fastify'
import { FullQuery } from '../../http/schemas.js'
import { errors } from '../../lib/errors.js'
import { decodeBase64Json, isTrue, parseIdList } from '../../lib/input.js'
import { type Requirement, resource } from '../../policy/index.js'
import {
  CreateGroupForm,
  EmptyResponse,
  GroupListResponse,
  GroupParams,
  GroupResponse,
  MembershipBody,
  MembershipParams,
  UpdateGroupBody,
} from './groups.schemas.js'
import type { Group, GroupsService, MemberOperation } from './groups.service.js'
import { validatePolicy } from './groups.service.js'

const tags = ['groups']

/** Groups carry both `id` and `group_id` (docs/truevault-clients.md §2). */
function view(group: Group) {
  return { ...group, group_id: group.id }
}

const group = (id: string) => resource('Group', id.toLowerCase())
const membership = (groupId: string, userId: string) =>
  resource('Group', groupId.toLowerCase(), 'GroupMembership', userId)

function operationOf(value: unknown, field: string): MemberOperation {
  if (value === undefined || value === '') return 'APPEND'
  if (value === 'APPEND' || value === 'REMOVE') return value
  throw errors.invalidField(field, 'must be APPEND or REMOVE')
}

/** Decodes the policy: a real array in JSON, base64 JSON in a form; empty means none. */
function policyOf(value: unknown, json: boolean) {
  if (value === undefined || value === null || value === '')
    return json && value === null ? [] : undefined
  return validatePolicy(json ? value : decodeBase64Json(value, 'policy'))
}

export async function groupRoutes(app: FastifyInstance, groups: GroupsService): Promise<void> {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()

  r.post(
    '/v1/groups',
    {
      schema: { tags, summary: 'Create a group', body: CreateGroupForm, response: GroupResponse },
      config: {
        form: true,
        operation: 'group.create',
        access: {
          // Adding members to a group that does not exist yet needs membership rights on any group.
          policy: (req) => {
            const body = req.body as { user_ids?: string }
            const create: Requirement = { activity: 'C', resource: resource('Group', '') }
            if (!body.user_ids?.trim()) return create
            return {
              allOf: [
                create,
                {
                  anyOf: [
                    { activity: 'C', resource: membership('.*', '.*') },
                    { activity: 'U', resource: group('.*') },
                  ],
                },
              ],
            }
          },
        },
      },
    },
    async (req) => {
      const body = req.body
      const created = await groups.create(req.actor.principal.accountId, {
        name: body.name,
        policy: policyOf(body.policy, false) ?? [],
        userIds: parseIdList(body.user_ids, 'user_ids'),
      })
      return { group: view(created) }
    },
  )

  r.get(
    '/v1/groups/:group_id',
    {
      schema: {
        tags,
        summary: 'Read a group',
        params: GroupParams,
        querystring: FullQuery,
        response: GroupResponse,
      },
      config: {
        operation: 'group.read',
        access: {
          policy: (req) => ({
            activity: 'R',
            resource: group((req.params as { group_id: string }).group_id),
          }),
        },
      },
    },
    async (req) => {
      const found = await groups.get(
        req.actor.principal.accountId,
        req.params.group_id.toLowerCase(),
        isTrue(req.query.full),
      )
      return { group: view(found) }
    },
  )

  r.get(
    '/v1/groups',
    {
      schema: { tags, summary: 'List the groups the caller may read', response: GroupListResponse },
      config: {
        operation: 'group.list',
        access: { policy: () => ({ readAny: resource('Group', '') }) },
      },
    },
    async (req) => ({ groups: (await groups.list(req.actor)).map(view) }),
  )

  r.put(
    '/v1/groups/:group_id',
    {
      schema: {
        tags,
        summary: 'Update a group (JSON, or the deprecated form)',
        params: GroupParams,
        body: UpdateGroupBody,
        response: GroupResponse,
      },
      config: {
        form: true,
        operation: 'group.update',
        access: {
          policy: (req) => ({
            activity: 'U',
            resource: group((req.params as { group_id: string }).group_id),
          }),
        },
      },
    },
    async (req) => {
      const json = req.headers['content-type']?.includes('json') === true
      const body = req.body
      let userIds: string[] | undefined
      if (body.user_ids !== undefined) {
        if (json && !Array.isArray(body.user_ids))
          throw errors.invalidField('user_ids', 'must be an array of user ids')
        userIds = parseIdList(body.user_ids, 'user_ids')
      }
      const updated = await groups.update(
        req.actor.principal.accountId,
        req.params.group_id.toLowerCase(),
        {
          ...(body.name !== undefined ? { name: body.name } : {}),
          ...(body.policy !== undefined ? { policy: policyOf(body.policy, json) ?? [] } : {}),
          ...(userIds ? { userIds } : {}),
          operation: json
            ? operationOf(body.user_operation ?? body.operation, 'user_operation')
            : operationOf(body.operation ?? body.user_operation, 'operation'),
        },
      )
      return { group: view(updated) }
    },
  )

  r.post(
    '/v1/groups/:group_id/membership',
    {
      schema: {
        tags,
        summary: 'Add users to a group',
        params: GroupParams,
        body: MembershipBody,
        response: EmptyResponse,
      },
      config: {
        operation: 'group.add_members',
        access: {
          policy: (req) => {
            const { group_id } = req.params as { group_id: string }
            const { user_ids } = req.body as { user_ids: string[] }
            return {
              anyOf: [
                { activity: 'U', resource: group(group_id) },
                {
                  allOf: user_ids.map((u) => ({
                    activity: 'C' as const,
                    resource: membership(group_id, u.toLowerCase()),
                  })),
                },
              ],
            }
          },
        },
      },
    },
    async (req) => {
      const ids = parseIdList(req.body.user_ids, 'user_ids')
      await groups.addMembers(req.actor.principal.accountId, req.params.group_id.toLowerCase(), ids)
      return {}
    },
  )

  r.delete(
    '/v1/groups/:group_id/membership/:user_ids',
    {
      schema: {
        tags,
        summary: 'Remove users from a group (all must be members)',
        params: MembershipParams,
        response: EmptyResponse,
      },
      config: {
        operation: 'group.remove_members',
        access: {
          policy: (req) => {
            const { group_id, user_ids } = req.params as { group_id: string; user_ids: string }
            const ids = parseIdList(user_ids, 'user_ids', 1000)
            if (ids.length === 0)
              throw errors.invalidField('user_ids', 'must name at least one user')
            return {
              anyOf: [
                { activity: 'U', resource: group(group_id) },
                {
                  allOf: ids.map((u) => ({
                    activity: 'D' as const,
                    resource: membership(group_id, u),
                  })),
                },
              ],
            }
          },
        },
      },
    },
    async (req) => {
      const ids = parseIdList(req.params.user_ids, 'user_ids', 1000)
      await groups.removeMembers(
        req.actor.principal.accountId,
        req.params.group_id.toLowerCase(),
        ids,
      )
      return {}
    },
  )

  r.delete(
    '/v1/groups/:group_id',
    {
      schema: {
        tags,
        summary: 'Delete a group (its members are detached)',
        params: GroupParams,
        response: GroupResponse,
      },
      config: {
        operation: 'group.delete',
        access: {
          policy: (req) => ({
            activity: 'D',
            resource: group((req.params as { group_id: string }).group_id),
          }),
        },
      },
    },
    async (req) => ({
      group: view(
        await groups.delete(req.actor.principal.accountId, req.params.group_id.toLowerCase()),
      ),
    }),
  )
}
