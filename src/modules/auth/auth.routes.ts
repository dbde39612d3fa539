import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { UserPrincipal } from '../../access/principal.js'
import { USER_CREDENTIALS } from '../../http/access.js'
import { errors } from '../../lib/errors.js'
import { decodeBase64Json, isTrue } from '../../lib/input.js'
import type { GroupsService } from '../groups/groups.service.js'
import { userView } from '../users/user-view.js'
import type { UsersService } from '../users/users.service.js'
import {
  LoginForm,
  LoginResponse,
  LogoutAllResponse,
  LogoutResponse,
  MeQuery,
  MeResponse,
  UpdateMeForm,
} from './auth.schemas.js'
import type { CredentialsService } from './credentials.service.js'
import type { LoginService } from './login.service.js'

const tags = ['auth']

function me(req: FastifyRequest): UserPrincipal {
  const p = req.principal
  if (p?.kind !== 'user') throw errors.invalidAuthorization()
  return p
}

export async function authRoutes(
  app: FastifyInstance,
  services: {
    login: LoginService
    users: UsersService
    groups: GroupsService
    credentials: CredentialsService
  },
): Promise<void> {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()

  /** The caller as authenticated in this request, or re-read after a change. */
  async function ownView(p: UserPrincipal, full: boolean, reread = false) {
    const row = reread ? await services.users.get(p.accountId, p.userId) : p.user
    const groupIds = full
      ? (await services.groups.groupIdsOfUsers(p.accountId, [row.id])).get(row.id)
      : undefined
    if (!full) return userView(row)
    const attributesJson = await services.users.attributesJson(row)
    return userView(row, { full, groupIds: groupIds ?? [], attributesJson })
  }

  r.post(
    '/v1/auth/login',
    {
      schema: {
        tags,
        summary: 'Log in with username, password and account id',
        body: LoginForm,
        response: LoginResponse,
      },
      // A login writes one small token row: clients must still reach their data to read it.
      config: {
        form: true,
        operation: 'auth.login',
        access: { public: true },
        storesData: false,
        auditWrites: 'explicit',
      },
    },
    async (req) => {
      const b = req.body
      const { user, accessToken } = await services.login.login({
        accountId: b.account_id,
        username: b.username,
        password: b.password,
        mfaCode: b.mfa_code,
        notValidAfter: b.not_valid_after,
        client: req.ip,
      })
      return { user: { ...userView(user), access_token: accessToken } }
    },
  )

  r.post(
    '/v1/auth/logout',
    {
      schema: {
        tags,
        summary: 'Log out: the access token used stops working',
        response: LogoutResponse,
      },
      config: {
        vendsCredential: () => ['access_token'],
        operation: 'auth.logout',
        access: { self: true, credentials: ['access_token'] },
        // Ending a session frees space, never stores any: served under the free-space floor.
        storesData: false,
      },
    },
    async (req) => {
      const p = me(req)
      if (!(await services.credentials.revoke(p.accountId, p.credentialDigest)))
        throw errors.unauthenticated()
      return { logout: userView(p.user) }
    },
  )

  r.post(
    '/v1/auth/logout_all',
    {
      schema: {
        tags,
        summary: "Log out everywhere: every access token of the caller's user stops working",
        response: LogoutAllResponse,
      },
      // Ending sessions is a user's act: an API key or an access token, never a SAT. API keys
      // are not sessions and keep working.
      config: {
        vendsCredential: () => USER_CREDENTIALS,
        operation: 'auth.logout_all',
        access: { self: true, credentials: USER_CREDENTIALS },
        storesData: false,
      },
    },
    async (req) => {
      const p = me(req)
      const ended = await services.credentials.endAllSessions(p.accountId, p.userId)
      return { user: userView(p.user), ended_access_tokens: ended }
    },
  )

  r.get(
    '/v1/auth/me',
    {
      schema: { tags, summary: 'The current user', querystring: MeQuery, response: MeResponse },
      config: { operation: 'current_user.read', access: { self: true, invalidStatus: 400 } },
    },
    async (req) => ({ user: await ownView(me(req), isTrue(req.query.full)) }),
  )

  r.put(
    '/v1/auth/me',
    {
      schema: {
        tags,
        summary: "Replace the current user's attributes",
        querystring: MeQuery,
        body: UpdateMeForm,
        response: MeResponse,
      },
      config: {
        form: true,
        operation: 'current_user.update',
        access: { self: true, invalidStatus: 400 },
      },
    },
    async (req) => {
      const p = me(req)
      await services.users.setAttributes(
        p.accountId,
        p.userId,
        decodeBase64Json(req.body.attributes, 'attributes'),
      )
      return { user: await ownView(p, isTrue(req.query.full), true) }
    },
  )
}
