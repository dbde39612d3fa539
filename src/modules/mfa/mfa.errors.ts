import { AppError, ErrorType } from '../../lib/errors.js'

/**
 * MFA errors. The spec names `USER.MFA_FINALIZE_ENROLLMENT_FAILURE` and
 * `USER.MFA_FINALIZE_UNENROLLMENT_FAILURE`; TrueVault's MFA sample names `USER.MFA_CODE_REQUIRED`.
 * The one state the spec leaves unnamed (already enrolled) takes the same `USER.MFA_` form.
 */
export const mfaErrors = {
  codeRequired: () =>
    new AppError(
      401,
      'USER.MFA_CODE_REQUIRED',
      'MFA_CODE_REQUIRED',
      'This user has MFA enrolled: log in with mfa_code',
    ),
  /**
   * The account requires MFA (its `require_mfa` setting) and this user has none: told only after
   * the right password, as `codeRequired` is. 403: the caller proved who they are, and the
   * account's rule still refuses them until an administrator (or their own API key) enrolls
   * them (POST /v1/users/{id}/mfa/start_enrollment, then finalize_enrollment).
   */
  enrollmentRequired: () =>
    new AppError(
      403,
      'USER.MFA_ENROLLMENT_REQUIRED',
      'MFA_ENROLLMENT_REQUIRED',
      'This account requires MFA and this user has none enrolled: ask an administrator to enroll MFA for the user, then log in with mfa_code',
    ),
  alreadyEnrolled: () =>
    new AppError(
      400,
      'USER.MFA_ALREADY_ENROLLED',
      'MFA_ALREADY_ENROLLED',
      'MFA is already enrolled for this user; unenroll first',
    ),
  finalizeFailed: (message: string) =>
    new AppError(
      400,
      'USER.MFA_FINALIZE_ENROLLMENT_FAILURE',
      'MFA_FINALIZE_ENROLLMENT_FAILURE',
      message,
    ),
  unenrollFailed: (message: string) =>
    new AppError(
      400,
      'USER.MFA_FINALIZE_UNENROLLMENT_FAILURE',
      'MFA_FINALIZE_UNENROLLMENT_FAILURE',
      message,
    ),
  userDeactivated: () =>
    new AppError(400, ErrorType.invalidRequest, 'USER_DEACTIVATED', 'The user is DEACTIVATED'),
}
