import { randomBytes } from 'node:crypto'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { FsBlobStore } from '../src/blob/fs-blob-store.js'
import { MasterKey } from '../src/crypto/master-key.js'
import { createDeps } from '../src/deps.js'
import { runKeyRotation } from '../src/modules/keys/rotate-command.js'
import { migrateToLatest } from '../src/store/migrate.js'
import { fileKeyPath } from '../src/store/sqlite-file-key.js'
import { basicHeader, TEST_ARGON2 } from './helpers/app.js'
import {
  bootstrapCredentials,
  clusterBlobEnv,
  openCofferStore,
  runCoffer,
  type ServerProcess,
  sharedDatabase,
  startServerProcess,
  waitForOutput,
} from './helpers/processes.js'
import { testDialect } from './helpers/store.js'

/**
 * `coffer keys rotate` while `coffer serve` processes keep serving (issue 22, part 3): every
 * request of a read/write load during the rotation succeeds, every record reads afterwards with
 * the previous key removed from every node, and the embedded key file is picked up without a
 * restart.
 */

/** Data keys beyond the bootstrap account's: more than two batches of REWRAP_BATCH_SIZE. */
const EXTRA_ACCOUNTS = 230

interface Written {
  server: number
  apiKey: string
  vaultId: string
  docId: string
  content: { n: number; text: string }
}

/** A read/write load on the given servers until stopped: documents written, then read back. */
function startLoad(
  servers: () => ServerProcess[],
  accounts: { apiKey: string; vaultId: string }[],
) {
  const written: Written[] = []
  const failures: string[] = []
  let requests = 0
  let running = true
  const loop = async (worker: number) => {
    for (let i = 0; running; i++) {
      const list = servers()
      const s = (worker + i) % list.length
      const url = (list[s] as ServerProcess).url
      const account = accounts[(worker * 7 + i) % accounts.length] as {
        apiKey: string
        vaultId: string
      }
      const content = { n: i, text: `w${worker}-${i}` }
      try {
        const post = await fetch(`${url}/v2/vaults/${account.vaultId}/documents`, {
          method: 'POST',
          headers: {
            authorization: basicHeader(account.apiKey),
            'content-type': 'application/json',
          },
          body: JSON.stringify({ document: content }),
        })
        requests += 1
        if (post.status !== 200) {
          failures.push(`POST ${post.status} ${await post.text()}`)
          continue
        }
        const docId = ((await post.json()) as { document_id: string }).document_id
        written.push({
          server: s,
          apiKey: account.apiKey,
          vaultId: account.vaultId,
          docId,
          content,
        })
        // read an earlier record through the other server
        const earlier = written[(i * 13) % written.length] as Written
        const other = (list[(s + 1) % list.length] as ServerProcess).url
        const get = await fetch(
          `${other}/v2/vaults/${earlier.vaultId}/documents/${earlier.docId}`,
          {
            headers: { authorization: basicHeader(earlier.apiKey) },
          },
        )
        requests += 1
        if (get.status !== 200) failures.push(`GET ${get.status} ${await get.text()}`)
      } catch (error) {
        failures.push(String(error))
      }
    }
  }
  const workers = [0, 1, 2].map((w) => loop(w))
  return {
    written,
    failures,
    requests: () => requests,
    stop: async () => {
      running = false
      await Promise.all(workers)
    },
  }
}

async function readsBack(url: string, written: Written[]): Promise<string[]> {
  const problems: string[] = []
  for (const w of written) {
    const res = await fetch(`${url}/v2/vaults/${w.vaultId}/documents/${w.docId}`, {
      headers: { authorization: basicHeader(w.apiKey) },
    })
    const body = (await res.json()) as { documents?: { document: unknown }[] }
    if (
      res.status !== 200 ||
      JSON.stringify(body.documents?.[0]?.document) !== JSON.stringify(w.content)
    )
      problems.push(`${w.docId}: ${res.status} ${JSON.stringify(body)}`)
  }
  return problems
}

