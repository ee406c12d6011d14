// What an operator needs to see: the Service Bus namespace's and the Function App's logs and metrics
// in the Log Analytics workspace (diagnostic settings), and three metric alerts (docs/operations.md):
// - dead letters: the turns queue's own dead-letter sub-queue holds a message (Service Bus
//   `DeadletteredMessages` > 0; list, inspect and replay with `memory-core deadletters --source servicebus`);
// - function failures: invocations that failed (Application Insights `requests/failed`: the Functions
//   host records every invocation, the queue trigger's included, as a request);
// - queue backlog: Service Bus has no message-age metric, so the stand-in for "turns wait too long" is
//   `ActiveMessages` on the turns queue staying above a threshold for the whole window.
// With `alertEmail` set, an action group mails that address; empty, the alerts fire in the portal only.

param tags object = {}

@description('Prefix of the alert and action group names (the deployment\'s resource token).')
param namePrefix string

param logAnalyticsWorkspaceId string
param serviceBusNamespaceName string
param turnsQueueName string
param functionAppName string
param applicationInsightsName string

@description('Email address the alerts notify; empty: no action group (alerts show in the portal only).')
param alertEmail string = ''

@description('Failed invocations in 15 minutes above which the function-failure alert fires.')
@minValue(0)
param functionFailureThreshold int = 5

@description('Active (waiting) messages on the turns queue that, held for the whole window, raise the backlog alert.')
@minValue(1)
param queueBacklogThreshold int = 1000

@description('How long the backlog must stay above the threshold (ISO 8601; the metric alert window).')
@allowed([
  'PT15M'
  'PT30M'
  'PT1H'
  'PT6H'
])
param queueBacklogWindow string = 'PT30M'

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' existing = {
  name: serviceBusNamespaceName
}

resource functionApp 'Microsoft.Web/sites@2024-04-01' existing = {
  name: functionAppName
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

// ---- Diagnostic settings ---------------------------------------------------------------------

resource serviceBusDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: namespace
  properties: {
    workspaceId: logAnalyticsWorkspaceId
    logs: [
      {
        categoryGroup: 'allLogs'
        enabled: true
      }
    ]
    metrics: [
      {
        category: 'AllMetrics'
        enabled: true
      }
    ]
  }
}

resource functionAppDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: functionApp
  properties: {
    workspaceId: logAnalyticsWorkspaceId
    logs: [
      {
        category: 'FunctionAppLogs'
        enabled: true
      }
    ]
    metrics: [
      {
        category: 'AllMetrics'
        enabled: true
      }
    ]
  }
}

// ---- Alerts ----------------------------------------------------------------------------------

resource actionGroup 'Microsoft.Insights/actionGroups@2023-01-01' = if (!empty(alertEmail)) {
  name: '${namePrefix}-memory-alerts'
  location: 'Global'
  tags: tags
  properties: {
    groupShortName: 'memorycore'
    enabled: true
    emailReceivers: [
      {
        name: 'operator'
        emailAddress: alertEmail
        useCommonAlertSchema: true
      }
    ]
  }
}

var alertActions = empty(alertEmail) ? [] : [
  {
    actionGroupId: actionGroup!.id
  }
]

resource deadLetterAlert 'Microsoft.Insights/metricAlerts@2018-03-01' = {
  name: '${namePrefix}-turns-dead-lettered'
  location: 'global'
  tags: tags
  properties: {
    description: 'The turns queue\'s dead-letter sub-queue holds messages: memory-core deadletters list --source servicebus, then show and replay (docs/operations.md).'
    severity: 2
    enabled: true
    scopes: [
      namespace.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    autoMitigate: true
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'DeadLetteredMessages'
          metricNamespace: 'Microsoft.ServiceBus/namespaces'
          metricName: 'DeadletteredMessages'
          dimensions: [
            {
              name: 'EntityName'
              operator: 'Include'
              values: [
                turnsQueueName
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: 0
          timeAggregation: 'Maximum'
        }
      ]
    }
    actions: alertActions
  }
}

resource functionFailureAlert 'Microsoft.Insights/metricAlerts@2018-03-01' = {
  name: '${namePrefix}-function-failures'
  location: 'global'
  tags: tags
  properties: {
    description: 'Function invocations failed (Application Insights requests/failed): see the failures blade and the ingest_turns error logs (docs/operations.md).'
    severity: 2
    enabled: true
    scopes: [
      applicationInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    autoMitigate: true
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'FailedRequests'
          metricNamespace: 'microsoft.insights/components'
          metricName: 'requests/failed'
          operator: 'GreaterThan'
          threshold: functionFailureThreshold
          timeAggregation: 'Count'
        }
      ]
    }
    actions: alertActions
  }
}

resource queueBacklogAlert 'Microsoft.Insights/metricAlerts@2018-03-01' = {
  name: '${namePrefix}-turns-backlog'
  location: 'global'
  tags: tags
  properties: {
    description: 'Turns are waiting: the turns queue held more active messages than the threshold for the whole window (Service Bus has no message-age metric; docs/operations.md).'
    severity: 3
    enabled: true
    scopes: [
      namespace.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: queueBacklogWindow
    autoMitigate: true
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'ActiveMessages'
          metricNamespace: 'Microsoft.ServiceBus/namespaces'
          metricName: 'ActiveMessages'
          dimensions: [
            {
              name: 'EntityName'
              operator: 'Include'
              values: [
                turnsQueueName
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: queueBacklogThreshold
          // The fewest waiting in the window: above the threshold only if it never drained below it.
          timeAggregation: 'Minimum'
        }
      ]
    }
    actions: alertActions
  }
}

output actionGroupId string = empty(alertEmail) ? '' : actionGroup!.id
output alertNames array = [
  deadLetterAlert.name
  functionFailureAlert.name
  queueBacklogAlert.name
]
