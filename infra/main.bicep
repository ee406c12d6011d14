// memory-core on Azure: `azd up` provisions everything below into one resource group.
// Identity-based access only (no keys, no connection strings with secrets), least-privilege roles.
targetScope = 'subscription'

@minLength(1)
@maxLength(64)
@description('Name of the azd environment; used in the resource group name and the resource name hash.')
param environmentName string

@minLength(1)
@description('Primary location for all resources. It must offer the Flex Consumption plan.')
@metadata({
  azd: {
    type: 'location'
  }
})
param location string

@description('Location of the Azure OpenAI account (model availability differs by region). Empty: same as location.')
param openAiLocation string = ''

@description('Resource group name. Empty: rg-<environmentName>.')
param resourceGroupName string = ''

@description('Object id of the developer (or CI principal) that runs memory-core against these resources. Empty: no developer roles.')
param principalId string = ''

@allowed([
  'User'
  'ServicePrincipal'
  'Group'
])
param principalType string = 'User'

// ---- Microsoft Entra ID on the HTTP API ------------------------------------------------------

@description('Create the app registration of the API (app roles Memory.Agent, Memory.User, Memory.Admin; delegated scope Memory.ReadWrite) and make the Function App require its tokens (MEMORY_CREATE_API_REGISTRATION). Needs the right to register applications in the directory. false: no registration, the routes keep the Functions key.')
param createApiRegistration bool = true

@description('MEMORY_AUTH_AGENT_BINDINGS as an object: client id of an agent identity holding Memory.Agent -> the agent ids it may act for (["*"]: every agent). Set it in main.parameters.json: app settings set by hand are replaced on the next provision.')
param authAgentBindings object = {}

// ---- Function App ----------------------------------------------------------------------------

@allowed([
  '3.11'
  '3.12'
])
param pythonVersion string = '3.11'

@allowed([
  512
  2048
  4096
])
param functionInstanceMemoryMB int = 2048

@description('Flex Consumption scale-out limit (40 to 1000).')
@minValue(40)
@maxValue(1000)
param functionMaximumInstanceCount int = 40

@description('Always-ready instances for the HTTP functions (MEMORY_ALWAYS_READY_INSTANCES; 0: scale to zero, no baseline cost). One keeps the first search after idle fast; each is billed all the time (docs/deploy.md, Cold starts).')
@minValue(0)
@maxValue(40)
param functionAlwaysReadyInstanceCount int = 0

// ---- Service Bus -----------------------------------------------------------------------------

@description('Queue that carries turns (MEMORY_TURNS_QUEUE).')
param turnsQueueName string = 'memory-turns'

@description('Deliveries before a turn is dead-lettered.')
@minValue(1)
@maxValue(2000)
param turnsQueueMaxDeliveryCount int = 10

// ---- Monitoring ------------------------------------------------------------------------------

@description('Email address the alerts (dead letters, function failures, queue backlog) notify; empty: no action group, the alerts show in the portal only (infra/app/alerts.bicep).')
param alertEmail string = ''

// ---- Azure AI Search -------------------------------------------------------------------------

@allowed([
  'basic'
  'standard'
  'standard2'
  'standard3'
])
@description('Search tier; basic or higher so the semantic ranker is available.')
param searchSku string = 'basic'

@allowed([
  'free'
  'standard'
])
param searchSemanticSearch string = 'free'

@description('Search index that holds the memories (AZURE_SEARCH_INDEX_NAME).')
param searchIndexName string = 'memories'

// ---- Azure OpenAI ----------------------------------------------------------------------------
// Every default model and version is listed in model-retirements.json with its retirement date;
// tests/unit/test_infra_models.py fails once that date has passed, so move the default before then.
// main.parameters.json maps the model parameters to azd environment values (docs/deploy.md).

@description('Chat deployment name. Defaults to the model name; AZURE_OPENAI_CHAT_MODEL sets both.')
param chatDeploymentName string = 'gpt-5.4-mini'

@description('Chat model for extraction and consolidation (AZURE_OPENAI_CHAT_MODEL). A reasoning model: it rejects temperature, which memory-core does not send unless asked to.')
param chatModelName string = 'gpt-5.4-mini'

@description('Chat model version (AZURE_OPENAI_CHAT_MODEL_VERSION).')
param chatModelVersion string = '2026-03-17'

