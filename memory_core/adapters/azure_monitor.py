"""Exports memory-core's OpenTelemetry traces and metrics to Application Insights.

Uses the Azure Monitor OpenTelemetry distro (``azure-monitor-opentelemetry``) with Microsoft Entra
ID ingestion: the Application Insights component has local (key) authentication disabled, so the
exporter presents a token of the app's managed identity (the Monitoring Metrics Publisher role is
granted in the Bicep). Python logging is not exported here: the Functions host already forwards
the worker's log records to Application Insights, and exporting them twice would duplicate them.
"""

from __future__ import annotations

from typing import Any

from ..config import Settings
from ..errors import ConfigurationError

__all__ = ["configure_azure_monitor_exporter"]


def configure_azure_monitor_exporter(settings: Settings, *, credential: Any | None = None) -> None:
    """Install the global tracer and meter providers that export to Application Insights.

    Args:
        settings: ``APPLICATIONINSIGHTS_CONNECTION_STRING`` and ``AZURE_CLIENT_ID``.
        credential: A sync token credential; default ``DefaultAzureCredential`` with the
            user-assigned managed identity ``AZURE_CLIENT_ID`` when set.
    """
    if not settings.applicationinsights_connection_string:
        raise ConfigurationError("APPLICATIONINSIGHTS_CONNECTION_STRING is not set")
    from azure.monitor.opentelemetry import configure_azure_monitor

    if credential is None:
        from azure.identity import DefaultAzureCredential

        credential = DefaultAzureCredential(managed_identity_client_id=settings.azure_client_id or None)
    configure_azure_monitor(
        connection_string=settings.applicationinsights_connection_string,
        credential=credential,
        disable_logging=True,
        enable_live_metrics=False,
    )