/** Every file under a folder (the fs BLOB store's objects). */
function listFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name))
    .sort()
}

async function newVault(url: string, apiKey: string): Promise<string> {
  const res = await fetch(`${url}/v1/vaults`, {
    method: 'POST',
    headers: { authorization: basicHeader(apiKey) },
    body: new URLSearchParams({ name: `v-${Math.random().toString(36).slice(2)}` }),
  })
  expect(res.status).toBe(200)
  return ((await res.json()) as { vault: { id: string } }).vault.id
}

describe(`key rotation while serving (${testDialect}, two server processes)`, () => {
  it('rolling restart with current + previous, rotate under load, retire the previous: nothing fails', async () => {
    const db = await sharedDatabase()
    const servers: ServerProcess[] = []
    try {
      const oldKey = db.masterKey
      const newKey = MasterKey.generate()
      const [dirA, dirB, dirCli] = [db.dataDir(), db.dataDir(), db.dataDir()]
      const first = await startServerProcess(db.env(dirA))
      const admin = bootstrapCredentials(dirA)
      // Many accounts (one data key each), written under the old key by this process.
      const store = db.open()
      const deps = createDeps(store, {
        masterKey: oldKey,
        blobStore: new FsBlobStore(join(dirCli, 'blobs')),
        argon2: TEST_ARGON2,
      })
      const apiKeys = [admin.api_key]
      for (let i = 0; i < EXTRA_ACCOUNTS; i++)
        apiKeys.push((await deps.accounts.createWithAdmin()).api_key)
      await store.close()
      const accounts = []
      for (const apiKey of apiKeys.slice(0, 6))
        accounts.push({ apiKey, vaultId: await newVault(first.url, apiKey) })
      await first.stop()

      // Rolling restart: every node holds the new key as current and the old as previous.
      const both = {
        COFFER_MASTER_KEY: newKey.toBase64(),
        COFFER_MASTER_KEY_PREVIOUS: oldKey.toBase64(),
      }
      servers.push(await startServerProcess({ ...db.env(dirA), ...both }))
      servers.push(await startServerProcess({ ...db.env(dirB), ...both }))
      const load = startLoad(() => servers, accounts)
      while (load.written.length < 20) await new Promise((r) => setTimeout(r, 20))
      const rotated = await runCoffer(['keys', 'rotate'], { ...db.env(dirCli), ...both })
      const during = load.requests()
      await load.stop()
      expect(load.failures).toEqual([])
      expect(during).toBeGreaterThan(40)
      const report = JSON.parse(rotated.stdout)
      expect(report).toMatchObject({
        mode: 'environment',
        master_key_id: newKey.id,
        rotated_data_keys: EXTRA_ACCOUNTS + 1,
        not_under_current: 0,
        previous_may_be_retired: true,
        data_keys_by_master_key: { [newKey.id]: EXTRA_ACCOUNTS + 1 },
        unopenable: [],
      })
      expect(report.message).toContain('the previous key may be retired')
      // Run again: nothing left to do, same answer.
      const again = JSON.parse(
        (await runCoffer(['keys', 'rotate'], { ...db.env(dirCli), ...both })).stdout,
      )
      expect(again).toMatchObject({ rotated_data_keys: 0, previous_may_be_retired: true })

      // Retire the previous key on every node: everything still reads.
      for (const s of servers.splice(0)) await s.stop()
      const only = { COFFER_MASTER_KEY: newKey.toBase64() }
      servers.push(await startServerProcess({ ...db.env(dirA), ...only }))
      servers.push(await startServerProcess({ ...db.env(dirB), ...only }))
      expect(load.written.length).toBeGreaterThan(20)
      expect(await readsBack((servers[1] as ServerProcess).url, load.written)).toEqual([])
      // The old key alone no longer opens anything: refused at start.
      const refused = await runCoffer(['keys', 'rotate'], {
        ...db.env(dirCli),
        COFFER_MASTER_KEY: oldKey.toBase64(),
        COFFER_MASTER_KEY_PREVIOUS: MasterKey.generate().toBase64(),
      }).catch((e: { stderr: string }) => e)
      expect((refused as { stderr: string }).stderr).toMatch(/does not unlock this database/)
    } finally {
      for (const s of servers) await s.stop()
      await db.drop()
    }
  }, 300_000)
})

