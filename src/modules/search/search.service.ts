import type { Actor } from '../../access/principal.js'
import { USER_SYSTEM_FIELDS } from '../../indexing/index-values.js'
import { AppError, ErrorType, errors } from '../../lib/errors.js'
import { encodeBase64Json } from '../../lib/input.js'
import { type Meter, noopMeter, secondsSince } from '../../metrics/meter.js'
import { type QueryBound, QueryStopped } from '../../store/bounded-query.js'
import { type BoundedReads, ReadPoolUnavailable, ReadsBusy } from '../../store/bounded-reads.js'
import type { Executor } from '../../store/executor.js'
import type { DocumentRow, DocumentsService } from '../documents/documents.service.js'
import type { SchemasService } from '../schemas/schemas.service.js'
import type { UserSchemaService } from '../schemas/user-schema.service.js'
import type { UsersService } from '../users/users.service.js'
import type { VaultsService } from '../vaults/vaults.service.js'
import * as repo from './search.repo.js'
import { resolveSearch, type SearchQuery } from './search-fields.js'
import { KM_PER_MILE, type OptionShape } from './search-options.js'

export interface SearchInfo {
  per_page: number
  current_page: number
  num_pages: number
  total_result_count: number
}

export interface VaultSearchResult {
  documents: {
    document_id: string
    owner_id: string | null
    document?: string
    distance_from?: number
  }[]
  info: SearchInfo
}

/**
 * A user hit carries both shapes clients read (decisions.md, user search hits): the official SDK's
 * `{id, user_id, username, status, attributes}` and the spec's `{document_id, owner_id, document}`.
 * `document` is the same base64 attributes; `owner_id` is null (a user has no owner).
 */
export interface UserSearchResult {
  documents: {
    id: string
    user_id: string
    username: string
    status: string
    document_id: string
    owner_id: null
    attributes?: string
    document?: string
  }[]
  info: SearchInfo
}

const info = (query: SearchQuery, total: number): SearchInfo => ({
  per_page: query.perPage,
  current_page: query.page,
  num_pages: Math.ceil(total / query.perPage),
  total_result_count: total,
})

/** Default bound on each search statement (PostgreSQL), COFFER_SEARCH_TIMEOUT_MS. */
export const DEFAULT_SEARCH_TIMEOUT_MS = 5000

/**
 * A search stopped by its time bound is a 503: how long a valid search takes depends on the
 * data and on the server's load at that moment, not on whether the request is well formed, and
 * a 4xx would tell clients that the very same request can never succeed. One stopped because
 * its client left is never seen by anyone; it is still answered as a 4xx, not an error.
 */
function stopped(e: QueryStopped, timeoutMs: number): AppError {
  return e.reason === 'timeout'
    ? new AppError(
        503,
        ErrorType.unavailable,
        'SEARCH_TIMEOUT',
        `The search took longer than ${timeoutMs} ms; narrow its filters or sort keys, or retry later`,
      )
    : new AppError(
        400,
        ErrorType.invalidRequest,
        'REQUEST_ABORTED',
        'The client closed the request',
      )
}

/**
 * Refused before it ran because this node is already running and queueing as many searches as
 * it takes (COFFER_SEARCH_CONCURRENCY / COFFER_SEARCH_WORKERS, COFFER_SEARCH_QUEUE): a 503,
 * the same request succeeds once the load passes.
 */
const busy = () =>
  new AppError(
    503,
    ErrorType.unavailable,
    'SEARCH_BUSY',
    'This node is running as many searches as it takes; retry later',
  )

/**
 * SQLite's search workers are not running (they failed to start, or one died under this search):
 * answered at once rather than after the whole time bound. A 503: the request is fine, this node
 * cannot run searches now; the pool tries a fresh start a few seconds later (read-pool.ts).
 */
const unavailable = (e: ReadPoolUnavailable) =>
  new AppError(
    503,
    ErrorType.unavailable,
    'SEARCH_UNAVAILABLE',
    'Searches cannot run on this node now; retry later',
    {
      cause: e,
      retryAfterSeconds: 5,
      logFields: { reason: 'search workers not running', error: errorText(e.cause) },
    },
  )

const errorText = (e: unknown) => (e instanceof Error ? e.message : String(e)).slice(0, 500)

/**
 * Search over the index (docs/search.md): a vault's documents under one schema, or the account's
 * users under its user schema. Only what the caller may read is matched, counted and returned.
 */
