import { IntegrityError } from './aead.js'
import { MasterKey } from './master-key.js'

/** The master-key columns of a wrapped data key. */
export interface WrappedKeyRef {
  account_id: string
  id: string
  wrapped_key: string
  /** The legacy identifier on rows written before migration 0019, the fingerprint after. */
  master_key_id: string
  /** Null on rows written before migration 0019 whose key no node has named yet. */
  master_key_fingerprint: string | null
}

/**
 * The master keys a node holds: the current one (every new or re-wrapped data key is wrapped by
 * it) and previous ones (only unwrap), so data keys wrapped by either keep working while
 * `coffer keys rotate` moves them over. Swappable as a whole (`replace`): the key-file watcher
 * hands in a new set without a restart; readers always see one consistent set.
 */
export class MasterKeySet {
  #current: MasterKey
  #previous: MasterKey[]
  #onUnknown: (() => void) | undefined

  constructor(current: MasterKey, previous: readonly MasterKey[] = []) {
    this.#current = current
    this.#previous = withoutDuplicates(current, previous)
  }

  get current(): MasterKey {
    return this.#current
  }

  get previous(): readonly MasterKey[] {
    return this.#previous
  }

  /** Every key held, the current one first. */
  all(): MasterKey[] {
    return [this.#current, ...this.#previous]
  }

  replace(current: MasterKey, previous: readonly MasterKey[]): void {
    this.#previous = withoutDuplicates(current, previous)
    this.#current = current
  }

  /**
   * Called (synchronously) when a data key names a fingerprint this set does not hold, before
   * giving up: the key-file watcher re-reads the key files at once, so a data key re-wrapped by a
   * rotation that wrote a new key file a moment ago opens without waiting for the watcher.
   */
  onUnknownKey(reload: () => void): void {
    this.#onUnknown = reload
  }

  /** The fingerprints held, current first (for logs: fingerprints are not secret). */
  fingerprints(): string[] {
    return this.all().map((k) => k.id)
  }

  /** True when a key held has this fingerprint. */
  holdsFingerprint(fingerprint: string): boolean {
    return this.all().some((k) => k.id === fingerprint)
  }

  /** True when some held key wrapped the row (by fingerprint, or legacy id on old rows). */
  holdsKeyOf(ref: Pick<WrappedKeyRef, 'master_key_id' | 'master_key_fingerprint'>): boolean {
    if (ref.master_key_fingerprint !== null)
      return this.all().some((k) => k.id === ref.master_key_fingerprint)
    return this.all().some((k) => k.legacyId === ref.master_key_id || k.id === ref.master_key_id)
  }

  /**
   * Unwraps a data key. A row naming a fingerprint is opened by that key only; an old row
   * without one tries the key its legacy id names first, then every other key held (the AEAD tag
   * tells the right one). Returns the key that opened it, so the caller can record its
   * fingerprint.
   */
  unwrap(ref: WrappedKeyRef): { key: Buffer; by: MasterKey } {
    const context = `${ref.account_id}\n${ref.id}`
    if (ref.master_key_fingerprint !== null) {
      const by = this.#find(ref.master_key_fingerprint)
      if (!by)
        throw new IntegrityError('data key is wrapped by a master key this node does not hold')
      return { key: by.unwrap(ref.wrapped_key, context), by }
    }
    const keys = this.all()
    const named = keys.filter((k) => k.legacyId === ref.master_key_id || k.id === ref.master_key_id)
    for (const by of [...named, ...keys.filter((k) => !named.includes(k))]) {
      try {
        return { key: by.unwrap(ref.wrapped_key, context), by }
      } catch (error) {
        if (!(error instanceof IntegrityError)) throw error
      }
    }
    throw new IntegrityError('data key is wrapped by a master key this node does not hold')
  }

  /**
   * Unwraps the SQLite file key (store/sqlite-file-key.ts) with the key its fingerprint names,
   * current or previous: a node holding only the previous key beside the new one still opens
   * the database while a rotation re-wraps it.
   */
  unwrapFileKey(wrapped: { master_key_fingerprint: string; wrapped_key: string }): {
    key: Buffer
    by: MasterKey
  } {
    const by = this.#find(wrapped.master_key_fingerprint)
    if (!by) {
      throw new IntegrityError(
        `the database file key is wrapped by master key ${wrapped.master_key_fingerprint}, which this node does not hold (it holds ${this.fingerprints().join(', ')})`,
      )
    }
    return { key: by.unwrapFileKey(wrapped.wrapped_key), by }
  }

  /** The key held with this fingerprint, after re-reading the key files once if none is. */
  #find(fingerprint: string): MasterKey | undefined {
    const find = () => this.all().find((k) => k.id === fingerprint)
    let by = find()
    if (!by && this.#onUnknown) {
      this.#onUnknown()
      by = find()
    }
    return by
  }

  /** Parses comma- or newline-separated base64 keys (COFFER_MASTER_KEY_PREVIOUS and its file). */
  static parseList(text: string): MasterKey[] {
    return text
      .split(/[,\s]+/)
      .filter((part) => part.length > 0)
      .map((part) => MasterKey.fromBase64(part))
  }
}

function withoutDuplicates(current: MasterKey, previous: readonly MasterKey[]): MasterKey[] {
  const seen = new Set([current.id])
  const kept: MasterKey[] = []
  for (const key of previous) {
    if (seen.has(key.id)) continue
    seen.add(key.id)
    kept.push(key)
  }
  return kept
}
