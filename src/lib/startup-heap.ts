import { setFlagsFromString } from 'node:v8'

/**
 * The young generation stays small while the process loads (issue 21, idle RSS).
 *
 * Loading the server (hundreds of modules parsed, every route's schemas compiled) is an
 * allocation burst in which most objects survive, and V8 answers it by doubling the young
 * generation's two semi-spaces up to their 16 MiB maximum. An idle process never gets those 32
 * MiB back: V8 shrinks them only in a GC run while the allocation rate is low, and an idle
 * server runs none. Measured on `coffer serve` on the file store, 3 s after it listens: 135 MB
 * resident, 31 MB of it the young generation holding 0.2 MB of live objects.
 *
 * So the growth factor is held at 1 (no growth) from before the modules load (src/coffer.ts
 * calls `holdStartupHeap` first, then imports main.ts) until the command is under way (`serve`
 * once its listeners are up, any other command as it starts), and put back to V8's default (2)
 * then: under load the young generation grows as before, so requests keep their GC cost. A
 * growth factor the operator gave (a node flag or NODE_OPTIONS) is left alone.
 *
 * V8 reads the flag each time it considers growing the space, so setting it at run time takes
 * effect at the next scavenge; it changes when memory is reserved, never what a program sees.
 */
const FLAG = '--semi-space-growth-factor'
/** V8's default (`node --v8-options`). */
export const V8_DEFAULT_GROWTH = 2

let held = false

/** Whether node was given its own growth factor (a flag, or in NODE_OPTIONS; `_` or `-`). */
export function growthGiven(execArgv: readonly string[], nodeOptions: string): boolean {
  return [...execArgv, ...nodeOptions.split(/\s+/)]
    .map((arg) => arg.replaceAll('_', '-'))
    .some((arg) => arg.startsWith(FLAG))
}

/** Holds the young generation at its initial size; call before anything else loads. */
export function holdStartupHeap(): boolean {
  if (held || growthGiven(process.execArgv, process.env.NODE_OPTIONS ?? '')) return false
  setFlagsFromString(`${FLAG}=1`)
  held = true
  return true
}

/** Lets the young generation grow again (idempotent; nothing when not held). */
export function startupHeapDone(): void {
  if (!held) return
  held = false
  setFlagsFromString(`${FLAG}=${V8_DEFAULT_GROWTH}`)
}
