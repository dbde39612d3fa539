import type { DocumentTransform, RouteTransform, TagObject } from './document.js'
import { operationsOf } from './document.js'

/** A route that names no tag gets this one (the consent routes: their listener is one module). */
export function fallbackTag(name: string): RouteTransform {
  return ({ schema }) => {
    if (!schema.tags || schema.tags.length === 0) schema.tags = [name]
  }
}

/**
 * The document's `tags` list: every tag the operations use, in order of first use, with the
 * description given here (lint: every tag used is declared; readers see what each module does).
 */
export function declaredTags(descriptions: Record<string, string>): DocumentTransform {
  return (doc) => {
    const names: string[] = []
    for (const [, , operation] of operationsOf(doc)) {
      for (const tag of operation.tags ?? []) if (!names.includes(tag)) names.push(tag)
    }
    doc.tags = names.map((name): TagObject => {
      const description = descriptions[name]
      return description ? { name, description } : { name }
    })
  }
}
