import type { Actor } from '../../access/principal.js'
import { newTouchedId, outsideAudit } from '../../audit/context.js'
import type { Keyring } from '../../crypto/keyring.js'
import type { SealedColumn } from '../../crypto/sealed-column.js'
import type { Clock } from '../../lib/clock.js'
import { errors } from '../../lib/errors.js'
import { resource } from '../../policy/index.js'
import type { Executor } from '../../store/executor.js'
import { checkEmail } from '../messaging/address-checks.js'
import {
  checkSubstitutionKey,
  HEADER_SAFE,
  resolveSubstitutions,
} from '../messaging/message-input.js'
import type { SendGridTemplateMessage } from '../messaging/sendgrid.client.js'
import { checkTemplateKeys } from '../messaging/sendgrid-template-data.js'
import { parseValueSpec, resolveValueSpec, type ValueSpec } from '../messaging/value-spec.js'
import type { SatsService } from '../sats/sats.service.js'
import type { UsersService } from '../users/users.service.js'
import * as repo from './flows.repo.js'
import { ResetCooldown } from './reset-cooldown.js'

/**
 * Substitutions every reset email carries besides the flow's own (README, Password reset;
 * decisions.md 54).
 */
export const RESET_TOKEN_TAG = '{{reset_token}}'
export const USER_ID_TAG = '{{user_id}}'
export const EXPIRES_AT_TAG = '{{reset_token_expires_at}}'
const RESERVED_TAGS = [RESET_TOKEN_TAG, USER_ID_TAG, EXPIRES_AT_TAG]
const MAX_NAME = 255
const MAX_TEMPLATE_ID = 255
const MAX_API_KEY = 1024
const MAX_USERNAME = 255
/** A user gets at most one reset email a minute from one flow. */
export const RESEND_COOLDOWN_MS = 60_000
/** Reset emails being sent at once; beyond, requests are answered as usual and dropped. */
const MAX_PENDING_SENDS = 100

export interface Flow {
  id: string
  name: string
  sg_template_id: string
  user_email_value_spec: ValueSpec
  from_email_value_spec: ValueSpec
  substitutions: Record<string, ValueSpec>
  /** The SAT whose bounds the reset tokens inherit, once linked (null before). */
  scoped_access_token_id: string | null
}

export interface FlowInput {
  name?: unknown
  sg_api_key?: unknown
  sg_template_id?: unknown
  user_email_value_spec?: unknown
  from_email_value_spec?: unknown
  substitutions?: unknown
}

/** What sends the email: SendGrid's v3 Mail Send (modules/messaging/sendgrid.client.ts). */
export interface TemplateMailer {
  sendTemplate(message: SendGridTemplateMessage): Promise<{ providerMessageId: string }>
}

export interface FlowsOptions {
  /** Life of the credential a reset email carries. */
  tokenTtlMs: number
  /** Told (without secrets) when a reset email could not be sent: the caller is never told. */
  onSendError?: (error: unknown, context: { flowId: string }) => void
}

/**
 * Password reset flows: an administrator stores the SendGrid key, template and value specifiers
 * once; then anyone allowed can ask for a reset email by username. The email carries a SAT that
 * can do exactly one thing, once, for a short time: update that user's password.
 */
export class PasswordResetFlowsService {
  readonly #pending = new Set<Promise<void>>()
  readonly #cooldown: ResetCooldown

  constructor(
    private readonly db: Executor,
    private readonly clock: Clock,
    private readonly keyring: Keyring,
    private readonly sats: SatsService,
    private readonly users: UsersService,
    private readonly mailer: TemplateMailer,
    private readonly options: FlowsOptions,
  ) {
    this.#cooldown = new ResetCooldown(db, clock, RESEND_COOLDOWN_MS)
  }

  /** Flows' sealed SendGrid API keys, as `coffer keys reencrypt` walks them. */
  sealedColumn(): SealedColumn {
    return {
      name: 'password_reset_flow_keys',
      listNotUnder: async (accountId, keyId, after, limit) =>
        (await repo.listKeysNotUnder(this.db, accountId, keyId, after, limit)).map((row) => ({
          id: row.id,
          scope: '',
          ciphertext: row.sg_api_key,
          context: keyContext(row.id),
        })),
      replace: (accountId, record, sealed) =>
        repo.replaceSealedKey(this.db, accountId, record.id, record.ciphertext, sealed),
    }
  }

