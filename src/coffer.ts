#!/usr/bin/env node
/**
 * The `coffer` command (package.json `bin`, the image's ENTRYPOINT): holds the young generation
 * small while the program loads (lib/startup-heap.ts), then runs main.ts. Only a dynamic import
 * can run something before main.ts's modules are loaded; `node dist/main.js` still works the
 * same, without the hold (tests run src/main.ts).
 */
import { holdStartupHeap } from './lib/startup-heap.js'

holdStartupHeap()
await import('./main.js')
