import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { USER_CREDENTIALS } from '../../http/access.js'
import { type Requirement, resource } from '../../policy/index.js'
import {
  EmptyResponse,
  FinalizeEnrollmentBody,
  MfaParams,
  StartEnrollmentBody,
  StartEnrollmentResponse,
  UnenrollBody,
} from './mfa.schemas.js'
import type { MfaService } from './mfa.service.js'

const tags = ['mfa']

const userId = (req: FastifyRequest) => (req.params as { user_id: string }).user_id.toLowerCase()

/**
 * Managing a user's MFA is an update of that user: U on `User::<id>`, which
 * `User::$[id=self.id]` grants users over themselves (as TrueVault's MFA sample sets it up).
 */
const updateUser = (req: FastifyRequest): Requirement => ({
  activity: 'U',
  resource: resource('User', userId(req)),
})

export async function mfaRoutes(app: FastifyInstance, mfa: MfaService): Promise<void> {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()

  r.post(
    '/v1/users/:user_id/mfa/start_enrollment',
    {
      schema: {
        tags,
        summary: 'Start (or restart) TOTP enrollment: a new secret, key URI and QR code',
        params: MfaParams,
        body: StartEnrollmentBody,
        response: StartEnrollmentResponse,
      },
      config: {
        operation: 'mfa.start_enrollment',
        access: { policy: updateUser, credentials: USER_CREDENTIALS },
      },
    },
    async (req) => {
      const e = await mfa.startEnrollment(
        req.actor.principal.accountId,
        userId(req),
        req.body.issuer,
      )
      const shown = { qr_code_svg: e.qrCodeSvg, secret: e.secret, uri: e.uri }
      return { user_mfa: shown, mfa: shown }
    },
  )

  r.post(
    '/v1/users/:user_id/mfa/finalize_enrollment',
    {
      schema: {
        tags,
        summary: 'Finish enrollment with the codes of two consecutive time steps',
        params: MfaParams,
        body: FinalizeEnrollmentBody,
        response: EmptyResponse,
      },
      config: {
        operation: 'mfa.finalize_enrollment',
        access: { policy: updateUser, credentials: USER_CREDENTIALS },
      },
    },
    async (req) => {
      const b = req.body
      await mfa.finalizeEnrollment(
        req.actor.principal.accountId,
        userId(req),
        b.mfa_code_1,
        b.mfa_code_2,
      )
      return {}
    },
  )

  r.post(
    '/v1/users/:user_id/mfa/unenroll',
    {
      schema: {
        tags,
        summary: "Turn MFA off with a current code and the user's password",
        params: MfaParams,
        body: UnenrollBody,
        response: EmptyResponse,
      },
      config: {
        operation: 'mfa.unenroll',
        access: { policy: updateUser, credentials: USER_CREDENTIALS },
      },
    },
    async (req) => {
      const b = req.body
      await mfa.unenroll(req.actor.principal.accountId, userId(req), b.mfa_code, b.password)
      return {}
    },
  )
}
