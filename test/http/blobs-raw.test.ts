import { createHash } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { connect } from 'node:net'
import { Readable } from 'node:stream'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { MAX_BLOB_BYTES } from '../../src/modules/blobs/blobs.service.js'
import { MAX_MEDIA_TYPE } from '../../src/modules/blobs/raw-upload.js'
import type { PolicyStatement } from '../../src/policy/index.js'
import { basicHeader, buildTestApp, createUser, type TestApp } from '../helpers/app.js'
import {
  type BlobStoreHarness,
  bytes,
  generated,
  generatedDigest,
  openBlobStore,
  STORE_KINDS,
  settledObjects,
  sha256,
} from '../helpers/blob-harness.js'

/**
 * Raw BLOB uploads (issue 11 item 2; docs/truevault-clients.md §1): the file is the whole request
 * body, as the Node, PHP (CURLOPT_PUT), Ruby and CarrierWave clients send it, over a real socket.
 */
const KiB = 1024
const MiB = 1024 * KiB
const P = (Activities: string, ...Resources: string[]): PolicyStatement => ({
  Resources,
  Activities,
})

interface Written {
  blob_id: string
  blob_filename: string
  blob_size: string
  owner_id: string | null
  blob: { id: string; filename: string; size: string; mime_type: string; owner_id: string | null }
}
interface Failed {
  result: string
  error: { message: string; code: string; type: string }
}

/** A body that goes out chunked (no Content-Length), as node-fetch 2 sends streams. */
const chunked = (size: number, seed: number) =>
  Readable.toWeb(Readable.from(generated(size, seed))) as ReadableStream<Uint8Array>

async function digestOf(res: Response): Promise<{ digest: string; length: number }> {
  const h = createHash('sha256')
  let length = 0
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    h.update(chunk)
    length += chunk.length
  }
  return { digest: h.digest('hex'), length }
}

