import { randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { ManualClock } from '../lib/clock.js'
import { newId } from '../lib/ids.js'
import { IntegrityError, NONCE_BYTES, TAG_BYTES } from './aead.js'
import {
  CURRENT_KEY_TTL_MS,
  type DataKeyRecord,
  type DataKeyStore,
  Keyring,
  type WrappedBy,
} from './keyring.js'
import { MasterKey } from './master-key.js'
import { MasterKeySet } from './master-key-set.js'

/**
 * The data-key table in memory, with the repository's semantics (store/data-keys.repo.ts):
 * `findCurrent` is the newest key of the account. Every call yields to the event loop first,
 * as a database round trip would, so concurrent callers really interleave.
 */
class MemoryDataKeyStore implements DataKeyStore {
  readonly records: DataKeyRecord[] = []
  inserts = 0
  failNextInsert = false
  /** Yield before answering, as a database round trip would. */
  delay = true

  async #roundTrip() {
    if (this.delay) await sleep(1)
  }

  async findCurrent(accountId: string) {
    await this.#roundTrip()
    return this.records
      .filter((r) => r.account_id === accountId)
      .sort((a, b) => b.created_at.localeCompare(a.created_at) || b.id.localeCompare(a.id))[0]
  }
  async findById(accountId: string, id: string) {
    await this.#roundTrip()
    return this.records.find((r) => r.account_id === accountId && r.id === id)
  }
  async insert(record: DataKeyRecord) {
    await this.#roundTrip()
    this.inserts++
    if (this.failNextInsert) {
      this.failNextInsert = false
      throw new Error('database is down')
    }
    if (this.records.some((r) => r.account_id === record.account_id && r.id === record.id))
      throw new Error('duplicate key')
    this.records.push({ ...record })
  }
  async listForAccount(accountId: string) {
    await this.#roundTrip()
    return this.records.filter((r) => r.account_id === accountId)
  }
  async wrappedBy() {
    await this.#roundTrip()
    const seen = new Map<string, WrappedBy>()
    for (const r of this.records) {
      const ref = {
        master_key_id: r.master_key_id,
        master_key_fingerprint: r.master_key_fingerprint,
      }
      seen.set(JSON.stringify(ref), ref)
    }
    return [...seen.values()]
  }
}

const clock = new ManualClock()

function setup(master = MasterKey.generate()) {
  const store = new MemoryDataKeyStore()
  return { master, store, keyring: new Keyring(master, store, clock) }
}

/** The keyring a freshly started process would have: same key and store, empty cache. */
const restarted = (k: { master: MasterKey; store: MemoryDataKeyStore }) =>
  new Keyring(k.master, k.store, clock)

const A = newId()
const B = newId()
const ctx = 'document\nvault-1\ndoc-1'

describe('Keyring encrypt / decrypt', () => {
  it('round-trips text and bytes as c1.<data key id>.<base64>', async () => {
    const k = setup()
    const text = await k.keyring.encrypt(A, '{"ssn":"078-05-1120"}', ctx)
    expect(text).toMatch(/^c1\.[0-9a-f-]{36}\.[A-Za-z0-9+/]+=*$/)
    expect(Keyring.isCiphertext(text)).toBe(true)
    expect(await k.keyring.decryptText(A, text, ctx)).toBe('{"ssn":"078-05-1120"}')
    const bytes = randomBytes(32)
    const sealed = await k.keyring.encrypt(A, bytes, ctx)
    expect((await k.keyring.decrypt(A, sealed, ctx)).equals(bytes)).toBe(true)
    // empty content round-trips too
    expect(await k.keyring.decryptText(A, await k.keyring.encrypt(A, '', ctx), ctx)).toBe('')
  })

  it('stores only the wrapped data key, under the master key id', async () => {
    const k = setup()
    await k.keyring.encrypt(A, 'x', ctx)
    expect(k.store.records).toHaveLength(1)
    const [record] = k.store.records as [DataKeyRecord]
    expect(record).toMatchObject({ account_id: A, master_key_id: k.master.id })
    expect(record.created_at).toBe(clock.now().toISOString())
    expect(k.master.unwrap(record.wrapped_key, `${A}\n${record.id}`)).toHaveLength(32)
  })

  it('decrypts in a restarted process (data key unwrapped from the store)', async () => {
    const k = setup()
    const text = await k.keyring.encrypt(A, 'hello', ctx)
    expect(await restarted(k).decryptText(A, text, ctx)).toBe('hello')
  })

  it('never repeats a ciphertext or a nonce for the same plaintext (10,000 encryptions)', async () => {
    const k = setup()
    const seen = new Set<string>()
    const nonces = new Set<string>()
    for (let i = 0; i < 10_000; i++) {
      const text = await k.keyring.encrypt(A, 'same', ctx)
      seen.add(text)
      const body = Buffer.from(text.split('.')[2] as string, 'base64')
      expect(body.length).toBe(NONCE_BYTES + 4 + TAG_BYTES)
      nonces.add(body.subarray(0, NONCE_BYTES).toString('hex'))
    }
    expect(seen.size).toBe(10_000)
    expect(nonces.size).toBe(10_000)
    // all under one data key
    expect(k.store.records).toHaveLength(1)
  })
})

