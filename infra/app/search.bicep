// Azure AI Search. Basic or higher so the semantic ranker is available; API keys are disabled
// (disableLocalAuth), so only Microsoft Entra ID role assignments grant access.

param location string
param tags object = {}
param name string

@allowed([
  'basic'
  'standard'
  'standard2'
  'standard3'
])
param sku string = 'basic'

@allowed([
  'free'
  'standard'
])
param semanticSearch string = 'free'

resource search 'Microsoft.Search/searchServices@2023-11-01' = {
  name: name
  location: location
  tags: tags
  sku: {
    name: sku
  }
  // No managed identity: the service calls nothing (the index has no vectorizer; memory-core sends
  // every query's vector itself). 'None' also removes the one earlier versions gave it.
  identity: {
    type: 'None'
  }
  properties: {
    replicaCount: 1
    partitionCount: 1
    hostingMode: 'default'
    publicNetworkAccess: 'enabled'
    // Keys off: no admin or query key works. (authOptions must stay unset when local auth is disabled.)
    disableLocalAuth: true
    semanticSearch: semanticSearch
  }
}

output name string = search.name
output endpoint string = 'https://${search.name}.search.windows.net'