export class SearchService {
  constructor(
    private readonly db: Executor,
    private readonly vaults: VaultsService,
    private readonly documents: DocumentsService,
    private readonly users: UsersService,
    private readonly schemas: SchemasService,
    private readonly userSchemas: UserSchemaService,
    private readonly timeoutMs = DEFAULT_SEARCH_TIMEOUT_MS,
    private readonly meter: Meter = noopMeter,
    /** Where searches run and how many at once; absent: inline on `db` (bounded there). */
    private readonly reads?: BoundedReads,
    /** Candidate-set size from which a search counts as broad (search.repo.ts). */
    private readonly broadRows = repo.ESTIMATE_LIMIT,
  ) {}

  #reads() {
    return this.reads ? { reads: this.reads } : {}
  }

  /** Runs one bounded search query, its stops answered as AppErrors. */
  async #bounded<T>(signal: AbortSignal | undefined, search: (bound: QueryBound) => Promise<T>) {
    const started = performance.now()
    try {
      const result = await search({ timeoutMs: this.timeoutMs, ...(signal ? { signal } : {}) })
      this.meter.observe('search_duration_seconds', { outcome: 'ok' }, secondsSince(started))
      return result
    } catch (e) {
      const outcome =
        e instanceof QueryStopped ? 'stopped' : e instanceof ReadsBusy ? 'busy' : 'error'
      this.meter.observe('search_duration_seconds', { outcome }, secondsSince(started))
      if (e instanceof ReadsBusy) throw busy()
      if (e instanceof ReadPoolUnavailable) throw unavailable(e)
      throw e instanceof QueryStopped ? stopped(e, this.timeoutMs) : e
    }
  }

  /** `signal`: aborts when the client has gone, which cancels the running query. */
  async searchVault(
    actor: Actor,
    vaultId: string,
    shape: OptionShape,
    signal?: AbortSignal,
  ): Promise<VaultSearchResult> {
    const accountId = actor.principal.accountId
    await this.vaults.require(this.db, accountId, vaultId)
    const schemaId = shape.schemaId as string
    const schema = await this.schemas.find(this.db, accountId, vaultId, schemaId)
    if (!schema) throw errors.notFound('Schema')
    const query = resolveSearch(shape, schema.fields)
    const scopes = actor.grants.readScopes(['Vault', vaultId, 'Document', ''])
    if (!scopes) throw errors.permissionDenied()
    const { total, hits } = await this.#bounded(signal, (bound) =>
      repo.searchDocuments(this.db, {
        accountId,
        vaultId,
        schemaId,
        scopes,
        query,
        bound,
        ...this.#reads(),
        broadRows: this.broadRows,
      }),
    )
    // distance_from: the first geo sort key's value (km in SQL), in the geo filter's unit.
    const geoKey = query.sort.findIndex((k) => k.column === 'geo')
    const geo = query.sort[geoKey]
    const perUnit = geo?.column === 'geo' && geo.point.unit === 'mi' ? KM_PER_MILE : 1
    const documents = await Promise.all(
      hits.map(async (hit) => {
        const km = geoKey >= 0 ? hit.keys[geoKey] : null
        return {
          document_id: hit.id,
          owner_id: hit.owner_id,
          ...(query.full
            ? { document: encodeBase64Json(await this.documents.openContent(hit as DocumentRow)) }
            : {}),
          ...(km === null || km === undefined ? {} : { distance_from: Number(km) / perUnit }),
        }
      }),
    )
    return { documents, info: info(query, total) }
  }

  async searchUsers(
    actor: Actor,
    shape: OptionShape,
    signal?: AbortSignal,
  ): Promise<UserSearchResult> {
    const accountId = actor.principal.accountId
    const schema = await this.userSchemas.current(this.db, accountId)
    const fields = [...USER_SYSTEM_FIELDS, ...(schema ? schema.fields : [])]
    const query = resolveSearch(shape, fields)
    const scopes = actor.grants.readScopes(['User', ''])
    if (!scopes) throw errors.permissionDenied()
    // Without a user schema nothing is indexed: nobody matches.
    if (!schema) return { documents: [], info: info(query, 0) }
    const { total, hits } = await this.#bounded(signal, (bound) =>
      repo.searchUsers(this.db, {
        accountId,
        schemaId: schema.id,
        scopes,
        query,
        bound,
        ...this.#reads(),
        broadRows: this.broadRows,
      }),
    )
    const documents = await Promise.all(
      hits.map(async (hit) => {
        // Only with full_document, as a user read shows attributes only with full=true.
        const attributes = query.full
          ? Buffer.from(
              await this.users.attributesJson({ ...hit, attributes: hit.attributes as string }),
            ).toString('base64')
          : undefined
        return {
          id: hit.id,
          user_id: hit.id,
          username: hit.username,
          status: hit.status,
          document_id: hit.id,
          owner_id: null,
          ...(attributes === undefined ? {} : { attributes, document: attributes }),
        }
      }),
    )
    return { documents, info: info(query, total) }
  }
}
