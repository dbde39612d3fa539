import fc from 'fast-check'
import type { LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { b64, buildTestApp, type TestApp, unb64 } from '../helpers/app.js'
import {
  expected,
  Fixture,
  fmtGrant,
  type Grant,
  type Matcher,
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
 * Every row of the spec's "Ownership change of a Document or BLOB" table on every document path
 * that sets or changes an owner, for bystanders granted exactly the table's permissions, each
 * one missing, each written another way, and Update alone (see helpers/ownership-matrix.ts).
 */

interface DocPath extends PathSpec {
  send(f: Fixture, auth: string, docId: string, to: string | null): Promise<LightMyRequestResponse>
}

const CONTENT = { marker: 'changed' }

const PATHS: DocPath[] = [
  {
    name: 'POST /v2/vaults/{v}/documents',
    kind: 'Document',
    create: true,
    content: true,
    gate: [],
    send: (f, auth, _d, to) =>
      f.t.api.post(`/v2/vaults/${f.vault}/documents`, {
        auth,
        json: { document: CONTENT, owner_id: to },
      }),
  },
  {
    name: 'POST /v1/vaults/{v}/documents',
    kind: 'Document',
    create: true,
    content: true,
    gate: [],
    send: (f, auth, _d, to) =>
      f.t.api.post(`/v1/vaults/${f.vault}/documents`, {
        auth,
        form: { document: b64(CONTENT), owner_id: to ?? '' },
      }),
  },
  {
    name: 'PUT /v2/vaults/{v}/documents/{d}',
    kind: 'Document',
    create: false,
    content: true,
    gate: ['U'],
    send: (f, auth, d, to) =>
      f.t.api.put(`/v2/vaults/${f.vault}/documents/${d}`, {
        auth,
        json: { document: CONTENT, owner_id: to },
      }),
  },
  {
    name: 'PUT /v1/vaults/{v}/documents/{d}',
    kind: 'Document',
    create: false,
    content: true,
    gate: ['U'],
    send: (f, auth, d, to) =>
      f.t.api.put(`/v1/vaults/${f.vault}/documents/${d}`, {
        auth,
        form: { document: b64(CONTENT), owner_id: to ?? '' },
      }),
  },
  {
    name: 'PUT /v1/vaults/{v}/documents/{d}/owner',
    kind: 'Document',
    create: false,
    content: false,
    gate: ['D'],
    send: (f, auth, d, to) =>
      f.t.api.put(`/v1/vaults/${f.vault}/documents/${d}/owner`, {
        auth,
        form: { owner_id: to ?? '' },
      }),
  },
]

async function adminCreate(f: Fixture, owner: string | null): Promise<string> {
  const res = await f.t.api.post(`/v2/vaults/${f.vault}/documents`, {
    auth: f.admin,
    json: { document: { marker: 'original' }, owner_id: owner },
  })
  if (res.statusCode !== 200) throw new Error(`document create failed: ${res.body}`)
  return res.json().document_id
}

async function adminRead(f: Fixture, id: string) {
  const res = await f.t.api.get(`/v2/vaults/${f.vault}/documents/${id}`, { auth: f.admin })
  if (res.statusCode !== 200) throw new Error(`document read failed: ${res.body}`)
  const doc = res.json().documents[0]
  return { owner: doc.owner_id as string | null, content: doc.document as unknown }
}

async function adminList(f: Fixture): Promise<string[]> {
  const res = await f.t.api.get(`/v1/vaults/${f.vault}/documents`, {
    auth: f.admin,
    query: { per_page: '500' },
  })
  if (res.statusCode !== 200) throw new Error(`document list failed: ${res.body}`)
  return res.json().data.items.map((i: { id: string }) => i.id)
}

async function adminDelete(f: Fixture, id: string): Promise<void> {
  const res = await f.t.api.delete(`/v1/vaults/${f.vault}/documents/${id}`, { auth: f.admin })
  if (res.statusCode !== 200) throw new Error(`document delete failed: ${res.body}`)
}

/** Runs one variant; returns what went wrong, or null. */
async function runVariant(
  f: Fixture,
  path: DocPath,
  from: Owner,
  to: Owner,
  v: Variant,
): Promise<string | null> {
  const want = expected(path, from, to, v)
  const toId = f.ownerId(to)
  if (path.create) {
    await f.grant(v.caller, 'Document', v.grants)
    const res = await path.send(f, f.keys[v.caller], '', toId)
    const bad = statusMismatch(res, want)
    if (bad) return bad
    const ids = await adminList(f)
    if (want !== 200)
      return ids.length === 0 ? null : `a refused create left ${ids.length} documents`
    const id = res.json().document_id as string
    const after = await adminRead(f, id)
    await adminDelete(f, id)
    if (ids.length !== 1) return `expected one document, found ${ids.length}`
    return after.owner === toId ? null : `owner ${after.owner}, expected ${toId}`
  }
  const docId = await adminCreate(f, f.ownerId(from))
  try {
    await f.grant(v.caller, 'Document', v.grants, docId)
    const res = await path.send(f, f.keys[v.caller], docId, toId)
    const bad = statusMismatch(res, want)
    if (bad) return bad
    const after = await adminRead(f, docId)
    const wantOwner = want === 200 ? toId : f.ownerId(from)
    if (after.owner !== wantOwner) return `owner ${after.owner}, expected ${wantOwner}`
    const changed = want === 200 && path.content
    const wantContent = changed ? CONTENT : { marker: 'original' }
    if (JSON.stringify(after.content) !== JSON.stringify(wantContent))
      return `content ${JSON.stringify(after.content)}, expected ${JSON.stringify(wantContent)}`
    if (want === 200) {
      const owner = res.json().document?.owner_id ?? res.json().owner_id
      if (owner !== undefined && owner !== toId) return `answered owner ${owner}, expected ${toId}`
    }
    return null
  } finally {
    await adminDelete(f, docId)
  }
}

let matrixSize = 0

describe('document ownership matrix (spec table × every path)', () => {
  let t: TestApp
  let f: Fixture

  beforeAll(async () => {
    t = await buildTestApp()
    f = new Fixture(t)
    await f.setup()
  })
  afterAll(async () => {
    await t.close()
    console.info(`document ownership matrix: ${matrixSize} requests checked`)
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
          // The model itself: exactly the table's grants are enough; Update alone never is.
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
        const docId = await adminCreate(f, f.ownerId(from))
        await f.grant('C', 'Document', grants, docId)
        const res = await path.send(f, f.keys.C, docId, f.ownerId(to))
        expect(res.statusCode, `${path.name} ${ownerName(from)} → ${ownerName(to)}`).toBe(401)
        expect((await adminRead(f, docId)).owner).toBe(f.ownerId(from))
        await adminDelete(f, docId)
      }
    }
  })
})

