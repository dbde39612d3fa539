import { randomBytes } from 'node:crypto'
import { pipeline, type Readable, Transform } from 'node:stream'
import { assertItemAllows } from '../../access/item-access.js'
import type { Actor } from '../../access/principal.js'
import {
  BlobNotFoundError,
  type BlobStore,
  BlobStoreUnavailableError,
  blobKey,
} from '../../blob/blob-store.js'
import { firstReadable, sizeLimit } from '../../blob/size-limit.js'
import { KEY_BYTES } from '../../crypto/aead.js'
import type { Keyring } from '../../crypto/keyring.js'
import type { SealedColumn } from '../../crypto/sealed-column.js'
import { decryptStream, encryptStream } from '../../crypto/stream-cipher.js'
import type { Clock } from '../../lib/clock.js'
import { AppError, ErrorType, errors } from '../../lib/errors.js'
import { newId } from '../../lib/ids.js'
import { ILL_FORMED_TEXT, isWellFormedText } from '../../lib/input.js'
import { type Meter, noopMeter } from '../../metrics/meter.js'
import { changeOwner, createItem, ownedItem, type Requirement } from '../../policy/index.js'
import type { Executor } from '../../store/executor.js'
import type { UsersService } from '../users/users.service.js'
import type { VaultsService } from '../vaults/vaults.service.js'
import type { BlobRow } from './blobs.repo.js'
import * as repo from './blobs.repo.js'

/** 50 MB (spec, Limits): enforced while streaming. */
export const MAX_BLOB_BYTES = 52_428_800
export const MAX_FILENAME = 255

/** Content written to the store but not (yet) recorded in a row. */
export interface StoredContent {
  objectId: string
  objectKey: string
  streamKey: Buffer
  size: number
}

export interface IncomingFile {
  stream: Readable
  filename: string
  mimeType: string
}

const collection = (vaultId: string) => ['Vault', vaultId, 'Blob']
export const blobResource = (row: Pick<BlobRow, 'vault_id' | 'id' | 'owner_id'>) =>
  ownedItem([...collection(row.vault_id), row.id], row.owner_id)
const notFound = () => errors.notFound('BLOB')
export const blobTooLarge = () =>
  new AppError(
    413,
    ErrorType.invalidRequest,
    'PAYLOAD_TOO_LARGE',
    `file must be at most ${MAX_BLOB_BYTES} bytes`,
  )

/** `field` names where the filename came from: the `file` part, or a raw upload's `filename`. */
export function validateFilename(name: string, field = 'file'): string {
  const what = field === 'file' ? 'filename ' : ''
  if (name.length > MAX_FILENAME)
    throw errors.invalidField(field, `${what}must be at most ${MAX_FILENAME} characters`)
  if (/\p{Cc}/u.test(name))
    throw errors.invalidField(field, `${what}must not contain control characters`)
  // Downloads percent-encode it (Content-Disposition): an unpaired surrogate would throw there.
  if (!isWellFormedText(name)) throw errors.invalidField(field, `${what}${ILL_FORMED_TEXT}`)
  return name
}

/**
 * Binary objects in vaults. Bytes stream through a size limit and chunked AES-256-GCM into the
 * blob store under a fresh object key per content version; the row (with the stream key wrapped
 * by the account's data key) is written after the object and deleted before it, so the row is
 * always the truth and a failed request leaves no object behind.
 */
export class BlobsService {
  constructor(
    private readonly db: Executor,
    private readonly clock: Clock,
    private readonly keyring: Keyring,
    private readonly store: BlobStore,
    private readonly vaults: VaultsService,
    private readonly users: UsersService,
    private readonly onCleanupError: (error: unknown, objectKey: string) => void = () => {},
    private readonly meter: Meter = noopMeter,
  ) {}

  async requireVault(actor: Actor, vaultId: string): Promise<void> {
    await this.vaults.require(this.db, actor.principal.accountId, vaultId)
  }

  /**
   * The owner of a BLOB (null: unowned), or undefined when the account has no such BLOB: what
   * `$[Owner=…]` matchers are decided on (the policy simulator).
   */
  async ownerOf(accountId: string, vaultId: string, id: string) {
    return (await repo.findById(this.db, accountId, vaultId, id))?.owner_id
  }