describe('Keyring binding (ciphertexts cannot move)', () => {
  it('fails closed in another context: another row, table or vault', async () => {
    const k = setup()
    const text = await k.keyring.encrypt(A, 'secret', ctx)
    for (const other of [
      'document\nvault-1\ndoc-2',
      'document\nvault-2\ndoc-1',
      'user-attributes\ndoc-1',
      `${ctx}\n`,
      '',
    ]) {
      await expect(k.keyring.decrypt(A, text, other)).rejects.toThrow(IntegrityError)
    }
  })

  it('fails closed in another account, whether or not that account has data keys', async () => {
    const k = setup()
    const text = await k.keyring.encrypt(A, 'secret', ctx)
    await expect(k.keyring.decrypt(B, text, ctx)).rejects.toThrow(IntegrityError)
    await k.keyring.encrypt(B, 'b', ctx)
    await expect(k.keyring.decrypt(B, text, ctx)).rejects.toThrow(IntegrityError)
    await expect(restarted(k).decrypt(B, text, ctx)).rejects.toThrow(IntegrityError)
    // even when B's own key id is put in front of A's body
    const bKey = k.store.records.find((r) => r.account_id === B) as DataKeyRecord
    const relabelled = text.replace(/^c1\.[^.]+\./, `c1.${bKey.id}.`)
    await expect(k.keyring.decrypt(B, relabelled, ctx)).rejects.toThrow(IntegrityError)
  })

  it('fails closed for a data key id the account does not have', async () => {
    const k = setup()
    const text = await k.keyring.encrypt(A, 'secret', ctx)
    const unknown = text.replace(/^c1\.[^.]+\./, `c1.${newId()}.`)
    await expect(k.keyring.decrypt(A, unknown, ctx)).rejects.toThrow(
      'stored data names an unknown data key',
    )
  })

  it('fails closed on every single-character change of the stored text', async () => {
    const k = setup()
    k.store.delay = false
    const fresh = restarted(k)
    // lengths giving 0, 1 and 2 characters of base64 padding
    for (const plain of ['', 'a', 'ab', 'abc', '{"ssn":"078-05-1120"}']) {
      const text = await k.keyring.encrypt(A, plain, ctx)
      expect(await fresh.decryptText(A, text, ctx)).toBe(plain)
      const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=.-_ !'
      for (let i = 0; i < text.length; i++) {
        for (const c of alphabet) {
          if (c === text[i]) continue
          const tampered = text.slice(0, i) + c + text.slice(i + 1)
          await expect(
            fresh.decrypt(A, tampered, ctx),
            `position ${i} of ${text.length} → ${c}`,
          ).rejects.toThrow(IntegrityError)
        }
      }
    }
  }, 60_000)

  it('fails closed when characters are appended, inserted or removed', async () => {
    const k = setup()
    const text = await k.keyring.encrypt(A, 'secret value', ctx)
    const variants = [
      `${text}.`,
      `${text}.extra`,
      `${text}A`,
      `${text}=`,
      `${text}\n`,
      ` ${text}`,
      text.slice(0, -1),
      text.replace('.', '..'),
      text.slice(0, 20) + text.slice(21),
      `${text.slice(0, 40)}!${text.slice(40)}`,
      `${text.slice(0, 40)}\n${text.slice(40)}`,
    ]
    for (const v of variants) {
      await expect(k.keyring.decrypt(A, v, ctx), JSON.stringify(v)).rejects.toThrow(IntegrityError)
    }
  })

  it('refuses texts that are not c1. ciphertexts: plaintext is never served as such', async () => {
    const k = setup()
    const text = await k.keyring.encrypt(A, 'x', ctx)
    const [, id, body] = text.split('.')
    for (const value of [
      '{"legacy":true}',
      '',
      'c1',
      'c1.',
      `c1.${id}`,
      `c1.${id}.`,
      `c1..${body}`,
      `c2.${id}.${body}`,
      `C1.${id}.${body}`,
      `.${id}.${body}`,
    ]) {
      expect(Keyring.isCiphertext(value)).toBe(value.startsWith('c1.'))
      await expect(k.keyring.decrypt(A, value, ctx), JSON.stringify(value)).rejects.toThrow(
        IntegrityError,
      )
    }
  })
})

