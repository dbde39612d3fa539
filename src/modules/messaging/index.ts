/**
 * What other features reuse (password reset flows send a templated email the same way): the
 * SendGrid client, value specifiers, the address checks and the spec's failure envelope.
 */
export {
  checkEmail,
  checkMediaUrl,
  checkRecipientNumber,
  checkSenderNumber,
} from './address-checks.js'
export { MessagingService } from './messaging.service.js'
export { EMAIL_FAILED, providerFailure, SMS_FAILED } from './provider-failure.js'
export { ProviderError, type ProviderFailure, type ProviderName } from './provider-http.js'
export {
  SendGridClient,
  type SendGridOptions,
  type SendGridTemplateMessage,
} from './sendgrid.client.js'
export { TwilioClient, type TwilioMessage, type TwilioOptions } from './twilio.client.js'
export {
  attributeAt,
  parseValueSpec,
  resolveValueSpec,
  type SystemField,
  type ValueSpec,
  type ValueSpecTarget,
} from './value-spec.js'
