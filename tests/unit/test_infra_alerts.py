"""Monitoring, checked: ``infra/app/alerts.bicep`` sends the Service Bus namespace's and the Function App's
logs and metrics to the Log Analytics workspace ``monitoring.bicep`` creates, and raises three metric
alerts on the deployed resources: dead letters in the turns queue's own sub-queue
(``DeadletteredMessages`` > 0 on the turns queue), failed invocations (Application Insights
``requests/failed``) and a backlog on the turns queue (``ActiveMessages``: Service Bus has no age metric).
The action group exists only with ``alertEmail`` set, and every alert notifies it then. Each check
fails on a mutated copy of the templates."""

from __future__ import annotations

from typing import Any

import pytest
from test_infra_bicep import (
    MAIN,
    Param,
    body,
    chain,
    declared,
    load,
    local_modules,
    mutate,
    param_default,
    resolve,
)

ALERTS = "app/alerts.bicep"
MONITORING = "app/monitoring.bicep"
SERVICEBUS = "app/servicebus.bicep"
FUNCTION = "app/function.bicep"

#: metric -> (the resource it is read on, its namespace, operator, how the threshold is set).
EXPECTED_ALERTS = {
    "DeadletteredMessages": ("namespace", "Microsoft.ServiceBus/namespaces", "GreaterThan", 0),
    "requests/failed": (
        "applicationInsights",
        "microsoft.insights/components",
        "GreaterThan",
        Param("functionFailureThreshold"),
    ),
    "ActiveMessages": (
        "namespace",
        "Microsoft.ServiceBus/namespaces",
        "GreaterThan",
        Param("queueBacklogThreshold"),
    ),
}
#: metrics read on one queue: they must be filtered to the turns queue.
PER_QUEUE = {"DeadletteredMessages", "ActiveMessages"}


def _existing(doc: dict[str, Any], symbol: str) -> dict[str, Any]:
    res = doc["resources"][symbol]
    assert res["existing"], f"{symbol} is the deployed resource, referenced with `existing`"
    return res


