import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { Keyring } from '../../src/crypto/keyring.js'
import { MasterKey } from '../../src/crypto/master-key.js'
import { MasterKeySet } from '../../src/crypto/master-key-set.js'
import { systemClock } from '../../src/lib/clock.js'
import { newId } from '../../src/lib/ids.js'
import { backfillFingerprints } from '../../src/modules/keys/fingerprint-backfill.js'
import { rotateMasterKey } from '../../src/modules/keys/rotation.js'
import { dataKeyStore } from '../../src/store/data-keys.repo.js'
import type { Store } from '../../src/store/db.js'
import { openTestStore, testDialect } from '../helpers/store.js'

/** The re-wrap and the fingerprint backfill on the real database, batch by batch. */
describe(`rotateMasterKey and the fingerprint backfill (${testDialect})`, () => {
  let store: Store
  const oldKey = MasterKey.generate()
  const newKey = MasterKey.generate()

  beforeEach(async () => {
    store = await openTestStore()
  })
  afterEach(async () => {
    await store.close()
  })

  /** `n` accounts with one data key each under `key`, and a ciphertext of each. */
  async function accounts(n: number, key: MasterKey) {
    const keyring = new Keyring(key, dataKeyStore(store.db), systemClock)
    const made: { id: string; text: string }[] = []
    for (let i = 0; i < n; i++) {
      const id = newId()
      const now = new Date().toISOString()
      await store.db.insertInto('accounts').values({ id, created_at: now }).execute()
      made.push({ id, text: await keyring.encrypt(id, `secret ${i}`, 'ctx') })
    }
    return made
  }

  it('re-wraps in batches, reports progress, and everything decrypts with the new key alone', async () => {
    const made = await accounts(7, oldKey)
    const progress: number[] = []
    const report = await rotateMasterKey(store, new MasterKeySet(newKey, [oldKey]), {
      batchSize: 3,
      onProgress: (p) => {
        expect(p.total).toBe(7)
        progress.push(p.rewrapped)
      },
    })
    expect(progress).toEqual([3, 6, 7])
    expect(report).toMatchObject({ rewrapped: 7, notUnderCurrent: 0, unopenable: [] })
    expect(report.byMasterKey).toEqual({ [newKey.id]: 7 })
    const alone = new Keyring(newKey, dataKeyStore(store.db), systemClock)
    await alone.assertUnlocks()
    for (const [i, a] of made.entries())
      expect(await alone.decryptText(a.id, a.text, 'ctx')).toBe(`secret ${i}`)
    // again: nothing to do
    expect((await rotateMasterKey(store, new MasterKeySet(newKey, [oldKey]))).rewrapped).toBe(0)
  })

  it('leaves data keys no key held opens, names them, and says the previous key is still needed', async () => {
    await accounts(2, oldKey)
    const stranger = MasterKey.generate()
    await accounts(1, stranger)
    const report = await rotateMasterKey(store, new MasterKeySet(newKey, [oldKey]))
    expect(report.rewrapped).toBe(2)
    expect(report.notUnderCurrent).toBe(1)
    expect(report.unopenable).toEqual([expect.objectContaining({ master_key: stranger.id })])
  })

  it('backfills fingerprints of rows written before migration 0019 (legacy id, NULL fingerprint)', async () => {
    const made = await accounts(5, oldKey)
    await store.db
      .updateTable('data_keys')
      .set({ master_key_id: oldKey.legacyId, master_key_fingerprint: null })
      .execute()
    const keys = new MasterKeySet(newKey, [oldKey])
    expect(await backfillFingerprints(store, keys)).toBe(5)
    const rows = await store.db.selectFrom('data_keys').selectAll().execute()
    for (const r of rows) {
      expect(r.master_key_fingerprint).toBe(oldKey.id)
      expect(r.master_key_id).toBe(oldKey.id)
    }
    expect(await backfillFingerprints(store, keys)).toBe(0)
    const ring = new Keyring(oldKey, dataKeyStore(store.db), systemClock)
    expect(await ring.decryptText(made[0]?.id as string, made[0]?.text as string, 'ctx')).toBe(
      'secret 0',
    )
  })
})
