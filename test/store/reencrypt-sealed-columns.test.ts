import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import { reencryptAccount, reencryptedColumns } from '../../src/modules/keys/reencrypt.js'
import { b64, buildTestApp, createUser, type TestApp } from '../helpers/app.js'
import { logicalDump } from '../helpers/db-dump.js'
import { TEMPLATE_ID } from '../helpers/messaging.js'
import { codeAtOffset, enrolledUser, login, mfaPath, startEnrollment } from '../helpers/mfa.js'
import { TEST_SENDGRID_KEY } from '../helpers/providers.js'

/**
 * `coffer keys reencrypt` is for a data key that may have been exposed: afterwards no value of
 * the account may still be sealed under it — not only documents, attributes and BLOBs, but the
 * MFA secrets (active and pending) and the password-reset flows' SendGrid API keys, which the
 * same data key seals (decisions 247). Each still opens under the new key.
 */

const PASSWORD = 'correct horse battery'
const clock = new ManualClock('2030-01-01T00:00:10.000Z')
let t: TestApp

beforeAll(async () => {
  t = await buildTestApp({ clock })
}, 60_000)

afterAll(async () => {
  await t?.close()
})

describe('keys reencrypt covers every sealed column', () => {
  it('leaves nothing under the old data key; MFA and reset flows still work', async () => {
    const auth = t.admin.api_key
    const accountId = t.admin.account_id
    const vault = await t.api.post('/v1/vaults', { auth, form: { name: 'v' } })
    const vaultId = vault.json().vault.id
    await t.api.post(`/v2/vaults/${vaultId}/documents`, { auth, json: { document: { a: 1 } } })
    const enrolled = await enrolledUser(t, clock, PASSWORD)
    const pendingUser = await createUser(t, { password: PASSWORD })
    const pending = await startEnrollment(t, pendingUser.id)
    const flow = await t.api.post('/v1/password_reset_flows', {
      auth,
      json: {
        name: 'patients',
        sg_api_key: TEST_SENDGRID_KEY,
        sg_template_id: TEMPLATE_ID,
        user_email_value_spec: { user_attribute: 'email' },
        from_email_value_spec: { literal_value: 'support@example.com' },
      },
    })
    expect(flow.statusCode, flow.body).toBe(200)
    await t.api.post('/v1/users', {
      auth,
      form: { username: 'with-attributes', password: PASSWORD, attributes: b64({ x: 1 }) },
    })

    const oldKey = await t.deps.keyring.currentKeyId(accountId)
    const underOld = `c1.${oldKey}.`
    const before = await logicalDump(t.deps.store)
    for (const table of ['user_mfa', 'password_reset_flows', 'documents']) {
      expect(before.split('\n').find((l) => l.startsWith(`${table}:`))).toContain(underOld)
    }

    const result = await reencryptAccount(t.deps.keyring, reencryptedColumns(t.deps), accountId, {
      pause: async () => {},
    })
    expect(result.data_key_id).not.toBe(oldKey)
    expect(result.remaining).toBe(0)
    expect(result.unreadable).toEqual([])
    expect(result.reencrypted).toMatchObject({
      mfa_secrets: 1,
      mfa_pending_secrets: 1,
      password_reset_flow_keys: 1,
    })
    // No ciphertext anywhere in the database is still under the old key.
    const after = await logicalDump(t.deps.store)
    expect(after).not.toContain(underOld)
    expect(after).toContain(`c1.${result.data_key_id}.`)

    // The active secret verifies a login's code; the pending one finishes its enrollment.
    const ok = await login(t, {
      account_id: accountId,
      username: enrolled.username,
      password: PASSWORD,
      mfa_code: codeAtOffset(enrolled.secret, clock),
    })
    expect(ok.statusCode, ok.body).toBe(200)
    const finalized = await t.api.post(mfaPath(pendingUser.id, 'finalize_enrollment'), {
      auth,
      json: {
        mfa_code_1: codeAtOffset(pending, clock, 0),
        mfa_code_2: codeAtOffset(pending, clock, 1),
      },
    })
    expect(finalized.statusCode, finalized.body).toBe(200)
    // The flow's key opens under the new data key (the service reads it to send).
    const row = await t.deps.store.db
      .selectFrom('password_reset_flows')
      .select(['id', 'sg_api_key'])
      .executeTakeFirstOrThrow()
    const key = await t.deps.keyring.decryptText(
      accountId,
      row.sg_api_key,
      `password-reset-flow-sg-key\n${row.id}`,
    )
    expect(key).toBe(TEST_SENDGRID_KEY)
  }, 60_000)
})
