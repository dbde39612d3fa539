import { type TProperties, Type } from 'typebox'

/** Shared schema pieces. Every route's responses are built from these so OpenAPI shows them. */
export const Uuid = Type.String({ format: 'uuid', description: 'UUID' })

export const ErrorEnvelope = Type.Object(
  {
    result: Type.Literal('error'),
    transaction_id: Type.String(),
    error: Type.Object({
      message: Type.String(),
      type: Type.String(),
      code: Type.String(),
      provider_error: Type.Optional(
        Type.Unknown({ description: "messaging: the provider's own error detail" }),
      ),
    }),
  },
  { $id: 'ErrorEnvelope', description: 'Every error response' },
)

/** `{result: "success", transaction_id, ...payload}`: the success envelope of a JSON response. */
export function success<P extends TProperties>(payload: P) {
  return Type.Object({
    result: Type.Literal('success'),
    transaction_id: Type.String(),
    ...payload,
  })
}

const errorRef = Type.Ref('ErrorEnvelope')

/** Responses of a route: its success schema plus the shared error envelope for 4xx/5xx. */
export function responses<S>(ok: S) {
  return { 200: ok, '4xx': errorRef, '5xx': errorRef }
}

/** `full`: the SDKs send `true`/`false`; community clients `1` and `01`. */
export const FullQuery = Type.Object({
  full: Type.Optional(Type.String({ description: 'true, 1 or 01 include attributes and groups' })),
})

/** Form fields arrive as strings (urlencoded, multipart or query string). */
export const FormString = (description?: string) =>
  Type.Optional(Type.String(description ? { description } : {}))

/**
 * A form field the route cannot do without: the schema marks it required, so the document says
 * so and a missing one is refused by validation, as `<field> is required` (http/errors.ts). An
 * empty value is still the service's to refuse, with the same message.
 */
export const RequiredFormString = (description?: string) =>
  Type.String(description ? { description } : {})
