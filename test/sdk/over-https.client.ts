import { createHash, randomBytes } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sdkFor, TRANSPORTS } from './transports.js'

/**
 * The official SDK against a Coffer that serves TLS (issue 19), run by sdk-https.test.ts in a
 * process of its own: the SDK takes no CA and no agent (it calls `fetch`, or node-fetch, itself),
 * so the test CA is trusted the way an operator's client would trust a private CA,
 * NODE_EXTRA_CA_CERTS. Prints one JSON line per transport: what it did, or the error it met.
 * COFFER_URL (https://…) and COFFER_API_KEY come from the environment.
 */

const url = process.env.COFFER_URL ?? ''
const apiKey = process.env.COFFER_API_KEY ?? ''
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex')

async function bytesOf(blob: unknown): Promise<Buffer> {
  if (blob instanceof Blob) return Buffer.from(await blob.arrayBuffer())
  const key = Object.getOwnPropertySymbols(blob).find((s) => s.description === 'buffer')
  return (blob as Record<symbol, Buffer>)[key as symbol] as Buffer
}

const folder = await mkdtemp(join(tmpdir(), 'coffer-sdk-https-'))
try {
  for (const transport of TRANSPORTS) {
    try {
      const TrueVaultClient = sdkFor(transport)
      const client = new TrueVaultClient({ apiKey }, url)
      const user = await client.readCurrentUser()
      const vault = await client.createVault(`sdk-https-${randomBytes(4).toString('hex')}`)
      const content = { name: 'Ada', transport }
      const created = await client.createDocument(vault.id, null, content)
      const [read] = await client.getDocuments(vault.id, [created.id])
      const original = randomBytes(200 * 1024)
      const file = join(folder, `${transport.replace(/\W+/g, '-')}.bin`)
      await writeFile(file, original)
      const payload =
        transport === 'global fetch' ? new File([original], 'scan.bin') : createReadStream(file)
      const blob = await client.createBlob(vault.id, payload)
      const back = await client.getBlob(vault.id, blob.id)
      const same = sha256(await bytesOf(back.blob)) === sha256(original)
      process.stdout.write(
        `${JSON.stringify({ transport, user: user.id, document: read?.document, blob: same })}\n`,
      )
    } catch (error) {
      const cause = (error as { cause?: { code?: string } }).cause
      const code = (error as { code?: string }).code ?? cause?.code
      process.stdout.write(
        `${JSON.stringify({ transport, error: String((error as Error).message), code })}\n`,
      )
    }
  }
} finally {
  await rm(folder, { recursive: true, force: true })
}