  /**
   * The object a BLOB's row names now (undefined: no such BLOB): `coffer check` tells an
   * orphaned object from one whose row exists.
   */
  async objectKeyOf(accountId: string, vaultId: string, id: string): Promise<string | undefined> {
    return (await repo.findById(this.db, accountId, vaultId, id))?.object_key
  }

  /** The BLOB, if the caller may at least see it (else 404 as if missing). */
  async find(actor: Actor, vaultId: string, id: string): Promise<BlobRow> {
    await this.requireVault(actor, vaultId)
    const row = await repo.findById(this.db, actor.principal.accountId, vaultId, id)
    if (!row) throw notFound()
    return row
  }

  /** Creating a BLOB with this owner (null: none) needs C on it (spec, "Ownership"). */
  assertCanCreate(actor: Actor, vaultId: string, ownerId: string | null): void {
    if (!actor.grants.satisfies(createItem(collection(vaultId), ownerId)))
      throw errors.permissionDenied()
  }

  /** Content replacement needs U on the BLOB: checked before any byte is stored. */
  assertCanReplace(actor: Actor, row: BlobRow): void {
    const item = blobResource(row)
    assertItemAllows(actor.grants, item, { activity: 'U', resource: item }, notFound)
  }

  /** Streams a file into the store, encrypted, failing with 413 past the size limit. */
  async storeContent(
    accountId: string,
    vaultId: string,
    blobId: string,
    file: Readable,
  ): Promise<StoredContent> {
    const objectId = newId()
    const objectKey = blobKey(accountId, vaultId, blobId, objectId)
    const streamKey = randomBytes(KEY_BYTES)
    const limiter = sizeLimit(MAX_BLOB_BYTES, blobTooLarge)
    file.on('error', (e) => limiter.destroy(e))
    limiter.on('error', () => file.resume())
    const encrypted = file.pipe(limiter).pipe(encryptStream(streamKey))
    limiter.on('error', (e) => encrypted.destroy(e))
    await this.store.put(objectKey, encrypted).catch((error) => {
      throw this.#storeFailure(error, { account_id: accountId, vault_id: vaultId, blob_id: blobId })
    })
    this.meter.count('blob_bytes', { direction: 'in' }, limiter.bytes())
    return { objectId, objectKey, streamKey, size: limiter.bytes() }
  }

