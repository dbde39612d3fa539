/**
 * The consent interface's own errors: a status and the spec's exact message text (spec, Consent
 * interface errors). The consent app renders them as `{"error": "<message>"}`, not in the main
 * API's envelope.
 */
export class ConsentError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
  ) {
    super(message)
    this.name = 'ConsentError'
  }
}

const bad = (message: string) => new ConsentError(400, message)

/** Every message of the spec's table, plus the few Coffer adds (decisions.md, Consent). */
export const consentErrors = {
  providerRequired: () => bad('Provider parameter is required (storefront or email)'),
  providerInvalid: () => bad("Provider must be either 'storefront' or 'email'"),
  tooLong: (name: string, max: number) => bad(`${name} must be at most ${max} characters`),
  shopRequiredStorefront: () => bad('Shop domain is required for storefront provider'),
  shopRequiredEmail: () => bad('Shop parameter is required for email provider'),
  privacyCenterRequired: () => bad('Privacy center ID is required'),
  emailRequired: () => bad('Customer email is required for email provider'),
  emailInvalid: () => bad('Customer email must be a valid email address'),
  clientIdInvalid: () => bad('client_id must be a valid UUID v4'),
  repeated: (name: string) => bad(`${name} must not be repeated`),
  customerIdInvalid: () => bad('logged_in_customer_id must be a numeric Shopify customer id'),
  notLoggedIn: () => new ConsentError(401, 'Customer must be logged in to access this endpoint'),
  signatureFailed: () => new ConsentError(401, 'Request signature verification failed'),
  storefrontSecretMissing: () => new ConsentError(500, 'storefront API secret is not configured'),
  invalidJson: () => bad('Request body must be valid JSON'),
  jwtRequired: () => bad('Property jwt must be a non-empty string'),
  noFields: () => bad('At least one consent field must be provided'),
  notBoolean: (field: string) => bad(`Field ${field} must be a boolean or null`),
  noRecord: () => new ConsentError(404, 'No valid consent record exists for the provided JWT'),
  tooManyRequests: () => new ConsentError(429, 'Too many requests; try again later'),
}
