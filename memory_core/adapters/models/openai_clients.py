"""Clients of the ``openai`` SDK: Azure OpenAI with Microsoft Entra ID, or any OpenAI-compatible endpoint.

Azure clients authenticate with a bearer token provider from ``azure.identity.aio`` (no API keys), on
either Azure endpoint: the versioned one (``/openai/deployments/NAME/...?api-version=...``) or the
``/openai/v1`` one (API version ``v1``, or an endpoint that ends in ``/openai/v1``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from openai import AsyncAzureOpenAI, AsyncOpenAI

from memory_core.errors import ConfigurationError

__all__ = [
    "AZURE_OPENAI_SCOPE",
    "AZURE_OPENAI_V1",
    "AzureOpenAIConnection",
    "ClientOwner",
    "CompatibleConnection",
    "TokenProvider",
    "azure_token_provider",
    "azure_v1_base_url",
]

#: The Entra ID scope of Azure OpenAI (Cognitive Services) data-plane calls.
AZURE_OPENAI_SCOPE = "https://cognitiveservices.azure.com/.default"
#: The ``AZURE_OPENAI_API_VERSION`` that selects Azure OpenAI's version-less ``/openai/v1`` endpoint.
AZURE_OPENAI_V1 = "v1"
#: An async callable returning a bearer token.
TokenProvider = Callable[[], Awaitable[str]]


def azure_token_provider(client_id: str | None = None) -> tuple[TokenProvider, Any]:
    """A bearer token provider for Azure OpenAI from ``DefaultAzureCredential`` (async).

    Args:
        client_id: Client id of a user-assigned managed identity; ``None`` or empty for the default.

    Returns:
        ``(provider, credential)``; whoever created them closes ``credential`` (``await
        credential.close()``).
    """
    from azure.identity.aio import DefaultAzureCredential, get_bearer_token_provider

    try:
        credential = DefaultAzureCredential(managed_identity_client_id=client_id or None)
    except ImportError as exc:  # azure-core's async transport needs aiohttp
        raise ConfigurationError(
            f"Microsoft Entra ID for Azure OpenAI needs an async HTTP transport for azure-identity: {exc}"
        ) from exc
    return get_bearer_token_provider(credential, AZURE_OPENAI_SCOPE), credential


def azure_v1_base_url(endpoint: str, api_version: str) -> str | None:
    """The ``/openai/v1/`` base URL of an Azure OpenAI resource, when the endpoint or the API version asks
    for it (``None``: the versioned endpoint).

    ``https://NAME.openai.azure.com`` with version ``v1`` and ``https://NAME.openai.azure.com/openai/v1``
    with any version both give ``https://NAME.openai.azure.com/openai/v1/``.
    """
    root = endpoint.strip().rstrip("/")
    if root.endswith("/openai/v1"):
        return f"{root}/"
    if api_version.strip().lower() != AZURE_OPENAI_V1:
        return None
    if root.endswith("/openai"):
        root = root[: -len("/openai")]
    return f"{root}/openai/v1/"


@dataclass(frozen=True, slots=True)
class AzureOpenAIConnection:
    """How a model reaches an Azure OpenAI resource, with Microsoft Entra ID tokens.

    Attributes:
        endpoint: ``https://NAME.openai.azure.com``, or ``https://NAME.openai.azure.com/openai/v1``
            (``AZURE_OPENAI_ENDPOINT``).
        api_version: Data-plane API version (``AZURE_OPENAI_API_VERSION``); ``v1`` for the
            ``/openai/v1`` endpoint.
        token_provider: Async callable returning a bearer token; when ``None`` one is made from
            ``DefaultAzureCredential`` (with ``client_id``) and closed with the model.
        client_id: User-assigned managed identity (``AZURE_CLIENT_ID``), when no provider is given.
        timeout: Seconds per HTTP attempt.
        max_retries: Transport retries after the first attempt.
        headers: Extra HTTP headers on every request (for example a gateway's).
    """

    endpoint: str
    api_version: str
    token_provider: TokenProvider | None = None
    client_id: str | None = None
    timeout: float = 30.0
    max_retries: int = 3
    headers: Mapping[str, str] | None = None

    def client(self, deployment: str) -> tuple[AsyncOpenAI, Any]:
        """A client on ``deployment``, and the credential it created (``None`` if given a provider).

        On the ``/openai/v1`` endpoint this is a plain ``AsyncOpenAI`` client whose key is the token
        provider (the SDK sends it as the bearer token); otherwise an ``AsyncAzureOpenAI`` client on the
        deployment.
        """
        credential: Any = None
        token_provider = self.token_provider
        if token_provider is None:
            token_provider, credential = azure_token_provider(self.client_id)
        v1 = azure_v1_base_url(self.endpoint, self.api_version)
        transport = _transport(self.timeout, self.max_retries, self.headers)
        client: AsyncOpenAI
        if v1 is not None:
            client = AsyncOpenAI(base_url=v1, api_key=token_provider, **transport)
        else:
            client = AsyncAzureOpenAI(
                azure_endpoint=self.endpoint,
                azure_deployment=deployment,
                api_version=self.api_version,
                azure_ad_token_provider=token_provider,
                **transport,
            )
        return client, credential


@dataclass(frozen=True, slots=True)
class CompatibleConnection:
    """How a model reaches OpenAI or an OpenAI-compatible server.

    Attributes:
        base_url: The API root, for example ``https://api.openai.com/v1`` or ``http://127.0.0.1:11434/v1``.
        api_key: Bearer key if the endpoint wants one; endpoints without authentication get a placeholder.
        timeout: Seconds per HTTP attempt.
        max_retries: Transport retries after the first attempt.
        headers: Extra HTTP headers on every request.
    """

    base_url: str
    api_key: str | None = None
    timeout: float = 30.0
    max_retries: int = 3
    headers: Mapping[str, str] | None = None

    def client(self) -> AsyncOpenAI:
        """An ``AsyncOpenAI`` client on :attr:`base_url`; without a key, a placeholder one (the SDK would
        otherwise read ``OPENAI_API_KEY`` itself)."""
        return AsyncOpenAI(
            base_url=self.base_url,
            api_key=self.api_key or "unused",
            **_transport(self.timeout, self.max_retries, self.headers),
        )


class _Transport(TypedDict):
    timeout: float
    max_retries: int
    default_headers: dict[str, str] | None


def _transport(timeout: float, max_retries: int, headers: Mapping[str, str] | None) -> _Transport:
    """The options every client takes: seconds per attempt, the SDK's retries, extra headers."""
    return {"timeout": timeout, "max_retries": max_retries, "default_headers": dict(headers or {}) or None}


class ClientOwner:
    """A model on an ``openai`` client that closes only what it created itself: a client passed in
    stays open.

    Args:
        client: An ``AsyncOpenAI`` or ``AsyncAzureOpenAI`` client.
        owns_client: Close ``client`` in :meth:`close` (only for clients this object created).
        credential: An async credential to close in :meth:`close` (one this object created).
    """

    def __init__(self, client: AsyncOpenAI, *, owns_client: bool, credential: Any) -> None:
        self._client = client
        self._owns_client = owns_client
        self._credential = credential

    async def close(self) -> None:
        """Close the client and credential this object created (never ones passed in)."""
        if self._owns_client:
            await self._client.close()
        if self._credential is not None:
            await self._credential.close()
