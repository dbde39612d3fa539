import fc from 'fast-check'
import type { LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildTestApp, type TestApp } from '../helpers/app.js'
import {
  blobFiles,
  expected,
  Fixture,
  fmtGrant,
  type Grant,
  type Matcher,
  multipart,
  NEW_OWNERS,
  OWNERS,
  type Owner,
  ownerName,
  type PathSpec,
  randomGrant,
  readsItem,
  statusMismatch,
  type Variant,
  variants,
  type Who,
} from '../helpers/ownership-matrix.js'

/**
 * Every row of the spec's "Ownership change of a Document or BLOB" table on every BLOB path that
 * sets or changes an owner (see helpers/ownership-matrix.ts), and after every request: the blob
 * store holds exactly one object per BLOB row (a refused upload leaves nothing behind).
 */

interface BlobPath extends PathSpec {
  send(f: Fixture, auth: string, blobId: string, to: string | null): Promise<LightMyRequestResponse>
}

const ORIGINAL = 'original bytes'
const CHANGED = 'changed bytes, longer'

function sendMultipart(
  f: Fixture,
  method: 'POST' | 'PUT',
  url: string,
  auth: string,
  parts: Parameters<typeof multipart>[0],
) {
  const m = multipart(parts)
  return f.t.app.inject({
    method,
    url,
    headers: {
      authorization: `Basic ${Buffer.from(`${auth}:`).toString('base64')}`,
      'content-type': m.contentType,
    },
    payload: m.payload,
  })
}

const file = (content: string) => ({ file: content, filename: 'a.txt', type: 'text/plain' })

const PATHS: BlobPath[] = [
  {
    name: 'POST /v1/vaults/{v}/blobs',
    kind: 'Blob',
    create: true,
    content: true,
    gate: [],
    // owner_id after the file: the upload is stored before the rule can be checked.
    send: (f, auth, _b, to) =>
      sendMultipart(f, 'POST', `/v1/vaults/${f.vault}/blobs`, auth, [
        file(CHANGED),
        ...(to === null ? [] : [{ name: 'owner_id', value: to }]),
      ]),
  },
  {
    name: 'PUT /v1/vaults/{v}/blobs/{b} (file and owner_id)',
    kind: 'Blob',
    create: false,
    content: true,
    gate: ['U', 'D'],
    send: (f, auth, b, to) =>
      sendMultipart(f, 'PUT', `/v1/vaults/${f.vault}/blobs/${b}`, auth, [
        { name: 'owner_id', value: to ?? 'null' },
        file(CHANGED),
      ]),
  },
  {
    name: 'PUT /v1/vaults/{v}/blobs/{b} (file, then owner_id)',
    kind: 'Blob',
    create: false,
    content: true,
    gate: ['U', 'D'],
    send: (f, auth, b, to) =>
      sendMultipart(f, 'PUT', `/v1/vaults/${f.vault}/blobs/${b}`, auth, [
        file(CHANGED),
        { name: 'owner_id', value: to ?? '' },
      ]),
  },
  {
    name: 'PUT /v1/vaults/{v}/blobs/{b} (owner_id alone)',
    kind: 'Blob',
    create: false,
    content: false,
    gate: ['U', 'D'],
    send: (f, auth, b, to) =>
      sendMultipart(f, 'PUT', `/v1/vaults/${f.vault}/blobs/${b}`, auth, [
        { name: 'owner_id', value: to ?? '' },
      ]),
  },
  {
    name: 'PUT /v1/vaults/{v}/blobs/{b}/owner',
    kind: 'Blob',
    create: false,
    content: false,
    gate: ['D'],
    send: (f, auth, b, to) =>
      f.t.api.put(`/v1/vaults/${f.vault}/blobs/${b}/owner`, {
        auth,
        form: { owner_id: to ?? '' },
      }),
  },
]

