import { createHash } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { MAX_BLOB_BYTES } from '../../src/modules/blobs/blobs.service.js'
import type { PolicyStatement } from '../../src/policy/index.js'
import { basicHeader, buildTestApp, createUser, type TestApp } from '../helpers/app.js'
import {
  type BlobStoreHarness,
  bytes,
  generatedDigest,
  openBlobStore,
  rowObjectKeys,
  STORE_KINDS,
  settledObjects,
  sha256,
  streamedMultipart,
} from '../helpers/blob-harness.js'

const KiB = 1024
const MiB = 1024 * KiB
const P = (Activities: string, ...Resources: string[]): PolicyStatement => ({
  Resources,
  Activities,
})

/** SHA-256 and length of a response body, read as it streams (never held whole). */
async function digestOf(res: Response): Promise<{ digest: string; length: number }> {
  const h = createHash('sha256')
  let length = 0
  if (res.body) {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      h.update(chunk)
      length += chunk.length
    }
  }
  return { digest: h.digest('hex'), length }
}

describe.each(STORE_KINDS)('BLOB endpoints over a real socket (%s store)', (kind) => {
  let h: BlobStoreHarness
  let t: TestApp
  let base: string
  let authorization: string
  let connections = 0

  beforeAll(async () => {
    h = await openBlobStore(kind)
    t = await buildTestApp({ blobStore: h.store })
    t.app.server.on('connection', () => {
      connections++
    })
    await t.app.listen({ host: '127.0.0.1', port: 0 })
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`
    authorization = basicHeader(t.admin.api_key)
  })
  afterAll(async () => {
    await t?.close()
    await h?.close()
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
    expect(res.status).toBe(200)
    return ((await res.json()) as { vault: { id: string } }).vault.id
  }

  /** Uploads a generated file of `size` bytes as a streamed (chunked) multipart body. */
  const streamUpload = (
    url: string,
    size: number,
    options: {
      method?: 'POST' | 'PUT'
      seed?: number
      fields?: Record<string, string>
      signal?: AbortSignal
      onBytes?: (sent: number) => void
      credential?: string
    } = {},
  ) => {
    const body = streamedMultipart(
      { filename: `big-${size}.bin`, type: 'application/x-big', size, seed: options.seed ?? 1 },
      options.fields,
      options.onBytes,
    )
    return fetch(url, {
      method: options.method ?? 'POST',
      headers: {
        authorization: options.credential ? basicHeader(options.credential) : authorization,
        'content-type': body.contentType,
      },
      body: body.stream,
      duplex: 'half',
      ...(options.signal ? { signal: options.signal } : {}),
    } as RequestInit)
  }

  /** Uploads with Node's own FormData and Blob, as a browser or the SDK would. */
  const formUpload = (vaultId: string, data: Uint8Array | string, name: string, type: string) => {
    const form = new FormData()
    form.append('file', new Blob([data], { type }), name)
    return fetch(`${base}/v1/vaults/${vaultId}/blobs`, {
      method: 'POST',
      headers: { authorization },
      body: form,
    })
  }

  const get = (path: string, init: RequestInit = {}) =>
    fetch(`${base}${path}`, { ...init, headers: { authorization, ...(init.headers ?? {}) } })

  it('stores exactly 52,428,800 bytes and streams them back intact', async () => {
    const v = await newVault()
    const size = MAX_BLOB_BYTES
    expect(size).toBe(52_428_800)
    const expected = await generatedDigest(size, 7)
    const up = await streamUpload(`${base}/v1/vaults/${v}/blobs`, size, { seed: 7 })
    const body = (await up.json()) as { blob_id: string; blob_size: string; blob: { size: string } }
    expect(up.status, JSON.stringify(body)).toBe(200)
    expect(body.blob_size).toBe('52428800')
    expect(body.blob.size).toBe('52428800')
    const down = await get(`/v1/vaults/${v}/blobs/${body.blob_id}`)
    expect(down.status).toBe(200)
    expect(down.headers.get('content-length')).toBe('52428800')
    expect(down.headers.get('content-type')).toBe('application/x-big')
    expect(down.headers.get('content-disposition')).toContain(`filename="big-${size}.bin"`)
    const got = await digestOf(down)
    expect(got.length).toBe(size)
    expect(got.digest).toBe(expected)
  })

  it('answers 413 one byte over the limit, keeps nothing, and serves the next request', async () => {
    const v = await newVault()
    const { puts } = h.store
    const objects = await h.objects()
    const before = connections
    const res = await streamUpload(`${base}/v1/vaults/${v}/blobs`, MAX_BLOB_BYTES + 1)
    expect(res.status).toBe(413)
    expect(await res.json()).toMatchObject({
      result: 'error',
      error: { type: 'invalid_request_error', code: 'PAYLOAD_TOO_LARGE' },
    })
    // It was refused while streaming into the store, which now holds nothing new.
    expect(h.store.puts).toBe(puts + 1)
    const { objects: after } = await settledObjects(h, t, 5_000)
    expect(after).toEqual(objects)
    const list = await get(`/v1/vaults/${v}/blobs`)
    expect(((await list.json()) as { data: { total: number } }).data.total).toBe(0)
    // The next requests are served (on the kept-alive connection or a new one).
    const next = await formUpload(v, 'after', 'after.txt', 'text/plain')
    expect(next.status).toBe(200)
    const again = await get(`/v1/vaults/${v}/blobs`)
    expect(again.status).toBe(200)
    expect(connections - before).toBeLessThanOrEqual(2)
  })

  it('refuses an over-size update with 413 and keeps the old content intact', async () => {
    const v = await newVault()
    const old = bytes(200 * KiB + 5, 3)
    const up = await formUpload(v, old, 'old.bin', 'application/x-old')
    const id = ((await up.json()) as { blob_id: string }).blob_id
    const objects = await h.objects()
    const res = await streamUpload(`${base}/v1/vaults/${v}/blobs/${id}`, MAX_BLOB_BYTES + 1, {
      method: 'PUT',
    })
    expect(res.status).toBe(413)
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('PAYLOAD_TOO_LARGE')
    const { objects: after } = await settledObjects(h, t, 5_000)
    expect(after).toEqual(objects)
    const down = await get(`/v1/vaults/${v}/blobs/${id}`)
    expect(down.headers.get('content-type')).toBe('application/x-old')
    expect(down.headers.get('content-length')).toBe(String(old.length))
    expect(sha256(new Uint8Array(await down.arrayBuffer()))).toBe(sha256(old))
  })

  it('streams uploads from FormData and Blob, and downloads by GET and HEAD', async () => {
    const v = await newVault()
    for (const size of [0, 64 * KiB - 1, 64 * KiB, 64 * KiB + 1, 3 * MiB + 11]) {
      const data = bytes(size, size + 1)
      const up = await formUpload(v, data, 'résumé 数据.bin', 'application/x-thing')
      const body = (await up.json()) as {
        blob_id: string
        blob_size: string
        blob_filename: string
      }
      expect(up.status).toBe(200)
      expect(body.blob_size).toBe(String(size))
      expect(body.blob_filename).toBe('résumé 数据.bin')
      const down = await get(`/v1/vaults/${v}/blobs/${body.blob_id}`)
      expect(down.status, down.status === 200 ? '' : await down.clone().text()).toBe(200)
      expect(down.headers.get('content-type')).toBe('application/x-thing')
      expect(down.headers.get('content-length')).toBe(String(size))
      const disposition = down.headers.get('content-disposition') ?? ''
      expect(disposition).toMatch(/^attachment; filename="r_sum_ __\.bin"; filename\*=UTF-8''/)
      expect(decodeURIComponent(disposition.split("UTF-8''")[1] ?? '')).toBe('résumé 数据.bin')
      expect(sha256(new Uint8Array(await down.arrayBuffer()))).toBe(sha256(data))
      const head = await get(`/v1/vaults/${v}/blobs/${body.blob_id}`, { method: 'HEAD' })
      expect(head.status).toBe(200)
      expect(head.headers.get('content-type')).toBe('application/x-thing')
      expect(head.headers.get('content-disposition')).toBe(disposition)
      expect((await head.arrayBuffer()).byteLength).toBe(0)
    }
  })

  it('takes 10 parallel uploads to one vault, all intact', async () => {
    const v = await newVault()
    const files = Array.from({ length: 10 }, (_, i) => bytes(100 * KiB + i * 37 * KiB + i, 100 + i))
    const responses = await Promise.all(
      files.map((data, i) => formUpload(v, data, `p${i}.bin`, 'application/octet-stream')),
    )
    const ids: string[] = []
    for (const res of responses) {
      expect(res.status).toBe(200)
      ids.push(((await res.json()) as { blob_id: string }).blob_id)
    }
    expect(new Set(ids).size).toBe(10)
    const downloads = await Promise.all(ids.map((id) => get(`/v1/vaults/${v}/blobs/${id}`)))
    for (const [i, res] of downloads.entries()) {
      expect(res.status).toBe(200)
      expect(sha256(new Uint8Array(await res.arrayBuffer()))).toBe(sha256(files[i] as Buffer))
    }
    const list = await get(`/v1/vaults/${v}/blobs`)
    expect(((await list.json()) as { data: { total: number } }).data.total).toBe(10)
    // And 10 parallel replacements of one BLOB: each either wins or loses cleanly.
    const target = ids[0] as string
    const replaced = await Promise.all(
      files.map((data, i) => {
        const form = new FormData()
        form.append('file', new Blob([data]), `r${i}.bin`)
        return fetch(`${base}/v1/vaults/${v}/blobs/${target}`, {
          method: 'PUT',
          headers: { authorization },
          body: form,
        })
      }),
    )
    const statuses = replaced.map((r) => r.status)
    for (const r of replaced) await r.arrayBuffer()
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(1)
    expect(statuses.every((s) => s === 200 || s === 409)).toBe(true)
    const final = await get(`/v1/vaults/${v}/blobs/${target}`)
    const name = /filename="r(\d)\.bin"/.exec(final.headers.get('content-disposition') ?? '')
    expect(name).not.toBeNull()
    const winner = files[Number(name?.[1])] as Buffer
    expect(sha256(new Uint8Array(await final.arrayBuffer()))).toBe(sha256(winner))
  })

  it('leaves no object behind when the client aborts mid-upload', async () => {
    const v = await newVault()
    const objects = await h.objects()
    const rows = await rowObjectKeys(t)
    const puts = h.store.puts
    const controller = new AbortController()
    const upload = streamUpload(`${base}/v1/vaults/${v}/blobs`, 20 * MiB, {
      signal: controller.signal,
      onBytes: (sent) => {
        if (sent >= 6 * MiB) controller.abort()
      },
    })
    await expect(upload).rejects.toThrow()
    // Give the server a moment to notice the hang-up and clean up.
    await sleep(200)
    const { objects: after } = await settledObjects(h, t, 5_000)
    expect(after).toEqual(objects)
    expect(await rowObjectKeys(t)).toEqual(rows)
    expect(h.store.puts).toBe(puts + 1)
    // The same for a replacement: the old content stays.
    const up = await formUpload(v, 'keep me', 'keep.txt', 'text/plain')
    const id = ((await up.json()) as { blob_id: string }).blob_id
    const before = await h.objects()
    const c2 = new AbortController()
    const replace = streamUpload(`${base}/v1/vaults/${v}/blobs/${id}`, 20 * MiB, {
      method: 'PUT',
      signal: c2.signal,
      onBytes: (sent) => {
        if (sent >= 6 * MiB) c2.abort()
      },
    })
    await expect(replace).rejects.toThrow()
    await sleep(200)
    expect((await settledObjects(h, t, 5_000)).objects).toEqual(before)
    expect(await (await get(`/v1/vaults/${v}/blobs/${id}`)).text()).toBe('keep me')
    // The server is still fine.
    const list = await get(`/v1/vaults/${v}/blobs`)
    expect(((await list.json()) as { data: { total: number } }).data.total).toBe(1)
  })

  it('holds exactly the objects of existing rows after a run of failing requests', async () => {
    const v = await newVault()
    const keep = await formUpload(v, bytes(300 * KiB, 9), 'keep.bin', 'application/x-keep')
    const keepId = ((await keep.json()) as { blob_id: string }).blob_id
    const self = await createUser(t, { policy: [P('CR', `Vault::${v}::Blob::$[Owner=self]`)] })
    const puts = h.store.puts
    const post = (form: FormData, credential?: string) =>
      fetch(`${base}/v1/vaults/${v}/blobs`, {
        method: 'POST',
        headers: { authorization: credential ? basicHeader(credential) : authorization },
        body: form,
      })
    const big = () => new Blob([bytes(2 * MiB + 3, 5)], { type: 'application/x-big' })

    // Permission denied after the upload (the owner rule is known only then).
    const f1 = new FormData()
    f1.append('file', big(), 'denied.bin')
    const denied = await post(f1, self.apiKey)
    expect(denied.status).toBe(401)
    // An unknown owner after the file.
    const f2 = new FormData()
    f2.append('file', big(), 'owner.bin')
    f2.append('owner_id', '0190a000-0000-7000-8000-000000000000')
    expect((await post(f2)).status).toBe(400)
    // A malformed owner before the file.
    const f3 = new FormData()
    f3.append('owner_id', 'bad')
    f3.append('file', big(), 'bad.bin')
    expect((await post(f3)).status).toBe(400)
    // A second file part.
    const f4 = new FormData()
    f4.append('file', big(), 'one.bin')
    f4.append('file', big(), 'two.bin')
    expect((await post(f4)).status).toBe(400)
    // A file under another name after a good one.
    const f5 = new FormData()
    f5.append('file', big(), 'one.bin')
    f5.append('attachment', big(), 'two.bin')
    expect((await post(f5)).status).toBe(400)
    // A replacement with an unknown owner, and one by a caller who may not update.
    const f6 = new FormData()
    f6.append('file', big(), 'r.bin')
    f6.append('owner_id', '0190a000-0000-7000-8000-000000000000')
    const r6 = await fetch(`${base}/v1/vaults/${v}/blobs/${keepId}`, {
      method: 'PUT',
      headers: { authorization },
      body: f6,
    })
    expect(r6.status).toBe(400)
    // An aborted upload.
    const controller = new AbortController()
    await expect(
      streamUpload(`${base}/v1/vaults/${v}/blobs`, 12 * MiB, {
        signal: controller.signal,
        onBytes: (sent) => {
          if (sent >= 3 * MiB) controller.abort()
        },
      }),
    ).rejects.toThrow()
    // Earlier cases of this suite made 413s on the same server: all of it must be gone.
    await sleep(200)
    expect(h.store.puts - puts).toBe(7)
    const { objects, rows } = await settledObjects(h, t, 5_000)
    expect(objects).toEqual(rows)
    const down = await get(`/v1/vaults/${v}/blobs/${keepId}`)
    expect(sha256(new Uint8Array(await down.arrayBuffer()))).toBe(sha256(bytes(300 * KiB, 9)))
  })
})
