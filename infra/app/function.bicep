// The memory-core Function App on a Flex Consumption plan: Python, user-assigned identity for
// everything (host storage, deployment package, Service Bus, Search, OpenAI, telemetry), no keys.

param location string
param tags object = {}
param name string

@description('azd service name (azure.yaml) the app is tagged with.')
param serviceName string

param planId string
param identityId string
param identityClientId string

@description('Blob endpoint of the host storage account (https://NAME.blob.core.windows.net/).')
param storageBlobEndpoint string
param deploymentContainerName string

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
param instanceMemoryMB int = 2048

@description('Flex Consumption scale-out limit (40 to 1000).')
@minValue(40)
@maxValue(1000)
param maximumInstanceCount int = 40

@description('Always-ready instances for the HTTP functions (0: scale to zero). Each is billed all the time (docs/deploy.md, Cold starts).')
@minValue(0)
@maxValue(40)
param alwaysReadyInstanceCount int = 0

@description('The settings memory-core reads (Settings.environment_variables()).')
param appSettings object

// Settings the Functions host and its extensions read (not memory-core): identity-based
// connections for the host storage (blob only) and the Service Bus trigger, and Entra ID
// authentication for Application Insights ingestion (local auth is disabled on the component).
var hostSettings = {
  AzureWebJobsStorage__blobServiceUri: storageBlobEndpoint
  AzureWebJobsStorage__credential: 'managedidentity'
  AzureWebJobsStorage__clientId: identityClientId
  ServiceBusConnection__credential: 'managedidentity'
  ServiceBusConnection__clientId: identityClientId
  APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=${identityClientId};Authorization=AAD'
}

// The http group (every HTTP function): the search an agent waits for before each run is answered
// without a cold start. The Service Bus trigger scales on demand.
var alwaysReadyHttp = [
  {
    name: 'http'
    instanceCount: alwaysReadyInstanceCount
  }
]

resource functionApp 'Microsoft.Web/sites@2024-04-01' = {
  name: name
  location: location
  tags: union(tags, {
    'azd-service-name': serviceName
  })
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    serverFarmId: planId
    httpsOnly: true
    siteConfig: {
      minTlsVersion: '1.2'
    }
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${storageBlobEndpoint}${deploymentContainerName}'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      scaleAndConcurrency: {
        alwaysReady: (alwaysReadyInstanceCount > 0) ? alwaysReadyHttp : []
        instanceMemoryMB: instanceMemoryMB
        maximumInstanceCount: maximumInstanceCount
      }
      runtime: {
        name: 'python'
        version: pythonVersion
      }
    }
  }
}

// Flex Consumption sets the runtime in functionAppConfig; FUNCTIONS_WORKER_RUNTIME,
// FUNCTIONS_EXTENSION_VERSION and AzureWebJobsStorage (a connection string) must not be set here.
resource settings 'Microsoft.Web/sites/config@2024-04-01' = {
  parent: functionApp
  name: 'appsettings'
  properties: union(hostSettings, appSettings)
}

// Basic (user name + password) publishing is off; azd deploys with Microsoft Entra ID.
resource scmBasicAuth 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: functionApp
  name: 'scm'
  properties: {
    allow: false
  }
}

resource ftpBasicAuth 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: functionApp
  name: 'ftp'
  properties: {
    allow: false
  }
}

output name string = functionApp.name
output defaultHostName string = functionApp.properties.defaultHostName
