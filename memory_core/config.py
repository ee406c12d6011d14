"""Settings: one frozen object, built from the environment inside ``bootstrap`` (never at import).

Every setting has exactly one environment variable; the same names appear in
``local.settings.sample.json``, the Bicep app settings and the README's table.
:func:`Settings.environment_variables` lists them so tests can check those places agree.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any
from urllib.parse import urlsplit

from memory_core.domain.network import is_loopback
from memory_core.domain.policy import HumanMemoryPolicy
from memory_core.domain.records import DEFAULT_AGENT_ID
from memory_core.domain.validation import validate_scope_id
from memory_core.errors import ConfigurationError, ValidationError

__all__ = ["EMBEDDERS", "LLM_PROVIDERS", "OPENAI_BASE_URL", "Settings"]

#: ``MEMORY_EMBEDDER`` values.
EMBEDDERS = ("e5-local", "hash", "azure_openai", "openai", "compatible")
#: ``MEMORY_LLM_PROVIDER`` values (empty: automatic).
LLM_PROVIDERS = ("", "none", "azure", "openai", "compatible")
#: The API root of ``MEMORY_LLM_PROVIDER=openai`` when ``MEMORY_LLM_BASE_URL`` is empty.
OPENAI_BASE_URL = "https://api.openai.com/v1"
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_GUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_CLAIM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
#: (field, least value, message) of the integer settings with a lower bound, checked in this order.
_MINIMUMS = (
    ("embedder_threads", 1, "MEMORY_EMBEDDER_THREADS must be at least 1"),
    ("query_cache_size", 0, "MEMORY_QUERY_CACHE_SIZE must not be negative"),
    ("vector_index_min_scope", 0, "MEMORY_VECTOR_INDEX_MIN_SCOPE must not be negative"),
    ("heavy_operations", 1, "MEMORY_HEAVY_OPERATIONS must be at least 1"),
)


def _env(name: str, default: Any, doc: str, *, secret: bool = False) -> Any:
    """A setting read from the environment variable ``name``; a ``secret`` one is left out of ``repr``."""
    return field(default=default, repr=not secret, metadata={"env": name, "doc": doc})


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything memory-core reads from its environment."""

    store: str = _env("MEMORY_STORE", "sqlite", "Memory store: `sqlite` (embedded) or `azure_search`.")
    sqlite_path: str = _env(
        "MEMORY_SQLITE_PATH", ".memory-core/memory.db", "Embedded store file (SQLite, WAL)."
    )
    embedder: str = _env(
        "MEMORY_EMBEDDER",
        "e5-local",
        "Embedder: `e5-local` (multilingual-e5-small, offline), `hash` (tests), `azure_openai`, `openai` "
        "(OpenAI's API) or `compatible` (an OpenAI-compatible server at MEMORY_LLM_BASE_URL).",
    )
    embedder_threads: int = _env(
        "MEMORY_EMBEDDER_THREADS", 2, "Threads the local embedder may use (pins OMP_NUM_THREADS)."
    )
    query_cache_size: int = _env(
        "MEMORY_QUERY_CACHE_SIZE",
        1024,
        "Distinct query texts whose embeddings are kept in memory for repeats (0: no cache).",
    )
    vector_index_min_scope: int = _env(
        "MEMORY_VECTOR_INDEX_MIN_SCOPE",
        0,
        "Embedded store: scopes of at least this many memories get an approximate vector index (HNSW; needs the `ann` extra); 0: every scope is searched exactly.",
    )
    heavy_operations: int = _env(
        "MEMORY_HEAVY_OPERATIONS",
        2,
        "Heavy HTTP operations (export pages, purges, forgetting runs) served at once per process; one "
        "more is answered 429 with Retry-After (searches are never held back).",
    )
    sqlite_check_seconds: float = _env(
        "MEMORY_SQLITE_CHECK_SECONDS",
        5.0,
        "Embedded store and queue: how long the integrity check (`quick_check`) at open may take; a larger file is reported not checked in time (0: no check).",
    )
    half_life_days: float = _env("MEMORY_HALF_LIFE_DAYS", 45.0, "Retention half-life in days.")
    archive_threshold: float = _env(
        "MEMORY_ARCHIVE_THRESHOLD", 0.22, "At or below this retention a memory is archived."
    )
    access_boost: float = _env("MEMORY_ACCESS_BOOST", 0.04, "Retention added per recall.")
    access_boost_cap: float = _env("MEMORY_ACCESS_BOOST_CAP", 0.35, "Most retention recalls can add.")
    forget_tolerance: float = _env(
        "MEMORY_FORGET_TOLERANCE",
        0.01,
        "Forgetting rewrites a memory whose status is unchanged only when its stored retention is "
        "off by more than this.",
    )
    episodes: bool = _env(
        "MEMORY_EPISODES",
        True,
        "Keep each user message as an episodic memory (the user's own words, dated, with the speaker) "
        "beside the facts extracted from it.",
    )
    episode_importance: float = _env(
        "MEMORY_EPISODE_IMPORTANCE", 0.3, "Importance of an episode (below a fact's, so episodes fade sooner)."
    )
    azure_search_endpoint: str = _env(
        "AZURE_SEARCH_ENDPOINT", "", "Azure AI Search endpoint (`https://NAME.search.windows.net`)."
    )
    azure_search_index_name: str = _env("AZURE_SEARCH_INDEX_NAME", "memories", "Azure AI Search index.")
    azure_search_api_key: str = _env(
        "AZURE_SEARCH_API_KEY",
        "",
        "Optional admin key; leave empty to use Microsoft Entra ID (recommended).",
        secret=True,
    )
    azure_openai_endpoint: str = _env(
        "AZURE_OPENAI_ENDPOINT", "", "Azure OpenAI endpoint; empty means rule-based extraction."
    )
    azure_openai_chat_deployment: str = _env(
        "AZURE_OPENAI_CHAT_DEPLOYMENT", "", "Chat deployment used for extraction and consolidation."
    )
    azure_openai_embedding_deployment: str = _env(
        "AZURE_OPENAI_EMBEDDING_DEPLOYMENT", "", "Embedding deployment (with MEMORY_EMBEDDER=azure_openai)."
    )
    azure_openai_api_version: str = _env(
        "AZURE_OPENAI_API_VERSION",
        "v1",
        "Azure OpenAI data-plane API version: `v1` (the `/openai/v1` endpoint) or a dated version "
        "such as `2024-10-21` (the deployment endpoint).",
    )
    azure_client_id: str = _env(
        "AZURE_CLIENT_ID", "", "Client id of a user-assigned managed identity (empty: default credential)."
    )

    llm_provider: str = _env(
        "MEMORY_LLM_PROVIDER",
        "",
        "Chat model of extraction and consolidation: `azure` (Azure OpenAI, Microsoft Entra ID), `openai` "
        "(OpenAI's API, MEMORY_LLM_API_KEY), `compatible` (any OpenAI-compatible server at MEMORY_LLM_BASE_URL) "
        "or `none` (rules); empty: `azure` when AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_CHAT_DEPLOYMENT are "
        "set, else `none`.",
    )
    llm_model: str = _env(
        "MEMORY_LLM_MODEL",
        "",
        "Chat model name with MEMORY_LLM_PROVIDER=openai or compatible (Azure: AZURE_OPENAI_CHAT_DEPLOYMENT).",
    )
    llm_base_url: str = _env(
        "MEMORY_LLM_BASE_URL",
        "",
        "API root of `openai` (default `https://api.openai.com/v1`) or `compatible` (required, for example "
        "`http://127.0.0.1:11434/v1`); also the embedder's with MEMORY_EMBEDDER=openai or compatible.",
    )
    llm_api_key: str = _env(
        "MEMORY_LLM_API_KEY",
        "",
        "API key of `openai` (required; for example your `$OPENAI_API_KEY`) or `compatible` (optional: a "
        "server without authentication needs none); its own variable, so a key in your shell's "
        "OPENAI_API_KEY is never sent to another server; never sent to Azure, which uses Microsoft Entra ID.",
        secret=True,
    )
    llm_headers: str = _env(
        "MEMORY_LLM_HEADERS",
        "",
        "Extra HTTP headers for the chat and embedding endpoints, as a JSON object of strings.",
    )
    llm_timeout_seconds: float = _env(
        "MEMORY_LLM_TIMEOUT_SECONDS", 30.0, "Seconds per chat or embedding HTTP attempt (the SDK retries 3 times)."
    )
    embedding_model: str = _env(
        "MEMORY_EMBEDDING_MODEL",
        "",
        "Embedding model with MEMORY_EMBEDDER=openai or compatible (Azure: AZURE_OPENAI_EMBEDDING_DEPLOYMENT).",
    )
    embedding_dimensions: int = _env(
        "MEMORY_EMBEDDING_DIMENSIONS",
        1536,
        "Vector size of the Azure OpenAI, OpenAI or compatible embedder (asked for from Azure and OpenAI; "
        "a compatible server's model must return it).",
    )

    api_token: str = _env(
        "MEMORY_API_TOKEN",
        "",
        "Bearer token `memory-core serve` requires on every route but health (at least 16 characters); "
        "its holder administers every user's memories; empty: no token, and only a loopback address may "
        "be bound. `memory-core mcp` never uses it (MEMORY_MCP_TOKEN).",
        secret=True,
    )

    mcp_token: str = _env(
        "MEMORY_MCP_TOKEN",
        "",
        "Bearer token `memory-core mcp --transport http` requires on every request (at least 16 "
        "characters; it must differ from MEMORY_API_TOKEN, since its holder reaches one user's memories "
        "only); empty: no token, and only a loopback address may be bound.",
        secret=True,
    )

    mcp_user_id: str = _env(
        "MEMORY_MCP_USER_ID",
        "",
        "User id whose memories `memory-core mcp` serves when `--user` is not given (the model cannot "
        "choose another); empty: `--user` is required.",
    )
    mcp_agent_id: str = _env(
        "MEMORY_MCP_AGENT_ID",
        DEFAULT_AGENT_ID,
        "Agent id whose memories `memory-core mcp` serves when `--agent` is not given.",
    )

    auth_tenant_id: str = _env(
        "MEMORY_AUTH_TENANT_ID",
        "",
        "Directory (tenant) id whose Microsoft Entra ID access tokens the HTTP API accepts (a GUID). With "
        "MEMORY_AUTH_AUDIENCE it turns on token validation and role checks on every route but health; "
        "empty (both): the Function App's routes are protected by the Functions key only.",
    )
    auth_audience: str = _env(
        "MEMORY_AUTH_AUDIENCE",
        "",
        "Accepted token audiences, comma-separated: the API's application ID URI (`api://...`) and/or "
        "its client id.",
    )
    auth_user_id_claim: str = _env(
        "MEMORY_AUTH_USER_ID_CLAIM",
        "oid",
        "Claim of a signed-in user's token that is their `user_id` (never taken from the request); "
        "`oid` is stable per tenant.",
    )
    auth_agent_bindings: str = _env(
        "MEMORY_AUTH_AGENT_BINDINGS",
        "",
        "Agent identities: a JSON object from an app's client id (`azp` / `appid` claim) to the agent ids "
        'its `Memory.Agent` tokens may act for, for example {"<client id>": ["support-bot"]} '
        '(`["*"]`: every agent).',
    )
    auth_authority: str = _env(
        "MEMORY_AUTH_AUTHORITY",
        "https://login.microsoftonline.com",
        "Microsoft Entra authority: the tenant's OpenID configuration and keys are read from "
        "`<authority>/<tenant>/v2.0/.well-known/openid-configuration` (sovereign clouds: for example "
        "`https://login.microsoftonline.us`).",
    )

    turns_queue: str = _env("MEMORY_TURNS_QUEUE", "memory-turns", "Service Bus queue that carries turns.")
    servicebus_namespace: str = _env(
        "ServiceBusConnection__fullyQualifiedNamespace",
        "",
        "Service Bus namespace host (`NAME.servicebus.windows.net`); identity-based connection.",
    )
    history_table_endpoint: str = _env(
        "MEMORY_HISTORY_TABLE_ENDPOINT",
        "",
        "Table endpoint of the decision history and turn journal with MEMORY_STORE=azure_search "
        "(`https://ACCOUNT.table.core.windows.net`, Microsoft Entra ID; `UseDevelopmentStorage=true` for Azurite).",
    )
    forget_schedule: str = _env(
        "MEMORY_FORGET_SCHEDULE", "0 30 3 * * *", "NCRONTAB schedule of the nightly forgetting job (UTC)."
    )
    applicationinsights_connection_string: str = _env(
        "APPLICATIONINSIGHTS_CONNECTION_STRING",
        "",
        "Application Insights connection string (traces and metrics, Microsoft Entra ID ingestion); empty: not exported.",
    )
    telemetry_console: bool = _env(
        "MEMORY_TELEMETRY_CONSOLE",
        False,
        "Print traces and metrics to the console (local runs) when no Application Insights connection string is set.",
    )
    telemetry_content: bool = _env(
        "MEMORY_TELEMETRY_CONTENT",
        False,
        "Put memory text and queries in telemetry; off: only ids, counts, modes and timings.",
    )

    def __post_init__(self) -> None:
        self._check_backends()
        for name, least, message in _MINIMUMS:
            if getattr(self, name) < least:
                raise ConfigurationError(message)
        self._check_llm()
        self._check_memory_policy()
        self._check_auth()

    def _check_backends(self) -> None:
        """The store and embedder named, and what each needs."""
        if self.store not in {"sqlite", "azure_search"}:
            raise ConfigurationError(f"MEMORY_STORE must be 'sqlite' or 'azure_search', not {self.store!r}")
        if self.embedder not in EMBEDDERS:
            raise ConfigurationError(
                f"MEMORY_EMBEDDER must be one of {', '.join(map(repr, EMBEDDERS))}, not {self.embedder!r}"
            )
        if self.store == "azure_search" and not self.azure_search_endpoint:
            raise ConfigurationError("MEMORY_STORE=azure_search needs AZURE_SEARCH_ENDPOINT")
        for name, token in (("MEMORY_API_TOKEN", self.api_token), ("MEMORY_MCP_TOKEN", self.mcp_token)):
            if token and len(token) < 16:
                raise ConfigurationError(
                    f"{name} must be at least 16 characters (for example the output of "
                    "python -c 'import secrets; print(secrets.token_urlsafe(32))')"
                )
        if self.mcp_token and self.mcp_token == self.api_token:
            raise ConfigurationError(
                "MEMORY_MCP_TOKEN must differ from MEMORY_API_TOKEN: the MCP server's token reaches one "
                "user's memories, memory-core serve's administers everyone's"
            )
        if self.embedder == "azure_openai" and not (
            self.azure_openai_endpoint and self.azure_openai_embedding_deployment
        ):
            raise ConfigurationError(
                "MEMORY_EMBEDDER=azure_openai needs AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_EMBEDDING_DEPLOYMENT"
            )

    def _check_memory_policy(self) -> None:
        """Retention, forgetting and episode settings."""
        try:
            self.policy()
        except ValueError as exc:  # the policy names the parameter
            raise ConfigurationError(f"invalid memory policy setting: {exc}") from exc
        if not (math.isfinite(self.forget_tolerance) and 0 <= self.forget_tolerance < 1):
            raise ConfigurationError("MEMORY_FORGET_TOLERANCE must be in [0, 1)")
        if not (math.isfinite(self.episode_importance) and 0 <= self.episode_importance <= 1):
            raise ConfigurationError("MEMORY_EPISODE_IMPORTANCE must be in [0, 1]")

    def _check_auth(self) -> None:
        """Say exactly what is missing or wrong in the Microsoft Entra ID settings."""
        if bool(self.auth_tenant_id) != bool(self.auth_audience):
            missing = "MEMORY_AUTH_AUDIENCE" if self.auth_tenant_id else "MEMORY_AUTH_TENANT_ID"
            raise ConfigurationError(
                f"MEMORY_AUTH_TENANT_ID and MEMORY_AUTH_AUDIENCE go together: {missing} is empty (set both "
                "to require Microsoft Entra ID tokens on the HTTP API, or neither)"
            )
        if self.auth_tenant_id and not _GUID.fullmatch(self.auth_tenant_id):
            raise ConfigurationError(
                "MEMORY_AUTH_TENANT_ID must be the directory (tenant) id, a GUID such as "
                f"00000000-0000-0000-0000-000000000000, not {self.auth_tenant_id!r} (a domain name is not "
                "the tid claim)"
            )
        for audience in self.auth_audiences():
            if any(c.isspace() for c in audience):
                raise ConfigurationError(f"MEMORY_AUTH_AUDIENCE has an audience with spaces: {audience!r}")
        if self.auth_audience and not self.auth_audiences():
            raise ConfigurationError("MEMORY_AUTH_AUDIENCE names no audience")
        if not _CLAIM_NAME.fullmatch(self.auth_user_id_claim):
            raise ConfigurationError(
                "MEMORY_AUTH_USER_ID_CLAIM must be a claim name such as oid or sub, "
                f"not {self.auth_user_id_claim!r}"
            )
        if not _is_authority(self.auth_authority):
            raise ConfigurationError(
                "MEMORY_AUTH_AUTHORITY must be an https URL such as https://login.microsoftonline.com "
                f"(http only on a loopback address), not {self.auth_authority!r}"
            )
        self.agent_binding_map()

    @property
    def auth_enabled(self) -> bool:
        """Whether the HTTP API validates Microsoft Entra ID tokens (tenant and audience are set)."""
        return bool(self.auth_tenant_id and self.auth_audience)

    def auth_audiences(self) -> tuple[str, ...]:
        """``MEMORY_AUTH_AUDIENCE`` as a tuple (comma-separated, blanks dropped)."""
        return tuple(a.strip() for a in self.auth_audience.split(",") if a.strip())

    def agent_binding_map(self) -> dict[str, tuple[str, ...]]:
        """``MEMORY_AUTH_AGENT_BINDINGS`` as client id -> agent ids (validated)."""
        if not self.auth_agent_bindings:
            return {}
        example = '{"<client id>": ["support-bot", "travel-bot"]} or {"<client id>": ["*"]}'
        try:
            value = json.loads(self.auth_agent_bindings)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(
                f"MEMORY_AUTH_AGENT_BINDINGS is not JSON: {exc.msg} at position {exc.pos}; expected {example}"
            ) from None
        if not isinstance(value, dict):
            raise ConfigurationError(f"MEMORY_AUTH_AGENT_BINDINGS must be a JSON object such as {example}")
        return {client: _bound_agents(client, agents) for client, agents in value.items()}

    def _check_llm(self) -> None:
        """Say exactly what is missing or wrong in the chat model and embedder settings."""
        if self.llm_provider not in LLM_PROVIDERS:
            raise ConfigurationError(
                f"MEMORY_LLM_PROVIDER must be one of {', '.join(map(repr, LLM_PROVIDERS))} (empty: automatic), "
                f"not {self.llm_provider!r}"
            )
        provider = self.chat_provider
        if provider == "azure" and not (self.azure_openai_endpoint and self.azure_openai_chat_deployment):
            raise ConfigurationError(
                "MEMORY_LLM_PROVIDER=azure needs AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_CHAT_DEPLOYMENT"
            )
        self._check_api_model(provider, "MEMORY_LLM_PROVIDER", self.llm_model, "MEMORY_LLM_MODEL")
        self._check_api_model(self.embedder, "MEMORY_EMBEDDER", self.embedding_model, "MEMORY_EMBEDDING_MODEL")
        if self.llm_base_url:
            parts = urlsplit(self.llm_base_url)
            if parts.scheme not in {"http", "https"} or not parts.hostname:
                raise ConfigurationError(
                    f"MEMORY_LLM_BASE_URL must be an http(s) URL such as http://127.0.0.1:11434/v1, "
                    f"not {self.llm_base_url!r}"
                )
        self.llm_header_map()
        if not self.llm_timeout_seconds > 0:
            raise ConfigurationError("MEMORY_LLM_TIMEOUT_SECONDS must be positive")
        if not self.sqlite_check_seconds >= 0:
            raise ConfigurationError("MEMORY_SQLITE_CHECK_SECONDS must not be negative")
        if self.embedding_dimensions < 1:
            raise ConfigurationError("MEMORY_EMBEDDING_DIMENSIONS must be at least 1")

    def _check_api_model(self, choice: str, role: str, model: str, model_var: str) -> None:
        """What ``role`` (a chat model or embedder setting) needs when ``choice`` is an OpenAI API."""
        if choice not in {"openai", "compatible"}:
            return
        if not model:
            raise ConfigurationError(f"{role}={choice} needs {model_var} (the model's name)")
        if choice == "openai" and not self.llm_api_key:
            raise ConfigurationError(f"{role}=openai needs MEMORY_LLM_API_KEY")
        if choice == "compatible" and not self.llm_base_url:
            raise ConfigurationError(
                f"{role}=compatible needs MEMORY_LLM_BASE_URL (for example http://127.0.0.1:11434/v1)"
            )

    @property
    def chat_provider(self) -> str:
        """The chat model's provider: ``MEMORY_LLM_PROVIDER``, or when empty ``azure`` if Azure OpenAI
        is configured and ``none`` otherwise."""
        if self.llm_provider:
            return self.llm_provider
        return "azure" if self.azure_openai_endpoint and self.azure_openai_chat_deployment else "none"

    @property
    def llm_api_root(self) -> str:
        """The API root of ``openai`` / ``compatible`` (``MEMORY_LLM_BASE_URL``; OpenAI's by default)."""
        return self.llm_base_url or OPENAI_BASE_URL

    def llm_header_map(self) -> dict[str, str]:
        """``MEMORY_LLM_HEADERS`` as a dict (validated)."""
        if not self.llm_headers:
            return {}
        try:
            value = json.loads(self.llm_headers)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(f"MEMORY_LLM_HEADERS is not JSON: {exc.msg} at position {exc.pos}") from None
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and k and isinstance(v, str) for k, v in value.items()
        ):
            raise ConfigurationError(
                'MEMORY_LLM_HEADERS must be a JSON object of header names to strings, e.g. {"X-Team": "memory"}'
            )
        bad = [k for k, v in value.items() if not _HEADER_NAME.fullmatch(k) or "\n" in v or "\r" in v]
        if bad:
            raise ConfigurationError(f"MEMORY_LLM_HEADERS has an invalid header: {bad[0]!r}")
        return dict(value)

    @classmethod
    def from_env(cls, environ: Mapping[str, str], **overrides: Any) -> Settings:
        """Build settings from ``environ`` (missing or empty variables keep their defaults)."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            name = f.metadata["env"]
            raw = environ.get(name)
            if raw is None or raw.strip() == "":
                continue
            values[f.name] = _convert(name, raw.strip(), type(f.default))
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    @classmethod
    def environment_variables(cls) -> dict[str, str]:
        """Every environment variable the settings read, with its description."""
        return {f.metadata["env"]: f.metadata["doc"] for f in fields(cls)}

    def policy(self) -> HumanMemoryPolicy:
        return HumanMemoryPolicy(
            half_life_days=self.half_life_days,
            archive_threshold=self.archive_threshold,
            access_boost=self.access_boost,
            access_boost_cap=self.access_boost_cap,
        )


def _is_authority(url: str) -> bool:
    """Whether ``url`` can be a Microsoft Entra authority: https, or http on a loopback address."""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname or parts.query or parts.fragment:
        return False
    return parts.scheme == "https" or is_loopback(parts.hostname)


def _bound_agents(client: str, agents: Any) -> tuple[str, ...]:
    """The agent ids one client id of ``MEMORY_AUTH_AGENT_BINDINGS`` may act for (validated)."""
    if not client.strip() or client != client.strip():
        raise ConfigurationError(f"MEMORY_AUTH_AGENT_BINDINGS has an empty or padded client id: {client!r}")
    if not isinstance(agents, list) or not agents or not all(isinstance(a, str) for a in agents):
        raise ConfigurationError(
            f'MEMORY_AUTH_AGENT_BINDINGS[{client!r}] must be a non-empty list of agent ids (or ["*"])'
        )
    for agent in agents:
        if agent != "*":
            try:
                validate_scope_id(agent, "agent_id")
            except ValidationError as exc:
                raise ConfigurationError(
                    f"MEMORY_AUTH_AGENT_BINDINGS[{client!r}] has an invalid agent id {agent!r}: {exc.message}"
                ) from None
    return tuple(agents)


def _convert(name: str, raw: str, kind: type) -> Any:
    try:
        if kind is int:
            return int(raw)
        if kind is float:
            value = float(raw)
            if not math.isfinite(value):
                raise ValueError(raw)
            return value
        if kind is bool:
            if raw.lower() in {"1", "true", "yes", "on"}:
                return True
            if raw.lower() in {"0", "false", "no", "off"}:
                return False
            raise ValueError(raw)
    except ValueError:
        raise ConfigurationError(f"{name}={raw!r} is not a valid {kind.__name__}") from None
    return raw
