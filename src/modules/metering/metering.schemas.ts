import { Type } from 'typebox'
import { CATEGORIES } from '../../access/metering.js'
import { responses, success, Uuid } from '../../http/schemas.js'
import { MAX_USAGE_DAYS } from './metering.service.js'

export const AccountParams = Type.Object({ account_id: Uuid })

const date = (what: string) =>
  Type.String({
    description: `${what} (UTC date, YYYY-MM-DD, inclusive; at most ${MAX_USAGE_DAYS} days in all)`,
    examples: ['2026-01-31'],
  })

/** Read as text and checked by the service (a real calendar date), so a 400 names the field. */
export const UsageQuery = Type.Object({
  from: Type.Optional(date('First day')),
  to: Type.Optional(date('Last day')),
})

const Counts = Type.Object(
  Object.fromEntries(CATEGORIES.map((c) => [c, Type.Integer({ minimum: 0 })])) as Record<
    (typeof CATEGORIES)[number],
    ReturnType<typeof Type.Integer>
  >,
  {
    description:
      'Operations per billing category: user_read (GET /v2/users/{ids}, GET /v1/users), ' +
      'document_read (documents by id), document_list (document lists), document_search and ' +
      'user_search (searches)',
  },
)

export const UsageResponse = responses(
  success({
    usage: Type.Object({
      from: Type.String(),
      to: Type.String(),
      days: Type.Array(
        Type.Object({
          day: Type.String(),
          operations: Counts,
          total: Type.Integer({ minimum: 0 }),
        }),
        { description: 'Every day of the range, in order (zeroes included)' },
      ),
      totals: Counts,
    }),
  }),
)
