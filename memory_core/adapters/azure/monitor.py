"""Exports memory-core's OpenTelemetry traces and metrics to Application Insights.

Uses the Azure Monitor OpenTelemetry distro (``azure-monitor-opentelemetry``) with Microsoft Entra
ID ingestion: the Application Insights component has local (key) authentication disabled, so the
exporter presents a token of the app's managed identity (the Monitoring Metrics Publisher role is
granted in the Bicep). Python logging is not exported here: the Functions host already forwards
the worker's log records to Application Insights, and exporting them twice would duplicate them.
"""

from __future__ import annotations

from typing import Any

from memory_core.errors import ConfigurationError

__all__ = ["configure_azure_monitor_exporter"]


def configure_azure_monitor_exporter(
    connection_string: str, *, client_id: str = "", credential: Any | None = None
) -> None:
    """Install the global tracer and meter providers that export to Application Insights.

    Args:
        connection_string: The Application Insights connection string.
        client_id: A user-assigned managed identity for ``DefaultAzureCredential`` (empty: default).
        credential: A sync token credential instead of ``DefaultAzureCredential``.
    """
    if not connection_string:
        raise ConfigurationError("APPLICATIONINSIGHTS_CONNECTION_STRING is not set")
    from azure.monitor.opentelemetry import configure_azure_monitor

    if credential is None:
        from azure.identity import DefaultAzureCredential

        credential = DefaultAzureCredential(managed_identity_client_id=client_id or None)
    configure_azure_monitor(
        connection_string=connection_string,
        credential=credential,
        disable_logging=True,
        enable_live_metrics=False,
    )
