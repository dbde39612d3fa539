import { createRequire } from 'node:module'
import TrueVaultClient from 'truevault'

/*
 * No vitest here: a process of its own (test/sdk/over-https.client.ts) loads the SDK this way too.
 */

/**
 * The SDK picks its HTTP stack once, at load: the global `fetch`/`FormData` when they exist
 * (Node 18+, browsers), else its bundled node-fetch 2 + form-data (older Node, where its own suite
 * ran). Each suite runs against both, since they frame multipart bodies differently.
 */
export const TRANSPORTS = ['global fetch', 'node-fetch + form-data'] as const
export type Transport = (typeof TRANSPORTS)[number]

export type Sdk = typeof TrueVaultClient

const require = createRequire(import.meta.url)
let legacySdk: Sdk | undefined

export function sdkFor(transport: Transport): Sdk {
  if (transport === 'global fetch') return TrueVaultClient
  legacySdk ??= loadWithoutGlobalFetch()
  return legacySdk
}

/**
 * A second copy of the SDK module, loaded while `fetch` and `FormData` are hidden (and the flag by
 * which its bundled babel-polyfill refuses to load twice).
 */
function loadWithoutGlobalFetch(): Sdk {
  const path = require.resolve('truevault')
  const names = ['fetch', 'FormData', '_babelPolyfill'] as const
  const saved = names.map((n) => Object.getOwnPropertyDescriptor(globalThis, n))
  const cached = require.cache[path]
  delete require.cache[path]
  try {
    for (const n of names)
      Object.defineProperty(globalThis, n, { value: undefined, configurable: true, writable: true })
    return require('truevault') as Sdk
  } finally {
    names.forEach((n, i) => {
      const d = saved[i]
      if (d) Object.defineProperty(globalThis, n, d)
      else Reflect.deleteProperty(globalThis, n)
    })
    if (cached) require.cache[path] = cached
    else delete require.cache[path]
  }
}
