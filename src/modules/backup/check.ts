import { BlobNotFoundError, type BlobStore } from '../../blob/blob-store.js'
import type { DataKeyRecord, Keyring } from '../../crypto/keyring.js'
import type { SealedColumn } from '../../crypto/sealed-column.js'
import { decryptStream } from '../../crypto/stream-cipher.js'
import { accountsWithDataKeys, dataKeysNotUnder } from '../../store/data-keys.repo.js'
import type { Executor } from '../../store/executor.js'

/** Problems listed in a report at most (all are counted). */
export const MAX_LISTED_PROBLEMS = 1000
/** Orphan candidates looked at again after the walk (a BLOB upload writes its object first). */
const MAX_ORPHAN_CANDIDATES = 10_000
/** How long the walk waits before looking at orphan candidates again. */
export const ORPHAN_RECHECK_DELAY_MS = 1000
const PAGE = 200
/** No data key has this id: `listNotUnder` with it lists every record of a column. */
const NO_KEY = 'none'
const OBJECT_KEY = /^a\/([0-9a-f-]{36})\/v\/([0-9a-f-]{36})\/b\/([0-9a-f-]{36})\/[0-9a-f-]{36}$/

export type ProblemKind =
  | 'data_key'
  | 'record'
  | 'blob_key'
  | 'blob_content'
  | 'missing_object'
  | 'orphaned_object'

export interface CheckProblem {
  kind: ProblemKind
  /** Where: account and record ids, or the object key (never a value). */
  where: string
  detail: string
}

export interface CheckReport {
  ok: boolean
  checked: {
    data_keys: number
    records: Record<string, number>
    blob_objects: number
    blob_bytes: number
    objects_listed: number
  }
  problems_total: number
  problems: CheckProblem[]
}

/** What `coffer check` reads; main.ts hands the features' ports over. */
export interface CheckInput {
  db: Executor
  keyring: Keyring
  /**
   * Sealed columns whose every ciphertext must decrypt (documents, user attributes, MFA secrets,
   * reset flows' keys).
   */
  columns: SealedColumn[]
  /** The BLOBs' column: stream keys, and each BLOB's object (scope `vault\nobject key`). */
  blobs: SealedColumn
  blobStore: BlobStore
  /** The object a BLOB row names now (undefined: no such row). */
  blobObjectKey(accountId: string, vaultId: string, blobId: string): Promise<string | undefined>
  onProgress?: (done: number, note: string) => void
  pause?: (ms: number) => Promise<void>
}

/**
 * `coffer check` (decisions 236): every data key unwraps with a master key held, every sealed
 * record decrypts, every BLOB's stream key decrypts and its object exists and decrypts to the
 * end, and every object in the store belongs to a BLOB row. Reads only; safe beside serving
 * nodes (an object a BLOB upload wrote a moment before its row is looked at again before it is
 * called orphaned; a BLOB deleted meanwhile is not called missing).
 */
export async function runCheck(input: CheckInput): Promise<CheckReport> {
  const problems: CheckProblem[] = []
  let total = 0
  let done = 0
  const problem = (kind: ProblemKind, where: string, detail: string) => {
    total += 1
    if (problems.length < MAX_LISTED_PROBLEMS) problems.push({ kind, where, detail })
  }
  const step = (note: string) => input.onProgress?.(++done, note)
  const checked: CheckReport['checked'] = {
    data_keys: 0,
    records: {},
    blob_objects: 0,
    blob_bytes: 0,
    objects_listed: 0,
  }

  let after: DataKeyRecord | undefined
  for (;;) {
    // A fingerprint no row has: every data key, in key order.
    const page = await dataKeysNotUnder(input.db, '', after, PAGE)
    if (page.length === 0) break
    after = page[page.length - 1]
    for (const record of page) {
      checked.data_keys += 1
      try {
        input.keyring.masterKeys.unwrap(record)
      } catch (error) {
        problem(
          'data_key',
          `account ${record.account_id} data key ${record.id}`,
          `does not unwrap (master key ${record.master_key_fingerprint ?? record.master_key_id}): ${message(error)}`,
        )
      }
      step('data keys')
    }
  }

  for (const account of await accountsWithDataKeys(input.db)) {
    for (const column of input.columns) {
      checked.records[column.name] ??= 0
      for await (const record of everyRecord(column, account)) {
        checked.records[column.name] = (checked.records[column.name] ?? 0) + 1
        try {
          await input.keyring.decrypt(account, record.ciphertext, record.context)
        } catch (error) {
          problem('record', `account ${account} ${column.name} ${record.id}`, message(error))
        }
        step(column.name)
      }
    }
    for await (const record of everyRecord(input.blobs, account)) {
      const [vaultId = '', objectKey = ''] = record.scope.split('\n')
      const where = `account ${account} vault ${vaultId} blob ${record.id}`
      let key: Buffer
      try {
        key = await input.keyring.decrypt(account, record.ciphertext, record.context)
      } catch (error) {
        problem('blob_key', where, `stream key: ${message(error)}`)
        continue
      }
      try {
        checked.blob_bytes += await decryptObject(input.blobStore, objectKey, key)
        checked.blob_objects += 1
      } catch (error) {
        if (!(error instanceof BlobNotFoundError)) {
          problem('blob_content', where, `object ${objectKey}: ${message(error)}`)
        } else if ((await input.blobObjectKey(account, vaultId, record.id)) === objectKey) {
          problem('missing_object', where, `object ${objectKey} is not in the BLOB store`)
        }
      }
      step('blobs')
    }
  }

  const candidates: string[] = []
  for await (const object of input.blobStore.list('a/')) {
    checked.objects_listed += 1
    if (!(await belongs(input, object.key))) {
      if (candidates.length < MAX_ORPHAN_CANDIDATES) candidates.push(object.key)
      else problem('orphaned_object', object.key, 'no BLOB row names this object')
    }
    step('objects')
  }
  if (candidates.length > 0) {
    await (input.pause ?? sleep)(ORPHAN_RECHECK_DELAY_MS)
    for (const key of candidates) {
      if (!(await belongs(input, key)) && (await input.blobStore.exists(key))) {
        problem('orphaned_object', key, 'no BLOB row names this object')
      }
    }
  }
  return { ok: total === 0, checked, problems_total: total, problems }
}

async function* everyRecord(column: SealedColumn, accountId: string) {
  let after: string | undefined
  for (;;) {
    const page = await column.listNotUnder(accountId, NO_KEY, after, PAGE)
    if (page.length === 0) return
    yield* page
    after = page[page.length - 1]?.id
  }
}

async function belongs(input: CheckInput, key: string): Promise<boolean> {
  const m = OBJECT_KEY.exec(key)
  if (!m) return false
  const [, account = '', vault = '', blob = ''] = m
  return (await input.blobObjectKey(account, vault, blob)) === key
}

/** Reads the object through the decrypting stream to its end; returns the plaintext bytes. */
async function decryptObject(store: BlobStore, objectKey: string, key: Buffer): Promise<number> {
  const source = await store.get(objectKey)
  const plain = decryptStream(key)
  source.on('error', (e) => plain.destroy(e))
  source.pipe(plain)
  let bytes = 0
  for await (const chunk of plain as AsyncIterable<Buffer>) bytes += chunk.length
  return bytes
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
