import { createServer } from 'node:net'

export interface ListenTarget {
  /** The settings that chose the address, for the message: `COFFER_HOST/COFFER_PORT`. */
  settings: string
  host: string
  port: number
}

/**
 * Binds each address once and lets it go again, before the server writes anything (the first
 * account, a generated key): a host name that does not resolve, an address this machine does
 * not have or a port in use then fails the start with the settings named, not after the first
 * account was created. (Another process could still take a port in the moment between; the
 * real listen then fails as before.)
 */
export async function checkListenAddresses(targets: readonly ListenTarget[]): Promise<void> {
  for (const target of targets) {
    await new Promise<void>((resolve, reject) => {
      const server = createServer()
      server.once('error', (error: NodeJS.ErrnoException) => {
        const code = error.code ?? 'error'
        const reason =
          code === 'EADDRINUSE'
            ? 'the port is in use'
            : code === 'EADDRNOTAVAIL'
              ? 'this machine has no such address'
              : code === 'ENOTFOUND' || code === 'EAI_AGAIN'
                ? 'the host name does not resolve'
                : code === 'EACCES'
                  ? 'this process may not use the port'
                  : 'it cannot be used'
        reject(
          new Error(
            `cannot listen on ${target.host}:${target.port} (${target.settings}): ${reason} (${code})`,
          ),
        )
      })
      server.listen({ host: target.host, port: target.port, exclusive: true }, () =>
        server.close(() => resolve()),
      )
    })
  }
}
