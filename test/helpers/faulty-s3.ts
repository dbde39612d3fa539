import { createServer as createHttpServer, request } from 'node:http'
import { type AddressInfo, createServer, type Server, type Socket } from 'node:net'

/** Closes a server and the connections it still holds (a hung peer never closes its own). */
function closer(server: Server, sockets: Set<Socket>): () => Promise<void> {
  server.on('connection', (socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  return () =>
    new Promise<void>((done) => {
      for (const socket of sockets) socket.destroy()
      server.close(() => done())
    })
}

const listen = (server: Server) =>
  new Promise<string>((done) =>
    server.listen(0, '127.0.0.1', () =>
      done(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
    ),
  )

/** An address where nothing listens: connections are refused at once. */
export async function refusedEndpoint(): Promise<string> {
  const server = createServer()
  const endpoint = await listen(server)
  await new Promise<void>((done) => server.close(() => done()))
  return endpoint
}

/**
 * What the proxy does with each request: pass it to the real store, hold it unanswered
 * (a store that accepts connections and never answers), answer every request `NoSuchBucket`,
 * fail every part after the first with a 500 (a store breaking mid-upload), or fail every
 * CompleteMultipartUpload with a 500, or drop the connection of every GET after its first `cutAfter` bytes, or drop every connection
 * as soon as a request arrives (`reset`).
 */
export type FaultMode =
  | 'forward'
  | 'hang'
  | 'no-such-bucket'
  | 'fail-later-parts'
  | 'fail-completion'
  | 'cut-downloads'
  | 'reset'

export interface FaultyS3 {
  endpoint: string
  mode: FaultMode
  /** Bytes of a GET's body sent before `cut-downloads` drops the connection. */
  cutAfter: number
  /** `METHOD url` of every request received, in order. */
  readonly requests: string[]
  /**
   * Honour `If-None-Match: *` on PutObject and CompleteMultipartUpload as AWS S3 does (412 when
   * an object exists), which s3rver ignores.
   */
  conditionalWrites: boolean
  /** Awaited before each request is handled (a test makes a race happen here). */
  beforeRequest:
    | ((method: string, url: string, headers: Record<string, unknown>) => Promise<void>)
    | undefined
  close(): Promise<void>
}

const s3Error = (code: string, message: string) =>
  `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${message}</Message></Error>`

/**
 * An S3 endpoint in front of `target` (s3rver) that misbehaves on demand and records every
 * request. s3rver implements neither AbortMultipartUpload nor ListMultipartUploads, so the
 * proxy answers an abort itself (204, as S3 does) and the record shows which uploads were
 * aborted.
 */
export async function startFaultyS3(target: string): Promise<FaultyS3> {
  const sockets = new Set<Socket>()
  const upstream = new URL(target)
  const faulty: FaultyS3 = {
    endpoint: '',
    mode: 'forward',
    cutAfter: 64 * 1024,
    requests: [],
    conditionalWrites: false,
    beforeRequest: undefined,
    close: async () => {},
  }
  const existsUpstream = (path: string) =>
    new Promise<boolean>((done, fail) => {
      const head = request(
        { host: upstream.hostname, port: upstream.port, method: 'HEAD', path },
        (answer) => {
          answer.resume()
          done(answer.statusCode === 200)
        },
      )
      head.on('error', fail)
      head.end()
    })
  const server = createHttpServer(async (req, res) => {
    const url = req.url ?? '/'
    faulty.requests.push(`${req.method} ${url}`)
    const query = new URL(url, 'http://x').searchParams
    req.pause()
    await faulty.beforeRequest?.(req.method ?? '', url, req.headers)
    const write =
      (req.method === 'PUT' && !query.has('partNumber')) ||
      (req.method === 'POST' && query.has('uploadId'))
    if (
      faulty.conditionalWrites &&
      write &&
      req.headers['if-none-match'] === '*' &&
      (await existsUpstream(new URL(url, 'http://x').pathname))
    ) {
      req.resume()
      res.writeHead(412, { 'content-type': 'application/xml' })
      res.end(
        s3Error(
          'PreconditionFailed',
          'At least one of the pre-conditions you specified did not hold',
        ),
      )
      return
    }
    if (faulty.mode === 'hang') return
    if (faulty.mode === 'reset') {
      req.socket.destroy()
      return
    }
    if (faulty.mode === 'no-such-bucket') {
      req.resume()
      res.writeHead(404, { 'content-type': 'application/xml' })
      res.end(s3Error('NoSuchBucket', 'The specified bucket does not exist'))
      return
    }
    if (req.method === 'DELETE' && query.has('uploadId')) {
      req.resume()
      res.writeHead(204).end()
      return
    }
    const failedPart =
      faulty.mode === 'fail-later-parts' &&
      req.method === 'PUT' &&
      Number(query.get('partNumber')) > 1
    const failedCompletion =
      faulty.mode === 'fail-completion' && req.method === 'POST' && query.has('uploadId')
    if (failedPart || failedCompletion) {
      req.resume()
      res.writeHead(500, { 'content-type': 'application/xml' })
      res.end(s3Error('InternalError', 'We encountered an internal error. Please try again.'))
      return
    }
    const forward = request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: url,
        headers: req.headers,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers)
        if (faulty.mode !== 'cut-downloads' || req.method !== 'GET') {
          answer.pipe(res)
          return
        }
        let sent = 0
        answer.on('data', (chunk: Buffer) => {
          if (sent >= faulty.cutAfter) return
          const piece = chunk.subarray(0, faulty.cutAfter - sent)
          sent += chunk.length
          if (sent < faulty.cutAfter) {
            res.write(piece)
            return
          }
          answer.destroy()
          // Once the bytes are out, so the client sees a body that stops, not no answer.
          res.write(piece, () => res.socket?.destroy())
        })
      },
    )
    forward.on('error', () => res.destroy())
    req.pipe(forward)
  })
  faulty.close = closer(server, sockets)
  faulty.endpoint = await listen(server)
  return faulty
}
