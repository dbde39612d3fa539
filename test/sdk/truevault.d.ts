/** Types for the parts of the official `truevault` SDK (1.3.1, untyped CommonJS) the tests use. */
declare module 'truevault' {
  class TrueVaultClient {
    constructor(
      authn: { apiKey: string } | { accessToken: string } | { httpBasic: string } | null,
      host?: string,
    )
    readonly host: string
    readonly accessToken: string
    readonly authHeader: string | null
    static login(
      accountId: string,
      username: string,
      password: string,
      mfaCode?: string,
      host?: string,
      notValidAfter?: Date,
    ): Promise<TrueVaultClient>
    static generateAccessToken(
      accountId: string,
      username: string,
      password: string,
      mfaCode?: string,
      host?: string,
      notValidAfter?: Date,
    ): Promise<string>
    logout(): Promise<TrueVaultClient.User>
    readCurrentUser(full?: boolean): Promise<TrueVaultClient.User>
    updateCurrentUser(attributes: unknown): Promise<TrueVaultClient.User>
    listUsers(full?: boolean): Promise<TrueVaultClient.User[]>
    listUsersWithStatus(status: string | null, full?: boolean): Promise<TrueVaultClient.User[]>
    readUser(userId: string): Promise<TrueVaultClient.User>
    readUsers(userIds: string[]): Promise<TrueVaultClient.User[]>
    createUser(
      username: string,
      password?: string,
      attributes?: unknown,
      groupIds?: string[],
      status?: string,
    ): Promise<TrueVaultClient.User>
    /** Returns the response's `mfa` object. */
    startUserMfaEnrollment(userId: string, issuer: string): Promise<TrueVaultClient.MfaEnrollment>
    /** Answers nothing (the SDK drops the body). */
    finalizeMfaEnrollment(userId: string, mfaCode1: string, mfaCode2: string): Promise<undefined>
    /** Answers nothing (the SDK drops the body). */
    unenrollMfa(userId: string, mfaCode: string, password: string): Promise<undefined>
    updateUserAttributes(userId: string, attributes: unknown): Promise<TrueVaultClient.User>
    updateUserStatus(userId: string, status: string): Promise<TrueVaultClient.User>
    updateUserUsername(userId: string, newUsername: string): Promise<TrueVaultClient.User>
    updateUserPassword(userId: string, newPassword: string): Promise<TrueVaultClient.User>
    deleteUser(userId: string): Promise<TrueVaultClient.User>
    createUserApiKey(userId: string): Promise<string>
    createUserAccessToken(userId: string, notValidAfter?: Date): Promise<string>
    createGroup(
      name: string,
      policy: TrueVaultClient.PolicyStatement[],
      userIds?: string[],
    ): Promise<TrueVaultClient.Group>
    updateGroup(
      groupId: string,
      name?: string,
      policy?: TrueVaultClient.PolicyStatement[],
    ): Promise<TrueVaultClient.Group>
    deleteGroup(groupId: string): Promise<TrueVaultClient.Group>
    listGroups(): Promise<TrueVaultClient.Group[]>
    readFullGroup(groupId: string): Promise<TrueVaultClient.Group>
    addUsersToGroup(groupId: string, userIds: string[]): Promise<undefined>
    removeUsersFromGroup(groupId: string, userIds: string[]): Promise<undefined>
    addUsersToGroupReturnUserIds(groupId: string, userIds: string[]): Promise<TrueVaultClient.Group>
    removeUsersFromGroupReturnUserIds(
      groupId: string,
      userIds: string[],
    ): Promise<TrueVaultClient.Group>
    listVaults(page?: number, perPage?: number): Promise<TrueVaultClient.Vault[]>
    createVault(name: string): Promise<TrueVaultClient.Vault>
    readVault(vaultId: string): Promise<TrueVaultClient.Vault>
    updateVault(vaultId: string, name: string): Promise<TrueVaultClient.Vault>
    deleteVault(vaultId: string): Promise<TrueVaultClient.Vault>
    createDocument(
      vaultId: string,
      schemaId: string | null,
      document: unknown,
      ownerId?: string | null,
    ): Promise<TrueVaultClient.DocumentMeta>
    listDocuments(
      vaultId: string,
      full?: boolean,
      page?: number,
      perPage?: number,
    ): Promise<TrueVaultClient.Page<TrueVaultClient.DocumentItem>>
    getDocuments(vaultId: string, documentIds: string[]): Promise<TrueVaultClient.DocumentItem[]>
    updateDocument(
      vaultId: string,
      documentId: string,
      document: unknown,
      ownerId?: string | null,
      schemaId?: string | null,
    ): Promise<TrueVaultClient.DocumentMeta>
    updateDocumentOwner(
      vaultId: string,
      documentId: string,
      ownerId: string,
    ): Promise<TrueVaultClient.DocumentMeta>
    /** Built by the SDK from the top-level `document_id` and `owner_id`. */
    deleteDocument(vaultId: string, documentId: string): Promise<{ id: unknown; owner_id: unknown }>
    /**
     * `file` goes to `FormData.append('file', file)`: a `Blob`/`File` for the global `FormData`,
     * a readable stream (or Buffer) for the `form-data` package.
     */
    createBlob(
      vaultId: string,
      file: TrueVaultClient.BlobPayload,
      ownerId?: string | null,
    ): Promise<TrueVaultClient.BlobInfo>
    /** Raw `fetch` (no `_tv_sdk`, no error check): whatever the body is comes back as `blob`. */
    getBlob(vaultId: string, blobId: string): Promise<TrueVaultClient.BlobDownload>
    listBlobs(
      vaultId: string,
      page?: number,
      perPage?: number,
    ): Promise<TrueVaultClient.Page<TrueVaultClient.BlobInfo>>
    updateBlob(
      vaultId: string,
      blobId: string,
      file: TrueVaultClient.BlobPayload,
      ownerId?: string | null,
    ): Promise<TrueVaultClient.BlobInfo>
    updateBlobOwner(
      vaultId: string,
      blobId: string,
      ownerId: string,
    ): Promise<TrueVaultClient.BlobInfo>
    deleteBlob(vaultId: string, blobId: string): Promise<TrueVaultClient.BlobInfo>
    createSchema(
      vaultId: string,
      name: string,
      fields: TrueVaultClient.SchemaFieldInput[],
    ): Promise<TrueVaultClient.Schema>
    updateSchema(
      vaultId: string,
      schemaId: string,
      name: string,
      fields: TrueVaultClient.SchemaFieldInput[],
    ): Promise<TrueVaultClient.Schema>
    readSchema(vaultId: string, schemaId: string): Promise<TrueVaultClient.Schema>
    listSchemas(vaultId: string): Promise<TrueVaultClient.Schema[]>
    /** Answers nothing (the SDK drops the body). */
    deleteSchema(vaultId: string, schemaId: string): Promise<undefined>
    createUserSchema(
      accountId: string,
      name: string,
      fields: TrueVaultClient.SchemaFieldInput[],
    ): Promise<TrueVaultClient.UserSchema>
    readUserSchema(accountId: string): Promise<TrueVaultClient.UserSchema>
    updateUserSchema(
      accountId: string,
      name: string,
      fields: TrueVaultClient.SchemaFieldInput[],
    ): Promise<TrueVaultClient.UserSchema>
    deleteUserSchema(accountId: string): Promise<TrueVaultClient.UserSchema>
    listDocumentsInSchema(
      vaultId: string,
      schemaId: string,
      full?: boolean,
      page?: number,
      perPage?: number,
    ): Promise<TrueVaultClient.Page<TrueVaultClient.DocumentItem>>
    /** `document` of each result is decoded by the SDK (present only with `full_document`). */
    searchDocuments(
      vaultId: string,
      searchOption: Record<string, unknown>,
    ): Promise<TrueVaultClient.SearchResult<TrueVaultClient.DocumentHit>>
    /** `attributes` of each result is decoded by the SDK (present only with `full_document`). */
    searchUsers(
      searchOption: Record<string, unknown>,
    ): Promise<TrueVaultClient.SearchResult<TrueVaultClient.UserHit>>
    createScopedAccessToken(
      name: string,
      policy: TrueVaultClient.PolicyStatement[],
      notValidAfter?: Date,
      allowedUses?: number,
    ): Promise<TrueVaultClient.ScopedAccessToken>
    getScopedAccessToken(tokenId: string): Promise<TrueVaultClient.ScopedAccessToken>
    listScopedAccessTokens(): Promise<TrueVaultClient.ScopedAccessToken[]>
    deleteScopedAccessToken(tokenId: string): Promise<undefined>
    /** JSON `POST v1/users/{id}/message/email` with provider SENDGRID; resolves `provider_message_id`. */
    sendEmailSendgrid(
      sendgridApiKey: string,
      userId: string,
      sendgridTemplateId: string,
      fromEmailSpecifier: TrueVaultClient.ValueSpec,
      toEmailSpecifier: TrueVaultClient.ValueSpec,
      substitutions?: Record<string, TrueVaultClient.ValueSpec>,
    ): Promise<string>
    /**
     * JSON `POST v1/users/{id}/message/sms` with provider TWILIO (`auth: {account_sid, username:
     * keySid, password: keySecret}`, `media_urls: mediaURLs || []`); resolves `provider_message_id`.
     */
    sendSMSTwilio(
      twilioAccountSid: string,
      twilioKeySid: string,
      twilioKeySecret: string,
      userId: string,
      fromNumberSpecifier: TrueVaultClient.ValueSpec,
      toNumberSpecifier: TrueVaultClient.ValueSpec,
      messageBody: string,
      mediaURLs?: TrueVaultClient.ValueSpec[],
    ): Promise<string>
    createPasswordResetFlow(
      name: string,
      sendGridTemplateId: string,
      sendGridApiKey: string,
      userEmailValueSpec: TrueVaultClient.ValueSpec,
      fromEmailValueSpec: TrueVaultClient.ValueSpec,
      substitutions: Record<string, TrueVaultClient.ValueSpec>,
    ): Promise<TrueVaultClient.PasswordResetFlow>
    listPasswordResetFlows(): Promise<TrueVaultClient.PasswordResetFlow[]>
    sendPasswordResetEmail(flowId: string, username: string): Promise<undefined>
    linkScopedAccessTokenToPasswordResetFlow(flowId: string, tokenId: string): Promise<unknown>
  }

