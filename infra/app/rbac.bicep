// Least-privilege role assignments for one principal: the Function App's user-assigned identity,
// or (optionally) the developer who runs memory-core locally against the deployed resources.
// Every assignment is named guid(scope, principal, role), so re-deploying is idempotent.
// Role definition ids: https://learn.microsoft.com/azure/role-based-access-control/built-in-roles

param principalId string

@allowed([
  'ServicePrincipal'
  'User'
  'Group'
])
param principalType string

param storageAccountName string
param serviceBusNamespaceName string
param turnsQueueName string
param searchServiceName string
param openAiAccountName string
param applicationInsightsName string

@description('Also grant Search Service Contributor (create or update the index definition). Only the developer who runs azd needs it: `memory-core index ensure` runs in the postprovision hook with their sign-in. The app identity reads and writes documents only, so it cannot delete or redefine the index.')
param manageSearchIndex bool = false

var roles = {
  serviceBusDataOwner: '090c5cfd-751d-490a-894a-3ce6f1109419' // Azure Service Bus Data Owner
  searchIndexDataContributor: '8ebe5a00-799e-43f5-93ac-243d3dce84a7' // Search Index Data Contributor
  searchServiceContributor: '7ca78c08-252a-4471-8644-bb5ff32d4ba0' // Search Service Contributor
  openAiUser: '5e0bd9bd-7b93-4f28-af87-19fc36ad61bd' // Cognitive Services OpenAI User
  storageBlobDataOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b' // Storage Blob Data Owner
  monitoringMetricsPublisher: '3913510d-42f4-4e42-8a64-420c390055eb' // Monitoring Metrics Publisher
  storageTableDataContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3' // Storage Table Data Contributor
}

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource serviceBus 'Microsoft.ServiceBus/namespaces@2024-01-01' existing = {
  name: serviceBusNamespaceName
}

resource turnsQueue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' existing = {
  parent: serviceBus
  name: turnsQueueName
}

resource search 'Microsoft.Search/searchServices@2023-11-01' existing = {
  name: searchServiceName
}

resource openAi 'Microsoft.CognitiveServices/accounts@2024-10-01' existing = {
  name: openAiAccountName
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

// Azure Service Bus Data Owner, on the turns queue only (never the namespace): the queue trigger
// receives turns, the HTTP turn endpoint, recall updates and `memory-core deadletters replay` send,
// and Flex Consumption's target-based scaling reads the queue's message count, which needs Manage
// rights (as in the official Flex Consumption + Service Bus quickstart). Owner's data actions include
// send and receive, so no separate Data Receiver / Data Sender assignment is made: one assignment is
// the whole grant on the queue, and nothing on any other entity of the namespace.
resource turnsQueueOwner 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(turnsQueue.id, principalId, roles.serviceBusDataOwner)
  scope: turnsQueue
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataOwner)
    principalId: principalId
    principalType: principalType
  }
}

// Search Index Data Contributor: read, write and delete memory documents.
resource searchIndexDataContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(search.id, principalId, roles.searchIndexDataContributor)
  scope: search
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.searchIndexDataContributor)
    principalId: principalId
    principalType: principalType
  }
}

// Search Service Contributor: create or update the index definition (`memory-core index ensure`);
// a control-plane role, so only for the deploying developer (manageSearchIndex), never the app.
resource searchServiceContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (manageSearchIndex) {
  name: guid(search.id, principalId, roles.searchServiceContributor)
  scope: search
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.searchServiceContributor)
    principalId: principalId
    principalType: principalType
  }
}

// Cognitive Services OpenAI User: call the chat and embedding deployments (no management rights).
resource openAiUser 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(openAi.id, principalId, roles.openAiUser)
  scope: openAi
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.openAiUser)
    principalId: principalId
    principalType: principalType
  }
}

// Storage Blob Data Owner, on the host storage account: AzureWebJobsStorage (blob leases for the
// timer trigger) and the Flex Consumption deployment container. No queue role: the host is
// configured with a blob service URI only and no trigger here needs storage queues.
resource storageBlobDataOwner 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(storage.id, principalId, roles.storageBlobDataOwner)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageBlobDataOwner)
    principalId: principalId
    principalType: principalType
  }
}

// Monitoring Metrics Publisher, on the Application Insights component: Entra ID telemetry ingestion.
resource monitoringMetricsPublisher 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(applicationInsights.id, principalId, roles.monitoringMetricsPublisher)
  scope: applicationInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.monitoringMetricsPublisher)
    principalId: principalId
    principalType: principalType
  }
}

// Storage Table Data Contributor, on the host storage account: memory-core's history table
// (decision history, turn journal, set-aside poison messages; MEMORY_HISTORY_TABLE_ENDPOINT).
resource storageTableDataContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(storage.id, principalId, roles.storageTableDataContributor)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageTableDataContributor)
    principalId: principalId
    principalType: principalType
  }
}
