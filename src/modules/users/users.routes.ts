import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { CredentialKind } from '../../access/principal.js'
import { reportReturned } from '../../access/returned.js'
import { ANY_CREDENTIAL, API_KEY_ONLY, USER_CREDENTIALS } from '../../http/access.js'
import { FullQuery } from '../../http/schemas.js'
import { errors } from '../../lib/errors.js'
import { decodeBase64Json, isTrue, parseIdList } from '../../lib/input.js'
import { type Requirement, resource } from '../../policy/index.js'
import type { GroupsService } from '../groups/groups.service.js'
import { userView, type ViewOptions } from './user-view.js'
import type { UserRow } from './users.repo.js'
import {
  AccessKeyResponse,
  AccessTokenForm,
  ApiKeyResponse,
  CreateUserForm,
  ListUsersQuery,
  PasswordBody,
  UpdateUserForm,
  UserIdsParams,
  UserParams,
  UsersV1Response,
  UsersV2Response,
  UserV1Response,
} from './users.schemas.js'
import { USER_STATUSES, type UsersService, validatePassword } from './users.service.js'

const tags = ['users']
const MAX_IDS = 100

const userRes = (id: string) => resource('User', id.toLowerCase())
const param = (req: FastifyRequest) => (req.params as { user_id: string }).user_id.toLowerCase()
const onUser =
  (activity: 'R' | 'U' | 'D') =>
  (req: FastifyRequest): Requirement => ({ activity, resource: userRes(param(req)) })
const passwordRes = (req: FastifyRequest) => resource('User', param(req), 'Password')
/**
 * Setting a password: U on `User::ID::Password` or on the user itself (spec, policy table). A SAT
 * needs the password grant itself — the narrow path a reset token holds — so a SAT with U on a
 * user (even on itself) can never take the account over.
 */
const onPassword = (req: FastifyRequest): Requirement =>
  req.principal?.kind === 'sat'
    ? { activity: 'U', resource: passwordRes(req) }
    : {
        anyOf: [
          { activity: 'U', resource: passwordRes(req) },
          { activity: 'U', resource: userRes(param(req)) },
        ],
      }
/**
 * A password's rules (the server's and the account's), checked before the request is let
 * through, so a too-short or common password does not spend a single-use credential (a password
 * reset token) on a 400. The caller's credential was read in onRequest: its account is known.
 */
const checkPasswordEarly =
  (users: UsersService) =>
  async (req: FastifyRequest): Promise<void> => {
    const password = (req.body as { password?: unknown } | undefined)?.password
    if (password === undefined) return
    const accountId = req.principal?.accountId
    if (accountId === undefined) validatePassword(password)
    else await users.checkNewPassword(accountId, password)
  }

/**
 * The SDK's `updateUserPassword` sends the password alone to the general update: that needs only
 * the password grant (a password reset token holds no other), any other field the user grant.
 */
const onUserUpdate = (req: FastifyRequest): Requirement =>
  isPasswordOnly(updatedFields(req)) ? onPassword(req) : onUser('U')(req)

/** The fields a general update acts on (not the SDK's `_tv_sdk` query parameter, not `full`). */
function updatedFields(req: FastifyRequest): string[] {
  const body = (req.body ?? {}) as Record<string, unknown>
  return Object.keys(UpdateUserForm.properties).filter(
    (k) => body[k] !== undefined && !(k === 'status' && body[k] === ''),
  )
}

const isPasswordOnly = (fields: string[]) => fields.length === 1 && fields[0] === 'password'

/**
 * Who may send this general update (decision 49 made consistent): vending a token needs an API
 * key, as on the dedicated token route; a password alone may come from a reset token (a SAT
 * holding `User::ID::Password`); a password with other changes needs a user's credential; the
 * other fields change no credential.
 */
function updateKinds(req: FastifyRequest): CredentialKind[] {
  const fields = updatedFields(req)
  const body = req.body as { access_token?: string }
  if (body.access_token) return API_KEY_ONLY
  if (fields.includes('password') && !isPasswordOnly(fields)) return USER_CREDENTIALS
  return ANY_CREDENTIAL
}

/** Optional base64 attributes of a form: absent or empty means "not given". */
function attributesOf(value: string | undefined): unknown {
  return value === undefined || value.trim() === ''
    ? undefined
    : decodeBase64Json(value, 'attributes')
}

/**
 * The official SDK's `createUser(name)` sends the text "undefined" as the password (FormData
 * stringifies it) and TrueVault's React sample sends "null" for invited users: both mean "no
 * password", never a guessable one.
 */
function passwordOf(value: string | undefined): string | undefined {
  return value === undefined || value === '' || value === 'undefined' || value === 'null'
    ? undefined
    : value
}