  /** Records a stored upload; on any refusal the object is removed again. */
  async create(
    actor: Actor,
    vaultId: string,
    blobId: string,
    content: StoredContent,
    meta: { filename: string; mimeType: string; ownerId: string | null },
  ): Promise<BlobRow> {
    return this.#orDiscard(content, async () => {
      const accountId = actor.principal.accountId
      this.assertCanCreate(actor, vaultId, meta.ownerId)
      await this.#checkOwner(accountId, meta.ownerId)
      const now = this.clock.now().toISOString()
      const row: BlobRow = {
        account_id: accountId,
        vault_id: vaultId,
        id: blobId,
        owner_id: meta.ownerId,
        filename: meta.filename,
        mime_type: meta.mimeType,
        size: content.size,
        object_key: content.objectKey,
        content_key: await this.#wrapKey(accountId, vaultId, blobId, content),
        metadata_document_id: null,
        created_at: now,
        updated_at: now,
      }
      await repo.insert(this.db, row)
      return row
    })
  }

  /** New content (already checked with `assertCanReplace`) and/or a new owner. */
  async update(
    actor: Actor,
    row: BlobRow,
    changes: {
      content?: StoredContent
      filename?: string
      mimeType?: string
      ownerId?: string | null
    },
  ): Promise<BlobRow> {
    const run = async () => {
      const accountId = actor.principal.accountId
      const item = blobResource(row)
      // Content needs U; an owner change exactly the spec's table (D and C, not R or U).
      const needs: Requirement[] = []
      if (changes.content) needs.push({ activity: 'U', resource: item })
      const ownerChange =
        changes.ownerId === undefined
          ? null
          : changeOwner(collection(row.vault_id), row.id, row.owner_id, changes.ownerId)
      if (ownerChange) needs.push(ownerChange)
      // A request that changes nothing still may not confirm that someone else's BLOB exists.
      if (needs.length === 0) needs.push({ activity: 'R', resource: item })
      assertItemAllows(actor.grants, item, { allOf: needs }, notFound)
      if (changes.ownerId !== undefined) await this.#checkOwner(accountId, changes.ownerId)
      const patch: repo.BlobPatch = { updated_at: this.clock.now().toISOString() }
      if (changes.ownerId !== undefined) patch.owner_id = changes.ownerId
      if (changes.content) {
        patch.object_key = changes.content.objectKey
        patch.content_key = await this.#wrapKey(accountId, row.vault_id, row.id, changes.content)
        patch.size = changes.content.size
        patch.filename = changes.filename ?? row.filename
        patch.mime_type = changes.mimeType ?? row.mime_type
      }
      if (!(await repo.update(this.db, accountId, row.vault_id, row.id, row.object_key, patch))) {
        throw new AppError(
          409,
          ErrorType.invalidRequest,
          'CONFLICT',
          'The BLOB changed meanwhile; try again',
        )
      }
      return (await repo.findById(this.db, accountId, row.vault_id, row.id)) as BlobRow
    }
    const updated = changes.content ? await this.#orDiscard(changes.content, run) : await run()
    // The row now names the new object: the old one is garbage.
    if (changes.content) await this.#deleteObject(row.object_key)
    return updated
  }

  /** The decrypted content, checked to decrypt before the caller sends any header. */
  async open(
    actor: Actor,
    vaultId: string,
    id: string,
  ): Promise<{ row: BlobRow; stream: Readable }> {
    const row = await this.find(actor, vaultId, id)
    const item = blobResource(row)
    assertItemAllows(actor.grants, item, { activity: 'R', resource: item }, notFound)
    const key = await this.keyring.decrypt(
      row.account_id,
      row.content_key,
      keyContext(row.vault_id, row.id, row.object_key),
    )
    const source = await this.#getObject(row)
    const plain = decryptStream(key)
    // Counts the bytes actually served, also of a download the client abandons half-way.
    const served = new Transform({
      transform: (chunk: Buffer, _encoding, done) => {
        this.meter.count('blob_bytes', { direction: 'out' }, chunk.length)
        done(null, chunk)
      },
    })
    // pipeline, not pipe: when decryption fails or the client goes away, the object's file
    // handle (or S3 response) is released at once, not left open until garbage collection.
    let sourceFailure: unknown
    source.once('error', (error) => {
      sourceFailure = error
    })
    pipeline(source, plain, served, () => {})
    await firstReadable(served).catch((error) => {
      // The store dropped the object's stream before the first byte: the store's failure (a
      // connection reset would otherwise read as the database's), not the content's.
      if (sourceFailure === undefined) throw error
      throw this.#storeFailure(
        new BlobStoreUnavailableError('GetObject', false, 0, sourceFailure),
        { account_id: row.account_id, vault_id: row.vault_id, blob_id: row.id },
      )
    })
    return { row, stream: served }
  }

  async list(actor: Actor, vaultId: string, page: number, perPage: number) {
    const accountId = actor.principal.accountId
    await this.requireVault(actor, vaultId)
    const scopes = actor.grants.readScopes([...collection(vaultId), ''])
    if (!scopes) throw errors.permissionDenied()
    const [rows, total] = await Promise.all([
      repo.list(this.db, accountId, vaultId, scopes, perPage, (page - 1) * perPage),
      repo.count(this.db, accountId, vaultId, scopes),
    ])
    return { rows, total }
  }

  /** Row first, then the object: a crash in between leaves garbage, never a dangling row. */
  async delete(actor: Actor, vaultId: string, id: string): Promise<BlobRow> {
    const row = await this.find(actor, vaultId, id)
    const item = blobResource(row)
    assertItemAllows(actor.grants, item, { activity: 'D', resource: item }, notFound)
    if (!(await repo.remove(this.db, row.account_id, vaultId, id))) throw notFound()
    await this.#deleteObject(row.object_key)
    return row
  }

  /** Removes stored content that no row will name (a refused or failed upload). */
  discard(content: StoredContent): Promise<void> {
    return this.#deleteObject(content.objectKey)
  }

  async #orDiscard<T>(content: StoredContent, run: () => Promise<T>): Promise<T> {
    try {
      return await run()
    } catch (error) {
      await this.discard(content)
      throw error
    }
  }

  /**
   * The row's object; when the store does not have it (deleted by hand, written to another
   * node's folder), a 503 that says so, logged once and counted: never an anonymous 500.
   */
  async #getObject(row: BlobRow): Promise<Readable> {
    try {
      return await this.store.get(row.object_key)
    } catch (error) {
      if (!(error instanceof BlobNotFoundError)) {
        throw this.#storeFailure(error, {
          account_id: row.account_id,
          vault_id: row.vault_id,
          blob_id: row.id,
        })
      }
      const store = this.store.kind === 's3' ? 's3' : 'fs'
      this.meter.count('blob_objects_missing', { store })
      throw errors.blobContentUnavailable({
        account_id: row.account_id,
        vault_id: row.vault_id,
        blob_id: row.id,
        object_key: row.object_key,
        blob_store: store,
      })
    }
  }

  /**
   * The store's own failure as 503 BLOB_STORE_UNAVAILABLE (504 BLOB_STORE_TIMEOUT past its
   * deadline), logged once with what failed; any other error (the body's own) unchanged.
   */
  #storeFailure(error: unknown, fields: Record<string, string>): unknown {
    if (!(error instanceof BlobStoreUnavailableError)) return error
    const logFields = {
      ...fields,
      blob_store: this.store.kind,
      operation: error.operation,
      cause: error.message,
    }
    return error.timedOut
      ? errors.blobStoreTimeout(error.deadlineMs, logFields)
      : errors.blobStoreUnavailable(logFields)
  }

  async #deleteObject(objectKey: string): Promise<void> {
    try {
      await this.store.delete(objectKey)
    } catch (error) {
      this.onCleanupError(error, objectKey)
    }
  }

  /**
   * The BLOBs, for `coffer keys reencrypt` (crypto/sealed-column.ts): each one's content is
   * decrypted from its object into a new object under a new stream key, sealed by the account's
   * current data key; the row is switched only if it still names the old object (an upload in
   * between wins and the new object is removed), then the old object is deleted. Works on any
   * BLOB store (fs, S3) through its interface.
   */
  sealedColumn(): SealedColumn {
    return {
      name: 'blobs',
      listNotUnder: async (accountId, keyId, after, limit) =>
        (await repo.listNotUnderKey(this.db, accountId, keyId, after, limit)).map((row) => ({
          id: row.id,
          scope: `${row.vault_id}\n${row.object_key}`,
          ciphertext: row.content_key,
          context: keyContext(row.vault_id, row.id, row.object_key),
        })),
      replace: async () => false,
      reencrypt: async (accountId, record) => {
        const [vaultId = '', objectKey = ''] = record.scope.split('\n')
        const key = await this.keyring.decrypt(accountId, record.ciphertext, record.context)
        const source = await this.store.get(objectKey)
        const plain = decryptStream(key)
        source.on('error', (e) => plain.destroy(e))
        const content = await this.storeContent(accountId, vaultId, record.id, source.pipe(plain))
        return this.#orDiscard(content, async () => {
          const sealed = await this.#wrapKey(accountId, vaultId, record.id, content)
          const switched = await repo.update(this.db, accountId, vaultId, record.id, objectKey, {
            object_key: content.objectKey,
            content_key: sealed,
          })
          if (!switched) {
            await this.discard(content)
            return false
          }
          await this.#deleteObject(objectKey)
          return true
        })
      },
    }
  }

  #wrapKey(
    accountId: string,
    vaultId: string,
    blobId: string,
    content: StoredContent,
  ): Promise<string> {
    return this.keyring.encrypt(
      accountId,
      content.streamKey,
      keyContext(vaultId, blobId, content.objectKey),
    )
  }

  async #checkOwner(accountId: string, ownerId: string | null): Promise<void> {
    if (ownerId !== null && !(await this.users.exists(accountId, ownerId))) {
      throw errors.invalidField('owner_id', 'is not a user of this account')
    }
  }
}

/** The stream key is bound to its BLOB and object: it cannot be moved to another. */
function keyContext(vaultId: string, blobId: string, objectKey: string): string {
  return `blob-stream-key\n${vaultId}\n${blobId}\n${objectKey}`
}
