import { describe, expect, it } from 'vitest'
import { AppError } from '../../lib/errors.js'
import { dispositionFilename } from './disposition-filename.js'

describe('dispositionFilename (RFC 6266)', () => {
  it('reads filename as a token or a quoted string, names case-insensitively', () => {
    expect(dispositionFilename('attachment; filename=a.txt')).toBe('a.txt')
    expect(dispositionFilename('attachment; FileName="a b.txt"')).toBe('a b.txt')
    expect(dispositionFilename('attachment;filename="x\\\\y\\"z"')).toBe('x\\y"z')
    expect(dispositionFilename('form-data; name="file"; filename="f.png"')).toBe('f.png')
  })

  it('prefers filename* in UTF-8 or ISO-8859-1, in either order', () => {
    expect(
      dispositionFilename(`attachment; filename*=UTF-8''%E2%82%AC.txt; filename="e.txt"`),
    ).toBe('€.txt')
    expect(dispositionFilename(`attachment; filename="e.txt"; filename*=utf-8'en'%E2%82%AC`)).toBe(
      '€',
    )
    expect(dispositionFilename("attachment; filename*=ISO-8859-1''%E9t%E9")).toBe('été')
  })

  it('ignores a filename* in another charset and falls back to filename', () => {
    expect(dispositionFilename(`attachment; filename*=koi8-r''%C1; filename="k.txt"`)).toBe('k.txt')
  })

  it('names none when there is none', () => {
    expect(dispositionFilename('attachment')).toBeUndefined()
    expect(dispositionFilename('inline; size=3')).toBeUndefined()
    expect(dispositionFilename('')).toBeUndefined()
  })

  it('refuses a malformed or non-UTF-8 filename* with a 400 naming the header', () => {
    for (const header of [
      "attachment; filename*=UTF-8''%FF",
      'attachment; filename*=no-quotes',
      "attachment; filename*=UTF-8''%G1",
    ]) {
      let error: unknown
      try {
        dispositionFilename(header)
      } catch (e) {
        error = e
      }
      expect(error).toBeInstanceOf(AppError)
      expect((error as AppError).statusCode).toBe(400)
      expect((error as AppError).message).toContain('Content-Disposition')
    }
  })
})
