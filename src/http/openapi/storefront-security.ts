import type { RouteTransform, SecurityScheme } from './document.js'

export const STOREFRONT_SIGNATURE = 'StorefrontSignature'

/**
 * The consent API takes no credential; what authenticates a storefront request is the App
 * Proxy's signature in the query (modules/consent/signature.ts), checked in production only.
 */
export const STOREFRONT_SCHEMES: Record<string, SecurityScheme> = {
  [STOREFRONT_SIGNATURE]: {
    type: 'apiKey',
    in: 'query',
    name: 'signature',
    description:
      'Storefront provider: the App Proxy adds `signature`, the lowercase hex HMAC-SHA256 (with ' +
      'the shared storefront secret) of every other query parameter as `key=value` (repeated ' +
      'keys merged as `key=v1,v2`), sorted by byte order and joined with no separator; ' +
      '`timestamp` must be within the allowed skew. Checked in production only. The email ' +
      'provider sends none. A POST is authorized by the `jwt` in its body.',
  },
}

/**
 * Every consent operation: signed by the App Proxy (storefront), or anonymous (`{}`: the email
 * provider on GET, the token alone on POST). The service checks a signature whenever the query
 * carries one, on both methods.
 */
export const storefrontSecurity: RouteTransform = ({ schema }) => {
  schema.security = [{ [STOREFRONT_SIGNATURE]: [] }, {}]
}