describe(`keys reencrypt while serving (${testDialect}, two server processes)`, () => {
  it('new data keys, every document and attribute re-encrypted under a read/write load: nothing fails or is lost', async () => {
    const db = await sharedDatabase()
    const servers: ServerProcess[] = []
    try {
      const [dirA, dirB, dirCli] = [db.dataDir(), db.dataDir(), db.dataDir()]
      // One BLOB folder for the servers and the command (on SQLite too).
      const blobs = join(db.dataDir(), 'blobs')
      const env = (dir: string) => ({ ...db.env(dir), ...clusterBlobEnv(blobs) })
      servers.push(await startServerProcess(env(dirA)))
      servers.push(await startServerProcess(env(dirB)))
      const admin = bootstrapCredentials(dirA)
      const url = (servers[0] as ServerProcess).url
      const user = await fetch(`${url}/v1/users`, {
        method: 'POST',
        headers: { authorization: basicHeader(admin.api_key) },
        body: new URLSearchParams({
          username: 'attrs',
          attributes: Buffer.from(JSON.stringify({ ssn: '078-05-1120' })).toString('base64'),
        }),
      })
      expect(user.status).toBe(200)
      const userId = ((await user.json()) as { user: { id: string } }).user.id
      const accounts = [{ apiKey: admin.api_key, vaultId: await newVault(url, admin.api_key) }]
      const vaultId = (accounts[0] as { vaultId: string }).vaultId
      const bytes = randomBytes(200_000)
      const form = new FormData()
      form.append('file', new Blob([bytes]), 'scan.bin')
      const upload = await fetch(`${url}/v1/vaults/${vaultId}/blobs`, {
        method: 'POST',
        headers: { authorization: basicHeader(admin.api_key) },
        body: form,
      })
      expect(upload.status, await upload.clone().text()).toBe(200)
      const blobId = ((await upload.json()) as { blob_id: string }).blob_id
      const objectsBefore = listFiles(blobs)
      expect(objectsBefore).toHaveLength(1)
      const load = startLoad(() => servers, accounts)
      while (load.written.length < 30) await new Promise((r) => setTimeout(r, 20))
      const store = db.open()
      const keyBefore = await store.db
        .selectFrom('data_keys')
        .select('id')
        .where('account_id', '=', admin.account_id)
        .execute()
      const ran = await runCoffer(
        ['keys', 'reencrypt', '--account', admin.account_id],
        env(dirCli),
      ).catch((e: { code: number; stdout: string; stderr: string }) => {
        throw new Error(`exit ${e.code}: ${e.stdout} ${e.stderr}`)
      })
      const writtenDuring = load.written.length
      // keep the load on a little after the command: writes now use the new key everywhere
      while (load.written.length < writtenDuring + 10) await new Promise((r) => setTimeout(r, 20))
      await load.stop()
      expect(load.failures).toEqual([])
      const report = JSON.parse(ran.stdout)
      expect(report.done).toBe(true)
      const [account] = report.accounts
      expect(account).toMatchObject({ account_id: admin.account_id, resumed: false, remaining: 0 })
      expect(account.reencrypted.documents).toBeGreaterThanOrEqual(30)
      expect(account.reencrypted.user_attributes).toBeGreaterThanOrEqual(2)
      expect(account.reencrypted.blobs).toBe(1)
      // the BLOB: a new object under a new stream key, the old object gone, the bytes the same
      const objectsAfter = listFiles(blobs)
      expect(objectsAfter).toHaveLength(1)
      expect(objectsAfter).not.toEqual(objectsBefore)
      const download = await fetch(`${url}/v1/vaults/${vaultId}/blobs/${blobId}`, {
        headers: { authorization: basicHeader(admin.api_key) },
      })
      expect(download.status).toBe(200)
      expect(Buffer.from(await download.arrayBuffer()).equals(bytes)).toBe(true)
      expect(keyBefore.map((k) => k.id)).not.toContain(account.data_key_id)
      try {
        // every document and attribute of the account is under the new data key
        const docs = await store.db
          .selectFrom('documents')
          .select('content')
          .where('account_id', '=', admin.account_id)
          .execute()
        expect(docs.length).toBe(load.written.length)
        for (const d of docs) expect(d.content.startsWith(`c1.${account.data_key_id}.`)).toBe(true)
        const users = await store.db
          .selectFrom('users')
          .select('attributes')
          .where('account_id', '=', admin.account_id)
          .execute()
        for (const u of users)
          expect(u.attributes.startsWith(`c1.${account.data_key_id}.`)).toBe(true)
        const blobRows = await store.db.selectFrom('blobs').select('content_key').execute()
        for (const b of blobRows)
          expect(b.content_key.startsWith(`c1.${account.data_key_id}.`)).toBe(true)
      } finally {
        await store.close()
      }
      expect(await readsBack((servers[1] as ServerProcess).url, load.written)).toEqual([])
      const attrs = await fetch(`${url}/v2/users/${userId}?full=true`, {
        headers: { authorization: basicHeader(admin.api_key) },
      })
      expect(
        ((await attrs.json()) as { users: { attributes: unknown }[] }).users[0]?.attributes,
      ).toEqual({
        ssn: '078-05-1120',
      })
      // run again: a fresh key, nothing lost
      const again = JSON.parse((await runCoffer(['keys', 'reencrypt'], env(dirCli))).stdout)
      expect(again.done).toBe(true)
      expect(again.accounts[0].data_key_id).not.toBe(account.data_key_id)
      expect(await readsBack(url, load.written)).toEqual([])
      // a malformed or unknown account is refused, nothing changed
      const bad = await runCoffer(['keys', 'reencrypt', '--account', 'nope'], env(dirCli)).catch(
        (e: { code: number; stderr: string }) => e,
      )
      expect((bad as { code: number }).code).toBe(1)
      expect((bad as { stderr: string }).stderr).toContain('--account <account_id>')
    } finally {
      for (const s of servers) await s.stop()
      await db.drop()
    }
  }, 300_000)
})