describe.each(STORE_KINDS)('raw BLOB uploads over a real socket (%s store)', (kind) => {
  let h: BlobStoreHarness
  let t: TestApp
  let base: string
  let authorization: string
  let port: number
  /** Every status the server answered (from its request log): no client input may cause a 5xx. */
  const statuses: number[] = []

  beforeAll(async () => {
    h = await openBlobStore(kind)
    const stream = {
      write(line: string) {
        const status = (JSON.parse(line) as { status?: unknown }).status
        if (typeof status === 'number') statuses.push(status)
      },
    }
    t = await buildTestApp({ blobStore: h.store, logger: { level: 'info', stream } })
    await t.app.listen({ host: '127.0.0.1', port: 0 })
    port = (t.app.server.address() as AddressInfo).port
    base = `http://127.0.0.1:${port}`
    authorization = basicHeader(t.admin.api_key)
  })
  afterAll(async () => {
    await t?.close()
    await h?.close()
    expect(statuses.length).toBeGreaterThan(0)
    expect(statuses.filter((s) => s >= 500)).toEqual([])
  })
  afterEach(async () => {
    const { objects, rows } = await settledObjects(h, t, 5_000)
    expect(objects).toEqual(rows)
  })

  const newVault = async () => {
    const res = await fetch(`${base}/v1/vaults`, {
      method: 'POST',
      headers: { authorization, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ name: `vault-${Math.random().toString(36).slice(2)}` }),
    })
    return ((await res.json()) as { vault: { id: string } }).vault.id
  }

  const send = (
    path: string,
    body: Buffer | ReadableStream<Uint8Array> | undefined,
    headers: Record<string, string>,
    method: 'POST' | 'PUT' = 'POST',
  ) =>
    fetch(`${base}${path}`, {
      method,
      headers: { authorization, ...headers },
      ...(body === undefined ? {} : { body }),
      ...(body instanceof ReadableStream ? { duplex: 'half' } : {}),
    } as RequestInit)

  const download = (v: string, id: string) =>
    fetch(`${base}/v1/vaults/${v}/blobs/${id}`, { headers: { authorization } })

  /** Uploads, checks the answer's shape, and reads the BLOB back byte for byte. */
  const roundTrip = async (
    v: string,
    res: Response,
    data: Buffer,
    expected: { filename: string; type: string; owner?: string | null },
  ) => {
    const body = (await res.json()) as Written
    expect(res.status, JSON.stringify(body)).toBe(200)
    // The same answer as a multipart upload: flat fields and the nested `blob`.
    expect(body).toMatchObject({
      result: 'success',
      blob_filename: expected.filename,
      blob_size: String(data.length),
      owner_id: expected.owner ?? null,
      blob: {
        id: body.blob_id,
        filename: expected.filename,
        size: String(data.length),
        mime_type: expected.type,
      },
    })
    const down = await download(v, body.blob_id)
    expect(down.status).toBe(200)
    expect(down.headers.get('content-type')).toBe(expected.type)
    expect(down.headers.get('content-length')).toBe(String(data.length))
    expect(sha256(new Uint8Array(await down.arrayBuffer()))).toBe(sha256(data))
    return { body, disposition: down.headers.get('content-disposition') }
  }

  it('stores a raw application/octet-stream body (Node, PHP CURLOPT_PUT, Ruby)', async () => {
    const v = await newVault()
    const data = bytes(200 * KiB + 3, 11)
    const res = await send(`/v1/vaults/${v}/blobs`, data, {
      'content-type': 'application/octet-stream',
    })
    const { disposition } = await roundTrip(v, res, data, {
      filename: '',
      type: 'application/octet-stream',
    })
    // No filename given: stored as none, as a multipart part without one.
    expect(disposition).toBe('attachment')
    // A body with no Content-Type at all is the same raw file.
    const bare = await fetch(`${base}/v1/vaults/${v}/blobs`, {
      method: 'POST',
      headers: { authorization },
      body: Readable.toWeb(Readable.from([data])) as ReadableStream<Uint8Array>,
      duplex: 'half',
    } as RequestInit)
    await roundTrip(v, bare, data, { filename: '', type: 'application/octet-stream' })
  })

  it('stores a raw image/png with ?filename=, ?name= and the type as sent', async () => {
    const v = await newVault()
    const png = Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), bytes(5 * KiB, 2)])
    const byFilename = await send(`/v1/vaults/${v}/blobs?filename=photo%20%C3%A9.png`, png, {
      'content-type': 'image/png',
    })
    const { disposition } = await roundTrip(v, byFilename, png, {
      filename: 'photo é.png',
      type: 'image/png',
    })
    expect(disposition).toBe(
      `attachment; filename="photo _.png"; filename*=UTF-8''photo%20%C3%A9.png`,
    )
    const byName = await send(`/v1/vaults/${v}/blobs?name=scan.png`, png, {
      'content-type': 'image/png',
    })
    await roundTrip(v, byName, png, { filename: 'scan.png', type: 'image/png' })
    // A text file keeps its charset parameter: the download says how to read it.
    const text = Buffer.from('héllo\n')
    const plain = await send(`/v1/vaults/${v}/blobs?filename=a.txt`, text, {
      'content-type': 'text/plain; charset=utf-8',
    })
    await roundTrip(v, plain, text, { filename: 'a.txt', type: 'text/plain; charset=utf-8' })
  })

  it('takes the filename from Content-Disposition (RFC 6266, filename* first)', async () => {
    const v = await newVault()
    const pdf = Buffer.concat([Buffer.from('%PDF-1.4\n'), bytes(10 * KiB, 4)])
    const extended = await send(`/v1/vaults/${v}/blobs`, pdf, {
      'content-type': 'application/pdf',
      'content-disposition': `attachment; filename="resume.pdf"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%E2%82%AC.pdf`,
    })
    await roundTrip(v, extended, pdf, { filename: 'résumé €.pdf', type: 'application/pdf' })
    const quoted = await send(`/v1/vaults/${v}/blobs`, pdf, {
      'content-type': 'application/pdf',
      'content-disposition': 'attachment; filename="my \\"cv\\".pdf"',
    })
    await roundTrip(v, quoted, pdf, { filename: 'my "cv".pdf', type: 'application/pdf' })
    const token = await send(`/v1/vaults/${v}/blobs`, pdf, {
      'content-type': 'application/pdf',
      'content-disposition': 'inline; filename=cv.pdf',
    })
    await roundTrip(v, token, pdf, { filename: 'cv.pdf', type: 'application/pdf' })
    // Raw UTF-8 bytes in a quoted filename (what curl sends) are read as UTF-8; ISO-8859-1 too.
    const utf8Bytes = Buffer.from('naïve 数据.pdf').toString('latin1')
    const rawUtf8 = await send(`/v1/vaults/${v}/blobs`, pdf, {
      'content-type': 'application/pdf',
      'content-disposition': `attachment; filename="${utf8Bytes}"`,
    })
    await roundTrip(v, rawUtf8, pdf, { filename: 'naïve 数据.pdf', type: 'application/pdf' })
    const latin1 = await send(`/v1/vaults/${v}/blobs`, pdf, {
      'content-type': 'application/pdf',
      'content-disposition': "attachment; filename*=iso-8859-1'en'%A3%20rates.pdf",
    })
    await roundTrip(v, latin1, pdf, { filename: '£ rates.pdf', type: 'application/pdf' })
    // The query parameter wins over the header.
    const both = await send(`/v1/vaults/${v}/blobs?filename=query.pdf`, pdf, {
      'content-type': 'application/pdf',
      'content-disposition': 'attachment; filename="header.pdf"',
    })
    await roundTrip(v, both, pdf, { filename: 'query.pdf', type: 'application/pdf' })
    // A broken filename* is a 400 naming the header; nothing is stored.
    const puts = h.store.puts
    const broken = await send(`/v1/vaults/${v}/blobs`, pdf, {
      'content-type': 'application/pdf',
      'content-disposition': "attachment; filename*=UTF-8''%FF%FE.pdf",
    })
    expect(broken.status).toBe(400)
    expect(((await broken.json()) as Failed).error.message).toContain('Content-Disposition')
    expect(h.store.puts).toBe(puts)
  })

  it('streams a chunked raw body past the 1 MiB body limit, JSON files included', async () => {
    const v = await newVault()
    const size = 3 * MiB + 17
    const res = await send(`/v1/vaults/${v}/blobs?filename=big.bin`, chunked(size, 5), {
      'content-type': 'application/octet-stream',
    })
    await roundTrip(v, res, bytes(size, 5), {
      filename: 'big.bin',
      type: 'application/octet-stream',
    })
    // A JSON file is a file on this route (never parsed, never held to 1 MiB).
    const json = Buffer.from(JSON.stringify({ rows: 'x'.repeat(2 * MiB) }))
    const asJson = await send(`/v1/vaults/${v}/blobs?filename=data.json`, json, {
      'content-type': 'application/json',
    })
    await roundTrip(v, asJson, json, { filename: 'data.json', type: 'application/json' })
    // Elsewhere nothing changed: raw bodies are still 415 and JSON still limited to 1 MiB.
    const group = await send('/v1/groups', bytes(100), {
      'content-type': 'application/octet-stream',
    })
    expect(group.status).toBe(415)
    const vault = await send('/v1/vaults', json, { 'content-type': 'application/json' })
    expect(vault.status).toBe(413)
  })

  it('replaces content with a raw PUT (CarrierWave adapter, Node clients)', async () => {
    const v = await newVault()
    const first = await send(`/v1/vaults/${v}/blobs?filename=avatar.png`, bytes(4 * KiB, 1), {
      'content-type': 'image/png',
    })
    const id = ((await first.json()) as Written).blob_id
    const objects = await h.objects()
    const next = bytes(300 * KiB + 1, 8)
    const put = await send(
      `/v1/vaults/${v}/blobs/${id}`,
      next,
      { 'content-type': 'image/jpeg' },
      'PUT',
    )
    // Without a new name the BLOB keeps its own; the type is the request's.
    const { body } = await roundTrip(v, put, next, { filename: 'avatar.png', type: 'image/jpeg' })
    expect(body.blob_id).toBe(id)
    // One object still: the old content's object is gone.
    const after = await h.objects()
    expect(after).toHaveLength(objects.length)
    expect(after).not.toEqual(objects)
    // A new name and an owner in the query, content chunked.
    const owner = await createUser(t)
    const renamed = await send(
      `/v1/vaults/${v}/blobs/${id}?filename=new.jpg&owner_id=${owner.id}`,
      chunked(70 * KiB, 3),
      { 'content-type': 'image/jpeg' },
      'PUT',
    )
    await roundTrip(v, renamed, bytes(70 * KiB, 3), {
      filename: 'new.jpg',
      type: 'image/jpeg',
      owner: owner.id,
    })
    // An empty body with only `owner_id` changes the owner and keeps the content.
    const ownerless = await send(`/v1/vaults/${v}/blobs/${id}?owner_id=`, undefined, {}, 'PUT')
    const o = (await ownerless.json()) as Written
    expect(ownerless.status, JSON.stringify(o)).toBe(200)
    expect(o.owner_id).toBeNull()
    expect(o.blob_size).toBe(String(70 * KiB))
  })

  /** What PHP's curl sends: `Expect: 100-continue` (bodies over 1 KiB), the body after the 100. */
  const curlUpload = (method: 'POST' | 'PUT', path: string, data: Buffer) =>
    new Promise<string>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.write(
          `${method} ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: ${authorization}\r\n` +
            `Content-Type: application/octet-stream\r\nContent-Length: ${data.length}\r\n` +
            'Expect: 100-continue\r\nConnection: close\r\n\r\n',
        )
      })
      let text = ''
      let sent = false
      socket.on('data', (d) => {
        text += d.toString('latin1')
        if (!sent && text.startsWith('HTTP/1.1 100 Continue\r\n\r\n')) {
          sent = true
          socket.write(data)
        }
      })
      socket.on('end', () => resolve(text))
      socket.on('error', reject)
    })

  it('takes PHP CURLOPT_PUT uploads that wait for 100 Continue', async () => {
    const v = await newVault()
    const data = bytes(40 * KiB, 6)
    const post = await curlUpload('POST', `/v1/vaults/${v}/blobs?filename=php.bin`, data)
    expect(post).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /)
    const id = /"blob_id":"([0-9a-f-]{36})"/.exec(post)?.[1] as string
    const next = bytes(50 * KiB, 7)
    const put = await curlUpload('PUT', `/v1/vaults/${v}/blobs/${id}`, next)
    expect(put).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /)
    const down = await download(v, id)
    expect(down.headers.get('content-disposition')).toContain('filename="php.bin"')
    expect(sha256(new Uint8Array(await down.arrayBuffer()))).toBe(sha256(next))
  })

  it('refuses an empty raw body with 400 and stores nothing', async () => {
    const v = await newVault()
    const puts = h.store.puts
    for (const res of [
      await send(`/v1/vaults/${v}/blobs`, Buffer.alloc(0), {
        'content-type': 'application/octet-stream',
      }),
      await send(`/v1/vaults/${v}/blobs?filename=a.png`, chunked(0, 1), {
        'content-type': 'image/png',
      }),
      await send(`/v1/vaults/${v}/blobs`, undefined, {}),
    ]) {
      expect(res.status).toBe(400)
      const body = (await res.json()) as Failed
      expect(body.error.code).toBe('INVALID_PARAMETER')
      expect(body.error.message).toContain('file')
    }
    const put = await send(
      `/v1/vaults/${v}/blobs/${crypto.randomUUID()}`,
      Buffer.alloc(0),
      {
        'content-type': 'application/octet-stream',
      },
      'PUT',
    )
    expect(put.status).toBe(404)
    expect(h.store.puts).toBe(puts)
  })

  it('holds the filename and Content-Type to their limits (at the limit passes)', async () => {
    const v = await newVault()
    const data = Buffer.from('limits')
    const name = `${'n'.repeat(251)}.txt`
    const atName = await send(`/v1/vaults/${v}/blobs?filename=${name}`, data, {
      'content-type': 'text/plain',
    })
    await roundTrip(v, atName, data, { filename: name, type: 'text/plain' })
    const type = `application/x-${'t'.repeat(MAX_MEDIA_TYPE - 14)}`
    expect(type).toHaveLength(MAX_MEDIA_TYPE)
    const atType = await send(`/v1/vaults/${v}/blobs`, data, { 'content-type': type })
    await roundTrip(v, atType, data, { filename: '', type })
    const puts = h.store.puts
    const overName = await send(`/v1/vaults/${v}/blobs?filename=x${name}`, data, {
      'content-type': 'text/plain',
    })
    expect(overName.status).toBe(400)
    expect(((await overName.json()) as Failed).error.message).toBe(
      'filename must be at most 255 characters',
    )
    const overType = await send(`/v1/vaults/${v}/blobs`, data, { 'content-type': `${type}x` })
    expect(overType.status).toBe(400)
    expect(((await overType.json()) as Failed).error.message).toBe(
      'Content-Type must be at most 255 characters',
    )
    expect(h.store.puts).toBe(puts)
  })

  it('refuses anonymous and unauthorised raw uploads before reading a byte', async () => {
    const v = await newVault()
    const puts = h.store.puts
    let pulled = 0
    const counted = () =>
      Readable.toWeb(
        Readable.from(
          (async function* () {
            for await (const c of generated(8 * MiB, 1)) {
              pulled += c.length
              yield c
            }
          })(),
        ),
      ) as ReadableStream<Uint8Array>
    const anonymous = await fetch(`${base}/v1/vaults/${v}/blobs`, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream' },
      body: counted(),
      duplex: 'half',
    } as RequestInit).catch(() => undefined)
    // Refused at once (the client may even be cut off while still sending).
    if (anonymous) expect(anonymous.status).toBe(401)
    const reader = await createUser(t, { policy: [P('R', `Vault::${v}::Blob::.*`)] })
    const denied = await send(`/v1/vaults/${v}/blobs`, bytes(2 * MiB, 1), {
      authorization: basicHeader(reader.apiKey),
      'content-type': 'application/octet-stream',
    })
    expect(denied.status).toBe(401)
    // The owner rule too: the owner is in the query, so it is checked before storing.
    const self = await createUser(t, { policy: [P('C', `Vault::${v}::Blob::$[Owner=self]`)] })
    const selfAuth = { authorization: basicHeader(self.apiKey), 'content-type': 'image/png' }
    const unowned = await send(`/v1/vaults/${v}/blobs`, bytes(2 * MiB, 1), selfAuth)
    expect(unowned.status).toBe(401)
    const other = await send(`/v1/vaults/${v}/blobs?owner_id=${t.admin.userId}`, bytes(9), selfAuth)
    expect(other.status).toBe(401)
    expect(h.store.puts).toBe(puts)
    expect(pulled).toBeLessThan(8 * MiB)
    const own = await send(`/v1/vaults/${v}/blobs?owner_id=${self.id}`, bytes(9), selfAuth)
    expect(((await own.json()) as Written).owner_id).toBe(self.id)
    expect(h.store.puts).toBe(puts + 1)
  })

  it('answers 413 one byte over 50 MB, streamed or declared, and keeps nothing', async () => {
    const v = await newVault()
    const objects = await h.objects()
    const puts = h.store.puts
    const over = await send(`/v1/vaults/${v}/blobs`, chunked(MAX_BLOB_BYTES + 1, 2), {
      'content-type': 'application/octet-stream',
    })
    expect(over.status).toBe(413)
    expect(((await over.json()) as Failed).error.code).toBe('PAYLOAD_TOO_LARGE')
    expect(h.store.puts).toBe(puts + 1)
    expect((await settledObjects(h, t, 5_000)).objects).toEqual(objects)
    // A declared Content-Length over the limit is refused before anything is stored.
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.write(
          `POST /v1/vaults/${v}/blobs HTTP/1.1\r\nHost: x\r\nAuthorization: ${authorization}\r\n` +
            `Content-Type: application/octet-stream\r\nContent-Length: ${MAX_BLOB_BYTES + 1}\r\n\r\n`,
        )
        socket.write(bytes(64 * KiB, 1))
      })
      let text = ''
      socket.on('data', (d) => {
        text += d.toString('latin1')
        if (text.includes('\r\n\r\n') && text.includes('}')) {
          socket.destroy()
          resolve(text)
        }
      })
      socket.on('error', reject)
    })
    expect(answer).toMatch(/^HTTP\/1\.1 413 /)
    expect(answer).toContain('PAYLOAD_TOO_LARGE')
    expect(h.store.puts).toBe(puts + 1)
    const list = await fetch(`${base}/v1/vaults/${v}/blobs`, { headers: { authorization } })
    expect(((await list.json()) as { data: { total: number } }).data.total).toBe(0)
  })

  it('leaves nothing behind when the client hangs up mid-way, and keeps the old content', async () => {
    const v = await newVault()
    const keep = await send(`/v1/vaults/${v}/blobs?filename=keep.txt`, Buffer.from('keep me'), {
      'content-type': 'text/plain',
    })
    const id = ((await keep.json()) as Written).blob_id
    const objects = await h.objects()
    for (const [method, path] of [
      ['POST', `/v1/vaults/${v}/blobs`],
      ['PUT', `/v1/vaults/${v}/blobs/${id}`],
    ] as const) {
      const controller = new AbortController()
      const body = (async function* () {
        let sent = 0
        for await (const c of generated(20 * MiB, 4)) {
          sent += c.length
          if (sent >= 6 * MiB) controller.abort()
          yield c
        }
      })()
      await expect(
        fetch(`${base}${path}`, {
          method,
          headers: { authorization, 'content-type': 'application/octet-stream' },
          body: Readable.toWeb(Readable.from(body)) as ReadableStream<Uint8Array>,
          duplex: 'half',
          signal: controller.signal,
        } as RequestInit),
      ).rejects.toThrow()
    }
    expect((await settledObjects(h, t, 5_000)).objects).toEqual(objects)
    expect(await (await download(v, id)).text()).toBe('keep me')
  })

  it('stores exactly 50 MB sent raw and chunked, and streams it back intact', async () => {
    const v = await newVault()
    const res = await send(`/v1/vaults/${v}/blobs?filename=max.bin`, chunked(MAX_BLOB_BYTES, 9), {
      'content-type': 'application/octet-stream',
    })
    const body = (await res.json()) as Written
    expect(res.status, JSON.stringify(body)).toBe(200)
    expect(body.blob_size).toBe(String(MAX_BLOB_BYTES))
    const got = await digestOf(await download(v, body.blob_id))
    expect(got.length).toBe(MAX_BLOB_BYTES)
    expect(got.digest).toBe(await generatedDigest(MAX_BLOB_BYTES, 9))
  })
})
