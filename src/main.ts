#!/usr/bin/env node
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { buildApp } from './app.js'
import { type Config, ConfigError, loadConfig } from './config.js'
import { createDeps } from './deps.js'
import { openStore } from './store/db.js'
import { migrateToLatest } from './store/migrate.js'

const USAGE = `usage: coffer <command>

commands:
  serve            run the API server (migrates the database first)
  migrate          bring the database schema up to date
  account create   create an account with an admin user; prints its credentials as JSON
`

async function open(config: Config) {
  // The database, its WAL, keys and credentials files are readable by this user only.
  process.umask(0o077)
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 })
  const store = openStore({ url: config.databaseUrl })
  await migrateToLatest(store.db)
  return store
}

/** First start on an empty database: an account and admin, credentials to a 0600 file. */
async function bootstrap(
  config: Config,
  deps: ReturnType<typeof createDeps>,
  log: (msg: object, text: string) => void,
) {
  if (await deps.accounts.hasAny()) return
  const credentials = await deps.accounts.createWithAdmin()
  const file = join(config.dataDir, 'bootstrap-credentials.json')
  if (existsSync(file)) throw new Error(`${file} already exists; refusing to overwrite it`)
  writeFileSync(file, `${JSON.stringify(credentials, null, 2)}\n`, { mode: 0o600, flag: 'wx' })
  chmodSync(file, 0o600)
  log(
    { account_id: credentials.account_id, file },
    'created the first account; admin credentials written to file',
  )
}

async function serve(config: Config): Promise<void> {
  const store = await open(config)
  const deps = createDeps(store)
  const app = await buildApp(deps, {
    logger: { level: config.logLevel },
    trustProxy: config.trustProxy,
    bodyLimit: config.bodyLimitBytes,
  })
  await bootstrap(config, deps, (obj, msg) => app.log.info(obj, msg))
  await app.listen({ host: config.host, port: config.port })
  const stop = async () => {
    await app.close()
    await store.close()
    process.exit(0)
  }
  process.once('SIGINT', () => void stop())
  process.once('SIGTERM', () => void stop())
}

async function main(argv: string[]): Promise<number> {
  const [command, sub] = argv
  if (!command || command === 'help' || command === '--help') {
    process.stdout.write(USAGE)
    return command ? 0 : 1
  }
  const config = loadConfig()
  if (command === 'serve') {
    await serve(config)
    return -1
  }
  if (command === 'migrate') {
    const store = await open(config)
    await store.close()
    process.stdout.write('database is up to date\n')
    return 0
  }
  if (command === 'account' && sub === 'create') {
    const store = await open(config)
    const credentials = await createDeps(store).accounts.createWithAdmin()
    await store.close()
    process.stdout.write(`${JSON.stringify(credentials, null, 2)}\n`)
    return 0
  }
  process.stderr.write(`unknown command: ${argv.join(' ')}\n\n${USAGE}`)
  return 1
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code)
  },
  (error: unknown) => {
    if (error instanceof ConfigError) process.stderr.write(`${error.message}\n`)
    else process.stderr.write(`coffer: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exit(1)
  },
)
