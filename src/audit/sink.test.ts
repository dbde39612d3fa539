import { PassThrough, Writable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import type { ChainedEvent } from './event.js'
import { AuditSink, parseAuditSink, sinkLine } from './sink.js'

const event = (seq: number): ChainedEvent => ({
  accountId: 'a',
  id: `id-${seq}`,
  at: '2026-01-01T00:00:00.000Z',
  transactionId: 't',
  actorUserId: null,
  credentialKind: 'api_key',
  credentialRef: 'abc',
  satId: null,
  satCreatorId: null,
  clientIp: '127.0.0.1',
  method: 'GET',
  route: '/v1/vaults',
  operation: 'vault.list',
  resources: { vault: ['v1'] },
  decision: 'allowed',
  reason: null,
  status: 200,
  operationsConsumed: 0,
  operationsCategory: null,
  seq,
  prevHash: '0',
  hash: 'h',
})

describe('COFFER_AUDIT_SINK', () => {
  it('parses db, stdout and absolute paths; refuses anything else', () => {
    expect(parseAuditSink(undefined)).toEqual([])
    expect(parseAuditSink('db')).toEqual([])
    expect(parseAuditSink('db,stdout,/var/log/a.jsonl')).toEqual([
      { kind: 'stdout' },
      { kind: 'file', path: '/var/log/a.jsonl' },
    ])
    expect(parseAuditSink('syslog')).toMatch(/COFFER_AUDIT_SINK takes/)
  })

  it('writes one JSON line per event', () => {
    const out = new PassThrough()
    const chunks: string[] = []
    out.on('data', (c) => chunks.push(String(c)))
    new AuditSink(out).write([event(1), event(2)])
    const lines = chunks
      .join('')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    expect(lines.map((l) => l.seq)).toEqual([1, 2])
    expect(lines[0]).toMatchObject({ operation: 'vault.list', resources: { vault: ['v1'] } })
  })

  it('drops from the copy, never blocks, once a stalled destination fills the bound', () => {
    // A destination that never finishes a write: everything stays buffered.
    const stalled = new Writable({ highWaterMark: 1, write: () => {} })
    const warnings: string[] = []
    const sink = new AuditSink(stalled, sinkLine(event(1)).length * 3, (m) => warnings.push(m))
    sink.write(Array.from({ length: 10 }, (_, i) => event(i + 1)))
    expect(sink.dropped).toBe(7)
    expect(warnings).toHaveLength(1)
  })
})
