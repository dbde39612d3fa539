import { CURRENT_KEY_TTL_MS, Keyring } from '../../crypto/keyring.js'
import type { SealedColumn } from '../../crypto/sealed-column.js'
import { withWriteRetry } from './write-retry.js'

/** Records read per page; each is then replaced in a transaction of its own. */
export const REENCRYPT_PAGE_SIZE = 50
/**
 * Passes over an account at most: a node keeps writing under the account's previous data key
 * until it re-reads the current one (CURRENT_KEY_TTL_MS), so passes after the first pick those
 * writes up, one TTL apart.
 */
export const REENCRYPT_MAX_PASSES = 5
/** Added to CURRENT_KEY_TTL_MS before the closing pass. */
const SWITCH_MARGIN_MS = 1000

interface OwnsSealedColumn {
  sealedColumn(): SealedColumn
}

/** The services that own keyring ciphertexts (the node's deps have them all). */
export interface SealedColumnOwners {
  documents: OwnsSealedColumn
  users: OwnsSealedColumn
  blobService: OwnsSealedColumn
  mfa: { sealedColumns(): SealedColumn[] }
  passwordResets: OwnsSealedColumn
}

/**
 * Every column sealed with an account's data key: document content, user attributes, BLOB
 * keys, MFA secrets (active and pending) and password-reset flows' SendGrid API keys. A data
 * key suspected exposed leaves nothing under it (decisions 247).
 */
export function reencryptedColumns(owners: SealedColumnOwners): SealedColumn[] {
  return [
    owners.documents.sealedColumn(),
    owners.users.sealedColumn(),
    owners.blobService.sealedColumn(),
    ...owners.mfa.sealedColumns(),
    owners.passwordResets.sealedColumn(),
  ]
}

/** The same columns but the BLOBs' (`coffer check` opens BLOBs with their objects). */
export function sealedRecordColumns(
  owners: Omit<SealedColumnOwners, 'blobService'>,
): SealedColumn[] {
  return [
    owners.documents.sealedColumn(),
    owners.users.sealedColumn(),
    ...owners.mfa.sealedColumns(),
    owners.passwordResets.sealedColumn(),
  ]
}

export interface AccountReencryption {
  account_id: string
  /** The data key everything is now under. */
  data_key_id: string
  /** True when an earlier run had already added that key and was stopped before finishing. */
  resumed: boolean
  /** Records re-encrypted per column. */
  reencrypted: Record<string, number>
  /** Records that do not decrypt (named by column and id), left as they are. */
  unreadable: string[]
  /** Records still not under the new key at the end (0 when done). */
  remaining: number
}

/**
 * `coffer keys reencrypt`, for one account: a new data key, then every sealed record (documents,
 * user attributes) decrypted and encrypted again under it, one record per write, each write
 * conditional on the record not having changed since it was read. Servers keep serving: they
 * read both keys, and switch their new writes to the new key within CURRENT_KEY_TTL_MS. A
 * stopped run resumes: while some record is not under the account's newest key, no other key is
 * added and the walk starts over from what is left.
 */
export async function reencryptAccount(
  keyring: Keyring,
  columns: SealedColumn[],
  accountId: string,
  options: {
    pageSize?: number
    onRecord?: () => void
    pause?: (ms: number) => Promise<void>
  } = {},
): Promise<AccountReencryption> {
  const pageSize = options.pageSize ?? REENCRYPT_PAGE_SIZE
  const pause = options.pause ?? ((ms) => new Promise<void>((r) => setTimeout(r, ms)))
  await keyring.preload(accountId)
  const current = await keyring.currentKeyId(accountId)
  const resumed = await anyNotUnder(columns, accountId, current)
  const keyId = resumed ? current : await keyring.addDataKey(accountId)
  const reencrypted: Record<string, number> = Object.fromEntries(columns.map((c) => [c.name, 0]))
  const unreadable = new Set<string>()
  for (let pass = 0; pass < REENCRYPT_MAX_PASSES; pass++) {
    // Pass 2 on starts once every node has re-read the current key (a TTL and a margin for a
    // request that sealed under the old key just before and writes just after).
    if (pass > 0) await pause(CURRENT_KEY_TTL_MS + SWITCH_MARGIN_MS)
    for (const column of columns) {
      let after: string | undefined
      for (;;) {
        const page = await column.listNotUnder(accountId, keyId, after, pageSize)
        if (page.length === 0) break
        after = page[page.length - 1]?.id
        for (const record of page) {
          const own = column.reencrypt
          if (own) {
            let replaced: boolean
            try {
              replaced = await withWriteRetry(() => own.call(column, accountId, record))
            } catch {
              unreadable.add(`${column.name}/${record.id}`)
              continue
            }
            if (replaced) reencrypted[column.name] = (reencrypted[column.name] ?? 0) + 1
            options.onRecord?.()
            continue
          }
          let sealed: string
          try {
            const plain = await keyring.decrypt(accountId, record.ciphertext, record.context)
            sealed = await keyring.encrypt(accountId, plain, record.context)
          } catch {
            unreadable.add(`${column.name}/${record.id}`)
            continue
          }
          if (Keyring.keyIdOf(sealed) !== keyId) {
            throw new Error(`account ${accountId}: data key ${keyId} is no longer current`)
          }
          const replaced = await withWriteRetry(() => column.replace(accountId, record, sealed))
          // Not replaced: the API wrote the record meanwhile; the next pass sees its new value.
          if (replaced) reencrypted[column.name] = (reencrypted[column.name] ?? 0) + 1
          options.onRecord?.()
        }
      }
    }
    // Done only after a pass that began when every node already wrote under the new key.
    if (pass > 0 && (await countNotUnder(columns, accountId, keyId)) <= unreadable.size) break
  }
  return {
    account_id: accountId,
    data_key_id: keyId,
    resumed,
    reencrypted,
    unreadable: [...unreadable],
    remaining: await countNotUnder(columns, accountId, keyId),
  }
}

async function anyNotUnder(columns: SealedColumn[], accountId: string, keyId: string) {
  for (const column of columns) {
    if ((await column.listNotUnder(accountId, keyId, undefined, 1)).length > 0) return true
  }
  return false
}

/** Records not under `keyId`, counted page by page (bounded memory). */
async function countNotUnder(columns: SealedColumn[], accountId: string, keyId: string) {
  let n = 0
  for (const column of columns) {
    let after: string | undefined
    for (;;) {
      const page = await column.listNotUnder(accountId, keyId, after, 500)
      n += page.length
      if (page.length < 500) break
      after = page[page.length - 1]?.id
    }
  }
  return n
}
