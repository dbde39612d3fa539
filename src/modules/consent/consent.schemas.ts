import { Type } from 'typebox'

/** `type: ['boolean', 'null']` rather than anyOf: serialized without trying each branch. */
const NullableBoolean = (description: string) =>
  Type.Unsafe<boolean | null>({ type: ['boolean', 'null'], description })

/** The consent record as GET and POST answer it (spec, Consumer consent record). */
export const ConsentRecordSchema = Type.Object({
  jwt: Type.String({ description: 'opaque token identifying the consumer; send it with POST' }),
  consentAnalytics: NullableBoolean('analytics cookies'),
  consentAdvertising: NullableBoolean('advertising cookies'),
  consentPersonalization: NullableBoolean('personalization cookies'),
  consentTargetedAdvertising: NullableBoolean('targeted advertising (false is an opt-out)'),
  optedOut: NullableBoolean('global opt-out (true never expires)'),
  implicit: NullableBoolean('true while no explicit choice is in force'),
  isExisting: Type.Boolean({ description: 'false when the record was just created' }),
})

/** The consent interface's error body: the spec's message text, not the main API's envelope. */
export const ConsentErrorSchema = Type.Object({ error: Type.String() })

export const ConsentResponses = {
  200: ConsentRecordSchema,
  '4xx': ConsentErrorSchema,
  '5xx': ConsentErrorSchema,
}
