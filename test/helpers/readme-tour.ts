/**
 * The README's tour: the fenced blocks marked `sh tour` or `js tour` (GitHub highlights them by
 * the first word and ignores the rest of the info string), in the order they appear.
 */
export interface TourBlock {
  lang: 'sh' | 'js'
  code: string
  /** Line of the opening fence (1-based), to point at the block when it fails. */
  line: number
}

const OPENING = /^```(sh|js) tour\s*$/
const CLOSING = /^```\s*$/

export function tourBlocks(markdown: string): TourBlock[] {
  const lines = markdown.split('\n')
  const blocks: TourBlock[] = []
  for (let i = 0; i < lines.length; i++) {
    const open = OPENING.exec(lines[i] as string)
    if (!open) continue
    const start = i
    const body: string[] = []
    for (i++; i < lines.length && !CLOSING.test(lines[i] as string); i++)
      body.push(lines[i] as string)
    if (i === lines.length) throw new Error(`README line ${start + 1}: tour block never closed`)
    blocks.push({ lang: open[1] as 'sh' | 'js', code: body.join('\n'), line: start + 1 })
  }
  return blocks
}

/** A JS block names its file in its first line (`// sdk-tour.cjs`), as the README tells to save it. */
export function scriptName(block: TourBlock): string {
  const named = /^\/\/ ([\w.-]+\.c?js)\s*$/.exec(block.code.split('\n')[0] ?? '')
  if (!named)
    throw new Error(`README line ${block.line}: a js tour block starts with // <file>.cjs`)
  return named[1] as string
}

/**
 * One bash script running every block in order in one session (so variables carry over): shell
 * blocks as written, each JS block as `node <its file>` (written beside it by the caller).
 */
export function tourScript(blocks: TourBlock[]): string {
  return blocks
    .map((b) =>
      b.lang === 'sh'
        ? `# README line ${b.line}\n${b.code}`
        : `# README line ${b.line}\nnode ${scriptName(b)}`,
    )
    .join('\n')
}