async function adminCreate(f: Fixture, owner: string | null): Promise<string> {
  const res = await sendMultipart(f, 'POST', `/v1/vaults/${f.vault}/blobs`, f.admin, [
    ...(owner === null ? [] : [{ name: 'owner_id', value: owner }]),
    file(ORIGINAL),
  ])
  if (res.statusCode !== 200) throw new Error(`blob create failed: ${res.body}`)
  return res.json().blob_id
}

async function adminList(f: Fixture): Promise<{ id: string; owner_id: string | null }[]> {
  const res = await f.t.api.get(`/v1/vaults/${f.vault}/blobs`, {
    auth: f.admin,
    query: { per_page: '500' },
  })
  if (res.statusCode !== 200) throw new Error(`blob list failed: ${res.body}`)
  return res.json().data.items
}

async function adminContent(f: Fixture, id: string): Promise<string> {
  const res = await f.t.api.get(`/v1/vaults/${f.vault}/blobs/${id}`, { auth: f.admin })
  if (res.statusCode !== 200) throw new Error(`blob read failed: ${res.body}`)
  return res.body
}

async function adminDelete(f: Fixture, id: string): Promise<void> {
  const res = await f.t.api.delete(`/v1/vaults/${f.vault}/blobs/${id}`, { auth: f.admin })
  if (res.statusCode !== 200) throw new Error(`blob delete failed: ${res.body}`)
}

/** Objects in the store must be exactly one per BLOB row. */
function objectMismatch(f: Fixture, rows: number): string | null {
  const files = blobFiles(f.t)
  return files.length === rows ? null : `${files.length} objects in the store for ${rows} BLOBs`
}

/** Runs one variant; returns what went wrong, or null. */
async function runVariant(
  f: Fixture,
  path: BlobPath,
  from: Owner,
  to: Owner,
  v: Variant,
): Promise<string | null> {
  const want = expected(path, from, to, v)
  const toId = f.ownerId(to)
  if (path.create) {
    await f.grant(v.caller, 'Blob', v.grants)
    const res = await path.send(f, f.keys[v.caller], '', toId)
    const bad = statusMismatch(res, want)
    if (bad) return bad
    const rows = await adminList(f)
    const objects = objectMismatch(f, rows.length)
    if (want !== 200)
      return rows.length === 0 ? objects : `a refused create left ${rows.length} BLOBs`
    const id = res.json().blob_id as string
    const content = await adminContent(f, id)
    await adminDelete(f, id)
    if (rows.length !== 1 || rows[0]?.id !== id)
      return `expected the one new BLOB, found ${rows.length}`
    if (rows[0].owner_id !== toId) return `owner ${rows[0].owner_id}, expected ${toId}`
    return objects ?? (content === CHANGED ? null : `content ${content}`)
  }
  const blobId = await adminCreate(f, f.ownerId(from))
  try {
    await f.grant(v.caller, 'Blob', v.grants, blobId)
    const res = await path.send(f, f.keys[v.caller], blobId, toId)
    const bad = statusMismatch(res, want)
    if (bad) return bad
    const rows = await adminList(f)
    const wantOwner = want === 200 ? toId : f.ownerId(from)
    if (rows.length !== 1 || rows[0]?.owner_id !== wantOwner)
      return `owner ${rows[0]?.owner_id}, expected ${wantOwner}`
    const content = await adminContent(f, blobId)
    const wantContent = want === 200 && path.content ? CHANGED : ORIGINAL
    if (content !== wantContent)
      return `content ${JSON.stringify(content)}, expected ${wantContent}`
    if (want === 200 && res.json().owner_id !== toId)
      return `answered owner ${res.json().owner_id}, expected ${toId}`
    return objectMismatch(f, 1)
  } finally {
    await adminDelete(f, blobId)
  }
}

let matrixSize = 0

