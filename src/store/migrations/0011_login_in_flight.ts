import type { Kysely } from 'kysely'

// biome-ignore lint/suspicious/noExplicitAny: migrations describe the schema as it was then
type Db = Kysely<any>

/**
 * Login attempts counted before their password is checked but not yet settled. `failures`
 * counts them too (so a flood of guesses is limited before any hashing), and this column tells
 * the two apart: a window spent only by attempts still in flight makes the next one wait, not
 * fail, since those attempts may all turn out to be right (issue 12, point 9).
 */
export async function up(db: Db): Promise<void> {
  await db.schema
    .alterTable('login_throttle')
    .addColumn('in_flight', 'integer', (c) => c.notNull().defaultTo(0))
    .execute()
}

export async function down(db: Db): Promise<void> {
  await db.schema.alterTable('login_throttle').dropColumn('in_flight').execute()
}
