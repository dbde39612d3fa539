import { describe, expect, it } from 'vitest'
import type { OpenApiDocument } from './document.js'
import { erasedPath, oneTemplatePerPath, templateNames } from './path-params.js'

const param = (name: string, description = 'UUID') => ({
  in: 'path',
  name,
  required: true,
  description,
})

describe('oneTemplatePerPath', () => {
  it('merges paths that differ only in template names under the shortest name', () => {
    const doc: OpenApiDocument = {
      openapi: '3.1.0',
      paths: {
        '/v/{vault_id}/docs': { get: { operationId: 'listDocs' } },
        '/v/{vault_id}/docs/{doc_ids}': {
          get: {
            operationId: 'readDocs',
            parameters: [param('vault_id'), param('doc_ids', 'comma-separated ids')],
          },
        },
        '/v/{vault_id}/docs/{doc_id}': {
          put: { operationId: 'updateDoc', parameters: [param('vault_id'), param('doc_id')] },
        },
        '/v/{vault_id}/docs/{doc_id}/owner': { put: { operationId: 'setOwner' } },
      },
    }
    oneTemplatePerPath(doc)
    expect(Object.keys(doc.paths)).toEqual([
      '/v/{vault_id}/docs',
      '/v/{vault_id}/docs/{doc_id}',
      '/v/{vault_id}/docs/{doc_id}/owner',
    ])
    const item = doc.paths['/v/{vault_id}/docs/{doc_id}']
    expect(item?.get?.parameters).toEqual([
      param('vault_id'),
      param('doc_id', 'comma-separated ids'),
    ])
    expect(item?.put?.operationId).toBe('updateDoc')
  })

  it('refuses to merge two operations of one method', () => {
    const doc: OpenApiDocument = {
      openapi: '3.1.0',
      paths: { '/a/{x}': { get: {} }, '/a/{y}': { get: {} } },
    }
    expect(() => oneTemplatePerPath(doc)).toThrow(/two get operations on \/a\/\{x\}/)
  })

  it('leaves distinct templates alone', () => {
    const paths = { '/a/{x}': { get: {} }, '/a/{x}/b': { get: {} }, '/c/{x}': { get: {} } }
    const doc: OpenApiDocument = { openapi: '3.1.0', paths: structuredClone(paths) }
    oneTemplatePerPath(doc)
    expect(doc.paths).toEqual(paths)
  })
})

describe('templates', () => {
  it('names and erases them', () => {
    expect(templateNames('/a/{x}/b/{y_ids}')).toEqual(['x', 'y_ids'])
    expect(erasedPath('/a/{x}/b/{y_ids}')).toBe('/a/{}/b/{}')
  })
})