@description('Chat deployment type (AZURE_OPENAI_CHAT_DEPLOYMENT_SKU), such as GlobalStandard, DataZoneStandard or Standard.')
param chatDeploymentSku string = 'GlobalStandard'

@description('Chat deployment capacity, in thousands of tokens per minute (AZURE_OPENAI_CHAT_DEPLOYMENT_CAPACITY).')
param chatDeploymentCapacity int = 30

@description('Embedding deployment name. Defaults to the model name; AZURE_OPENAI_EMBEDDING_MODEL sets both.')
param embeddingDeploymentName string = 'text-embedding-3-small'

@description('Embedding model (AZURE_OPENAI_EMBEDDING_MODEL); the index expects its vector size.')
param embeddingModelName string = 'text-embedding-3-small'

@description('Embedding model version (AZURE_OPENAI_EMBEDDING_MODEL_VERSION).')
param embeddingModelVersion string = '1'

@description('Embedding deployment type (AZURE_OPENAI_EMBEDDING_DEPLOYMENT_SKU).')
param embeddingDeploymentSku string = 'GlobalStandard'

@description('Embedding deployment capacity, in thousands of tokens per minute (AZURE_OPENAI_EMBEDDING_DEPLOYMENT_CAPACITY).')
param embeddingDeploymentCapacity int = 30

@description('Azure OpenAI data-plane API version (AZURE_OPENAI_API_VERSION): v1 is the GA /openai/v1 API, which needs no dated version; a dated version such as 2024-10-21 uses the deployment endpoint.')
param openAiApiVersion string = 'v1'

// ---- Memory policy (strings: Bicep has no floating-point type) ------------------------------

@description('NCRONTAB schedule of the nightly forgetting job, UTC (MEMORY_FORGET_SCHEDULE).')
param forgetSchedule string = '0 30 3 * * *'

@description('Retention half-life in days (MEMORY_HALF_LIFE_DAYS).')
param memoryHalfLifeDays string = '45'

@description('At or below this retention a memory is archived (MEMORY_ARCHIVE_THRESHOLD).')
param memoryArchiveThreshold string = '0.22'

@description('Retention added per recall (MEMORY_ACCESS_BOOST).')
param memoryAccessBoost string = '0.04'

@description('Most retention recalls can add (MEMORY_ACCESS_BOOST_CAP).')
param memoryAccessBoostCap string = '0.35'

@description('Retention drift that makes forgetting rewrite an unchanged memory (MEMORY_FORGET_TOLERANCE).')
param memoryForgetTolerance string = '0.01'

@description('Keep each user message as an episodic memory beside the extracted facts (MEMORY_EPISODES).')
param memoryEpisodes string = 'true'

@description('Importance of an episodic memory (MEMORY_EPISODE_IMPORTANCE).')
param memoryEpisodeImportance string = '0.3'

// ---- Names -----------------------------------------------------------------------------------

var abbrs = loadJsonContent('abbreviations.json')
var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = {
  'azd-env-name': environmentName
}
var serviceName = 'memory'
var functionAppName = '${abbrs.webSitesFunctions}${resourceToken}'
var deploymentContainerName = 'app-package-${take(functionAppName, 32)}-${take(resourceToken, 7)}'

resource rg 'Microsoft.Resources/resourceGroups@2021-04-01' = {
  name: empty(resourceGroupName) ? '${abbrs.resourcesResourceGroups}${environmentName}' : resourceGroupName
  location: location
  tags: tags
}

// ---- Resources -------------------------------------------------------------------------------

// The one identity the Function App uses for every dependency.
module functionIdentity 'br/public:avm/res/managed-identity/user-assigned-identity:0.6.0' = {
  name: 'identity'
  scope: rg
  params: {
    name: '${abbrs.managedIdentityUserAssignedIdentities}${resourceToken}'
    location: location
    tags: tags
  }
}

module monitoring './app/monitoring.bicep' = {
  name: 'monitoring'
  scope: rg
  params: {
    location: location
    tags: tags
    logAnalyticsName: '${abbrs.operationalInsightsWorkspaces}${resourceToken}'
    applicationInsightsName: '${abbrs.insightsComponents}${resourceToken}'
  }
}

