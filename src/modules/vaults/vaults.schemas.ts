import { Type } from 'typebox'
import { FormString, RequiredFormString, responses, success, Uuid } from '../../http/schemas.js'

export const VaultSchema = Type.Object({ id: Uuid, name: Type.String() })
export const LegacyVaultSchema = Type.Object({ id: Uuid, name: Type.String(), account_id: Uuid })

export const VaultParams = Type.Object({ vault_id: Uuid })
export const AccountParams = Type.Object({ account_id: Uuid })

export const CreateVaultForm = Type.Object({
  name: RequiredFormString('unique within the account'),
})
/** Without a name the vault is returned unchanged. */
export const RenameVaultForm = Type.Object({ name: FormString('unique within the account') })

/** `page` from 1, `per_page` from 1 to 500 (default 100). */
export const PageQuery = Type.Object({
  page: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000, default: 1 })),
  per_page: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
})

export const VaultResponse = responses(success({ vault: VaultSchema }))
export const VaultListResponse = responses(success({ vaults: Type.Array(VaultSchema) }))
export const LegacyVaultListResponse = responses(success({ vaults: Type.Array(LegacyVaultSchema) }))