describe('Keyring data keys', () => {
  it('creates exactly one data key per account under 20 concurrent first encryptions', async () => {
    const k = setup()
    const texts = await Promise.all(
      Array.from({ length: 20 }, (_, i) => k.keyring.encrypt(A, `value ${i}`, ctx)),
    )
    expect(k.store.inserts).toBe(1)
    expect(k.store.records).toHaveLength(1)
    const keyId = (k.store.records[0] as DataKeyRecord).id
    for (const [i, text] of texts.entries()) {
      expect(text.split('.')[1]).toBe(keyId)
      expect(await restarted(k).decryptText(A, text, ctx)).toBe(`value ${i}`)
    }
    // and one per account when accounts start together
    const more = Array.from({ length: 5 }, () => newId())
    await Promise.all(
      more.flatMap((acc) => [1, 2, 3, 4].map(() => k.keyring.encrypt(acc, 'v', ctx))),
    )
    expect(k.store.records).toHaveLength(6)
    expect(new Set(k.store.records.map((r) => r.account_id)).size).toBe(6)
  })

  it('reuses the stored data key after a restart instead of making another', async () => {
    const k = setup()
    await k.keyring.encrypt(A, 'x', ctx)
    await Promise.all(Array.from({ length: 10 }, () => restarted(k).encrypt(A, 'y', ctx)))
    expect(k.store.records).toHaveLength(1)
  })

  it('retries key creation after a failed insert (a failure is not cached)', async () => {
    const k = setup()
    k.store.failNextInsert = true
    await expect(k.keyring.encrypt(A, 'x', ctx)).rejects.toThrow('database is down')
    const text = await k.keyring.encrypt(A, 'x', ctx)
    expect(await k.keyring.decryptText(A, text, ctx)).toBe('x')
    expect(k.store.records).toHaveLength(1)
  })

  it('fails closed when the stored wrapped key is tampered with or moved to another record', async () => {
    const k = setup()
    const textA = await k.keyring.encrypt(A, 'a', ctx)
    const textB = await k.keyring.encrypt(B, 'b', ctx)
    const [recA, recB] = k.store.records as [DataKeyRecord, DataKeyRecord]
    const raw = Buffer.from(recA.wrapped_key, 'base64')
    raw[20] = (raw[20] as number) ^ 0x01
    const original = recA.wrapped_key
    recA.wrapped_key = raw.toString('base64')
    await expect(restarted(k).decrypt(A, textA, ctx)).rejects.toThrow(IntegrityError)
    // B's wrapped key copied into A's record: bound to B's account and id, so refused
    recA.wrapped_key = recB.wrapped_key
    await expect(restarted(k).decrypt(A, textA, ctx)).rejects.toThrow(IntegrityError)
    recA.wrapped_key = original
    expect(await restarted(k).decryptText(A, textA, ctx)).toBe('a')
    expect(await restarted(k).decryptText(B, textB, ctx)).toBe('b')
  })

  it('fails closed for a data key wrapped by another master key', async () => {
    const k = setup()
    const text = await k.keyring.encrypt(A, 'a', ctx)
    const other = new Keyring(MasterKey.generate(), k.store, clock)
    await expect(other.decrypt(A, text, ctx)).rejects.toThrow(
      'data key is wrapped by a master key this node does not hold',
    )
    // even if the record's fingerprint is relabelled to the other key's
    const record = k.store.records[0] as DataKeyRecord
    record.master_key_id = other.master.id
    record.master_key_fingerprint = other.master.id
    await expect(other.decrypt(A, text, ctx)).rejects.toThrow(IntegrityError)
  })
})

