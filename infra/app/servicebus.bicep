// Service Bus namespace (Standard: sessions and duplicate detection need it) and the turns queue.
// Local (SAS key) authentication is disabled: senders and receivers use Microsoft Entra ID.

param location string
param tags object = {}
param name string
param queueName string

@description('Deliveries before a turn is dead-lettered.')
@minValue(1)
@maxValue(2000)
param maxDeliveryCount int = 10

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' = {
  name: name
  location: location
  tags: tags
  sku: {
    name: 'Standard'
    tier: 'Standard'
  }
  properties: {
    disableLocalAuth: true
    minimumTlsVersion: '1.2'
    publicNetworkAccess: 'Enabled'
  }
}

// One message per turn. The session id is derived from the (user, agent) scope, so writes for one
// scope are processed in order; the message id is the turn id, so a resent turn is dropped.
resource turnsQueue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' = {
  parent: namespace
  name: queueName
  properties: {
    requiresSession: true
    requiresDuplicateDetection: true
    duplicateDetectionHistoryTimeWindow: 'PT1H'
    maxDeliveryCount: maxDeliveryCount
    deadLetteringOnMessageExpiration: true
    defaultMessageTimeToLive: 'P14D'
    lockDuration: 'PT1M'
    enablePartitioning: false
  }
}

output namespaceName string = namespace.name
output fullyQualifiedNamespace string = '${namespace.name}.servicebus.windows.net'
output queueName string = turnsQueue.name
