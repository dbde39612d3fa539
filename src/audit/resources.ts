import type { AuditResources } from './event.js'

/**
 * Ids of one kind an event lists; past this, only their count (a list of 1,000 documents would
 * make one event 40 KB). An auditor still sees which route and filter-free shape returned them.
 */
export const RESOURCE_IDS_MAX = 100

/** Longest id kept (ids are UUIDs; anything longer is a client's invalid input, cut). */
const ID_MAX_LENGTH = 64

/** The resources one request touched, gathered as it runs. */
export class ResourceSet {
  readonly #kinds = new Map<string, { ids: Set<string>; count: number }>()

  add(kind: string, ids: Iterable<string>): void {
    let entry = this.#kinds.get(kind)
    if (!entry) {
      entry = { ids: new Set(), count: 0 }
      this.#kinds.set(kind, entry)
    }
    for (const raw of ids) {
      if (typeof raw !== 'string' || raw === '') continue
      const id = raw.slice(0, ID_MAX_LENGTH)
      if (entry.ids.has(id)) continue
      entry.count++
      if (entry.ids.size < RESOURCE_IDS_MAX) entry.ids.add(id)
    }
  }

  /** A list or search answered `n` items that are not named (counted only). */
  addCount(kind: string, n: number): void {
    const entry = this.#kinds.get(kind) ?? { ids: new Set(), count: 0 }
    entry.count += n
    entry.ids.clear()
    this.#kinds.set(kind, entry)
  }

  toJSON(): AuditResources {
    const out: AuditResources = {}
    for (const [kind, { ids, count }] of this.#kinds) {
      out[kind] = count > RESOURCE_IDS_MAX || ids.size < count ? { count } : [...ids]
    }
    return out
  }
}
