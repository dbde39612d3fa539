import { describe, expect, it } from 'vitest'
import { ExactCache } from '../access/exact-cache.js'
import { isRightsWrite, RightsFeed } from './rights-feed.js'

describe('isRightsWrite', () => {
  it.each([
    'update "users" set "status" = ? where "id" = ?',
    'delete from "credentials" where "account_id" = $1 returning "digest"',
    'delete from "group_members" where "group_id" = ?',
    'insert into "group_members" ("account_id", "group_id", "user_id") values (?, ?, ?)',
    'update "groups" set "policy" = ?',
    'delete from "groups" where "id" = ?',
    'insert into "account_settings" ("account_id") values (?) on conflict ("account_id") do update set x = 1',
    'update "credentials" set "expires_at" = ?',
    // SQLite's conflict clauses (Kysely's orReplace): a replace deletes the row it collides with.
    'insert or replace into "credentials" ("digest") values (?)',
    'replace into "group_members" ("account_id", "group_id", "user_id") values (?, ?, ?)',
    'insert or replace into "users" ("id", "status") values (?, ?)',
    'update or replace "users" set "status" = ?',
  ])('%s: yes', (text) => expect(isRightsWrite(text)).toBe(true))

  it.each([
    'select * from "users"',
    'insert into "credentials" ("digest") values (?)',
    'insert into "users" ("id") values (?)',
    'insert into "documents" ("id") values (?)',
    'update "users_index" set x = 1',
    'delete from "credential_directory" where "digest" in (?)',
    'update "scoped_access_tokens" set "uses" = "uses" + 1',
  ])('%s: no', (text) => expect(isRightsWrite(text)).toBe(false))
})

describe('ExactCache', () => {
  it('stores only under an unmoved epoch, and empties on every change', () => {
    const feed = new RightsFeed({ trusted: true })
    const cache = new ExactCache<string>(feed, { size: 2, ttlMs: 1000 })
    const ticket = cache.ticket()
    feed.changed()
    cache.set('d1', 'stale', 0, 5000, ticket)
    expect(cache.get('d1', 1)).toBeUndefined()
    cache.set('d1', 'fresh', 0, 5000, cache.ticket())
    expect(cache.get('d1', 1)).toBe('fresh')
    feed.changed()
    expect(cache.get('d1', 1)).toBeUndefined()
  })

  it('ends an entry with its credential or the TTL, and keeps at most its size', () => {
    const feed = new RightsFeed({ trusted: true })
    const cache = new ExactCache<string>(feed, { size: 2, ttlMs: 1000 })
    cache.set('ends', 'v', 0, 500, cache.ticket())
    expect(cache.get('ends', 499)).toBe('v')
    expect(cache.get('ends', 500)).toBeUndefined()
    cache.set('ttl', 'v', 0, Number.POSITIVE_INFINITY, cache.ticket())
    expect(cache.get('ttl', 999)).toBe('v')
    expect(cache.get('ttl', 1000)).toBeUndefined()
    for (const d of ['a', 'b', 'c']) cache.set(d, d, 0, 5000, cache.ticket())
    expect(cache.entries).toBe(2)
    expect(cache.get('a', 1)).toBeUndefined()
  })

  it('keeps at most its weight, and never an entry heavier than all of it', () => {
    const feed = new RightsFeed({ trusted: true })
    const cache = new ExactCache<string>(feed, { maxWeight: 10, weigh: (v) => v.length })
    cache.set('big', 'x'.repeat(11), 0, 5000, cache.ticket())
    expect(cache.get('big', 1)).toBeUndefined()
    cache.set('a', 'aaaaaa', 0, 5000, cache.ticket())
    cache.set('b', 'bbbb', 0, 5000, cache.ticket())
    expect([cache.get('a', 1), cache.get('b', 1)]).toEqual(['aaaaaa', 'bbbb'])
    cache.set('c', 'cc', 0, 5000, cache.ticket())
    expect(cache.get('a', 1)).toBeUndefined()
    expect([cache.get('b', 1), cache.get('c', 1)]).toEqual(['bbbb', 'cc'])
  })

  it('is bypassed while the feed is not trusted (fail closed)', () => {
    const feed = new RightsFeed({ trusted: true })
    const cache = new ExactCache<string>(feed, { size: 2, ttlMs: 1000 })
    cache.set('d', 'v', 0, 5000, cache.ticket())
    feed.setTrusted(false)
    expect(cache.get('d', 1)).toBeUndefined()
    cache.set('d', 'v', 0, 5000, cache.ticket())
    feed.setTrusted(true)
    expect(cache.get('d', 1)).toBeUndefined()
  })
})
