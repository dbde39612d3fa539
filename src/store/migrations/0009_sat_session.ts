import type { Kysely } from 'kysely'

// biome-ignore lint/suspicious/noExplicitAny: migrations describe the schema as it was then
type Db = Kysely<any>

/**
 * The access token (its digest) a SAT was minted through, directly or by a SAT minted so; null
 * when an API key was used (or the server issued it). Such a SAT works only while that session
 * does, so a password change, a reset, logout or logout_all also ends what a stolen session
 * minted (security review, finding 7).
 */
export async function up(db: Db): Promise<void> {
  await db.schema.alterTable('scoped_access_tokens').addColumn('session_digest', 'text').execute()
}

export async function down(db: Db): Promise<void> {
  await db.schema.alterTable('scoped_access_tokens').dropColumn('session_digest').execute()
}
