import { Type } from 'typebox'
import { responses, success } from '../../http/schemas.js'
import { UserParams } from '../users/users.schemas.js'

export const MfaParams = UserParams

/**
 * Fields are `Unknown` here and checked by the service: the app coerces types (for form routes),
 * and a code sent as a number must be refused rather than turned into text without its leading
 * zeros. They stay required, so a missing one is named by the validator.
 */
const text = (description: string) => Type.Unknown({ description })

export const StartEnrollmentBody = Type.Object({
  issuer: text('string shown by authenticator apps; colons become underscores in the URI'),
})

export const FinalizeEnrollmentBody = Type.Object({
  mfa_code_1: text('string: the code of one time step'),
  mfa_code_2: text('string: the code of the next time step'),
})

export const UnenrollBody = Type.Object({
  mfa_code: text('string: a current, unused code'),
  password: text("string: the user's own password (also when an administrator calls)"),
})

const Enrollment = Type.Object({
  qr_code_svg: Type.String({ description: 'SVG image of the key URI' }),
  secret: Type.String({
    description: 'base32 TOTP secret (SHA-1, 6 digits, 30 s); shown only now',
  }),
  uri: Type.String({ description: 'otpauth:// key URI' }),
})

/** The spec names the key `user_mfa`; the official SDK reads `mfa`: both are sent. */
export const StartEnrollmentResponse = responses(success({ user_mfa: Enrollment, mfa: Enrollment }))
export const EmptyResponse = responses(success({}))