describe('Keyring.assertUnlocks', () => {
  it('passes on an empty store and on a store of its own keys', async () => {
    const k = setup()
    await expect(k.keyring.assertUnlocks()).resolves.toBeUndefined()
    await k.keyring.encrypt(A, 'a', ctx)
    await k.keyring.encrypt(B, 'b', ctx)
    await expect(restarted(k).assertUnlocks()).resolves.toBeUndefined()
  })

  it('throws for a store holding data keys of another master key, naming both ids', async () => {
    const k = setup()
    await k.keyring.encrypt(A, 'a', ctx)
    const stranger = MasterKey.generate()
    const other = new Keyring(stranger, k.store, clock)
    await expect(other.assertUnlocks()).rejects.toThrow(/does not unlock this database/)
    await expect(other.assertUnlocks()).rejects.toThrow(k.master.id)
    await expect(other.assertUnlocks()).rejects.toThrow(stranger.id)
  })

  it('throws when only some data keys are wrapped by this master key', async () => {
    const k = setup()
    await k.keyring.encrypt(A, 'a', ctx)
    const second = MasterKey.generate()
    await new Keyring(second, k.store, clock).encrypt(B, 'b', ctx)
    await expect(k.keyring.assertUnlocks()).rejects.toThrow(second.id)
    await expect(new Keyring(second, k.store, clock).assertUnlocks()).rejects.toThrow(k.master.id)
  })

  it('never puts the master key itself in its message', async () => {
    const k = setup()
    await k.keyring.encrypt(A, 'a', ctx)
    const stranger = MasterKey.generate()
    const error = await new Keyring(stranger, k.store, clock).assertUnlocks().catch((e) => e)
    expect(String(error.message)).not.toContain(stranger.toBase64().slice(0, 16))
    expect(String(error.message)).not.toContain(k.master.toBase64().slice(0, 16))
  })
})

describe('Keyring with previous master keys', () => {
  it('unwraps with a previous key, wraps new data keys with the current one only', async () => {
    const k = setup()
    const old = await k.keyring.encrypt(A, 'under the old key', ctx)
    const next = MasterKey.generate()
    const both = new Keyring(new MasterKeySet(next, [k.master]), k.store, clock)
    await expect(both.assertUnlocks()).resolves.toBeUndefined()
    expect(await both.decryptText(A, old, ctx)).toBe('under the old key')
    await both.decryptText(B, await both.encrypt(B, 'new account', ctx), ctx)
    const recB = k.store.records.find((r) => r.account_id === B) as DataKeyRecord
    expect(recB.master_key_fingerprint).toBe(next.id)
    expect(next.unwrap(recB.wrapped_key, `${B}\n${recB.id}`)).toHaveLength(32)
    // the old key alone no longer unlocks the store: B's key is under the new one
    await expect(restarted(k).assertUnlocks()).rejects.toThrow(next.id)
  })

  it('picks the key by fingerprint: a row naming a key not held fails without trying others', async () => {
    const k = setup()
    const text = await k.keyring.encrypt(A, 'a', ctx)
    const record = k.store.records[0] as DataKeyRecord
    const stranger = MasterKey.generate()
    record.master_key_fingerprint = stranger.id
    const both = new Keyring(new MasterKeySet(MasterKey.generate(), [k.master]), k.store, clock)
    await expect(both.decrypt(A, text, ctx)).rejects.toThrow('does not hold')
    await expect(both.assertUnlocks()).rejects.toThrow(stranger.id)
  })

  it('opens an old row without a fingerprint by trying each key held', async () => {
    const k = setup()
    const text = await k.keyring.encrypt(A, 'old row', ctx)
    const record = k.store.records[0] as DataKeyRecord
    // as written before migration 0019: the legacy id, no fingerprint
    record.master_key_id = k.master.legacyId
    record.master_key_fingerprint = null
    const first = MasterKey.generate()
    const ring = new Keyring(
      new MasterKeySet(first, [MasterKey.generate(), k.master]),
      k.store,
      clock,
    )
    await expect(ring.assertUnlocks()).resolves.toBeUndefined()
    expect(await ring.decryptText(A, text, ctx)).toBe('old row')
    // a legacy id naming no key held: refused at start, and no key opens it
    record.master_key_id = 'ffffffffffffffff'
    const fresh = new Keyring(new MasterKeySet(first, [k.master]), k.store, clock)
    await expect(fresh.assertUnlocks()).rejects.toThrow('ffffffffffffffff')
    expect(await fresh.decryptText(A, text, ctx)).toBe('old row')
    await expect(
      new Keyring(new MasterKeySet(first), k.store, clock).decrypt(A, text, ctx),
    ).rejects.toThrow('does not hold')
  })

  it('asks the reload hook once for an unknown fingerprint, then uses the reloaded keys', async () => {
    const k = setup()
    const text = await k.keyring.encrypt(A, 'a', ctx)
    const set = new MasterKeySet(MasterKey.generate())
    let reloads = 0
    set.onUnknownKey(() => {
      reloads += 1
      set.replace(set.current, [k.master])
    })
    expect(await new Keyring(set, k.store, clock).decryptText(A, text, ctx)).toBe('a')
    expect(reloads).toBe(1)
  })
})