  namespace TrueVaultClient {
    interface User {
      id: string
      user_id?: string
      account_id: string
      username: string
      status: string
      mfa_enrolled: boolean
      attributes?: unknown
      group_ids?: string[]
      access_token?: string
      api_key?: string
      [key: string]: unknown
    }
    interface MfaEnrollment {
      qr_code_svg: string
      secret: string
      uri: string
      [key: string]: unknown
    }
    interface PolicyStatement {
      Resources: string[]
      Activities: string
    }
    interface Group {
      id: string
      group_id?: string
      name: string
      policy: PolicyStatement[]
      user_ids?: string[]
      [key: string]: unknown
    }
    interface Vault {
      id: string
      name: string
      [key: string]: unknown
    }
    /** v2 document create/update and the v1 owner update. */
    interface DocumentMeta {
      id: string
      vault_id: string
      owner_id: string | null
      [key: string]: unknown
    }
    /** v2 multi-get, and v1 list items (`document` decoded by the SDK, only when `full`). */
    interface DocumentItem {
      id: string
      document?: unknown
      [key: string]: unknown
    }
    interface Page<T> {
      items: T[]
      page: number
      per_page: number
      total: number
      [key: string]: unknown
    }
    type BlobPayload = Blob | NodeJS.ReadableStream | Buffer
    interface BlobInfo {
      id: string
      filename?: string
      /** A string, as TrueVault sends it. */
      size?: string
      owner_id?: string | null
      [key: string]: unknown
    }
    interface BlobDownload {
      /** A global `Blob` with global fetch; node-fetch 2's own Blob (no readers) otherwise. */
      blob: unknown
      contentType: string | null
      /** From `Content-Disposition`, parsed by the `content-disposition` package. */
      fileName: string | undefined
    }
    /** A field as sent: `index` may be a boolean or 1/0 (the SDK suite sends 1). */
    interface SchemaFieldInput {
      name: string
      type?: string
      index?: boolean | number | string
    }
    interface SchemaField {
      name: string
      type: string
      index: boolean
    }
    interface Schema {
      id: string
      vault_id: string
      name: string
      fields: SchemaField[]
      [key: string]: unknown
    }
    interface UserSchema {
      id: string
      name: string
      fields: SchemaField[]
      vault_id: string
      [key: string]: unknown
    }
    interface SearchInfo {
      current_page: number
      num_pages: number
      per_page: number
      total_result_count: number
    }
    interface SearchResult<T> {
      documents: T[]
      info: SearchInfo
    }
    interface DocumentHit {
      document_id: string
      owner_id: string | null
      document?: unknown
      [key: string]: unknown
    }
    interface UserHit {
      id: string
      attributes?: unknown
      [key: string]: unknown
    }
    interface PasswordResetFlow {
      id: string
      name: string
      sg_template_id: string
      user_email_value_spec: ValueSpec
      from_email_value_spec: ValueSpec
      substitutions: Record<string, ValueSpec>
      [key: string]: unknown
    }
    interface ScopedAccessToken {
      id: string
      name: string
      policy: PolicyStatement[]
      not_valid_after: string
      allowed_uses: number | null
      consumed_uses: number
      http_auth?: { username: string; password: string }
    }
    /** A messaging value specifier. */
    type ValueSpec =
      | { literal_value: string }
      | { user_attribute: string }
      | { system_field: string }
    /** What the SDK throws when the body says `result: "error"`. */
    interface ApiError extends Error {
      error: { code: unknown; message: unknown; type: unknown; provider_error?: unknown }
      transaction_id: unknown
    }
  }

  export = TrueVaultClient
}
