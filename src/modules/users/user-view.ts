import type { UserSnapshot } from '../../access/principal.js'

/** A user as the API shows it; secrets and hashes never appear here. */
export interface UserView {
  id: string
  user_id: string
  account_id: string
  username: string
  status: string
  mfa_enrolled: boolean
  attributes?: unknown
  group_ids?: string[]
  access_token?: string
  api_key?: string
}

export interface ViewOptions {
  /** Include attributes and group ids (`full=true`); needs `attributesJson`. */
  full?: boolean
  /** The decrypted attributes (JSON text). */
  attributesJson?: string
  groupIds?: string[]
  /** v1 sends attributes as base64 JSON, v2 as JSON. */
  attributes?: 'base64' | 'json'
}

export function userView(row: UserSnapshot, options: ViewOptions = {}): UserView {
  const view: UserView = {
    id: row.id,
    user_id: row.id,
    account_id: row.account_id,
    username: row.username,
    status: row.status,
    mfa_enrolled: row.mfa_enrolled === 1,
  }
  if (options.full) {
    const json = options.attributesJson
    if (json === undefined) throw new Error('userView: full needs the decrypted attributes')
    view.attributes =
      options.attributes === 'json'
        ? JSON.parse(json)
        : Buffer.from(json, 'utf8').toString('base64')
    view.group_ids = options.groupIds ?? []
  }
  return view
}
