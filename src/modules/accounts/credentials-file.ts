import {
  closeSync,
  fsyncSync,
  linkSync,
  openSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs'
import { dirname } from 'node:path'
import type { AccountCredentials } from './accounts.service.js'

/**
 * Writes the credentials to `<file>.<account id>.tmp` (created exclusively, mode 0600, fsynced):
 * staged before the account's transaction commits, so a crash after the commit still leaves
 * the only copy of the admin password on disk under a name the log gives.
 */
export function stageCredentialsFile(file: string, credentials: AccountCredentials): string {
  const staged = `${file}.${credentials.account_id}.tmp`
  const fd = openSync(staged, 'wx', 0o600)
  try {
    writeSync(fd, `${JSON.stringify(credentials, null, 2)}\n`)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
  return staged
}

/**
 * Moves the staged file to its name without ever replacing a file already there (a link fails
 * with EEXIST where a rename would overwrite): when the name is taken, the staged file is kept
 * beside it as `<file>.<account id>.json`. Returns where the credentials now are.
 */
export function publishCredentialsFile(staged: string, file: string, accountId: string): string {
  let target = file
  try {
    linkSync(staged, file)
    unlinkSync(staged)
  } catch (error) {
    if ((error as { code?: unknown }).code !== 'EEXIST') throw error
    target = file.replace(/\.json$/, `.${accountId}.json`)
    renameSync(staged, target)
  }
  syncFolder(dirname(target))
  return target
}

/** A rename or link is durable only once its folder is. */
function syncFolder(dir: string): void {
  const fd = openSync(dir, 'r')
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}
