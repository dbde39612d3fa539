import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildTestApp, type TestApp } from '../helpers/app.js'

describe('smoke', () => {
  let t: TestApp
  beforeAll(async () => {
    t = await buildTestApp()
  })
  afterAll(() => t.close())

  it('serves the current user to the bootstrap admin', async () => {
    const res = await t.api.get('/v1/auth/me?full=true', { auth: t.admin.api_key })
    expect(res.statusCode).toBe(200)
    expect(res.json()).toMatchObject({
      result: 'success',
      user: { username: 'admin', status: 'ACTIVATED' },
    })
  })
})
