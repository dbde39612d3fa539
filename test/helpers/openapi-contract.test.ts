import { describe, expect, it } from 'vitest'
import { ResponseContract, type SentResponse } from './openapi-contract.js'

/** Pins the response validator the whole HTTP suite runs through (test/helpers/app.ts). */

const json = (schema: unknown) => ({ content: { 'application/json': { schema } } })
const DOC = {
  openapi: '3.1.0',
  info: { title: 't', version: '1' },
  components: {
    schemas: {
      Envelope: {
        type: 'object',
        required: ['result', 'error'],
        properties: { result: { const: 'error' }, error: { type: 'string' } },
      },
    },
  },
  paths: {
    '/things/{id}': {
      get: {
        responses: {
          200: json({
            type: 'object',
            required: ['id'],
            properties: { id: { type: 'string', format: 'uuid' } },
          }),
          '4XX': json({ $ref: '#/components/schemas/Envelope' }),
        },
      },
      delete: { responses: { 204: { description: 'gone' } } },
    },
    '/files/{id}': {
      get: {
        responses: {
          200: { content: { '*/*': { schema: { type: 'string', format: 'binary' } } } },
        },
      },
    },
  },
}

const ID = '0b9f6c1e-2d0a-4b8e-9a57-3c1d2e4f5a6b'
const ok: SentResponse = {
  method: 'GET',
  path: '/things/{id}',
  status: 200,
  contentType: 'application/json',
  body: JSON.stringify({ id: ID }),
}

describe('ResponseContract', () => {
  const contract = new ResponseContract(DOC)

  it('accepts a described response, media type parameters and all', () => {
    expect(contract.check(ok)).toBeUndefined()
    expect(
      contract.check({ ...ok, contentType: 'application/json; charset=utf-8' }),
    ).toBeUndefined()
  })

  it('rejects a status the operation does not document', () => {
    expect(contract.check({ ...ok, status: 500 })).toMatch(/-> 500: status not documented/)
    expect(contract.check({ ...ok, status: 201 })).toMatch(/status not documented/)
  })

  it('finds a status in its range, and checks the $ref it points to', () => {
    const error = { ...ok, status: 404, body: JSON.stringify({ result: 'error', error: 'x' }) }
    expect(contract.check(error)).toBeUndefined()
    expect(contract.check({ ...error, body: JSON.stringify({ result: 'success' }) })).toMatch(
      /must have required property 'error'|must be equal to constant/,
    )
  })

  it('rejects a media type the response does not document', () => {
    expect(contract.check({ ...ok, contentType: 'text/plain' })).toMatch(
      /media type text\/plain not documented \(application\/json\)/,
    )
    expect(contract.check({ ...ok, contentType: undefined })).toMatch(/no Content-Type/)
  })

  it('rejects a body that does not match the schema, naming what is wrong', () => {
    expect(contract.check({ ...ok, body: JSON.stringify({ id: 'not-a-uuid' }) })).toMatch(
      /body\/id must match format "uuid"/,
    )
    expect(contract.check({ ...ok, body: JSON.stringify({}) })).toMatch(/required property 'id'/)
    expect(contract.check({ ...ok, body: '{"id":' })).toMatch(/body is not JSON/)
  })

  it('finds the operation whatever the server calls its path parameters', () => {
    expect(contract.check({ ...ok, path: '/things/{thing_id}' })).toBeUndefined()
    expect(contract.check({ ...ok, path: '/things/{thing_id}', status: 500 })).toMatch(
      /GET \/things\/\{thing_id\} -> 500: status not documented/,
    )
  })

  it('rejects an operation the document does not have', () => {
    expect(contract.check({ ...ok, method: 'POST' })).toMatch(/no such operation/)
    expect(contract.check({ ...ok, path: '/things' })).toMatch(/no such operation/)
  })

  it('takes any bytes of any type where the document says binary; a streamed body too', () => {
    const file = { ...ok, path: '/files/{id}', contentType: 'image/png', body: Buffer.from([0]) }
    expect(contract.check(file)).toBeUndefined()
    expect(contract.check({ ...file, body: undefined })).toBeUndefined()
  })

  it('takes no body where the response describes none, and rejects one', () => {
    const gone = { ...ok, method: 'DELETE', status: 204, contentType: undefined, body: '' }
    expect(contract.check(gone)).toBeUndefined()
    expect(contract.check({ ...gone, body: '{}' })).toMatch(/describes none/)
  })
})