module storage './app/storage.bicep' = {
  name: 'storage'
  scope: rg
  params: {
    location: location
    tags: tags
    name: '${abbrs.storageStorageAccounts}${resourceToken}'
    deploymentContainerName: deploymentContainerName
  }
}

module serviceBus './app/servicebus.bicep' = {
  name: 'servicebus'
  scope: rg
  params: {
    location: location
    tags: tags
    name: '${abbrs.serviceBusNamespaces}${resourceToken}'
    queueName: turnsQueueName
    maxDeliveryCount: turnsQueueMaxDeliveryCount
  }
}

module search './app/search.bicep' = {
  name: 'search'
  scope: rg
  params: {
    location: location
    tags: tags
    name: '${abbrs.searchSearchServices}${resourceToken}'
    sku: searchSku
    semanticSearch: searchSemanticSearch
  }
}

module openAi './app/openai.bicep' = {
  name: 'openai'
  scope: rg
  params: {
    location: empty(openAiLocation) ? location : openAiLocation
    tags: tags
    name: '${abbrs.cognitiveServicesAccounts}${resourceToken}'
    chatDeploymentName: chatDeploymentName
    chatModelName: chatModelName
    chatModelVersion: chatModelVersion
    chatDeploymentSku: chatDeploymentSku
    chatDeploymentCapacity: chatDeploymentCapacity
    embeddingDeploymentName: embeddingDeploymentName
    embeddingModelName: embeddingModelName
    embeddingModelVersion: embeddingModelVersion
    embeddingDeploymentSku: embeddingDeploymentSku
    embeddingDeploymentCapacity: embeddingDeploymentCapacity
  }
}

// The API's Microsoft Entra ID app registration and service principal (Microsoft Graph Bicep
// extension). Memory.Admin goes to the developer who runs azd when that is a user.
module apiIdentity './app/api-identity.bicep' = if (createApiRegistration) {
  name: 'api-identity'
  scope: rg
  params: {
    uniqueName: 'memory-core-api-${resourceToken}'
    displayName: 'memory-core API (${environmentName})'
    adminUserObjectId: (principalType == 'User') ? principalId : ''
  }
}

// Flex Consumption: the module gives skuName 'FC1' the FlexConsumption tier (and no zone redundancy).
module plan 'br/public:avm/res/web/serverfarm:0.7.0' = {
  name: 'plan'
  scope: rg
  params: {
    name: '${abbrs.webServerFarms}${resourceToken}'
    location: location
    tags: tags
    skuName: 'FC1'
    reserved: true
  }
}

// Every setting memory-core reads (memory_core/config.py, Settings.environment_variables()),
// named exactly as it reads them. Not set on purpose: AZURE_SEARCH_API_KEY (keys are disabled),
// MEMORY_SQLITE_PATH and MEMORY_EMBEDDER_THREADS (embedded store and local embedder only), and the
// rest listed in tests/unit/test_infra_bicep.py (INTENTIONALLY_UNSET).
// MEMORY_AUTH_TENANT_ID and MEMORY_AUTH_AUDIENCE: with the app registration the routes require its
// tokens; without it both are empty and the routes keep the Functions key.
var memoryAppSettings = {
  MEMORY_STORE: 'azure_search'
  MEMORY_EMBEDDER: 'azure_openai'
  MEMORY_HALF_LIFE_DAYS: memoryHalfLifeDays
  MEMORY_ARCHIVE_THRESHOLD: memoryArchiveThreshold
  MEMORY_ACCESS_BOOST: memoryAccessBoost
  MEMORY_ACCESS_BOOST_CAP: memoryAccessBoostCap
  MEMORY_FORGET_TOLERANCE: memoryForgetTolerance
  MEMORY_EPISODES: memoryEpisodes
  MEMORY_EPISODE_IMPORTANCE: memoryEpisodeImportance
  MEMORY_FORGET_SCHEDULE: forgetSchedule
  MEMORY_TURNS_QUEUE: serviceBus.outputs.queueName
  ServiceBusConnection__fullyQualifiedNamespace: serviceBus.outputs.fullyQualifiedNamespace
  MEMORY_HISTORY_TABLE_ENDPOINT: storage.outputs.tableEndpoint
  AZURE_SEARCH_ENDPOINT: search.outputs.endpoint
  AZURE_SEARCH_INDEX_NAME: searchIndexName
  AZURE_OPENAI_ENDPOINT: openAi.outputs.endpoint
  AZURE_OPENAI_CHAT_DEPLOYMENT: openAi.outputs.chatDeploymentName
  AZURE_OPENAI_EMBEDDING_DEPLOYMENT: openAi.outputs.embeddingDeploymentName
  AZURE_OPENAI_API_VERSION: openAiApiVersion
  AZURE_CLIENT_ID: functionIdentity.outputs.clientId
  APPLICATIONINSIGHTS_CONNECTION_STRING: monitoring.outputs.applicationInsightsConnectionString
  MEMORY_TELEMETRY_CONSOLE: 'false'
  MEMORY_TELEMETRY_CONTENT: 'false'
  MEMORY_AUTH_TENANT_ID: createApiRegistration ? tenant().tenantId : ''
  MEMORY_AUTH_AUDIENCE: createApiRegistration ? apiIdentity!.outputs.audience : ''
  // The cloud's own authority (sovereign clouds too); unused while the two above are empty.
  MEMORY_AUTH_AUTHORITY: environment().authentication.loginEndpoint
  MEMORY_AUTH_AGENT_BINDINGS: string(authAgentBindings)
}

