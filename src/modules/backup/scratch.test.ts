import { describe, expect, it } from 'vitest'
import { withSearchPath } from './scratch.js'

describe('withSearchPath', () => {
  it('names the scratch schema, replacing a search_path the URL had and keeping other options', () => {
    const url =
      'postgres://u:p@db:5432/coffer?options=-c%20statement_timeout%3D5000%20-c%20search_path%3Dlive&sslmode=require'
    const out = new URL(withSearchPath(url, 'coffer_verify_ab12'))
    expect(out.searchParams.get('options')).toBe(
      '-c statement_timeout=5000 -c search_path=coffer_verify_ab12',
    )
    expect(out.searchParams.get('sslmode')).toBe('require')
    expect(out.username).toBe('u')
  })

  it('adds one to a URL without options', () => {
    const out = new URL(withSearchPath('postgres://db/coffer', 's'))
    expect(out.searchParams.get('options')).toBe('-c search_path=s')
  })
})