describe.skipIf(testDialect !== 'sqlite')(
  'key rotation on the embedded key file (SQLite: the only one generated in the data folder)',
  () => {
    it('the serving node picks the new key file up by itself, keeps the old until the re-wrap is done', async () => {
      const db = await sharedDatabase()
      let server: ServerProcess | undefined
      try {
        const dir = db.dataDir()
        // No COFFER_MASTER_KEY: the key is generated into dir/master.key at the first start.
        const { COFFER_MASTER_KEY: _, ...env } = db.env(dir)
        server = await startServerProcess(env)
        const keyFile = join(dir, 'master.key')
        const oldKey = MasterKey.fromBase64(readFileSync(keyFile, 'utf8'))
        const admin = bootstrapCredentials(dir)
        const accounts = [
          { apiKey: admin.api_key, vaultId: await newVault(server.url, admin.api_key) },
        ]
        const load = startLoad(() => [server as ServerProcess], accounts)
        while (load.written.length < 10) await new Promise((r) => setTimeout(r, 20))
        const rotated = JSON.parse((await runCoffer(['keys', 'rotate'], env)).stdout)
        const newKey = MasterKey.fromBase64(readFileSync(keyFile, 'utf8'))
        expect(newKey.id).not.toBe(oldKey.id)
        expect(rotated).toMatchObject({
          mode: 'key-file',
          master_key_id: newKey.id,
          previous_may_be_retired: true,
        })
        expect(existsSync(`${keyFile}.previous`)).toBe(false)
        // The server holds the new key as current (no restart, no signal), then drops the old.
        await waitForOutput(
          server,
          new RegExp(`"current":"${newKey.id}","previous":\\[\\],"msg":"master keys reloaded`),
        )
        await load.stop()
        expect(load.failures).toEqual([])
        expect(await readsBack(server.url, load.written)).toEqual([])
        // A restart on the new key file alone reads everything.
        await server.stop()
        server = await startServerProcess(env)
        expect(await readsBack(server.url, load.written)).toEqual([])
      } finally {
        await server?.stop()
        await db.drop()
      }
    }, 180_000)

    it('a rotation stopped midway resumes: no second new key, the previous key kept until done', async () => {
      const db = await sharedDatabase()
      try {
        const dir = db.dataDir()
        const { COFFER_MASTER_KEY: _, ...env } = db.env(dir)
        const config = {
          masterKey: undefined,
          newMasterKey: undefined,
          masterKeyFile: join(dir, 'master.key'),
          masterKeyPrevious: undefined,
          masterKeyPreviousFile: join(dir, 'master.key.previous'),
          databaseUrl: env.COFFER_DATABASE_URL as string,
        }
        // Accounts under a generated key file, through the CLI's own start.
        await runCoffer(['account', 'create'], env)
        const oldKey = MasterKey.fromBase64(readFileSync(config.masterKeyFile, 'utf8'))
        const store = openCofferStore(env.COFFER_DATABASE_URL as string, oldKey)
        await migrateToLatest(store.db)
        const deps = createDeps(store, {
          masterKey: oldKey,
          blobStore: new FsBlobStore(join(dir, 'blobs')),
          argon2: TEST_ARGON2,
        })
        for (let i = 0; i < 4; i++) await deps.accounts.createWithAdmin()
        try {
          // "Killed" after the first batch: the files are switched, some keys re-wrapped.
          const stopped = await runKeyRotation(config, store, (fn) => fn(), {
            batchSize: 2,
            onProgress: (p) => {
              if (p.rewrapped > 0) throw new Error('killed')
            },
          }).catch((e: Error) => e)
          expect(String(stopped)).toContain('killed')
          const newKey = MasterKey.fromBase64(readFileSync(config.masterKeyFile, 'utf8'))
          expect(newKey.id).not.toBe(oldKey.id)
          expect(readFileSync(config.masterKeyPreviousFile, 'utf8')).toContain(oldKey.toBase64())
          const resumed = await runKeyRotation(config, store, (fn) => fn())
          expect(resumed).toMatchObject({
            mode: 'key-file-resumed',
            master_key_id: newKey.id,
            notUnderCurrent: 0,
            previousMayBeRetired: true,
          })
          // 5 data keys: 2 re-wrapped before the stop, the other 3 now
          expect(resumed.rewrapped).toBe(3)
          // The SQLite file key was re-wrapped before the data keys: nothing left for the rerun.
          expect(resumed.file_key).toBe(testDialect === 'sqlite' ? 'current' : 'none')
          if (testDialect === 'sqlite') {
            const keyFile = readFileSync(fileKeyPath(env.COFFER_DATABASE_URL as string), 'utf8')
            expect(JSON.parse(keyFile).master_key_fingerprint).toBe(newKey.id)
          }
          expect(MasterKey.fromBase64(readFileSync(config.masterKeyFile, 'utf8')).id).toBe(
            newKey.id,
          )
          expect(existsSync(config.masterKeyPreviousFile)).toBe(false)
        } finally {
          await store.close()
        }
        // The CLI opens everything with the new key file alone.
        const listed = await runCoffer(['account', 'create'], env)
        expect(JSON.parse(listed.stdout).api_key).toBeTruthy()
      } finally {
        await db.drop()
      }
    }, 120_000)
  },
)
