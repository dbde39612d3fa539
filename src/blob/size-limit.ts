import { Transform, type TransformCallback } from 'node:stream'

/** Passes bytes through until more than `max` have gone by, then fails with `tooLarge()`. */
export function sizeLimit(max: number, tooLarge: () => Error): Transform & { bytes(): number } {
  let seen = 0
  const limiter = new Transform({
    transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback) {
      seen += chunk.length
      if (seen > max) done(tooLarge())
      else done(null, chunk)
    },
  })
  return Object.assign(limiter, { bytes: () => seen })
}

/**
 * Resolves once the stream has data (or has ended), rejects if it fails first: a download checks
 * that its first chunk decrypts before any header is sent.
 */
export function firstReadable(stream: NodeJS.ReadableStream): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = () => {
      stream.off('error', fail)
      resolve()
    }
    const fail = (error: Error) => {
      stream.off('readable', done)
      stream.off('end', done)
      reject(error)
    }
    stream.once('readable', done)
    stream.once('end', done)
    stream.once('error', fail)
  })
}
