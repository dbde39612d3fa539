import { PostgresAdapter, type Selectable } from 'kysely'
import type { Executor } from '../../store/executor.js'
import { precompiled } from '../../store/precompiled.js'
import type { ConsentEventsTable, ConsentRecordsTable } from '../../store/schema.js'

/**
 * Consent records (current state, keyed by shop and consumer digest) and their history. The
 * history is append-only: this file, the only one that touches `consent_events`, only ever
 * inserts and reads it.
 */

export type ConsentRecordRow = Selectable<ConsentRecordsTable>
export type ConsentEventRow = Selectable<ConsentEventsTable>

/** The preference columns, as stored (0/1/null). */
export type PreferenceColumns = Pick<
  ConsentRecordRow,
  | 'consent_analytics'
  | 'consent_advertising'
  | 'consent_personalization'
  | 'consent_targeted_advertising'
  | 'opted_out'
>

const findQuery = precompiled((db: Executor, shop: string, digest: string) =>
  db
    .selectFrom('consent_records')
    .selectAll()
    .where('shop', '=', shop)
    .where('consumer_digest', '=', digest),
)

/** Every GET reads its record first (hot path). */
export async function findRecord(db: Executor, shop: string, digest: string) {
  const [row] = await findQuery(db, shop, digest)
  return row
}

/** Inside a transaction: the record, locked against concurrent changes on PostgreSQL. */
export function findRecordForUpdate(db: Executor, shop: string, digest: string) {
  const query = db
    .selectFrom('consent_records')
    .selectAll()
    .where('shop', '=', shop)
    .where('consumer_digest', '=', digest)
  // SQLite has no row locks: its one connection runs one transaction at a time.
  return (
    db.getExecutor().adapter instanceof PostgresAdapter ? query.forUpdate() : query
  ).executeTakeFirst()
}

/** Inserts unless the consumer already has a record; true when this call created it. */
export async function insertRecord(db: Executor, row: ConsentRecordRow): Promise<boolean> {
  const result = await db
    .insertInto('consent_records')
    .values(row)
    .onConflict((oc) => oc.columns(['shop', 'consumer_digest']).doNothing())
    .executeTakeFirst()
  return Number(result.numInsertedOrUpdatedRows ?? 0) === 1
}

export async function updatePreferences(
  db: Executor,
  shop: string,
  digest: string,
  values: PreferenceColumns & { choice_at: string; updated_at: string },
): Promise<void> {
  await db
    .updateTable('consent_records')
    .set(values)
    .where('shop', '=', shop)
    .where('consumer_digest', '=', digest)
    .execute()
}

/**
 * Starts a lapsed record afresh; only if its choice is still the lapsed one (two GETs racing to
 * reset it: one wins, the other sees no row changed). True when this call reset it.
 */
export async function resetLapsed(
  db: Executor,
  shop: string,
  digest: string,
  lapsedChoiceAt: string,
  values: PreferenceColumns & {
    token_epoch: number
    updated_at: string
    last_provider: string
    last_privacy_center_id: string
    last_client_id: string | null
  },
): Promise<boolean> {
  const result = await db
    .updateTable('consent_records')
    .set({ ...values, choice_at: null })
    .where('shop', '=', shop)
    .where('consumer_digest', '=', digest)
    .where('choice_at', '=', lapsedChoiceAt)
    .executeTakeFirst()
  return Number(result.numUpdatedRows) === 1
}

/**
 * Where the consumer was last seen (recorded with later changes); written only when it differs,
 * or (with `updated_at`) to mark a record nobody chose for as still in use (see deleteUnchosen).
 */
export async function updateLastSeen(
  db: Executor,
  shop: string,
  digest: string,
  seen: {
    last_provider: string
    last_privacy_center_id: string
    last_client_id: string | null
    updated_at?: string
  },
): Promise<void> {
  await db
    .updateTable('consent_records')
    .set(seen)
    .where('shop', '=', shop)
    .where('consumer_digest', '=', digest)
    .execute()
}

export type RecordKey = Pick<ConsentRecordRow, 'shop' | 'consumer_digest'>

export type ExpiredRecord = Pick<
  ConsentRecordRow,
  'shop' | 'consumer_digest' | 'last_provider' | 'last_privacy_center_id' | 'last_client_id'