describe('document owner matchers', () => {
  let t: TestApp
  let f: Fixture
  const docs = {} as Record<'A' | 'B' | 'unowned', string>

  beforeAll(async () => {
    t = await buildTestApp()
    f = new Fixture(t)
    await f.setup()
    docs.A = await adminCreate(f, f.ids.A)
    docs.B = await adminCreate(f, f.ids.B)
    docs.unowned = await adminCreate(f, null)
  })
  afterAll(() => t.close())

  const read = (who: Who, id: string) =>
    f.t.api.get(`/v2/vaults/${f.vault}/documents/${id}`, { auth: f.keys[who] })

  it('R on $[Owner=.*] reads every owned document and never an unowned one', async () => {
    await f.grant('C', 'Document', [{ act: 'R', m: { k: 'owner', who: 'any' } }])
    expect((await read('C', docs.A)).statusCode).toBe(200)
    expect((await read('C', docs.B)).statusCode).toBe(200)
    expect((await read('C', docs.unowned)).statusCode).toBe(404)
    const v1 = await f.t.api.get(`/v1/vaults/${f.vault}/documents/${docs.unowned}`, {
      auth: f.keys.C,
    })
    expect(v1.statusCode).toBe(404)
  })

  it('$[Owner=self] R, U and D act only on the caller’s own documents', async () => {
    const self: Matcher = { k: 'owner', who: 'self' }
    await f.grant('A', 'Document', [
      { act: 'R', m: self },
      { act: 'U', m: self },
      { act: 'D', m: self },
    ])
    for (const id of [docs.B, docs.unowned]) {
      expect((await read('A', id)).statusCode).toBe(404)
      const put = await f.t.api.put(`/v2/vaults/${f.vault}/documents/${id}`, {
        auth: f.keys.A,
        json: { document: { x: 1 } },
      })
      expect(put.statusCode).toBe(404)
      const del = await f.t.api.delete(`/v1/vaults/${f.vault}/documents/${id}`, {
        auth: f.keys.A,
      })
      expect(del.statusCode).toBe(404)
      expect(await adminRead(f, id)).toMatchObject({ content: { marker: 'original' } })
    }
    expect((await read('A', docs.A)).statusCode).toBe(200)
    const put = await f.t.api.put(`/v2/vaults/${f.vault}/documents/${docs.A}`, {
      auth: f.keys.A,
      json: { document: { x: 1 } },
    })
    expect(put.statusCode).toBe(200)
    expect(await adminRead(f, docs.A)).toEqual({ owner: f.ids.A, content: { x: 1 } })
    const v1 = await f.t.api.get(`/v1/vaults/${f.vault}/documents/${docs.A}`, { auth: f.keys.A })
    expect(unb64(v1.body)).toEqual({ x: 1 })
    const del = await f.t.api.delete(`/v1/vaults/${f.vault}/documents/${docs.A}`, {
      auth: f.keys.A,
    })
    expect(del.statusCode).toBe(200)
    // B's own grant is not A's: the same policy on B's group covers only B's document.
    await f.grant('B', 'Document', [{ act: 'R', m: { k: 'owner', who: 'self' } }])
    expect((await read('B', docs.B)).statusCode).toBe(200)
    expect((await read('B', docs.unowned)).statusCode).toBe(404)
  })

  it('the plain collection matcher creates only unowned documents', async () => {
    await f.grant('A', 'Document', [{ act: 'C', m: { k: 'coll' } }])
    const post = (owner: string | null) =>
      f.t.api.post(`/v2/vaults/${f.vault}/documents`, {
        auth: f.keys.A,
        json: { document: {}, owner_id: owner },
      })
    expect((await post(f.ids.A)).statusCode).toBe(401)
    expect((await post(f.ids.B)).statusCode).toBe(401)
    expect((await post(null)).statusCode).toBe(200)
  })
})

describe('document lists match direct reads (randomized)', () => {
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

  it('a list holds exactly the documents a direct read returns', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom<Owner>(null, 'A', 'B', 'C'), { minLength: N, maxLength: N }),
        fc.constantFrom<Who>('A', 'C'),
        fc.array(randomGrant(N), { maxLength: 4 }),
        async (owners, caller, grants) => {
          for (const [i, id] of ids.entries()) {
            const res = await f.t.api.put(`/v1/vaults/${f.vault}/documents/${id}/owner`, {
              auth: f.admin,
              form: { owner_id: f.ownerId(owners[i] ?? null) ?? '' },
            })
            expect(res.statusCode, res.body).toBe(200)
          }
          await f.grant(caller, 'Document', grants, undefined, ids)
          const list = await f.t.api.get(`/v1/vaults/${f.vault}/documents`, {
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
            const res = await f.t.api.get(`/v2/vaults/${f.vault}/documents/${id}`, {
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