describe('MasterKey fingerprint', () => {
  it('is an HMAC under the key, distinct from the legacy hash id, and stable', () => {
    const key = MasterKey.generate()
    expect(key.id).toMatch(/^[0-9a-f]{16}$/)
    expect(key.id).not.toBe(key.legacyId)
    expect(MasterKey.fromBase64(key.toBase64()).id).toBe(key.id)
    expect(MasterKey.generate().id).not.toBe(key.id)
  })

  it('parses a previous-key list separated by commas or newlines, refusing a bad key', () => {
    const [a, b] = [MasterKey.generate(), MasterKey.generate()]
    const keys = MasterKeySet.parseList(`${a.toBase64()}, ${b.toBase64()}\n`)
    expect(keys.map((x) => x.id)).toEqual([a.id, b.id])
    expect(() => MasterKeySet.parseList('nope')).toThrow('exactly 32 bytes')
    // the current key given again as a previous one is held once
    expect(new MasterKeySet(a, [a, b, b]).fingerprints()).toEqual([a.id, b.id])
  })
})

describe('Keyring.addDataKey (keys reencrypt)', () => {
  it('makes a new data key current here at once and on other nodes after the TTL; old ciphertexts still open', async () => {
    const k = setup()
    const other = restarted(k)
    const before = await k.keyring.encrypt(A, 'before', ctx)
    const oldId = Keyring.keyIdOf(before)
    expect(Keyring.keyIdOf(await other.encrypt(A, 'x', ctx))).toBe(oldId)
    const newId = await k.keyring.addDataKey(A)
    expect(newId).not.toBe(oldId)
    expect(Keyring.keyIdOf(await k.keyring.encrypt(A, 'after', ctx))).toBe(newId)
    // the other node keeps its cached key until the TTL passes, then reads the newest
    expect(Keyring.keyIdOf(await other.encrypt(A, 'x', ctx))).toBe(oldId)
    clock.advance(CURRENT_KEY_TTL_MS + 1)
    await other.encrypt(A, 'x', ctx) // starts the refresh
    expect(Keyring.keyIdOf(await other.encrypt(A, 'x', ctx))).toBe(newId)
    expect(await other.decryptText(A, before, ctx)).toBe('before')
    expect(Keyring.keyIdOf('plain')).toBeUndefined()
  })

  it('a node that created the account key itself also re-reads the current key after the TTL', async () => {
    const k = setup()
    const record = k.keyring.newAccountKey(B)
    await k.store.insert(record)
    expect(await k.keyring.currentKeyId(B)).toBe(record.id)
    const added = await restarted(k).addDataKey(B)
    clock.advance(CURRENT_KEY_TTL_MS + 1)
    expect(await k.keyring.currentKeyId(B)).toBe(added)
  })
})
