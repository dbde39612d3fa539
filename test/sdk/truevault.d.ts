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
    /** What the SDK throws when the body says `result: "error"`. */
    interface ApiError extends Error {
      error: { code: unknown; message: unknown; type: unknown }
      transaction_id: unknown
    }
  }

  export = TrueVaultClient
}