def _call(docs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    calls = local_modules(docs[MAIN], ALERTS)
    assert len(calls) == 1, "main.bicep deploys the alerts module once"
    return body(next(iter(calls.values())))["params"]


def check_diagnostic_settings(docs: dict[str, dict[str, Any]]) -> None:
    """The namespace and the Function App send their logs and all metrics to the workspace."""
    doc = docs[ALERTS]
    targets = {}
    for _, symbol, res in declared({ALERTS: doc}, "Microsoft.Insights/diagnosticSettings"):
        cfg = body(res)
        scope = cfg["scope"]
        target = _existing(doc, scope)["type"]
        props = cfg["properties"]
        assert props["workspaceId"] == "logAnalyticsWorkspaceId", f"{symbol}: to the Log Analytics workspace"
        assert any(log.get("enabled") is True for log in props.get("logs", [])), f"{symbol}: logs on"
        assert {"category": "AllMetrics", "enabled": True} in props.get("metrics", []), (
            f"{symbol}: metrics on"
        )
        targets[target] = props
    assert set(targets) == {"Microsoft.ServiceBus/namespaces", "Microsoft.Web/sites"}, "diagnostics on both"
    assert targets["Microsoft.Web/sites"]["logs"][0].get("category") == "FunctionAppLogs"
    # The workspace is the one monitoring.bicep creates.
    params = _call(docs)
    assert chain(params["logAnalyticsWorkspaceId"]) == ["monitoring", "outputs", "logAnalyticsWorkspaceId"]
    (workspace,) = [
        s for _, s, _ in declared({MONITORING: docs[MONITORING]}, "Microsoft.OperationalInsights/workspaces")
    ]
    assert chain(docs[MONITORING]["outputs"]["logAnalyticsWorkspaceId"]["value"]) == [workspace, "id"]


def check_alerts(docs: dict[str, dict[str, Any]]) -> None:
    """The three metric alerts, on the deployed resources, notifying the action group when there is one."""
    doc = docs[ALERTS]
    seen = {}
    for _, symbol, res in declared({ALERTS: doc}, "Microsoft.Insights/metricAlerts"):
        props = body(res)["properties"]
        assert props["enabled"] is True and props.get("autoMitigate") is True, f"{symbol}: enabled, resolves"
        (criterion,) = props["criteria"]["allOf"]
        metric = criterion["metricName"]
        scope, namespace, operator, threshold = EXPECTED_ALERTS[metric]
        assert [chain(s) for s in props["scopes"]] == [[scope, "id"]], f"{symbol}: on {scope}"
        assert criterion["metricNamespace"] == namespace
        assert criterion["operator"] == operator, f"{symbol}: {operator}"
        assert resolve(doc, criterion["threshold"]) == threshold, f"{symbol}: threshold {threshold}"
        if metric in PER_QUEUE:
            dims = {d["name"]: d for d in criterion.get("dimensions", [])}
            assert dims.get("EntityName", {}).get("values") == ["turnsQueueName"], (
                f"{symbol}: the turns queue only"
            )
            assert dims["EntityName"]["operator"] == "Include"
        assert props["actions"] == "alertActions", f"{symbol}: notifies the action group when there is one"
        seen[metric] = symbol
    assert set(seen) == set(EXPECTED_ALERTS), f"alerts on {sorted(EXPECTED_ALERTS)}, not {sorted(seen)}"
    # What each alert is read on is the deployed resource main.bicep names.
    assert _existing(doc, "namespace")["type"] == "Microsoft.ServiceBus/namespaces"
    assert _existing(doc, "applicationInsights")["type"] == "Microsoft.Insights/components"
    params = _call(docs)
    assert chain(params["serviceBusNamespaceName"]) == ["serviceBus", "outputs", "namespaceName"]
    assert chain(params["turnsQueueName"]) == ["serviceBus", "outputs", "queueName"]
    assert chain(params["functionAppName"]) == ["functionApp", "outputs", "name"]
    assert chain(params["applicationInsightsName"]) == ["monitoring", "outputs", "applicationInsightsName"]
    # The backlog needs the queue above the threshold for the whole window: the window's minimum.
    backlog = next(
        body(r)
        for _, s, r in declared({ALERTS: doc}, "Microsoft.Insights/metricAlerts")
        if s == seen["ActiveMessages"]
    )
    assert backlog["properties"]["criteria"]["allOf"][0]["timeAggregation"] == "Minimum"
    assert param_default(doc, resolve(doc, backlog["properties"]["windowSize"])) in {
        "PT15M",
        "PT30M",
        "PT1H",
        "PT6H",
    }


def check_action_group(docs: dict[str, dict[str, Any]]) -> None:
    """An action group only with an email address; without one, the alerts have no actions."""
    doc = docs[ALERTS]
    assert param_default(doc, Param("alertEmail")) == ""
    assert param_default(docs[MAIN], Param("alertEmail")) == ""
    assert _call(docs)["alertEmail"] == "alertEmail"
    ((_, symbol, group),) = declared({ALERTS: doc}, "Microsoft.Insights/actionGroups")
    condition = group["config"].get("condition")
    assert condition == {
        "operator": {
            "type": "not",
            "operands": {
                "bool_value": {"function": {"type": "empty", "parameters": {"item_to_test": "alertEmail"}}}
            },
        }
    }, f"{symbol} exists only when alertEmail is set"
    (receiver,) = body(group)["properties"]["emailReceivers"]
    assert receiver["emailAddress"] == "alertEmail"
    actions = doc["variables"]["alertActions"]["value"]["operator"]
    assert actions["type"] == "conditional"
    assert actions["operands"]["condition"] == {
        "function": {"type": "empty", "parameters": {"item_to_test": "alertEmail"}}
    }
    assert actions["operands"]["true_value"] == []
    (action,) = actions["operands"]["false_value"]
    assert chain(action["actionGroupId"]) == [symbol, "id"]


def test_logs_and_metrics_go_to_the_log_analytics_workspace() -> None:
    check_diagnostic_settings(load())


def test_alerts_on_dead_letters_failures_and_backlog() -> None:
    check_alerts(load())


def test_the_action_group_only_with_an_email_address() -> None:
    check_action_group(load())


# ---- the checks bite: each one fails on a mutated copy -----------------------------------------


def test_the_dead_letter_alert_must_fire_on_the_first_dead_letter() -> None:
    docs = load(mutate(ALERTS, "threshold: 0\n", "threshold: 1\n"))
    with pytest.raises(AssertionError, match="threshold 0"):
        check_alerts(docs)


def test_an_alert_on_every_queue_of_the_namespace_is_refused() -> None:
    docs = load(
        mutate(
            ALERTS,
            "metricName: 'DeadletteredMessages'\n          dimensions: [",
            "metricName: 'DeadletteredMessages'\n          ignored: [",
        )
    )
    with pytest.raises(AssertionError, match="turns queue only"):
        check_alerts(docs)


def test_a_missing_alert_is_found() -> None:
    docs = load(mutate(ALERTS, "metricName: 'requests/failed'", "metricName: 'DeadletteredMessages'"))
    with pytest.raises(AssertionError):
        check_alerts(docs)


def test_diagnostics_only_on_the_namespace_are_not_enough() -> None:
    docs = load(mutate(ALERTS, "  scope: functionApp\n", "  scope: namespace\n"))
    with pytest.raises(AssertionError, match="diagnostics on both"):
        check_diagnostic_settings(docs)


def test_an_unconditional_action_group_is_refused() -> None:
    docs = load(mutate(ALERTS, "= if (!empty(alertEmail)) {", "= {"))
    with pytest.raises(AssertionError, match="only when alertEmail is set"):
        check_action_group(docs)
