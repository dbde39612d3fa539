import type { FastifyInstance, FastifyRequest } from 'fastify'
import { ConsentResponses } from './consent.schemas.js'
import type { ConsentService, RequestEvidence } from './consent.service.js'
import { parseQuery } from './signature.js'

export const CONSENT_PATH = '/api/v1/cmp/consent'

/** The raw query string's decoded pairs in arrival order: the signature needs all of them. */
function queryPairs(request: FastifyRequest): [string, string][] {
  const url = request.raw.url ?? ''
  const mark = url.indexOf('?')
  return mark < 0 ? [] : parseQuery(url.slice(mark + 1))
}

function evidence(request: FastifyRequest): RequestEvidence {
  return {
    gpc: request.headers['sec-gpc'] === '1',
    userAgent: request.headers['user-agent'],
  }
}

/** The two consent endpoints: public (no Authorization, spec), mounted only by consent-app.ts. */
export async function consentRoutes(app: FastifyInstance, consent: ConsentService): Promise<void> {
  app.get(
    CONSENT_PATH,
    {
      schema: {
        summary: "Read (or create) a consumer's consent record",
        response: ConsentResponses,
      },
      config: { operation: 'consent.read', access: { public: true } },
    },
    async (request) => consent.read(queryPairs(request), evidence(request)),
  )

  app.post(
    CONSENT_PATH,
    {
      schema: { summary: "Update a consumer's consent record", response: ConsentResponses },
      config: { operation: 'consent.update', access: { public: true } },
    },
    async (request) => consent.update(request.body, queryPairs(request), evidence(request)),
  )
}