  async create(actor: Actor, input: FlowInput): Promise<Flow> {
    const principal = actor.principal
    const now = this.clock.now()
    const id = newTouchedId('password_reset_flow', now.getTime())
    const apiKey = text(input.sg_api_key, 'sg_api_key', MAX_API_KEY)
    if (!HEADER_SAFE.test(apiKey))
      throw errors.invalidField('sg_api_key', 'must be printable ASCII without spaces')
    const templateId = text(input.sg_template_id, 'sg_template_id', MAX_TEMPLATE_ID)
    const flowSubstitutions = substitutions(input.substitutions)
    // A dynamic template gets them as variables: none may clash, nor with the reserved tags.
    checkTemplateKeys(templateId, Object.keys(flowSubstitutions), RESERVED_TAGS)
    const row: repo.FlowRow = {
      account_id: principal.accountId,
      id,
      creator_id: principal.kind === 'sat' ? principal.creatorId : principal.userId,
      name: text(input.name, 'name', MAX_NAME),
      sg_template_id: templateId,
      user_email_value_spec: JSON.stringify(
        parseValueSpec(input.user_email_value_spec, 'user_email_value_spec', {
          allowLiteral: false,
        }),
      ),
      from_email_value_spec: JSON.stringify(fromSpec(input.from_email_value_spec)),
      substitutions: JSON.stringify(flowSubstitutions),
      // Bound to the flow's id: a key moved to another flow's row does not decrypt.
      sg_api_key: await this.keyring.encrypt(principal.accountId, apiKey, keyContext(id)),
      // A flow made through a SAT stays within that SAT: its reset tokens are minted under it.
      linked_sat_id: principal.kind === 'sat' ? principal.satId : null,
      created_at: now.toISOString(),
    }
    await repo.insert(this.db, row)
    return view(row)
  }

  /** The flows the caller may read (a list never shows what a direct read would refuse). */
  async list(actor: Actor): Promise<Flow[]> {
    const rows = await repo.list(this.db, actor.principal.accountId)
    return rows.filter((r) => actor.grants.can('R', flowResource(r.id))).map(view)
  }

  async get(accountId: string, id: string): Promise<Flow> {
    return view(await this.#find(accountId, id))
  }

  async delete(accountId: string, id: string): Promise<Flow> {
    const row = await this.#find(accountId, id)
    if (!(await repo.remove(this.db, accountId, id))) throw errors.notFound('Password reset flow')
    return view(row)
  }

  /**
   * Links a SAT the caller manages: the reset tokens are then minted under it, so they are also
   * bounded by its policy and expiry, and stop being issued once it is deleted or expired.
   */
  async linkSat(actor: Actor, flowId: string, satId: unknown): Promise<Flow> {
    if (typeof satId !== 'string' || satId === '')
      throw errors.invalidField('scoped_access_token_id', 'is required')
    const row = await this.#find(actor.principal.accountId, flowId)
    const id = satId.toLowerCase().replace(/^sat-/, '')
    const sat = await this.sats.findManaged(actor.principal, id)
    if (!sat || !(await this.sats.isLive(sat.account_id, sat.id)))
      throw errors.notFound('Scoped access token')
    await repo.linkSat(this.db, row.account_id, row.id, sat.id)
    return view({ ...row, linked_sat_id: sat.id })
  }

  /**
   * Answers the same whether or not the user exists (body, status and timing): the flow and the
   * input are checked now; finding the user, minting the token and calling SendGrid happen after
   * the answer, so no step that depends on the user is inside the request's time.
   */
  async sendResetEmail(actor: Actor, flowId: string, username: unknown): Promise<void> {
    if (typeof username !== 'string' || username === '')
      throw errors.invalidField('username', 'is required')
    if (username.length > MAX_USERNAME)
      throw errors.invalidField('username', `must be at most ${MAX_USERNAME} characters`)
    const flow = await this.#find(actor.principal.accountId, flowId)
    if (this.#pending.size >= MAX_PENDING_SENDS) {
      // Same answer as ever; the operator is told that emails are being dropped.
      this.options.onSendError?.(new Error('too many reset emails in flight; one was dropped'), {
        flowId,
      })
      return
    }
    // Outside the request's audit context: the request's event records the send (stored as its
    // answer goes out); the job's writes (the resend claim, the reset token) run after it and
    // must not carry that event a second time.
    const job = outsideAudit(() => this.#send(actor, flow, username))
      .catch((error) => this.options.onSendError?.(error, { flowId }))
      .finally(() => this.#pending.delete(job))
    this.#pending.add(job)
  }

  /** Resolves once every reset email asked for so far is sent or has failed (shutdown, tests). */
  async idle(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending])
  }

  async #send(actor: Actor, flow: repo.FlowRow, username: string): Promise<void> {
    const accountId = flow.account_id
    // No control character is in any username; PostgreSQL text cannot even hold NUL.
    const user = /\p{Cc}/u.test(username)
      ? undefined
      : await this.users.findForLogin(accountId, username)
    // Unknown, or not one the caller may send this flow's email to: nothing happens, silently.
    if (!user || !actor.grants.can('C', resource('PasswordResetFlow', flow.id, 'Email', user.id)))
      return
    const bound = await this.#bound(flow)
    if (!bound) throw new Error('the flow’s linked scoped access token is deleted or expired')
    const target = {
      username: user.username,
      attributes: JSON.parse(await this.users.attributesJson(user)),
    }
    const to = checkEmail(
      resolveValueSpec(JSON.parse(flow.user_email_value_spec), target, 'user_email_value_spec'),
      'user_email_value_spec',
    )
    const from = checkEmail(
      resolveValueSpec(JSON.parse(flow.from_email_value_spec), target, 'from_email_value_spec'),
      'from_email_value_spec',
    )
    const apiKey = await this.keyring.decryptText(accountId, flow.sg_api_key, keyContext(flow.id))
    const expiresAt = new Date(this.clock.now().getTime() + this.options.tokenTtlMs)
    // One live link per user and flow: a new one replaces the old, at most one a minute (the
    // forgot-password page is public: nobody may flood a user's inbox or our database through it).
    // The claim is atomic on every node; the replacing below then runs once per window.
    if (!(await this.#cooldown.claim(accountId, flow.id, user.id))) return
    const token = await this.#issueOrRelease(accountId, flow.id, user.id, () =>
      this.sats.issueReplacing(
        {
          accountId,
          creatorId: bound.creatorId,
          parentId: bound.parentId,
          name: `password reset: ${flow.id}`,
          policy: [{ Resources: [`User::${user.id}::Password`], Activities: 'U' }],
          expiresAt,
          allowedUses: 1,
        },
        RESEND_COOLDOWN_MS,
      ),
    )
    if (!token) return
    const substitutions = resolveSubstitutions(
      Object.entries(JSON.parse(flow.substitutions) as Record<string, ValueSpec>),
      target,
    )
    substitutions[RESET_TOKEN_TAG] = Buffer.from(`${token.username}:${token.password}`).toString(
      'base64',
    )
    substitutions[USER_ID_TAG] = user.id
    substitutions[EXPIRES_AT_TAG] = expiresAt.toISOString()
    try {
      await this.mailer.sendTemplate({
        apiKey,
        templateId: flow.sg_template_id,
        from,
        to,
        substitutions,
      })
    } catch (error) {
      // The token never reached anyone: it must not stay usable, and a retry may send at once.
      await this.sats.revoke(accountId, token.id)
      await this.#cooldown.release(accountId, flow.id, user.id)
      throw error
    }
  }

  async #issueOrRelease<T>(
    accountId: string,
    flowId: string,
    userId: string,
    issue: () => Promise<T>,
  ): Promise<T> {
    try {
      return await issue()
    } catch (error) {
      await this.#cooldown.release(accountId, flowId, userId)
      throw error
    }
  }

