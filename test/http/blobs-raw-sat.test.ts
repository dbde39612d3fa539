import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MAX_BLOB_BYTES } from '../../src/modules/blobs/blobs.service.js'
import type { PolicyStatement } from '../../src/policy/index.js'
import { basicHeader, buildTestApp, createUser, type TestApp } from '../helpers/app.js'

/**
 * Decision 47: a refused (401) or invalid (400) request takes no SAT use. A raw BLOB upload
 * names everything but the file before its body (filename, type, size, owner), so all of that
 * is checked before the SAT is let through: a single-use upload token (a browser page's) is not
 * burnt by a name too long or an owner it may not set.
 */
describe('raw BLOB uploads with a single-use SAT', () => {
  let t: TestApp
  let vault: string
  let owner: { id: string }
  let other: { id: string }

  beforeAll(async () => {
    t = await buildTestApp()
    const v = await t.api.post('/v1/vaults', { auth: t.admin.api_key, form: { name: 'sat-raw' } })
    vault = v.json().vault.id
    owner = await createUser(t)
    other = await createUser(t)
  })
  afterAll(() => t?.close())

  /** A SAT that may create BLOBs owned by `owner` only, once. */
  const singleUse = async () => {
    const policy: PolicyStatement[] = [
      { Resources: [`Vault::${vault}::Blob::$[Owner=${owner.id}]`], Activities: 'C' },
    ]
    const res = await t.api.post('/v1/scoped_access_tokens', {
      auth: t.admin.api_key,
      json: {
        name: 'upload',
        policy,
        allowed_uses: 1,
        not_valid_after: new Date(Date.now() + 3_600_000).toISOString(),
      },
    })
    expect(res.statusCode, res.body).toBe(200)
    const { username, password } = res.json().scoped_access_token.http_auth
    return basicHeader(username, password)
  }

  const upload = (authorization: string, query: string, headers: Record<string, string> = {}) =>
    t.app.inject({
      method: 'POST',
      url: `/v1/vaults/${vault}/blobs?${query}`,
      headers: { authorization, 'content-type': 'application/octet-stream', ...headers },
      payload: Buffer.from('file'),
    })

  it.each<[string, string, Record<string, string>, number]>([
    ['a filename over 255 characters', `OWNED&filename=${'n'.repeat(256)}`, {}, 400],
    ['a filename with a control character', 'OWNED&filename=a%0Ab', {}, 400],
    ['a malformed filename*', 'OWNED', { 'content-disposition': 'attachment; filename*=x' }, 400],
    [
      'a Content-Type over 255 characters',
      'OWNED',
      { 'content-type': `a/${'b'.repeat(254)}` },
      400,
    ],
    ['a declared size over 50 MB', 'OWNED', { 'content-length': String(MAX_BLOB_BYTES + 1) }, 413],
    ['a malformed owner_id', 'owner_id=nope', {}, 400],
    ['no owner (C on the collection needed)', '', {}, 401],
    ['an owner the SAT may not set', 'owner_id=OTHER', {}, 401],
  ])('%s: refused, no use spent', async (_name, query, headers, status) => {
    const sat = await singleUse()
    const refused = await upload(
      sat,
      query.replace('OTHER', other.id).replace('OWNED', `owner_id=${owner.id}`),
      headers,
    )
    expect(refused.statusCode, refused.body).toBe(status)
    const ok = await upload(sat, `owner_id=${owner.id}&filename=ok.bin`)
    expect(ok.statusCode, ok.body).toBe(200)
    expect(ok.json().owner_id).toBe(owner.id)
    // Single use: spent now.
    expect((await upload(sat, `owner_id=${owner.id}`)).statusCode).toBe(401)
  })
})