module functionApp './app/function.bicep' = {
  name: 'function'
  scope: rg
  params: {
    location: location
    tags: tags
    name: functionAppName
    serviceName: serviceName
    planId: plan.outputs.resourceId
    identityId: functionIdentity.outputs.resourceId
    identityClientId: functionIdentity.outputs.clientId
    storageBlobEndpoint: storage.outputs.blobEndpoint
    deploymentContainerName: storage.outputs.deploymentContainerName
    pythonVersion: pythonVersion
    instanceMemoryMB: functionInstanceMemoryMB
    maximumInstanceCount: functionMaximumInstanceCount
    alwaysReadyInstanceCount: functionAlwaysReadyInstanceCount
    appSettings: memoryAppSettings
  }
  // Roles first, so the app does not start before it may reach its dependencies.
  dependsOn: [
    functionRoles
  ]
}

// Logs and metrics to the Log Analytics workspace, and the alerts of docs/operations.md.
module alerts './app/alerts.bicep' = {
  name: 'alerts'
  scope: rg
  params: {
    tags: tags
    namePrefix: resourceToken
    logAnalyticsWorkspaceId: monitoring.outputs.logAnalyticsWorkspaceId
    serviceBusNamespaceName: serviceBus.outputs.namespaceName
    turnsQueueName: serviceBus.outputs.queueName
    functionAppName: functionApp.outputs.name
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    alertEmail: alertEmail
  }
}

// ---- Role assignments ------------------------------------------------------------------------

module functionRoles './app/rbac.bicep' = {
  name: 'function-roles'
  scope: rg
  params: {
    principalId: functionIdentity.outputs.principalId
    principalType: 'ServicePrincipal'
    storageAccountName: storage.outputs.name
    serviceBusNamespaceName: serviceBus.outputs.namespaceName
    turnsQueueName: serviceBus.outputs.queueName
    searchServiceName: search.outputs.name
    openAiAccountName: openAi.outputs.name
    applicationInsightsName: monitoring.outputs.applicationInsightsName
  }
}

// What a developer needs to run memory-core (Core Tools, `memory-core serve`, `index ensure`)
// against the deployed resources with their own Microsoft Entra ID sign-in.
module developerRoles './app/rbac.bicep' = if (!empty(principalId)) {
  name: 'developer-roles'
  scope: rg
  params: {
    principalId: principalId
    principalType: principalType
    manageSearchIndex: true
    storageAccountName: storage.outputs.name
    serviceBusNamespaceName: serviceBus.outputs.namespaceName
    turnsQueueName: serviceBus.outputs.queueName
    searchServiceName: search.outputs.name
    openAiAccountName: openAi.outputs.name
    applicationInsightsName: monitoring.outputs.applicationInsightsName
  }
}

// ---- Outputs (azd stores them in the environment: `azd env get-values`) ----------------------

