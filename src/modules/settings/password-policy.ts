import { dictionary } from '@zxcvbn-ts/language-common'

/**
 * Refusal of common passwords (OWASP ASVS 4.0 2.1.7, 5.0 6.2.4): zxcvbn-ts's maintained list of
 * the most used passwords (about 49,000, lower case), from `@zxcvbn-ts/language-common`. A
 * password is compared in lower case, so `Password1` is as common as `password1`. The set is
 * built on first use, not at start.
 */
let common: ReadonlySet<string> | undefined

export function isCommonPassword(password: string): boolean {
  common ??= new Set(dictionary['passwords-common'])
  return common.has(password.toLowerCase())
}