function listStatuses(value: string | undefined): string[] {
  if (!value?.trim()) return ['ACTIVATED']
  return value.split(',').map((raw) => {
    const s = raw.trim().toUpperCase()
    // The SDK's doc comment says ACTIVE; the real status is ACTIVATED.
    const status = s === 'ACTIVE' ? 'ACTIVATED' : s
    if (!(USER_STATUSES as readonly string[]).includes(status)) {
      throw errors.invalidField('status', 'must list ACTIVATED, PENDING, LOCKED or DEACTIVATED')
    }
    return status
  })
}

export async function userRoutes(
  app: FastifyInstance,
  users: UsersService,
  groups: GroupsService,
): Promise<void> {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()

  /** Users with group ids loaded when `full`. */
  async function views(
    accountId: string,
    rows: UserRow[],
    full: boolean,
    attributes: ViewOptions['attributes'],
  ) {
    const groupIds = full
      ? await groups.groupIdsOfUsers(
          accountId,
          rows.map((u) => u.id),
        )
      : undefined
    const json = full ? await Promise.all(rows.map((u) => users.attributesJson(u))) : []
    return rows.map((u, i) =>
      userView(u, {
        full,
        attributes,
        groupIds: groupIds?.get(u.id) ?? [],
        ...(full ? { attributesJson: json[i] as string } : {}),
      }),
    )
  }

  r.post(
    '/v1/users',
    {
      schema: {
        tags,
        summary: 'Create a user',
        querystring: FullQuery,
        body: CreateUserForm,
        response: UserV1Response,
      },
      config: {
        form: true,
        // Public registration through a SAT is allowed, but the new user's API key and access
        // token are vended only to a user's credential (see the handler).
        vendsCredential: () => ANY_CREDENTIAL,
        operation: 'user.create',
        access: {
          // Joining a group at creation needs C on its memberships or U on the group (spec).
          policy: (req) => ({
            allOf: [
              { activity: 'C', resource: resource('User', '') },
              ...parseIdList((req.body as { group_ids?: string }).group_ids, 'group_ids').map(
                (g): Requirement => ({
                  anyOf: [
                    { activity: 'C', resource: resource('Group', g, 'GroupMembership', '.*') },
                    { activity: 'U', resource: resource('Group', g) },
                  ],
                }),
              ),
            ],
          }),
        },
      },
    },
    async (req) => {
      const b = req.body
      const created = await users.create(req.actor.principal.accountId, {
        username: b.username,
        password: passwordOf(b.password),
        attributes: attributesOf(b.attributes),
        groupIds: parseIdList(b.group_ids, 'group_ids'),
        status: b.status || undefined,
        // A SAT registers users but never holds their credentials: they log in themselves.
        credentials:
          req.actor.principal.kind === 'sat'
            ? undefined
            : {
                tokenExpiresAt: users.accessTokenExpiry(
                  b.access_token_not_valid_after,
                  'access_token_not_valid_after',
                ),
              },
      })
      const [user] = await views(
        req.actor.principal.accountId,
        [created.row],
        isTrue(req.query.full),
        'base64',
      )
      return { user: { ...user, api_key: created.apiKey, access_token: created.accessToken } }
    },
  )

  r.get(
    '/v2/users/:user_ids',
    {
      schema: {
        tags,
        summary: 'Read users by id (comma-separated, at most 100)',
        params: UserIdsParams,
        querystring: FullQuery,
        response: UsersV2Response,
      },
      config: {
        // Presence is checked per id in the service: a missing or unreadable id is a 404.
        operation: 'user.read_v2',
        access: { policy: () => ({ readAny: resource('User', '') }), deniedStatus: 404 },
      },
    },
    async (req) => {
      const ids = parseIdList(req.params.user_ids, 'user_ids', MAX_IDS)
      if (ids.length === 0) throw errors.invalidField('user_ids', 'must name at least one user')
      const rows = await users.getMany(req.actor, ids)
      const full = isTrue(req.query.full)
      reportReturned(req, { items: rows.length, full })
      return { users: await views(req.actor.principal.accountId, rows, full, 'json') }
    },
  )

  r.get(
    '/v1/users/:user_id',
    {
      schema: {
        tags,
        summary: 'Read a user (deprecated: use v2)',
        deprecated: true,
        params: UserParams,
        querystring: FullQuery,
        response: UserV1Response,
      },
      config: { operation: 'user.read', access: { policy: onUser('R') } },
    },
    async (req) => {
      const row = await users.get(req.actor.principal.accountId, param(req))
      const [user] = await views(
        req.actor.principal.accountId,
        [row],
        isTrue(req.query.full),
        'base64',
      )
      return { user }
    },
  )

  r.get(
    '/v1/users',
    {
      schema: {
        tags,
        summary: 'List the users the caller may read',
        querystring: ListUsersQuery,
        response: UsersV1Response,
      },
      config: {
        operation: 'user.list',
        access: { policy: () => ({ readAny: resource('User', '') }) },
      },
    },
    async (req) => {
      const rows = await users.list(req.actor, listStatuses(req.query.status))
      const full = isTrue(req.query.full)
      reportReturned(req, { items: rows.length, full })
      return { users: await views(req.actor.principal.accountId, rows, full, 'base64') }
    },
  )

  r.put(
    '/v1/users/:user_id',
    {
      schema: {
        tags,
        summary: 'Update a user (given fields are overwritten)',
        params: UserParams,
        querystring: FullQuery,
        body: UpdateUserForm,
        response: UserV1Response,
      },
      config: {
        form: true,
        vendsCredential: updateKinds,
        operation: 'user.update',
        access: { policy: onUserUpdate },
      },
      preValidation: checkPasswordEarly(users),
    },
    async (req) => {
      const b = req.body
      const expiresAt = b.access_token
        ? users.accessTokenExpiry(b.access_token_not_valid_after, 'access_token_not_valid_after')
        : undefined
      const attributes = attributesOf(b.attributes)
      const { row, accessToken } = await users.update(req.actor, param(req), {
        ...(b.username !== undefined ? { username: b.username } : {}),
        ...(b.password !== undefined ? { password: b.password } : {}),
        ...(attributes !== undefined ? { attributes } : {}),
        ...(b.status !== undefined && b.status !== '' ? { status: b.status } : {}),
        ...(b.access_token ? { newAccessToken: { expiresAt } } : {}),
      })
      // `full` never widens access: attributes and groups only for a caller who may read the
      // user (a password-only grant, such as a reset token's, may not).
      const full = isTrue(req.query.full) && req.actor.grants.can('R', userRes(param(req)))
      const [user] = await views(req.actor.principal.accountId, [row], full, 'base64')
      return { user: accessToken ? { ...user, access_token: accessToken } : user }
    },
  )

  r.put(
    '/v1/users/:user_id/password',
    {
      schema: {
        tags,
        summary: "Set a user's password (JSON)",
        params: UserParams,
        body: PasswordBody,
        response: UserV1Response,
      },
      // A reset token (a SAT) may use it too: `onPassword` holds a SAT to the password grant.
      config: {
        vendsCredential: () => ANY_CREDENTIAL,
        operation: 'user.update_password',
        access: { policy: onPassword },
      },
      preValidation: checkPasswordEarly(users),
    },
    async (req) => {
      const row = await users.setPassword(req.actor, param(req), req.body.password)
      return { user: userView(row) }
    },
  )

  r.delete(
    '/v1/users/:user_id',
    {
      schema: { tags, summary: 'Deactivate a user', params: UserParams, response: UserV1Response },
      config: { operation: 'user.delete', access: { policy: onUser('D') } },
    },
    async (req) => ({
      user: userView(await users.deactivate(req.actor.principal.accountId, param(req))),
    }),
  )

  r.post(
    '/v1/users/:user_id/access_token',
    {
      schema: {
        tags,
        summary: 'Vend an access token for a user (API key only)',
        params: UserParams,
        body: AccessTokenForm,
        response: UserV1Response,
      },
      config: {
        form: true,
        vendsCredential: true,
        operation: 'user.create_access_token',
        access: { policy: onUser('U'), credentials: API_KEY_ONLY },
      },
    },
    async (req) => {
      const expiresAt = users.accessTokenExpiry(req.body.not_valid_after, 'not_valid_after')
      const { row, accessToken } = await users.vendAccessToken(
        req.actor.principal.accountId,
        param(req),
        expiresAt,
      )
      return { user: { ...userView(row), access_token: accessToken } }
    },
  )

  r.post(
    '/v1/users/:user_id/api_key',
    {
      schema: {
        tags,
        summary: "Replace a user's API key (API key only)",
        params: UserParams,
        response: ApiKeyResponse,
      },
      config: {
        vendsCredential: true,
        operation: 'user.create_api_key',
        access: { policy: onUser('U'), credentials: API_KEY_ONLY },
      },
    },
    async (req) => ({
      api_key: await users.rotateApiKey(req.actor.principal.accountId, param(req)),
    }),
  )

  r.post(
    '/v1/users/:user_id/access_key',
    {
      schema: {
        tags,
        summary: 'Replace the access/secret key pair (deprecated)',
        deprecated: true,
        params: UserParams,
        response: AccessKeyResponse,
      },
      // The spec lists API key or access token; never a SAT. (The pair opens no endpoint.)
      config: {
        vendsCredential: () => USER_CREDENTIALS,
        operation: 'user.create_access_key',
        access: { policy: onUser('U'), credentials: USER_CREDENTIALS },
      },
    },
    async (req) => {
      const id = param(req)
      const pair = await users.replaceAccessKeyPair(req.actor.principal.accountId, id)
      return { user: { id, user_id: id, access_key: pair.accessKey, secret_key: pair.secretKey } }
    },
  )
}
