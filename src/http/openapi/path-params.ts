import type { DocumentTransform, Operation, PathItem } from './document.js'
import { HTTP_METHODS } from './document.js'

const TEMPLATE = /\{([^}]+)\}/g

/** The names of a path's templates in order (`/a/{x}/b/{y}` → `['x', 'y']`). */
export function templateNames(path: string): string[] {
  return [...path.matchAll(TEMPLATE)].map((match) => match[1] as string)
}

/** The path with its template names erased: equal for paths OpenAPI counts as identical. */
export function erasedPath(path: string): string {
  return path.replace(TEMPLATE, '{}')
}

/** Shortest name, then alphabetical: `document_id` over `document_ids`. */
function canonicalName(names: string[]): string {
  return [...names].sort((a, b) => a.length - b.length || (a < b ? -1 : 1))[0] as string
}

function renamed(operation: Operation, names: Map<string, string>): Operation {
  if (!operation.parameters) return operation
  return {
    ...operation,
    parameters: operation.parameters.map((p) =>
      p.in === 'path' && names.has(p.name) ? { ...p, name: names.get(p.name) as string } : p,
    ),
  }
}

/**
 * OAS 3.1 forbids two paths that differ only in template names. Fastify routes do differ so
 * (`GET .../documents/{document_ids}` takes a list, `PUT .../documents/{document_id}` one id);
 * the name is never on the wire, so the document gives each such position one name (the
 * shortest) and the operations that take a list say so in the parameter's description. The
 * routes keep theirs: error messages name the field as the route does.
 */
export const oneTemplatePerPath: DocumentTransform = (doc) => {
  const groups = new Map<string, string[]>()
  for (const path of Object.keys(doc.paths)) {
    const key = erasedPath(path)
    groups.set(key, [...(groups.get(key) ?? []), path])
  }
  const paths: Record<string, PathItem> = {}
  for (const [path, item] of Object.entries(doc.paths)) {
    const group = groups.get(erasedPath(path)) as string[]
    if (group.length === 1) {
      paths[path] = item
      continue
    }
    const names = group.map(templateNames)
    const canonical = (names[0] as string[]).map((_, i) =>
      canonicalName(names.map((list) => list[i] as string)),
    )
    let index = 0
    const target = erasedPath(path).replace(/\{\}/g, () => `{${canonical[index++]}}`)
    const own = new Map(templateNames(path).map((name, i) => [name, canonical[i] as string]))
    const merged: PathItem = paths[target] ?? {}
    for (const [key, value] of Object.entries(item)) {
      if (key in merged) throw new Error(`OpenAPI: two ${key} operations on ${target}`)
      merged[key] = HTTP_METHODS.includes(key) ? renamed(value, own) : value
    }
    paths[target] = merged
  }
  doc.paths = paths
}
