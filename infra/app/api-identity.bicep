// The memory API's Microsoft Entra ID app registration, created with the Microsoft Graph Bicep
// extension (its version is pinned in infra/bicepconfig.json): the app roles and the delegated scope
// that memory_core/domain/access.py checks, the service principal that role assignments are made on, and
// (optionally) Memory.Admin for the developer who runs azd. The Function App accepts tokens for it
// once main.bicep sets MEMORY_AUTH_TENANT_ID and MEMORY_AUTH_AUDIENCE from the outputs below.
//
// Creating it needs the right to register applications in the directory (see docs/deploy.md).
// Nothing here lives in the resource group: `azd down` leaves the registration in place.
// Re-deploying updates it in place, found by its uniqueName.
extension microsoftGraphV1

@description('Alternate key of the app registration, stable per azd environment (immutable once created).')
@minLength(1)
@maxLength(64)
param uniqueName string

@description('Name shown in the Microsoft Entra admin center.')
param displayName string

@description('Object id of a user who gets Memory.Admin and becomes an owner of the registration (the developer who runs azd). Empty: no assignment.')
param adminUserObjectId string = ''

// Application ID URI of the form api://<tenant id>/<string>: one of the secure formats the default
// identifier URI restrictions of Microsoft Entra ID allow, and known before the app exists (the
// client id is only assigned on creation, so api://<client id> cannot be set in the same resource).
var identifierUri = 'api://${tenant().tenantId}/${uniqueName}'

// Ids derived from the unique name: the same on every deployment (an id must not change while the
// role or scope is granted) and distinct for each role and the scope.
var appRoleIds = {
  agent: guid(uniqueName, 'appRole', 'Memory.Agent')
  user: guid(uniqueName, 'appRole', 'Memory.User')
  admin: guid(uniqueName, 'appRole', 'Memory.Admin')
}
var userScopeId = guid(uniqueName, 'oauth2PermissionScope', 'Memory.ReadWrite')
var adminScopeId = guid(uniqueName, 'oauth2PermissionScope', 'Memory.Admin.All')

var owners = empty(adminUserObjectId) ? [] : [
  adminUserObjectId
]

resource api 'Microsoft.Graph/applications@v1.0' = {
  uniqueName: uniqueName
  displayName: displayName
  description: 'memory-core HTTP API (long-term memory for agents): app roles Memory.Agent, Memory.User and Memory.Admin, delegated scope Memory.ReadWrite.'
  signInAudience: 'AzureADMyOrg'
  identifierUris: [
    identifierUri
  ]
  api: {
    // v2 access tokens: issuer https://login.microsoftonline.com/<tenant>/v2.0, audience the client id.
    requestedAccessTokenVersion: 2
    oauth2PermissionScopes: [
      {
        id: userScopeId
        value: 'Memory.ReadWrite'
        type: 'User'
        isEnabled: true
        adminConsentDisplayName: 'Read and change your memories'
        adminConsentDescription: 'Lets the app search, read, export and delete the memories of the signed-in user and post turns for them.'
        userConsentDisplayName: 'Read and change your memories'
        userConsentDescription: 'Lets the app search, read, export and delete your memories and post turns for you.'
      }
      {
        // Admin consent only: a signed-in user's Memory.Admin role counts only in a token that also
        // carries this scope, so an app consented for Memory.ReadWrite never acts with its user's admin rights.
        id: adminScopeId
        value: 'Memory.Admin.All'
        type: 'Admin'
        isEnabled: true
        adminConsentDisplayName: 'Administer every user\'s memories'
        adminConsentDescription: 'Lets the app act with the signed-in administrator\'s Memory.Admin role: forgetting, and export and purge of any user.'
      }
    ]
  }
  // idtyp in access tokens: 'app' for an app-only token, 'user' for a delegated one. The API classifies
  // a caller only by what the token says (memory_core/adapters/azure/entra_tokens.py identity_type),
  // never by a claim it lacks.
  optionalClaims: {
    accessToken: [
      {
        name: 'idtyp'
        essential: false
      }
    ]
  }
  // A role is removed in two deployments: first isEnabled: false, then the entry itself.
  appRoles: [
    {
      id: appRoleIds.agent
      value: 'Memory.Agent'
      displayName: 'Memory agent'
      description: 'An agent process (app-only token): search, read and delete memories and post turns for the agent ids its client id is bound to in MEMORY_AUTH_AGENT_BINDINGS.'
      allowedMemberTypes: [
        'Application'
      ]
      isEnabled: true
    }
    {
      id: appRoleIds.user
      value: 'Memory.User'
      displayName: 'Memory user'
      description: 'A signed-in user: their own memories only (search, read, delete, export, purge, post turns).'
      allowedMemberTypes: [
        'User'
      ]
      isEnabled: true
    }
    {
      id: appRoleIds.admin
      value: 'Memory.Admin'
      displayName: 'Memory administrator'
      description: 'Every route for every user and agent, including forgetting and cross-user export and purge.'
      allowedMemberTypes: [
        'User'
        'Application'
      ]
      isEnabled: true
    }
  ]
  owners: {
    relationships: owners
  }
}

resource apiServicePrincipal 'Microsoft.Graph/servicePrincipals@v1.0' = {
  appId: api.appId
  // Only users and apps assigned a role get tokens for the API (Memory.User gates users).
  appRoleAssignmentRequired: true
  owners: {
    relationships: owners
  }
}

// Memory.Admin for the developer who runs azd, so the deployed API can be tried with their own sign-in.
resource adminAssignment 'Microsoft.Graph/appRoleAssignedTo@v1.0' = if (!empty(adminUserObjectId)) {
  principalId: adminUserObjectId
  resourceId: apiServicePrincipal.id
  appRoleId: appRoleIds.admin
}

output appId string = api.appId
output identifierUri string = identifierUri
output servicePrincipalId string = apiServicePrincipal.id
// MEMORY_AUTH_AUDIENCE: v2 tokens carry the client id, v1 tokens the application ID URI.
output audience string = '${identifierUri},${api.appId}'
// What clients ask a token for (client credentials, managed identity, DefaultAzureCredential).
output scope string = '${identifierUri}/.default'
