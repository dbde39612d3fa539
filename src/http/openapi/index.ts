import type { DocumentSpec, DocumentTransform, RouteTransform } from './document.js'
import { documentedInput } from './documented-input.js'
import { formMediaTypes } from './form-media-types.js'
import { catalogOperation, operationIds } from './operation-ids.js'
import { oneTemplatePerPath } from './path-params.js'
import { CREDENTIAL_SCHEMES, securityFromAccess } from './security.js'
import { STOREFRONT_SCHEMES, storefrontSecurity } from './storefront-security.js'
import { declaredTags, fallbackTag } from './tags.js'

export { serveDocument, swaggerOptions } from './document.js'

/** What each feature module's tag groups (the document's `tags` list). */
const TAG_DESCRIPTIONS: Record<string, string> = {
  auth: 'Log in and out; the current user',
  users: 'Users and their credentials',
  groups: 'Groups, their policies and members',
  vaults: 'Vaults: the containers of documents, BLOBs and schemas',
  documents: 'Encrypted JSON documents in a vault',
  blobs: 'Encrypted files (BLOBs) in a vault',
  schemas: 'Document schemas and the account user schema (the searchable fields)',
  search: 'Search documents and users through their schemas',
  'scoped access tokens': 'Scoped access tokens (SATs): credentials with their own policy',
  audit: "The account's audit trail: who did what to which records, and whether it was allowed",
  policy: "The policy simulator: what a user's groups allow on a resource, and who may act on it",
  messaging: 'Email and text users through SendGrid and Twilio',
  'password reset flows': 'Password reset flows and their emails',
  mfa: 'TOTP multi-factor authentication',
  'account settings':
    "The account's security settings: token life cap, required MFA, password rules, sessions",
  consent: 'Consumer consent records for storefronts and email-identified consumers',
  backups: "The deployment's scheduled backups: settings, next run, last outcome",
}

/*
 * The steps that shape each listener's document, in order. A new concern gets its own file in
 * this folder and one line in the lists below; route steps see each route's live options, and
 * document steps the generated document.
 */

/** The main API's route steps, in order. */
export const MAIN_ROUTE_TRANSFORMS: readonly RouteTransform[] = [
  catalogOperation,
  securityFromAccess,
  documentedInput,
  formMediaTypes,
]

/** The main API's document steps, in order. */
export const MAIN_DOCUMENT_TRANSFORMS: readonly DocumentTransform[] = [
  operationIds,
  oneTemplatePerPath,
  declaredTags(TAG_DESCRIPTIONS),
]

export const CONSENT_ROUTE_TRANSFORMS: readonly RouteTransform[] = [
  catalogOperation,
  storefrontSecurity,
  fallbackTag('consent'),
]

export const CONSENT_DOCUMENT_TRANSFORMS: readonly DocumentTransform[] = [
  operationIds,
  oneTemplatePerPath,
  declaredTags(TAG_DESCRIPTIONS),
]

export const MAIN_DOCUMENT: DocumentSpec = {
  title: 'Coffer API',
  description:
    'TrueVault-compatible secure data store. Every JSON success body carries `result` and ' +
    '`transaction_id`; every error is an `ErrorEnvelope`.',
  securitySchemes: CREDENTIAL_SCHEMES,
  routeTransforms: MAIN_ROUTE_TRANSFORMS,
  documentTransforms: MAIN_DOCUMENT_TRANSFORMS,
}

export const CONSENT_DOCUMENT: DocumentSpec = {
  title: 'Coffer consent API',
  description:
    "Consumers' cookie and privacy choices, on the consent listener (not the main API): no " +
    'Authorization header; errors are `{"error": message}`.',
  securitySchemes: STOREFRONT_SCHEMES,
  routeTransforms: CONSENT_ROUTE_TRANSFORMS,
  documentTransforms: CONSENT_DOCUMENT_TRANSFORMS,
}
