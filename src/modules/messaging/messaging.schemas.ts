import { Type } from 'typebox'
import { responses, success, Uuid } from '../../http/schemas.js'

/**
 * Shapes only: that exactly one source is given, and the rules of each, are checked by
 * value-spec.ts with messages that name the field.
 */
export const ValueSpecSchema = Type.Object(
  {
    literal_value: Type.Optional(Type.String({ description: 'a fixed value' })),
    user_attribute: Type.Optional(
      Type.String({
        description:
          "a field of the user's attributes (a top-level key, or a dotted path); missing gives ''",
      }),
    ),
    system_field: Type.Optional(Type.String({ description: 'only `username`' })),
  },
  { description: 'value specifier: exactly one of literal_value, user_attribute, system_field' },
)

/** Provider credentials (their characters are checked by the service, with a clear message). */
const Secret = (description: string) => Type.String({ minLength: 1, maxLength: 512, description })

export const MessageParams = Type.Object({ user_id: Uuid })

export const EmailBody = Type.Object({
  provider: Type.String({ description: 'SENDGRID' }),
  auth: Type.Object({ sendgrid_api_key: Secret('used for this request only, never stored') }),
  template_id: Type.String({ minLength: 1, maxLength: 255, description: 'SendGrid template id' }),
  from_email_address: ValueSpecSchema,
  to_email_address: ValueSpecSchema,
  substitutions: Type.Optional(
    Type.Union([Type.Record(Type.String(), ValueSpecSchema, { maxProperties: 100 }), Type.Null()], {
      description:
        'template tag exactly as written in the template (e.g. `{{name}}`) → value specifier; ' +
        'no `<%…%>` delimiters; absent or null means none',
    }),
  ),
})

export const SmsBody = Type.Object({
  provider: Type.String({ description: 'TWILIO' }),
  auth: Type.Object({
    account_sid: Type.String({ minLength: 1, maxLength: 64, description: 'Twilio account SID' }),
    username: Secret('API key SID, or the account SID with the auth token'),
    password: Secret('API key secret, or the account auth token; never stored'),
  }),
  from_number: ValueSpecSchema,
  to_number: ValueSpecSchema,
  message_body: Type.String({
    maxLength: 1600,
    description: 'may be empty only when media_urls are given',
  }),
  media_urls: Type.Optional(
    Type.Union([Type.Array(ValueSpecSchema, { maxItems: 10 }), Type.Null()], {
      description: 'value specifiers resolving to public http(s) image URLs; at most 10',
    }),
  ),
})

export const MessageResponse = responses(
  success({ provider_message_id: Type.String({ description: "the provider's message id" }) }),
)
