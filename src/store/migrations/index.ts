import type { Migration } from 'kysely'
import * as m0001 from './0001_init.js'
import * as m0002 from './0002_data_plane.js'

/** Every migration in order. Never edit one that has shipped: add the next file instead. */
export const migrations: Record<string, Migration> = {
  '0001_init': m0001,
  '0002_data_plane': m0002,
}
