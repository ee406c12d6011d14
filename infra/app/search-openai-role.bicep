// The search service's system-assigned identity may call the Azure OpenAI embedding deployment:
// the index's integrated vectorizer embeds query text inside the search service, and Azure OpenAI
// accepts no keys (disableLocalAuth), so this role assignment is what makes it work.

param searchPrincipalId string
param openAiAccountName string

var openAiUserRole = '5e0bd9bd-7b93-4f28-af87-19fc36ad61bd' // Cognitive Services OpenAI User

resource openAi 'Microsoft.CognitiveServices/accounts@2024-10-01' existing = {
  name: openAiAccountName
}

// Cognitive Services OpenAI User, for the search service's identity, on the OpenAI account only.
resource searchOpenAiUser 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(openAi.id, searchPrincipalId, openAiUserRole)
  scope: openAi
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', openAiUserRole)
    principalId: searchPrincipalId
    principalType: 'ServicePrincipal'
  }
}