  /** Whose permissions bound the reset token: the linked SAT's (under it), else the creator's. */
  async #bound(flow: repo.FlowRow): Promise<{ creatorId: string; parentId: string | null } | null> {
    if (flow.linked_sat_id === null) return { creatorId: flow.creator_id, parentId: null }
    const sat = await this.sats.findById(flow.account_id, flow.linked_sat_id)
    if (!sat || !(await this.sats.isLive(flow.account_id, sat.id))) return null
    return { creatorId: sat.creator_id, parentId: sat.id }
  }

  async #find(accountId: string, id: string): Promise<repo.FlowRow> {
    const row = await repo.find(this.db, accountId, id)
    if (!row) throw errors.notFound('Password reset flow')
    return row
  }
}

export const flowResource = (id: string) => resource('PasswordResetFlow', id)
const keyContext = (flowId: string) => `password-reset-flow-sg-key\n${flowId}`

function view(row: repo.FlowRow): Flow {
  return {
    id: row.id,
    name: row.name,
    sg_template_id: row.sg_template_id,
    user_email_value_spec: JSON.parse(row.user_email_value_spec),
    from_email_value_spec: JSON.parse(row.from_email_value_spec),
    substitutions: JSON.parse(row.substitutions),
    scoped_access_token_id: row.linked_sat_id,
  }
}

function text(value: unknown, field: string, max: number): string {
  if (typeof value !== 'string' || value.trim() === '')
    throw errors.invalidField(field, 'is required')
  if (value.length > max) throw errors.invalidField(field, `must be at most ${max} characters`)
  if (/\p{Cc}/u.test(value)) throw errors.invalidField(field, 'must not contain control characters')
  return value
}

function fromSpec(value: unknown): ValueSpec {
  const spec = parseValueSpec(value, 'from_email_value_spec')
  if ('literal_value' in spec) checkEmail(spec.literal_value, 'from_email_value_spec.literal_value')
  return spec
}

/** Absent or null: none. Keys as written in the template; the reserved tags are ours. */
function substitutions(value: unknown): Record<string, ValueSpec> {
  if (value === undefined || value === null) return {}
  if (typeof value !== 'object' || Array.isArray(value))
    throw errors.invalidField(
      'substitutions',
      'must be an object of template tag → value specifier',
    )
  const out: Record<string, ValueSpec> = {}
  for (const [key, spec] of Object.entries(value as Record<string, unknown>)) {
    checkSubstitutionKey(key)
    if (RESERVED_TAGS.includes(key))
      throw errors.invalidField(
        `substitutions.${key}`,
        'is filled in by Coffer for every reset email',
      )
    out[key] = parseValueSpec(spec, `substitutions.${key}`)
  }
  return out
}
