import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { API_KEY_ONLY, USER_CREDENTIALS } from '../../http/access.js'
import { errors } from '../../lib/errors.js'
import { type Requirement, resource } from '../../policy/index.js'
import { AccountParams, SettingsPatchBody, SettingsResponse } from './settings.schemas.js'
import type { SettingsService } from './settings.service.js'

const tags = ['account settings']
const path = '/v1/accounts/:account_id/settings'

const accountParam = (req: FastifyRequest) =>
  (req.params as { account_id: string }).account_id.toLowerCase()

/** `Account::<account_id>::Settings`: R to read, U to change. */
const onSettings =
  (activity: 'R' | 'U') =>
  (req: FastifyRequest): Requirement => ({
    activity,
    resource: resource('Account', accountParam(req), 'Settings'),
  })

/**
 * The caller's own account, or 404: another account's settings are not there for this caller
 * (as for the other account-scoped paths), whatever its policy says.
 */
function ownAccount(req: FastifyRequest): string {
  const id = accountParam(req)
  if (id !== req.actor.principal.accountId) throw errors.notFound('Account')
  return id
}

export async function settingsRoutes(app: FastifyInstance, settings: SettingsService) {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()

  r.get(
    path,
    {
      schema: {
        tags,
        summary: "Read the account's security settings",
        params: AccountParams,
        response: SettingsResponse,
      },
      // Reading is a user's act (an API key or a session); a SAT is a narrower credential
      // handed to others, with no business reading how the account is secured.
      config: {
        operation: 'account_settings.read',
        access: { policy: onSettings('R'), credentials: USER_CREDENTIALS },
      },
    },
    async (req) => ({ settings: await settings.get(ownAccount(req)) }),
  )

  r.put(
    path,
    {
      schema: {
        tags,
        summary: "Change some of the account's security settings (API key only)",
        params: AccountParams,
        response: SettingsResponse,
      },
      // An API key only: a stolen session must not be able to lift the MFA requirement, raise
      // the token cap or stop password changes from ending sessions.
      config: {
        openapi: { body: { 'application/json': { schema: SettingsPatchBody } } },
        operation: 'account_settings.update',
        access: { policy: onSettings('U'), credentials: API_KEY_ONLY },
      },
    },
    async (req) => {
      ownAccount(req)
      return { settings: await settings.update(req.actor.principal, req.body) }
    },
  )
}
