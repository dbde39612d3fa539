import { Type } from 'typebox'
import { responses, success, Uuid } from '../../http/schemas.js'

export const VaultParams = Type.Object({ vault_id: Uuid })

/**
 * `search_option`: base64 of the JSON option (form field, as the SDK sends it). A JSON body may
 * instead be the raw option object itself (as the Go client sends it).
 */
export const SearchForm = Type.Object({
  search_option: Type.Optional(
    Type.Unknown({ description: 'base64 of the JSON search option (docs/search.md)' }),
  ),
})

const OptionDescription = 'base64 of the JSON search option (docs/search.md)'

/**
 * The body as documented, per media type (the route checks it: `search_option is required`):
 * a form needs `search_option`; a JSON body is `{search_option}` or the option object itself.
 */
export const DocumentedSearchBody = {
  'application/json': {
    schema: Type.Object(
      { search_option: Type.Optional(Type.Unknown({ description: OptionDescription })) },
      { minProperties: 1, description: '`{search_option}`, or the option object itself' },
    ),
  },
  'application/x-www-form-urlencoded': {
    schema: Type.Object({ search_option: Type.String({ description: OptionDescription }) }),
  },
  'multipart/form-data': {
    schema: Type.Object({ search_option: Type.String({ description: OptionDescription }) }),
  },
}

const Info = Type.Object({
  per_page: Type.Integer(),
  current_page: Type.Integer(),
  num_pages: Type.Integer(),
  total_result_count: Type.Integer(),
})

const DocumentHit = Type.Object({
  document_id: Uuid,
  owner_id: Type.Union([Uuid, Type.Null()]),
  document: Type.Optional(Type.String({ description: 'base64 JSON, with full_document' })),
  distance_from: Type.Optional(
    Type.Number({ description: "with a geo sort: distance in the geo filter's unit" }),
  ),
})

/** Both shapes clients read: the official SDK's and the spec's (decisions.md, user search hits). */
const UserHit = Type.Object({
  id: Uuid,
  user_id: Uuid,
  username: Type.String(),
  status: Type.String(),
  document_id: Uuid,
  owner_id: Type.Null({ description: 'a user has no owner' }),
  attributes: Type.Optional(Type.String({ description: 'base64 JSON, with full_document' })),
  document: Type.Optional(
    Type.String({ description: 'the same base64 attributes, as the spec names them' }),
  ),
})

export const VaultSearchResponse = responses(
  success({ data: Type.Object({ documents: Type.Array(DocumentHit), info: Info }) }),
)
export const UserSearchResponse = responses(
  success({ data: Type.Object({ documents: Type.Array(UserHit), info: Info }) }),
)
