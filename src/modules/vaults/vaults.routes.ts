import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { errors } from '../../lib/errors.js'
import { resource } from '../../policy/index.js'
import {
  AccountParams,
  CreateVaultForm,
  LegacyVaultListResponse,
  PageQuery,
  RenameVaultForm,
  VaultListResponse,
  VaultParams,
  VaultResponse,
} from './vaults.schemas.js'
import type { Vault, VaultsService } from './vaults.service.js'

const tags = ['vaults']
const vaultId = (req: FastifyRequest) => (req.params as { vault_id: string }).vault_id.toLowerCase()
const onVault = (activity: 'R' | 'U' | 'D') => (req: FastifyRequest) => ({
  activity,
  resource: resource('Vault', vaultId(req)),
})
const view = ({ id, name }: Vault) => ({ id, name })

export async function vaultRoutes(app: FastifyInstance, vaults: VaultsService): Promise<void> {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()

  r.post(
    '/v1/vaults',
    {
      schema: { tags, summary: 'Create a vault', body: CreateVaultForm, response: VaultResponse },
      config: {
        form: true,
        operation: 'vault.create',
        access: { policy: () => ({ activity: 'C', resource: resource('Vault', '') }) },
      },
    },
    async (req) => ({
      vault: view(await vaults.create(req.actor.principal.accountId, req.body.name)),
    }),
  )

  r.get(
    '/v1/vaults/:vault_id',
    {
      schema: { tags, summary: 'Read a vault', params: VaultParams, response: VaultResponse },
      config: { operation: 'vault.read', access: { policy: onVault('R') } },
    },
    async (req) => ({ vault: view(await vaults.get(req.actor.principal.accountId, vaultId(req))) }),
  )

  r.get(
    '/v1/vaults',
    {
      schema: {
        tags,
        summary: 'List the vaults the caller may read',
        querystring: PageQuery,
        response: VaultListResponse,
      },
      config: {
        operation: 'vault.list',
        access: { policy: () => ({ readAny: resource('Vault', '') }) },
      },
    },
    async (req) => ({
      vaults: (await vaults.list(req.actor, req.query.page ?? 1, req.query.per_page ?? 100)).map(
        view,
      ),
    }),
  )

  r.get(
    '/v1/accounts/:account_id/vaults',
    {
      schema: {
        tags,
        summary: 'List vaults (legacy account-scoped path)',
        deprecated: true,
        params: AccountParams,
        querystring: PageQuery,
        response: LegacyVaultListResponse,
      },
      config: {
        operation: 'vault.list_by_account',
        access: { policy: () => ({ readAny: resource('Vault', '') }) },
      },
    },
    async (req) => {
      if (req.params.account_id.toLowerCase() !== req.actor.principal.accountId)
        throw errors.notFound('Account')
      return {
        vaults: await vaults.list(req.actor, req.query.page ?? 1, req.query.per_page ?? 100),
      }
    },
  )

  r.put(
    '/v1/vaults/:vault_id',
    {
      schema: {
        tags,
        summary: 'Rename a vault',
        params: VaultParams,
        body: RenameVaultForm,
        response: VaultResponse,
      },
      config: { form: true, operation: 'vault.update', access: { policy: onVault('U') } },
    },
    async (req) => {
      const accountId = req.actor.principal.accountId
      // `name` is optional: without it the vault is returned unchanged.
      const vault =
        req.body.name === undefined
          ? await vaults.get(accountId, vaultId(req))
          : await vaults.rename(accountId, vaultId(req), req.body.name)
      return { vault: view(vault) }
    },
  )

  r.delete(
    '/v1/vaults/:vault_id',
    {
      schema: {
        tags,
        summary: 'Delete an empty vault',
        params: VaultParams,
        response: VaultResponse,
      },
      config: { operation: 'vault.delete', access: { policy: onVault('D') } },
    },
    async (req) => ({
      vault: view(await vaults.delete(req.actor.principal.accountId, vaultId(req))),
    }),
  )
}
