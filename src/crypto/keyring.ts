import { randomBytes } from 'node:crypto'
import type { Clock } from '../lib/clock.js'
import { newId } from '../lib/ids.js'
import { decodeStoredBase64, IntegrityError, KEY_BYTES, open, seal } from './aead.js'
import { DATA_KEY_CACHE_SIZE, DataKeyCache } from './data-key-cache.js'
import { MasterKey } from './master-key.js'
import { MasterKeySet } from './master-key-set.js'

/** A data key as stored: wrapped by the master key whose fingerprint it names. */
export interface DataKeyRecord {
  account_id: string
  id: string
  wrapped_key: string
  /** Before migration 0019 the key's legacy id; since, the same value as the fingerprint. */
  master_key_id: string
  /** Null only on rows written before migration 0019 and not yet re-wrapped or backfilled. */
  master_key_fingerprint: string | null
  created_at: string
}

/** Which master keys wrap some data key (distinct pairs). */
export type WrappedBy = Pick<DataKeyRecord, 'master_key_id' | 'master_key_fingerprint'>

/** Storage of wrapped data keys (implemented over the database in store/data-keys.repo.ts). */
export interface DataKeyStore {
  /**
   * The account's newest data key: the one new ciphertexts use (`coffer keys reencrypt` adds a
   * newer one; before it, an account had one key, or two only after a lost creation race).
   */
  findCurrent(accountId: string): Promise<DataKeyRecord | undefined>
  findById(accountId: string, id: string): Promise<DataKeyRecord | undefined>
  insert(record: DataKeyRecord): Promise<void>
  /** Every distinct (legacy id, fingerprint) naming the master key that wraps some data key. */
  wrappedBy(): Promise<WrappedBy[]>
  /** Every data key of the account. */
  listForAccount(accountId: string): Promise<DataKeyRecord[]>
}

const PREFIX = 'c1'
/**
 * How long a node keeps using the current data key it knows before asking the store again: a
 * key added by `coffer keys reencrypt` in another process is used for new writes within this.
 */
export const CURRENT_KEY_TTL_MS = 5000

/**
 * Envelope encryption of fields: each account has a random data key, wrapped by the master key
 * and cached unwrapped in memory. A ciphertext is `c1.<data key id>.<base64 of nonce‖ct‖tag>`
 * with the account, the key id and a caller-given context (table and row ids) bound as
 * associated data, so a ciphertext copied into another row or account fails to decrypt.
 */
export class Keyring {
  readonly #keys: DataKeyCache
  readonly #current = new Map<string, Promise<{ id: string; key: Buffer }>>()
  /** When each account's current key was last read from the store (ms since the epoch). */
  readonly #currentReadAt = new Map<string, number>()

  /** The master keys held: new data keys are wrapped by the current one, any one unwraps. */
  readonly masterKeys: MasterKeySet

  constructor(
    master: MasterKey | MasterKeySet,
    private readonly store: DataKeyStore,
    private readonly clock: Clock,
    dataKeyCacheSize = DATA_KEY_CACHE_SIZE,
  ) {
    this.masterKeys = master instanceof MasterKey ? new MasterKeySet(master) : master
    this.#keys = new DataKeyCache(() => this.clock.now().getTime(), dataKeyCacheSize)
  }

  /** The current master key (it wraps every new data key). */
  get master(): MasterKey {
    return this.masterKeys.current
  }

  /**
   * Throws unless every stored data key is wrapped by a master key held (current or previous):
   * else some data would not decrypt.
   */
  async assertUnlocks(): Promise<void> {
    const others = (await this.store.wrappedBy())
      .filter((ref) => !this.masterKeys.holdsKeyOf(ref))
      .map((ref) => ref.master_key_fingerprint ?? ref.master_key_id)
    if (others.length > 0) {
      throw new Error(
        `the configured master key (id ${this.master.id}${this.masterKeys.previous.length > 0 ? `, previous ${this.masterKeys.previous.map((k) => k.id).join(', ')}` : ''}) does not unlock this database: its data keys are wrapped by master key ${[...new Set(others)].join(', ')}`,
      )
    }
  }

  async encrypt(accountId: string, plaintext: Buffer | string, context: string): Promise<string> {
    const { id, key } = await this.#currentKey(accountId)
    const data = typeof plaintext === 'string' ? Buffer.from(plaintext, 'utf8') : plaintext
    return `${PREFIX}.${id}.${seal(key, data, aad(accountId, id, context)).toString('base64')}`
  }

  async decrypt(accountId: string, ciphertext: string, context: string): Promise<Buffer> {
    const parts = ciphertext.split('.')
    const [prefix, id, body] = parts
    if (parts.length !== 3 || prefix !== PREFIX || !id || !body)
      throw new IntegrityError('stored data is not a Coffer ciphertext')
    const sealed = decodeStoredBase64(body)
    const key = await this.#keyById(accountId, id)
    return open(key, sealed, aad(accountId, id, context))
  }

  async decryptText(accountId: string, ciphertext: string, context: string): Promise<string> {
    return (await this.decrypt(accountId, ciphertext, context)).toString('utf8')
  }

