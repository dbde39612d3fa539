import { api } from '../api'
import { Loading, Page, useLoad } from '../ui'

/** GET /v1/backups/status (decisions 248). */
export interface BackupStatus {
  schedule: string | null
  target: string | null
  keep: number
  next_run_at: string | null
  running: boolean
  last_success: { at: string; size_bytes: number; location: string | null } | null
  last_failure: { at: string; message: string } | null
  failures: number
}

/** 1536 → "1.5 KiB": binary units, one decimal. */
export function bytesText(n: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB']
  let value = n
  let unit = 0
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024
    unit += 1
  }
  return unit === 0 ? `${n} bytes` : `${value.toFixed(1)} ${units[unit]}`
}

/** An ISO time as the page shows it: UTC, to the second. */
const utc = (iso: string) => `${iso.slice(0, 19).replace('T', ' ')} UTC`

function Row({ label, children }: { label: string; children: preact.ComponentChildren }) {
  return (
    <tr>
      <th scope="row">{label}</th>
      <td>{children}</td>
    </tr>
  )
}

export function BackupsPage() {
  const loaded = useLoad(() => api<{ backup: BackupStatus }>('GET', '/v1/backups/status'), [])
  const b = loaded.data?.backup
  return (
    <Page
      title="Backups"
      actions={
        <button type="button" onClick={loaded.reload}>
          Refresh
        </button>
      }
    >
      <Loading loaded={loaded} />
      {b && (
        <>
          <table aria-label="Schedule">
            <caption>Schedule (this server's settings)</caption>
            <tbody>
              <Row label="Schedule">
                {b.schedule ? <code>{b.schedule}</code> : 'No scheduled backups'} (UTC)
              </Row>
              <Row label="Target">{b.target ? <code>{b.target}</code> : '—'}</Row>
              <Row label="Kept">{`newest ${b.keep}`}</Row>
              <Row label="Next run">
                {b.next_run_at ? utc(b.next_run_at) : '—'}
                {b.running ? ' (a backup is running now)' : ''}
              </Row>
            </tbody>
          </table>
          <table aria-label="Last outcome">
            <caption>Last outcome (any server of the deployment)</caption>
            <tbody>
              <Row label="Last success">
                {b.last_success
                  ? `${utc(b.last_success.at)}, ${bytesText(b.last_success.size_bytes)}`
                  : 'None yet'}
                {b.last_success?.location ? (
                  <>
                    {' '}
                    <code>{b.last_success.location}</code>
                  </>
                ) : null}
              </Row>
              <Row label="Last failure">
                {b.last_failure ? (
                  <>
                    {utc(b.last_failure.at)}: <span>{b.last_failure.message}</span>
                  </>
                ) : (
                  'None'
                )}
              </Row>
              <Row label="Failures">{String(b.failures)}</Row>
            </tbody>
          </table>
        </>
      )}
    </Page>
  )
}
