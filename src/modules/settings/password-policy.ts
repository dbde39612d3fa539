import { createRequire } from 'node:module'
import type * as Common from '@zxcvbn-ts/language-common'

/**
 * Refusal of common passwords (OWASP ASVS 4.0 2.1.7, 5.0 6.2.4): zxcvbn-ts's maintained list of
 * the most used passwords (about 49,000, lower case), from `@zxcvbn-ts/language-common`. A
 * password is compared in lower case, so `Password1` is as common as `password1`. The package
 * (megabytes of word lists) is loaded and the set built on first use, not at start: a server that
 * never sets a password never holds them.
 */
let common: ReadonlySet<string> | undefined

export function isCommonPassword(password: string): boolean {
  if (!common) {
    const { dictionary } = createRequire(import.meta.url)(
      '@zxcvbn-ts/language-common',
    ) as typeof Common
    common = new Set(dictionary['passwords-common'])
  }
  return common.has(password.toLowerCase())
}
