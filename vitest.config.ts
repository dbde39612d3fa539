import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Files share one PostgreSQL server (each in its own schema); two workers fit the 2-core box.
    maxWorkers: 2,
  },
})
