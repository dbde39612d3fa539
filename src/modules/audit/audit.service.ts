import { exportedEvent } from '../../audit/export.js'
import type { Executor } from '../../store/executor.js'
import { type AuditFilter, listEvents } from './audit.repo.js'

/** Reads the caller's own account's audit trail (`Audit::`, R). */
export class AuditService {
  constructor(private readonly db: Executor) {}

  async list(accountId: string, filter: AuditFilter, page: number, perPage: number) {
    const { rows, total } = await listEvents(this.db, accountId, filter, page, perPage)
    return { items: rows.map(exportedEvent), page, per_page: perPage, total }
  }
}
