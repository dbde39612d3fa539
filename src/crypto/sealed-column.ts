/** One stored ciphertext of a record (a document's content, a user's attributes). */
export interface SealedRecord {
  /** The record's id (the cursor: records are listed by id). */
  id: string
  /** What else identifies the row (a document's vault id; '' for users). */
  scope: string
  ciphertext: string
  /** The keyring context the ciphertext is bound to. */
  context: string
}

/**
 * A column of keyring ciphertexts, as `coffer keys reencrypt` walks it: a small port each
 * module that owns such a column implements over its own repository, so the command never
 * touches another module's table.
 */
export interface SealedColumn {
  readonly name: string
  /** The account's records by id after `after` whose ciphertext is not under data key `keyId`. */
  listNotUnder(
    accountId: string,
    keyId: string,
    after: string | undefined,
    limit: number,
  ): Promise<SealedRecord[]>
  /**
   * Stores `sealed` only if the row still holds `record.ciphertext` (a write of the API in
   * between wins: it is picked up by the next pass). Returns whether it was replaced.
   */
  replace(accountId: string, record: SealedRecord, sealed: string): Promise<boolean>
  /**
   * When present, re-encrypts the record itself instead of decrypt / encrypt / replace (a BLOB:
   * its content goes to a new object under a new stream key sealed by the current data key).
   * Same contract as `replace`: false when the record changed meanwhile.
   */
  reencrypt?(accountId: string, record: SealedRecord): Promise<boolean>
}
