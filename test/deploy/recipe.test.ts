import { existsSync } from 'node:fs'
import { isIP } from 'node:net'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { loadConfig } from '../../src/config.js'
import {
  type ComposeService,
  dockerEnv,
  dockerStages,
  durationMs,
  fillSecrets,
  haproxySections,
  healthcheckCommand,
  nodeSettings,
  parseEnvFile,
  ROOT,
  read,
  readCompose,
  references,
  settingsReadByConfig,
} from '../helpers/deploy-recipe.js'

/**
 * The deploy recipe (Dockerfile, deploy/) checked without a Docker engine: every setting it
 * gives is one Coffer reads and accepts, the nodes share what a cluster must share, the proxy
 * and the image probe /readyz, and the drain timings fit together.
 */

const compose = readCompose()
const example = parseEnvFile(read('deploy/cluster.env.example'))
const nodes = ['coffer-1', 'coffer-2'].map((name) => {
  const service = compose.services[name]
  if (!service) throw new Error(`compose.yaml has no service ${name}`)
  return service
})
const nodeEnv = (service: ComposeService) => service.environment ?? {}
const stages = dockerStages(read('Dockerfile'))
const image = stages.at(-1)?.instructions ?? []
const imageEnv = dockerEnv(image)

describe('deploy recipe: settings', () => {
  const known = settingsReadByConfig()

  it('the list of settings Coffer reads is complete enough to judge by', () => {
    for (const name of ['COFFER_MASTER_KEY', 'COFFER_S3_BUCKET', 'COFFER_SHUTDOWN_DELAY_MS'])
      expect(known).toContain(name)
    expect(known).not.toContain('COFFER_SHUTDOWN_DELAY')
  })

  it('every COFFER_ setting of the nodes, the image and cluster.env.example is one Coffer reads', () => {
    const given = [
      ...nodes.flatMap((n) => Object.keys(nodeEnv(n))),
      ...Object.keys(imageEnv),
      ...example.keys(),
    ].filter((name) => name.startsWith('COFFER_'))
    expect(given.length).toBeGreaterThan(10)
    expect(given.filter((name) => !known.has(name))).toEqual([])
  })

  it('both nodes get exactly the same settings, including the shared secrets', () => {
    const [one, two] = nodes.map(nodeEnv)
    expect(one).toEqual(two)
    for (const shared of ['COFFER_MASTER_KEY', 'COFFER_CONSENT_JWT_SECRET', 'COFFER_DATABASE_URL'])
      expect(one?.[shared]).toMatch(/\$\{/)
    expect(one?.COFFER_BLOB_STORE).toBe('s3')
  })

  it('cluster.env.example defines every name compose.yaml refers to, and nothing unused', () => {
    const referred = new Set(
      Object.values(compose.services).flatMap((s) =>
        Object.values(s.environment ?? {}).flatMap(references),
      ),
    )
    expect([...referred].filter((name) => !example.has(name))).toEqual([])
    expect([...example.keys()].filter((name) => !referred.has(name))).toEqual([])
  })

  it('the example ships no secret: each one is left for the operator to generate', () => {
    for (const name of [
      'POSTGRES_PASSWORD',
      'COFFER_MASTER_KEY',
      'COFFER_CONSENT_JWT_SECRET',
      'COFFER_STOREFRONT_SECRET',
      'MINIO_ROOT_PASSWORD',
      'COFFER_S3_SECRET_ACCESS_KEY',
    ])
      expect(example.get(name)).toBe('')
  })

  it('a node refuses to start without the shared secrets (compose stops at a missing one)', () => {
    const filled = fillSecrets(example)
    for (const name of ['COFFER_MASTER_KEY', 'COFFER_CONSENT_JWT_SECRET', 'POSTGRES_PASSWORD']) {
      expect(() => nodeSettings({ ...filled, [name]: '' })).toThrow(`required: ${name}`)
    }
  })

  it('with the secrets generated as the example says, Coffer accepts every node setting', () => {
    const config = loadConfig(nodeSettings(fillSecrets(example)))
    expect(config.host).toBe('0.0.0.0')
    expect(config.dataDir).toBe('/data')
    expect(config.databaseUrl).toMatch(/^postgres:\/\/coffer:[0-9a-f]{48}@postgres:5432\/coffer$/)
    expect(config.blobStore).toBe('s3')
    expect(config.s3).toMatchObject({
      endpoint: 'http://minio:9000',
      bucket: 'coffer',
      forcePathStyle: true,
    })
    expect(config.env).toBe('production')
  })
})

describe('deploy recipe: proxy and drain', () => {
  const proxy = compose.services.proxy as ComposeService
  const haproxy = haproxySections(read('deploy/haproxy.cfg'))
  const section = (name: string) => haproxy.get(name) ?? []
  const settings = loadConfig(nodeSettings(fillSecrets(example)))

  it('the nodes believe X-Forwarded-For from the proxy’s fixed address only', () => {
    const networks = proxy.networks as Record<string, { ipv4_address?: string }>
    const address = networks.coffer?.ipv4_address as string
    expect(isIP(address)).toBe(4)
    expect(settings.trustProxy).toEqual([address])
    const subnet = compose.networks.coffer?.ipam?.config[0]?.subnet ?? ''
    expect(address.startsWith(subnet.replace(/\.0\/24$/, '.'))).toBe(true)
    expect(section('defaults')).toContain('option forwardfor')
  })

  it('only the proxy is published; it serves both listeners round robin over both nodes', () => {
    const published = Object.entries(compose.services).filter(([, s]) => s.ports?.length)
    expect(published.map(([name]) => name)).toEqual(['proxy'])
    expect(proxy.ports).toEqual(['8080:8080', '8081:8081'])
    // Each frontend on the published port, to the nodes' listener of the same kind.
    for (const [frontend, bind, backend, port] of [
      ['api', 8080, 'coffer_api', settings.port],
      ['consent', 8081, 'coffer_consent', settings.consentPort],
    ] as const) {
      expect(section(`frontend ${frontend}`)).toEqual([
        `bind :${bind} ssl crt /usr/local/etc/haproxy/tls/coffer.pem alpn h2,http/1.1`,
        'http-request set-header X-Forwarded-Proto https',
        `default_backend ${backend}`,
      ])
      const lines = section(`backend ${backend}`)
      expect(lines).toContain('balance roundrobin')
      expect(lines.filter((l) => l.startsWith('server '))).toEqual([
        `server coffer-1 coffer-1:${port}`,
        `server coffer-2 coffer-2:${port}`,
      ])
    }
  })

  it('TLS ends at the proxy (TLS 1.2 at least), which the nodes are told and believe', () => {
    // Issue 19: in production a node on 0.0.0.0 starts in clear only when so declared.
    expect(settings.env).toBe('production')
    expect(settings.tls.terminatedByProxy).toBe(true)
    expect(settings.tls.api).toBeUndefined()
    expect(section('global')).toContain('ssl-default-bind-options ssl-min-ver TLSv1.2')
    // The certificate comes from deploy/tls/, mounted read-only, never from the repository.
    expect(proxy.volumes).toContain('./tls:/usr/local/etc/haproxy/tls:ro')
    expect(read('.gitignore').split('\n')).toContain('deploy/tls/')
  })

  it('the proxy takes a node out when /readyz fails, before the node stops accepting', () => {
    for (const backend of ['backend coffer_api', 'backend coffer_consent']) {
      expect(section(backend)).toEqual(
        expect.arrayContaining([
          'option httpchk',
          'http-check send meth GET uri /readyz',
          'http-check expect status 200',
        ]),
      )
    }
    const server = section('defaults').find((l) => l.startsWith('default-server')) ?? ''
    expect(server).toMatch(/\bcheck\b/)
    const inter = durationMs(/\binter (\S+)/.exec(server)?.[1] ?? '')
    const fall = Number(/\bfall (\d+)/.exec(server)?.[1])
    const checkTimeout = durationMs(
      section('defaults')
        .find((l) => l.startsWith('timeout check '))
        ?.split(' ')[2] ?? '',
    )
    // The worst case: the first failing check starts an interval after the signal.
    expect(inter * fall + checkTimeout).toBeLessThan(settings.operations.shutdownDelayMs)
  })

  it('the stop timeout covers the delay, the grace and the pool-close margin', () => {
    const ops = settings.operations
    for (const node of nodes) {
      expect(durationMs(node.stop_grace_period ?? '10s')).toBeGreaterThan(
        ops.shutdownDelayMs + ops.shutdownGraceMs + 5000,
      )
    }
  })
})

describe('deploy recipe: image', () => {
  const dockerignore = read('.dockerignore')
    .split('\n')
    .filter((l) => l && !l.startsWith('#'))
  const instruction = (keyword: string) => image.filter((i) => i.keyword === keyword)

  it('runs as a fixed non-root user that the image creates', () => {
    const user = instruction('USER').at(-1)?.args ?? ''
    expect(user).toMatch(/^\d+:\d+$/)
    const [uid, gid] = user.split(':').map(Number)
    expect(uid).not.toBe(0)
    expect(gid).not.toBe(0)
    const run = instruction('RUN')
      .map((i) => i.args)
      .join(' ')
    expect(run).toContain(`useradd --system --uid ${uid}`)
    expect(run).toContain(`chown coffer:coffer ${imageEnv.COFFER_DATA_DIR}`)
  })

  it('probes /readyz with node itself (no curl), listens on all addresses, stops on SIGTERM', () => {
    const check = healthcheckCommand(image)
    expect(check[0]).toBe('node')
    expect(check.join(' ')).toContain('/readyz')
    expect(check.join(' ')).not.toMatch(/curl|wget/)
    expect(instruction('STOPSIGNAL').map((i) => i.args)).toEqual(['SIGTERM'])
    expect(instruction('EXPOSE').map((i) => i.args)).toEqual(['8080 8081'])
    expect(imageEnv).toMatchObject({
      COFFER_HOST: '0.0.0.0',
      COFFER_PORT: '8080',
      COFFER_CONSENT_PORT: '8081',
    })
    expect(instruction('VOLUME').map((i) => i.args)).toEqual([`["${imageEnv.COFFER_DATA_DIR}"]`])
  })

  it('starts node on the build output of src/coffer.ts (the `coffer` command), serve by default', () => {
    expect(instruction('ENTRYPOINT').map((i) => JSON.parse(i.args))).toEqual([
      ['node', 'dist/coffer.js'],
    ])
    expect(instruction('CMD').map((i) => JSON.parse(i.args))).toEqual([['serve']])
    // tsconfig.build.json maps src/X.ts to dist/X.js (the build itself: image-entry test).
    const build = JSON.parse(read('tsconfig.build.json'))
    expect(build.compilerOptions).toMatchObject({ rootDir: 'src', outDir: 'dist' })
    expect(existsSync(join(ROOT, 'src', 'coffer.ts'))).toBe(true)
    // package.json's `coffer` command is the same file.
    expect(JSON.parse(read('package.json')).bin).toEqual({ coffer: 'dist/coffer.js' })
  })

  it('the runtime holds production dependencies and dist/ only', () => {
    const byName = new Map(stages.map((s) => [s.name, s.instructions]))
    const runs = (stage: string) =>
      (byName.get(stage) ?? []).filter((i) => i.keyword === 'RUN').map((i) => i.args)
    expect(runs('deps').join(' ')).toContain('npm ci --omit=dev --ignore-scripts')
    // the SQLite the server loads: the encrypted build (issue 22)
    expect(runs('deps').join(' ')).toContain('npm rebuild better-sqlite3-multiple-ciphers')
    expect(runs('build')).toContain('npm run build')
    expect(instruction('COPY').map((i) => i.args)).toEqual([
      '--from=deps /app/node_modules ./node_modules',
      '--from=build /app/dist ./dist',
      'package.json ./',
    ])
  })

  it('.dockerignore keeps secrets, data and local modules out of the build context', () => {
    for (const entry of ['**/node_modules', 'data', '.git', '.env', '**/.env', '**/*.env'])
      expect(dockerignore).toContain(entry)
    for (const needed of ['src', 'package.json', 'package-lock.json', 'tsconfig.json'])
      expect(dockerignore).not.toContain(needed)
  })
})
