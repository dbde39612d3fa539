/** Redraws at most this often: a fast run does not flood a slow terminal. */
const REDRAW_MS = 100

/**
 * A one-line progress counter on stderr, only when stderr is a terminal (a pipe or a log file
 * gets the final JSON on stdout and nothing else).
 */
export function terminalProgress(
  verb: string,
  noun: string,
  stream: NodeJS.WriteStream = process.stderr,
): { update(done: number, total: number, note?: string): void; end(): void } {
  const shown = stream.isTTY === true
  let last = 0
  let drawn = false
  return {
    update(done, total, note) {
      if (!shown) return
      const now = Date.now()
      if (drawn && now - last < REDRAW_MS && done < total) return
      last = now
      drawn = true
      stream.write(`\r${verb} ${done}/${total} ${noun}${note ? ` ${note}` : ''}`)
    },
    end() {
      if (shown && drawn) stream.write('\n')
      drawn = false
    },
  }
}
