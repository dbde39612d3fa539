/** The part of autocannon 9's programmatic API the bench uses (the package ships no types). */
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events'

  namespace autocannon {
    type Method = 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH' | 'HEAD' | 'OPTIONS'

    interface RequestParams {
      method?: Method
      path?: string
      headers?: Record<string, string>
      body?: string | Buffer
    }

    interface Request extends RequestParams {
      /** Called before each send; return the (possibly new) request, or a falsy value to reset. */
      setupRequest?: (
        request: RequestParams,
        context: Record<string, unknown>,
      ) => RequestParams | null | undefined | false
    }

    interface Options extends RequestParams {
      url: string
      connections?: number
      /** Seconds (or a timestring). */
      duration?: number | string
      amount?: number
      /** Seconds to wait for each response. */
      timeout?: number
      pipelining?: number
      bailout?: number
      title?: string
      requests?: Request[]
    }

    interface Histogram {
      average: number
      mean: number
      stddev: number
      min: number
      max: number
      total: number
      p2_5: number
      p50: number
      p75: number
      p90: number
      p97_5: number
      p99: number
      p99_9: number
      p99_99: number
      p99_999: number
    }

    interface Result {
      title?: string
      url: string
      /** Requests completed per second, sampled once a second. */
      requests: Histogram
      /** Response latency in milliseconds. */
      latency: Histogram
      throughput: Histogram
      /** Seconds. */
      duration: number
      errors: number
      timeouts: number
      mismatches: number
      non2xx: number
      resets: number
      '1xx': number
      '2xx': number
      '3xx': number
      '4xx': number
      '5xx': number
      statusCodeStats: Record<string, { count: number }>
      start: Date
      finish: Date
      connections: number
      pipelining: number
    }

    interface Instance extends EventEmitter {
      stop(): void
      /** Every response; `responseTime` is in milliseconds with sub-millisecond precision. */
      on(
        event: 'response',
        listener: (
          client: unknown,
          statusCode: number,
          resBytes: number,
          responseTime: number,
        ) => void,
      ): this
    }
  }

  function autocannon(
    options: autocannon.Options,
    callback: (error: Error | null, result: autocannon.Result) => void,
  ): autocannon.Instance

  export = autocannon
}
