import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import S3rver from 's3rver'

export interface TestS3Server {
  /** `http://127.0.0.1:<port>`; use path-style addressing (`forcePathStyle: true`). */
  endpoint: string
  bucket: string
  region: string
  accessKeyId: string
  secretAccessKey: string
  /** Stops the server and removes its storage directory. */
  close(): Promise<void>
}

/**
 * An in-process S3 server (s3rver) on a random local port, storing into a fresh temporary
 * directory, with one empty bucket. s3rver accepts the fixed `S3RVER` / `S3RVER` credentials.
 */
export async function startS3Server(bucket = 'coffer-test'): Promise<TestS3Server> {
  const directory = await mkdtemp(path.join(tmpdir(), 'coffer-s3rver-'))
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory,
    configureBuckets: [{ name: bucket, configs: [] }],
  })
  let port: number
  try {
    port = (await server.run()).port
  } catch (err) {
    await rm(directory, { recursive: true, force: true })
    throw err
  }
  return {
    endpoint: `http://127.0.0.1:${port}`,
    bucket,
    region: 'us-east-1',
    accessKeyId: 'S3RVER',
    secretAccessKey: 'S3RVER',
    async close() {
      try {
        await server.close()
      } finally {
        await rm(directory, { recursive: true, force: true })
      }
    },
  }
}