output AZURE_LOCATION string = location
output AZURE_TENANT_ID string = tenant().tenantId
output AZURE_RESOURCE_GROUP string = rg.name
output AZURE_FUNCTION_APP_NAME string = functionApp.outputs.name
output SERVICE_MEMORY_NAME string = functionApp.outputs.name
output SERVICE_MEMORY_URI string = 'https://${functionApp.outputs.defaultHostName}'

// The same names and values as the app settings, so the postprovision hook (`memory-core index
// ensure`) and local runs see what the Function App sees. AZURE_CLIENT_ID is left out on purpose:
// locally the developer's own credential is used, not the app's managed identity.
output MEMORY_STORE string = memoryAppSettings.MEMORY_STORE
output MEMORY_EMBEDDER string = memoryAppSettings.MEMORY_EMBEDDER
output MEMORY_HALF_LIFE_DAYS string = memoryAppSettings.MEMORY_HALF_LIFE_DAYS
output MEMORY_ARCHIVE_THRESHOLD string = memoryAppSettings.MEMORY_ARCHIVE_THRESHOLD
output MEMORY_ACCESS_BOOST string = memoryAppSettings.MEMORY_ACCESS_BOOST
output MEMORY_ACCESS_BOOST_CAP string = memoryAppSettings.MEMORY_ACCESS_BOOST_CAP
output MEMORY_FORGET_TOLERANCE string = memoryAppSettings.MEMORY_FORGET_TOLERANCE
output MEMORY_EPISODES string = memoryAppSettings.MEMORY_EPISODES
output MEMORY_EPISODE_IMPORTANCE string = memoryAppSettings.MEMORY_EPISODE_IMPORTANCE
output MEMORY_FORGET_SCHEDULE string = memoryAppSettings.MEMORY_FORGET_SCHEDULE
output MEMORY_TURNS_QUEUE string = memoryAppSettings.MEMORY_TURNS_QUEUE
// ServiceBusConnection__fullyQualifiedNamespace (azd environment names are UPPER_SNAKE).
output AZURE_SERVICEBUS_FULLY_QUALIFIED_NAMESPACE string = memoryAppSettings.ServiceBusConnection__fullyQualifiedNamespace
output MEMORY_HISTORY_TABLE_ENDPOINT string = memoryAppSettings.MEMORY_HISTORY_TABLE_ENDPOINT
output AZURE_SEARCH_ENDPOINT string = memoryAppSettings.AZURE_SEARCH_ENDPOINT
output AZURE_SEARCH_INDEX_NAME string = memoryAppSettings.AZURE_SEARCH_INDEX_NAME
output AZURE_OPENAI_ENDPOINT string = memoryAppSettings.AZURE_OPENAI_ENDPOINT
output AZURE_OPENAI_CHAT_DEPLOYMENT string = memoryAppSettings.AZURE_OPENAI_CHAT_DEPLOYMENT
output AZURE_OPENAI_EMBEDDING_DEPLOYMENT string = memoryAppSettings.AZURE_OPENAI_EMBEDDING_DEPLOYMENT
output AZURE_OPENAI_API_VERSION string = memoryAppSettings.AZURE_OPENAI_API_VERSION
output APPLICATIONINSIGHTS_CONNECTION_STRING string = memoryAppSettings.APPLICATIONINSIGHTS_CONNECTION_STRING
output MEMORY_TELEMETRY_CONSOLE string = memoryAppSettings.MEMORY_TELEMETRY_CONSOLE
output MEMORY_TELEMETRY_CONTENT string = memoryAppSettings.MEMORY_TELEMETRY_CONTENT
output MEMORY_AUTH_TENANT_ID string = memoryAppSettings.MEMORY_AUTH_TENANT_ID
output MEMORY_AUTH_AUDIENCE string = memoryAppSettings.MEMORY_AUTH_AUDIENCE
output MEMORY_AUTH_AUTHORITY string = memoryAppSettings.MEMORY_AUTH_AUTHORITY
output MEMORY_AUTH_AGENT_BINDINGS string = memoryAppSettings.MEMORY_AUTH_AGENT_BINDINGS

// For clients and role assignments (docs/deploy.md); empty without the app registration.
output MEMORY_API_CLIENT_ID string = createApiRegistration ? apiIdentity!.outputs.appId : ''
output MEMORY_API_SCOPE string = createApiRegistration ? apiIdentity!.outputs.scope : ''
