import { availableParallelism } from 'node:os'
import { hash, verify } from '@node-rs/argon2'
import { BoundedGate, GateFullError } from '../lib/bounded-gate.js'
import { errors } from '../lib/errors.js'

/** `Algorithm.Argon2id` of @node-rs/argon2 (a const enum, which isolated modules cannot read). */
const ARGON2ID = 2

/** argon2id cost: OWASP's m = 19 MiB, t = 2, p = 1 in production. */
export interface PasswordHasherOptions {
  memoryCost: number
  timeCost: number
}

export const OWASP_ARGON2: PasswordHasherOptions = { memoryCost: 19_456, timeCost: 2 }

/**
 * How much argon2 work may be in flight. @node-rs/argon2 runs on libuv's thread pool (4 threads
 * by default), which the filesystem BLOB store, `fs` and DNS also use: unbounded, a login flood
 * fills every thread and file reads wait behind it. At most `maxConcurrent` hashes run, at most
 * `maxQueued` wait, and beyond that the call is refused with 503 + Retry-After instead of
 * queueing without bound.
 */
export interface HashingLimits {
  maxConcurrent: number
  maxQueued: number
}

/**
 * Half the thread pool, so file I/O always has threads, and at most half the CPUs: each hash
 * keeps a core busy, and the event loop (every other request) needs one too. 1 on a 2-core host,
 * 2 with the default pool on 4 cores or more.
 */
export function defaultHashingLimits(
  threadPoolSize = 4,
  cpus = availableParallelism(),
): HashingLimits {
  const maxConcurrent = Math.max(1, Math.min(Math.floor(threadPoolSize / 2), Math.floor(cpus / 2)))
  return { maxConcurrent, maxQueued: 32 }
}

/** A refused hash is retried after this long: the queue drains in well under a second. */
const BUSY_RETRY_AFTER_SECONDS = 1

/**
 * Every argon2 hash and verification of the process goes through one instance (deps.ts), so the
 * limits hold across logins, user creation, password changes and MFA unenrollment alike.
 */
export class PasswordHasher {
  readonly #options: PasswordHasherOptions
  readonly #gate: BoundedGate
  #dummy: Promise<string> | undefined

  constructor(
    options: PasswordHasherOptions = OWASP_ARGON2,
    limits: HashingLimits = defaultHashingLimits(),
  ) {
    this.#options = options
    this.#gate = new BoundedGate(limits.maxConcurrent, limits.maxQueued)
  }

  /** Hashes running and waiting now. */
  load(): { running: number; queued: number } {
    return this.#gate.load()
  }

  /**
   * Throws the same 503 a hash would get when the queue is full now: lets a caller shed a request
   * before doing other work for it (the gate itself still decides when the hash is asked for).
   */
  assertCapacity(): void {
    const { running, queued } = this.#gate.load()
    if (running >= this.#gate.maxRunning && queued >= this.#gate.maxQueued)
      throw errors.busy('password hashing', BUSY_RETRY_AFTER_SECONDS)
  }

  hash(password: string): Promise<string> {
    return this.#gated(() => this.#hash(password))
  }

  /** Verifies a password; a missing hash still costs one full verification (no timing oracle). */
  async verify(storedHash: string | null | undefined, password: string): Promise<boolean> {
    if (!storedHash) {
      // Made once, outside the gate: a refused first attempt must not cache a rejection.
      this.#dummy ??= this.#hash('coffer-dummy-password')
      const dummy = await this.#dummy
      await this.#gated(() => verify(dummy, password).catch(() => false))
      return false
    }
    return this.#gated(async () => {
      try {
        return await verify(storedHash, password)
      } catch {
        return false
      }
    })
  }

  #hash(password: string): Promise<string> {
    return hash(password, {
      algorithm: ARGON2ID,
      memoryCost: this.#options.memoryCost,
      timeCost: this.#options.timeCost,
      parallelism: 1,
    })
  }

  async #gated<T>(task: () => Promise<T>): Promise<T> {
    try {
      return await this.#gate.run(task)
    } catch (error) {
      if (error instanceof GateFullError)
        throw errors.busy('password hashing', BUSY_RETRY_AFTER_SECONDS)
      throw error
    }
  }
}