describe('BLOB ownership matrix (spec table × every path)', () => {
  let t: TestApp
  let f: Fixture

  beforeAll(async () => {
    t = await buildTestApp()
    f = new Fixture(t)
    await f.setup()
  })
  afterAll(async () => {
    // Every BLOB was deleted again: no object may remain, refused or not.
    expect(blobFiles(t)).toEqual([])
    await t.close()
    console.info(`BLOB ownership matrix: ${matrixSize} requests checked`)
  })

  for (const path of PATHS) {
    const cells = path.create
      ? NEW_OWNERS.map((to) => [null, to] as const)
      : OWNERS.flatMap((from) => NEW_OWNERS.map((to) => [from, to] as const))
    describe(path.name, () => {
      for (const [from, to] of cells) {
        const label = path.create
          ? `create owned by ${ownerName(to)}`
          : `${ownerName(from)} → ${ownerName(to)}`
        it(label, async () => {
          const all = variants(path, from, to)
          expect(expected(path, from, to, all[0] as Variant)).toBe(200)
          const failures: string[] = []
          for (const v of all) {
            const problem = await runVariant(f, path, from, to, v)
            matrixSize++
            if (problem)
              failures.push(
                `${v.name} [caller ${v.caller}: ${v.grants.map(fmtGrant).join('; ')}]: ${problem}`,
              )
          }
          expect(failures).toEqual([])
        })
      }
    })
  }

  it('Update alone never changes an owner, on any path', async () => {
    for (const path of PATHS.filter((p) => !p.create)) {
      for (const [from, to] of [
        [null, 'A'],
        ['A', null],
        ['A', 'B'],
      ] as const) {
        const grants: Grant[] = [
          { act: 'U', m: { k: 'item' } },
          { act: 'R', m: { k: 'item' } },
        ]
        const blobId = await adminCreate(f, f.ownerId(from))
        await f.grant('C', 'Blob', grants, blobId)
        const res = await path.send(f, f.keys.C, blobId, f.ownerId(to))
        expect(res.statusCode, `${path.name} ${ownerName(from)} → ${ownerName(to)}`).toBe(401)
        expect((await adminList(f))[0]?.owner_id).toBe(f.ownerId(from))
        expect(await adminContent(f, blobId)).toBe(ORIGINAL)
        expect(blobFiles(t)).toHaveLength(1)
        await adminDelete(f, blobId)
      }
    }
  })

  it('a refused upload leaves no object in the store', async () => {
    // C on the collection only: the upload is stored, then refused for its owner_id.
    await f.grant('C', 'Blob', [{ act: 'C', m: { k: 'coll' } }])
    for (const owner of [f.ids.A, f.ids.C]) {
      const res = await PATHS[0]?.send(f, f.keys.C, '', owner)
      expect(res?.statusCode).toBe(401)
    }
    expect(await adminList(f)).toEqual([])
    expect(blobFiles(t)).toEqual([])
  })
})

