import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  buildConsentTestApp,
  CONSENT,
  type ConsentTestApp,
  emailQuery,
} from '../helpers/consent.js'
import { ResponseContract } from '../helpers/openapi-contract.js'

/**
 * The consent listener's answers are held to its own /openapi.json like the main API's
 * (test/helpers/consent.ts watches every one): this proves the watch has teeth there.
 */
describe('the consent document as a response contract', () => {
  let t: ConsentTestApp
  let contract: ResponseContract
  beforeAll(async () => {
    t = await buildConsentTestApp()
    contract = new ResponseContract(JSON.parse(JSON.stringify(t.app.swagger())))
  })
  afterAll(() => t.close())

  it('describes a real answer, and refuses a wrong status, media type or body', async () => {
    const res = await t.get(emailQuery('contract@example.com'))
    const real = {
      method: 'GET',
      path: CONSENT,
      status: res.statusCode,
      contentType: String(res.headers['content-type']),
      body: res.body,
    }
    expect(contract.check(real)).toBeUndefined()
    expect(contract.check({ ...real, status: 418 })).toBeDefined()
    expect(contract.check({ ...real, contentType: 'text/html' })).toBeDefined()
    expect(contract.check({ ...real, body: JSON.stringify({ unexpected: true }) })).toBeDefined()
  })
})
