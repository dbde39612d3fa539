import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { FreeSpaceFloor } from '../../src/storage/free-space-floor.js'
import { buildTestApp, createUser, type TestApp } from '../helpers/app.js'

// A floor whose reading the test sets: `full` true puts free space under it.
describe('the free-space floor guard (review of issue #18)', () => {
  let t: TestApp
  let full = false
  beforeAll(async () => {
    t = await buildTestApp({
      freeSpace: new FreeSpaceFloor({
        paths: ['/data'],
        minFreeBytes: 100,
        refreshMs: 0,
        statfs: async () => ({ bavail: full ? 1 : 10_000, bsize: 1, blocks: 100_000 }),
        onChange: () => {},
      }),
    })
  })
  afterAll(async () => {
    await t?.close()
  })

  it('a POST to no route is 404, not 507: a stranger learns nothing about the disk', async () => {
    full = true
    const res = await t.app.inject({ method: 'POST', url: '/v1/no_such_route', payload: {} })
    full = false
    expect(res.statusCode, res.body).toBe(404)
    expect(res.json().error.code).toBe('ROUTE_NOT_FOUND')
  })

  it('logging out (logout, logout_all) still works under the floor: it stores nothing', async () => {
    const user = await createUser(t, { password: 'a long enough password 1' })
    full = true
    try {
      const out = await t.api.post('/v1/auth/logout', { auth: user.accessToken })
      expect(out.statusCode, out.body).toBe(200)
      const all = await t.api.post('/v1/auth/logout_all', { auth: user.apiKey })
      expect(all.statusCode, all.body).toBe(200)
      // A write is still refused.
      const v = await t.api.post('/v1/vaults', { auth: t.admin.api_key, form: { name: 'x' } })
      expect(v.statusCode, v.body).toBe(507)
    } finally {
      full = false
    }
  })
})
