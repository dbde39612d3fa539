import { describe, expect, it } from 'vitest'
import { parseExportArgs } from './consent-cli.js'

describe('consent export arguments', () => {
  it('reads every option, in either spelling', () => {
    expect(parseExportArgs(['--shop', 's.example'])).toEqual({
      shop: 's.example',
      format: 'csv',
      consumer: undefined,
      identifiers: false,
      output: undefined,
    })
    expect(
      parseExportArgs([
        '--shop=s.example',
        '--format=jsonl',
        '--output',
        '/tmp/x',
        '--consumer',
        'a@b.co',
        '--identifiers',
      ]),
    ).toEqual({
      shop: 's.example',
      format: 'jsonl',
      consumer: 'a@b.co',
      identifiers: true,
      output: '/tmp/x',
    })
  })

  it('refuses what it cannot use, naming the problem', () => {
    const cases: [string[], RegExp][] = [
      [[], /--shop <domain> is required/],
      [['--format', 'csv'], /--shop <domain> is required/],
      [['--shop'], /--shop needs a value/],
      [['--shop='], /--shop needs a value/],
      [['--shop', 's', '--format', 'xml'], /--format must be csv or jsonl/],
      [['--shop', 's', '--shop', 't'], /--shop given twice/],
      [['--shop', 's', '--what'], /unknown argument --what/],
      [['s.example'], /unknown argument s.example/],
    ]
    for (const [args, message] of cases) {
      expect(() => parseExportArgs(args), args.join(' ')).toThrow(message)
    }
  })
})