describe('BLOB owner matchers', () => {
  let t: TestApp
  let f: Fixture
  const blobs = {} as Record<'A' | 'B' | 'unowned', string>

  beforeAll(async () => {
    t = await buildTestApp()
    f = new Fixture(t)
    await f.setup()
    blobs.A = await adminCreate(f, f.ids.A)
    blobs.B = await adminCreate(f, f.ids.B)
    blobs.unowned = await adminCreate(f, null)
  })
  afterAll(() => t.close())

  const read = (who: Who, id: string) =>
    f.t.api.get(`/v1/vaults/${f.vault}/blobs/${id}`, { auth: f.keys[who] })
  const replace = (who: Who, id: string) =>
    sendMultipart(f, 'PUT', `/v1/vaults/${f.vault}/blobs/${id}`, f.keys[who], [file(CHANGED)])

  it('R on $[Owner=.*] reads every owned BLOB and never an unowned one', async () => {
    await f.grant('C', 'Blob', [{ act: 'R', m: { k: 'owner', who: 'any' } }])
    expect((await read('C', blobs.A)).body).toBe(ORIGINAL)
    expect((await read('C', blobs.B)).statusCode).toBe(200)
    expect((await read('C', blobs.unowned)).statusCode).toBe(404)
  })

  it('$[Owner=self] R, U and D act only on the caller’s own BLOBs', async () => {
    const self: Matcher = { k: 'owner', who: 'self' }
    await f.grant('A', 'Blob', [
      { act: 'R', m: self },
      { act: 'U', m: self },
      { act: 'D', m: self },
    ])
    for (const id of [blobs.B, blobs.unowned]) {
      expect((await read('A', id)).statusCode).toBe(404)
      expect((await replace('A', id)).statusCode).toBe(404)
      const del = await f.t.api.delete(`/v1/vaults/${f.vault}/blobs/${id}`, { auth: f.keys.A })
      expect(del.statusCode).toBe(404)
      expect(await adminContent(f, id)).toBe(ORIGINAL)
    }
    expect(blobFiles(t)).toHaveLength(3)
    expect((await read('A', blobs.A)).body).toBe(ORIGINAL)
    expect((await replace('A', blobs.A)).statusCode).toBe(200)
    expect(await adminContent(f, blobs.A)).toBe(CHANGED)
    const del = await f.t.api.delete(`/v1/vaults/${f.vault}/blobs/${blobs.A}`, { auth: f.keys.A })
    expect(del.statusCode).toBe(200)
    expect(blobFiles(t)).toHaveLength(2)
  })

  it('the plain collection matcher creates only unowned BLOBs', async () => {
    await f.grant('A', 'Blob', [{ act: 'C', m: { k: 'coll' } }])
    const before = blobFiles(t).length
    expect((await PATHS[0]?.send(f, f.keys.A, '', f.ids.A))?.statusCode).toBe(401)
    expect((await PATHS[0]?.send(f, f.keys.A, '', f.ids.B))?.statusCode).toBe(401)
    expect(blobFiles(t)).toHaveLength(before)
    const ok = await PATHS[0]?.send(f, f.keys.A, '', null)
    expect(ok?.statusCode).toBe(200)
    expect(ok?.json().owner_id).toBeNull()
    expect(blobFiles(t)).toHaveLength(before + 1)
  })
})

describe('BLOB lists match direct reads (randomized)', () => {
  const N = 8
  let t: TestApp
  let f: Fixture
  const ids: string[] = []

  beforeAll(async () => {
    t = await buildTestApp()
    f = new Fixture(t)
    await f.setup()
    for (let i = 0; i < N; i++) ids.push(await adminCreate(f, null))
  })
  afterAll(() => t.close())

  it('a list holds exactly the BLOBs a direct read returns', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom<Owner>(null, 'A', 'B', 'C'), { minLength: N, maxLength: N }),
        fc.constantFrom<Who>('A', 'C'),
        fc.array(randomGrant(N), { maxLength: 4 }),
        async (owners, caller, grants) => {
          for (const [i, id] of ids.entries()) {
            const res = await f.t.api.put(`/v1/vaults/${f.vault}/blobs/${id}/owner`, {
              auth: f.admin,
              form: { owner_id: f.ownerId(owners[i] ?? null) ?? '' },
            })
            expect(res.statusCode, res.body).toBe(200)
          }
          await f.grant(caller, 'Blob', grants, undefined, ids)
          const list = await f.t.api.get(`/v1/vaults/${f.vault}/blobs`, {
            auth: f.keys[caller],
            query: { per_page: '500' },
          })
          const hasRead = grants.some((g) => g.act === 'R')
          expect(list.statusCode, list.body).toBe(hasRead ? 200 : 401)
          const listed = new Set<string>(
            hasRead ? list.json().data.items.map((i: { id: string }) => i.id) : [],
          )
          if (hasRead) expect(list.json().data.total).toBe(listed.size)
          for (const [i, id] of ids.entries()) {
            const res = await f.t.api.get(`/v1/vaults/${f.vault}/blobs/${id}`, {
              auth: f.keys[caller],
            })
            const readable = readsItem(grants, caller, i, owners[i] ?? null)
            expect(res.statusCode === 200, `item ${i}: ${res.body}`).toBe(listed.has(id))
            expect(res.statusCode === 200, `item ${i} per the spec`).toBe(readable)
            if (!readable) expect(res.statusCode).toBe(hasRead ? 404 : 401)
          }
        },
      ),
      { seed: 20240611, numRuns: 40 },
    )
  })
})