  /**
   * Loads every data key of the account into memory. Work inside a database transaction must not
   * query the keyring's store (on SQLite the transaction holds the only connection), so bulk
   * re-encryption or re-indexing preloads first.
   */
  async preload(accountId: string): Promise<void> {
    this.#keys.hold(accountId)
    await this.#currentKey(accountId)
    for (const record of await this.store.listForAccount(accountId)) {
      if (!this.#keys.has(record.account_id, record.id)) this.#unwrap(record)
    }
  }

  /** Unwrapped data keys held in memory now (tests). */
  get cachedDataKeys(): number {
    return this.#keys.entries
  }

  /**
   * The first data key of a new account, to be inserted by the caller in the transaction that
   * creates the account (data keys reference their account, so the keyring's own store cannot
   * insert it before that commits). Cached at once: should the transaction roll back, the cache
   * holds a key of an account id that is never used again.
   */
  newAccountKey(accountId: string): DataKeyRecord {
    const { record, key } = this.#newKey(accountId)
    this.#current.set(accountId, Promise.resolve({ id: record.id, key }))
    return record
  }

  /** A fresh data key, wrapped by the master key and known to this keyring. */
  #newKey(accountId: string): { record: DataKeyRecord; key: Buffer } {
    const id = newId()
    const key = randomBytes(KEY_BYTES)
    const record = {
      account_id: accountId,
      id,
      wrapped_key: this.master.wrap(key, `${accountId}\n${id}`),
      master_key_id: this.master.id,
      master_key_fingerprint: this.master.id,
      created_at: this.clock.now().toISOString(),
    }
    this.#keys.set(accountId, id, key)
    return { record, key }
  }

  /**
   * Adds a new data key to the account and makes it current here at once (other nodes within
   * CURRENT_KEY_TTL_MS): what `coffer keys reencrypt` moves the account's content to.
   */
  async addDataKey(accountId: string): Promise<string> {
    const { record, key } = this.#newKey(accountId)
    await this.store.insert(record)
    this.#current.set(accountId, Promise.resolve({ id: record.id, key }))
    this.#currentReadAt.set(accountId, this.clock.now().getTime())
    return record.id
  }

  /** The id of the data key new ciphertexts of the account use. */
  async currentKeyId(accountId: string): Promise<string> {
    return (await this.#currentKey(accountId)).id
  }

  /** The id of the data key a ciphertext names (undefined: not a ciphertext of this format). */
  static keyIdOf(ciphertext: string): string | undefined {
    const [prefix, id] = ciphertext.split('.')
    return prefix === PREFIX ? id : undefined
  }

  /** True when the text is a ciphertext of this format (plaintext JSON never starts so). */
  static isCiphertext(text: string): boolean {
    return text.startsWith(`${PREFIX}.`)
  }

  #currentKey(accountId: string): Promise<{ id: string; key: Buffer }> {
    let pending = this.#current.get(accountId)
    const now = this.clock.now().getTime()
    // A key set by newAccountKey counts as read when first used.
    if (pending && !this.#currentReadAt.has(accountId)) this.#currentReadAt.set(accountId, now)
    const readAt = this.#currentReadAt.get(accountId) ?? now
    if (pending && now - readAt > CURRENT_KEY_TTL_MS) {
      // Another process may have added a newer key (keys reencrypt): look again, once per TTL.
      const cached = pending
      pending = this.#refreshCurrent(accountId, cached)
      this.#current.set(accountId, pending)
      this.#currentReadAt.set(accountId, now)
    }
    if (!pending) {
      this.#currentReadAt.set(accountId, now)
      pending = this.#loadOrCreate(accountId)
      this.#current.set(accountId, pending)
      pending.catch(() => this.#current.delete(accountId))
    }
    return pending
  }

  /** The store's current key, or the cached one when the store cannot tell. */
  async #refreshCurrent(
    accountId: string,
    cached: Promise<{ id: string; key: Buffer }>,
  ): Promise<{ id: string; key: Buffer }> {
    try {
      const record = await this.store.findCurrent(accountId)
      const known = await cached
      if (!record || record.id === known.id) return known
      return {
        id: record.id,
        key: this.#keys.get(accountId, record.id) ?? this.#unwrap(record),
      }
    } catch {
      return cached
    }
  }

  async #loadOrCreate(accountId: string): Promise<{ id: string; key: Buffer }> {
    const existing = await this.store.findCurrent(accountId)
    if (existing) return { id: existing.id, key: this.#unwrap(existing) }
    const { record, key } = this.#newKey(accountId)
    await this.store.insert(record)
    return { id: record.id, key }
  }

  async #keyById(accountId: string, id: string): Promise<Buffer> {
    const cached = this.#keys.get(accountId, id)
    if (cached) return cached
    const record = await this.store.findById(accountId, id)
    if (!record) throw new IntegrityError('stored data names an unknown data key')
    return this.#unwrap(record)
  }

  #unwrap(record: DataKeyRecord): Buffer {
    const { key } = this.masterKeys.unwrap(record)
    this.#keys.set(record.account_id, record.id, key)
    return key
  }
}

function aad(accountId: string, keyId: string, context: string): Buffer {
  return Buffer.from(`coffer field ${PREFIX}\n${accountId}\n${keyId}\n${context}`, 'utf8')
}
