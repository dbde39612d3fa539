import { Type } from 'typebox'
import { responses, success, Uuid } from '../../http/schemas.js'
import { MAX_GRANTED_BY } from './explain-activity.js'
import { MAX_RESOURCE_LENGTH } from './simulated-resource.js'

const ResourceText = Type.String({
  minLength: 1,
  maxLength: MAX_RESOURCE_LENGTH,
  description:
    'a concrete resource as policies name it, e.g. Vault::<id>::Document::<id>, Vault::<id>::Blob::, User::<id>, Group::<id>',
})

export const ExplainBody = Type.Object({
  user_id: Type.Optional(Uuid),
  policy: Type.Optional(
    Type.Array(Type.Unknown(), {
      description:
        'a policy as a group holds it: [{"Resources": [matcher, …], "Activities": "CRUD"}, …]',
    }),
  ),
  resource: ResourceText,
  activities: Type.Optional(
    Type.String({ description: 'which of C, R, U, D to explain (default "CRUD")' }),
  ),
})

export const AccessQuery = Type.Object({
  resource: ResourceText,
  page: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000, default: 1 })),
  per_page: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
})

const Nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Union([t, Type.Null()])

const GrantEntry = Type.Object({
  group_id: Nullable(Uuid),
  group_name: Nullable(Type.String()),
  statement_index: Type.Integer({ description: "the statement's index in the group's policy" }),
  resource_matcher: Type.String({ description: 'the matcher as written in the statement' }),
  activities: Type.String({ description: "the statement's Activities, each letter once" }),
  condition: Type.Optional(
    Type.String({
      description:
        'what the match depended on: owner=self, owner=any, owner=<id>, id=self, or for a list "list: only …" (the items it covers)',
    }),
  ),
})

const GrantedBy = Type.Array(GrantEntry, {
  maxItems: MAX_GRANTED_BY,
  description: `the granting statements, at most ${MAX_GRANTED_BY}`,
})
const Truncated = Type.Optional(
  Type.Literal(true, {
    description: `present when more than ${MAX_GRANTED_BY} statements grant (granted_by names the first ${MAX_GRANTED_BY})`,
  }),
)

const ActivityExplanation = Type.Object({
  activity: Type.Union(['C', 'R', 'U', 'D'].map((a) => Type.Literal(a))),
  allowed: Type.Boolean(),
  granted_by: GrantedBy,
  granted_by_truncated: Truncated,
})

export const ExplainResponse = responses(
  success({
    explanation: Type.Object({
      resource: Type.String(),
      subject: Type.Union([
        Type.Object({ user_id: Uuid, username: Type.String(), status: Type.String() }),
        Type.Object({ policy: Type.Literal(true) }),
      ]),
      activities: Type.Array(ActivityExplanation),
    }),
  }),
)

export const AccessResponse = responses(
  success({
    data: Type.Object({
      resource: Type.String(),
      items: Type.Array(
        Type.Object({
          user_id: Uuid,
          username: Type.String(),
          status: Type.String(),
          activities: Type.String({ description: 'the letters allowed, in CRUD order' }),
          granted_by: GrantedBy,
          granted_by_truncated: Truncated,
        }),
      ),
      info: Type.Object({
        current_page: Type.Integer(),
        per_page: Type.Integer(),
        num_pages: Type.Integer(),
        total_result_count: Type.Integer(),
      }),
    }),
  }),
)