>

/**
 * Reads the next `pageSize` records in key order after `after` and deletes those nobody ever
 * chose for (no choice, no preference, no history but their `created` event) untouched since
 * `cutoff`. Returns them, with where they were last seen, and the last key read (where the next
 * page starts; undefined at the end). Paging by key bounds each statement (SQLite runs it on
 * the event loop) and reads the table once per pass. The delete checks every condition again
 * on the row itself, so a choice made meanwhile keeps the record (PostgreSQL re-evaluates them
 * under the row lock).
 */
export async function deleteUnchosen(
  db: Executor,
  cutoff: string,
  pageSize: number,
  after: RecordKey | undefined,
): Promise<{ expired: ExpiredRecord[]; last: RecordKey | undefined }> {
  let page = db
    .selectFrom('consent_records')
    .select(['shop', 'consumer_digest', 'choice_at', 'updated_at'])
    .orderBy('shop')
    .orderBy('consumer_digest')
    .limit(pageSize)
  if (after) {
    page = page.where(({ eb, refTuple, tuple }) =>
      eb(refTuple('shop', 'consumer_digest'), '>', tuple(after.shop, after.consumer_digest)),
    )
  }
  const rows = await page.execute()
  const last = rows.at(-1)
  const candidates = rows.filter((r) => r.choice_at === null && r.updated_at <= cutoff)
  if (candidates.length === 0) return { expired: [], last }
  const expired = await db
    .deleteFrom('consent_records')
    .where(({ eb, or, and }) =>
      or(
        candidates.map((c) =>
          and([eb('shop', '=', c.shop), eb('consumer_digest', '=', c.consumer_digest)]),
        ),
      ),
    )
    .where('choice_at', 'is', null)
    .where('updated_at', '<=', cutoff)
    .where('consent_analytics', 'is', null)
    .where('consent_advertising', 'is', null)
    .where('consent_personalization', 'is', null)
    .where('consent_targeted_advertising', 'is', null)
    .where('opted_out', 'is', null)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('consent_events as e')
            .select('e.id')
            .whereRef('e.shop', '=', 'consent_records.shop')
            .whereRef('e.consumer_digest', '=', 'consent_records.consumer_digest')
            .where('e.action', '<>', 'created'),
        ),
      ),
    )
    .returning([
      'shop',
      'consumer_digest',
      'last_provider',
      'last_privacy_center_id',
      'last_client_id',
    ])
    .execute()
  return { expired, last }
}

export async function appendEvent(db: Executor, row: ConsentEventRow): Promise<void> {
  await db.insertInto('consent_events').values(row).execute()
}

/** Several events in one statement (pruning appends one per expired record). */
export async function appendEvents(db: Executor, rows: ConsentEventRow[]): Promise<void> {
  if (rows.length > 0) await db.insertInto('consent_events').values(rows).execute()
}

/** Kind and sealed identifier are null once the consumer's record has expired (deleteUnchosen). */
export type ExportRow = ConsentEventRow & {
  consumer_kind: string | null
  consumer_sealed: string | null
}

/** One page of a shop's history in recording order, optionally of one consumer. */
export function listEvents(
  db: Executor,
  shop: string,
  after: string,
  limit: number,
  digest?: string,
): Promise<ExportRow[]> {
  // A left join: the history of a consumer whose unchosen record expired is still exported.
  let query = db
    .selectFrom('consent_events as e')
    .leftJoin('consent_records as r', (join) =>
      join.onRef('r.shop', '=', 'e.shop').onRef('r.consumer_digest', '=', 'e.consumer_digest'),
    )
    .selectAll('e')
    .select(['r.consumer_kind', 'r.consumer_sealed'])
    .where('e.shop', '=', shop)
    .where('e.id', '>', after)
  if (digest !== undefined) query = query.where('e.consumer_digest', '=', digest)
  return query.orderBy('e.id').limit(limit).execute()
}

/** True when any consent record exists (a lost consent secret must not be replaced silently). */
export async function hasAnyRecord(db: Executor): Promise<boolean> {
  const row = await db.selectFrom('consent_records').select('shop').limit(1).executeTakeFirst()
  return row !== undefined
}
