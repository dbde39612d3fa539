import { useState } from 'preact/hooks'
import { api } from '../api'
import { session } from '../session'
import { errorFor, Loading, Page, TextField, useLoad } from '../ui'

/** A UTC day `daysAgo` before today, as the API wants it (YYYY-MM-DD). */
export function utcDay(daysAgo = 0): string {
  return new Date(Date.now() - daysAgo * 86_400_000).toISOString().slice(0, 10)
}

interface Usage {
  from: string
  to: string
  days: { day: string; total: number; operations: Record<string, number> }[]
  totals: Record<string, number>
}

const WIDTH = 640
const HEIGHT = 200

/** Operations per day as plain SVG bars (no chart library: one small chart). */
function Chart({ usage }: { usage: Usage }) {
  const max = Math.max(1, ...usage.days.map((d) => d.total))
  const band = WIDTH / Math.max(1, usage.days.length)
  return (
    <svg
      viewBox={`0 0 ${WIDTH} ${HEIGHT + 20}`}
      role="img"
      aria-label={`Operations per day from ${usage.from} to ${usage.to}`}
      class="chart"
    >
      {usage.days.map((d, i) => {
        const h = (d.total / max) * HEIGHT
        return (
          <g key={d.day}>
            <title>{`${d.day}: ${d.total} operations`}</title>
            <rect x={i * band + 2} y={HEIGHT - h} width={Math.max(1, band - 4)} height={h} />
            {usage.days.length <= 14 && (
              <text x={i * band + band / 2} y={HEIGHT + 14} text-anchor="middle">
                {d.day.slice(5)}
              </text>
            )}
          </g>
        )
      })}
    </svg>
  )
}

export function UsagePage() {
  const accountId = session.get()?.accountId ?? ''
  const [from, setFrom] = useState(utcDay(29))
  const [to, setTo] = useState(utcDay())
  const [range, setRange] = useState({ from, to })
  const usage = useLoad(
    () => api<{ usage: Usage }>('GET', `/v1/accounts/${accountId}/usage`, { query: range }),
    [accountId, range],
  )
  const u = usage.data?.usage
  return (
    <Page title="Usage">
      <form
        class="filters"
        aria-label="Usage period"
        onSubmit={(e) => {
          e.preventDefault()
          setRange({ from: from.trim(), to: to.trim() })
        }}
      >
        <TextField
          label="From (UTC day)"
          name="from"
          value={from}
          onInput={setFrom}
          error={errorFor(usage.error, 'from', ['from', 'to'])}
        />
        <TextField
          label="To (UTC day)"
          name="to"
          value={to}
          onInput={setTo}
          error={errorFor(usage.error, 'to', ['from', 'to'])}
        />
        <button type="submit">Show</button>
      </form>
      {!errorFor(usage.error, 'from', ['from', 'to']) &&
        !errorFor(usage.error, 'to', ['from', 'to']) && <Loading loaded={usage} />}
      {u && (
        <>
          <Chart usage={u} />
          <table>
            <caption>
              Operations from {u.from} to {u.to}
            </caption>
            <thead>
              <tr>
                <th scope="col">Category</th>
                <th scope="col">Total</th>
              </tr>
            </thead>
            <tbody>
              {Object.entries(u.totals).map(([k, v]) => (
                <tr key={k}>
                  <td>{k}</td>
                  <td>{v}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </Page>
  )
}
