import { existsSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import type { AccountCredentials, AccountsService } from './accounts.service.js'
import { publishCredentialsFile, stageCredentialsFile } from './credentials-file.js'

export const CREDENTIALS_FILE = 'bootstrap-credentials.json'

export type BootstrapOutcome =
  | { created: true; accountId: string; file: string }
  | { created: false; reason: 'already-bootstrapped' | 'another-node' }

/**
 * First start on an empty database: one account and admin, credentials to a 0600 file in the
 * data folder. Nodes starting together (on one PostgreSQL database, or one SQLite file with a
 * shared data folder) race safely: the account's transaction claims a singleton row, exactly
 * one node commits, the others learn that another node bootstrapped and go on serving.
 */
export async function bootstrapFirstAccount(
  accounts: AccountsService,
  dataDir: string,
): Promise<BootstrapOutcome> {
  if (await accounts.isBootstrapped()) return { created: false, reason: 'already-bootstrapped' }
  const file = join(dataDir, CREDENTIALS_FILE)
  // A file left from an earlier database would be mistaken for this one's credentials. Unless
  // another node has just bootstrapped (and written it), refuse before anything is created.
  if (existsSync(file)) {
    if (await accounts.isBootstrapped()) return { created: false, reason: 'another-node' }
    throw new Error(`${file} already exists; refusing to overwrite it`)
  }
  let staged: string | undefined
  let credentials: AccountCredentials | null
  try {
    credentials = await accounts.createWithAdmin({
      firstStart: true,
      beforeCommit: (c) => {
        staged = stageCredentialsFile(file, c)
      },
    })
  } catch (error) {
    // The transaction rolled back: the staged credentials name an account that does not exist.
    if (staged) rmSync(staged, { force: true })
    throw error
  }
  if (!credentials || !staged) return { created: false, reason: 'another-node' }
  // Committed: from here on the staged file is the only copy of the password; never remove it.
  const written = publishCredentialsFile(staged, file, credentials.account_id)
  return { created: true, accountId: credentials.account_id, file: written }
}
