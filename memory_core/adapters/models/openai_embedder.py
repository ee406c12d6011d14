"""The embedder on the ``openai`` SDK: :class:`OpenAIEmbedder` (formerly ``AzureOpenAIEmbedder``, still
importable) implements :class:`~memory_core.ports.Embedder` on an Azure OpenAI deployment, OpenAI or an
OpenAI-compatible server (float32 unit vectors)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import openai
from openai import AsyncOpenAI

from memory_core.adapters.models.openai_clients import (
    AzureOpenAIConnection,
    ClientOwner,
    CompatibleConnection,
)
from memory_core.adapters.models.openai_errors import translate_error
from memory_core.errors import ConfigurationError, PermanentError

__all__ = ["AzureOpenAIEmbedder", "OpenAIEmbedder"]


class OpenAIEmbedder(ClientOwner):
    """:class:`~memory_core.ports.Embedder` on an Azure OpenAI, OpenAI or OpenAI-compatible embeddings model.

    Queries and passages are embedded the same way. Vectors are re-normalized to unit length.

    Args:
        client: An ``AsyncOpenAI`` or ``AsyncAzureOpenAI`` client.
        model: Model name, or the embeddings deployment on Azure.
        dimensions: Vector size. Sent as ``dimensions`` when ``send_dimensions`` (text-embedding-3
            models can shorten vectors); otherwise only checked against what the model returns.
        owns_client: Close ``client`` in :meth:`close`.
        credential: An async credential to close in :meth:`close`.
        batch_size: Texts per request.
        send_dimensions: Ask the model for ``dimensions`` (many compatible servers reject the parameter).
        provider: The first part of :attr:`name` (``azure-openai``, ``openai``, ``compatible``).
    """

    def __init__(
        self,
        client: AsyncOpenAI,
        *,
        model: str,
        dimensions: int,
        owns_client: bool = False,
        credential: Any = None,
        batch_size: int = 64,
        send_dimensions: bool = True,
        provider: str = "azure-openai",
    ) -> None:
        if dimensions < 1:
            raise ConfigurationError("embedding dimensions must be positive")
        if not model:
            raise ConfigurationError("an embedding model or deployment name is required")
        super().__init__(client, owns_client=owns_client, credential=credential)
        self._model = model
        self._dimensions = dimensions
        self._batch_size = max(1, batch_size)
        self._send_dimensions = send_dimensions
        self._provider = provider

    @classmethod
    def azure(
        cls, connection: AzureOpenAIConnection, *, deployment: str, dimensions: int = 1536
    ) -> OpenAIEmbedder:
        """An embedder on an Azure OpenAI embeddings deployment with Microsoft Entra ID tokens.

        Args:
            connection: The resource and how to reach it.
            deployment: The embeddings deployment.
            dimensions: The model's vector size.
        """
        if not connection.endpoint or not deployment:
            raise ConfigurationError("Azure OpenAI embeddings need an endpoint and a deployment")
        client, credential = connection.client(deployment)
        return cls(client, model=deployment, dimensions=dimensions, owns_client=True, credential=credential)

    @classmethod
    def openai_compatible(
        cls,
        connection: CompatibleConnection,
        *,
        model: str,
        dimensions: int,
        send_dimensions: bool = False,
        provider: str = "compatible",
    ) -> OpenAIEmbedder:
        """An embedder on OpenAI or an OpenAI-compatible endpoint (``.../v1/embeddings``).

        Args:
            connection: The endpoint and how to reach it.
            model: Model name.
            dimensions: The model's vector size (or the size to ask for, with ``send_dimensions``).
            send_dimensions: Send ``dimensions`` (OpenAI's text-embedding-3 models take it).
            provider: The first part of :attr:`name`.
        """
        if not connection.base_url:
            raise ConfigurationError("an OpenAI-compatible embedder needs a base URL")
        return cls(
            connection.client(),
            model=model,
            dimensions=dimensions,
            owns_client=True,
            send_dimensions=send_dimensions,
            provider=provider,
        )

    @property
    def name(self) -> str:
        return f"{self._provider}-{self._model}-{self._dimensions}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    async def embed_query(self, text: str) -> np.ndarray:
        """One unit vector for a query."""
        vectors = await self.embed_passages([text])
        vector: np.ndarray = vectors[0]
        return vector

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors for ``texts`` (``(len(texts), dimensions)``, float32)."""
        if not texts:
            return np.zeros((0, self._dimensions), dtype=np.float32)
        rows: list[np.ndarray] = []
        for start in range(0, len(texts), self._batch_size):
            batch = [t if t.strip() else " " for t in texts[start : start + self._batch_size]]
            rows.extend(self._unit_vector(embedding) for embedding in await self._embed(batch))
        matrix: np.ndarray = np.stack(rows).astype(np.float32, copy=False)
        return matrix

    async def _embed(self, batch: list[str]) -> list[list[float]]:
        """One request's embeddings, in the order of ``batch``."""
        try:
            if self._send_dimensions:
                response = await self._client.embeddings.create(
                    model=self._model, input=batch, dimensions=self._dimensions
                )
            else:
                response = await self._client.embeddings.create(model=self._model, input=batch)
        except openai.OpenAIError as exc:
            raise translate_error(exc, "embedding") from exc
        items = sorted(response.data, key=lambda item: item.index)
        if len(items) != len(batch):
            raise PermanentError(f"embedding returned {len(items)} vectors for {len(batch)} texts")
        return [item.embedding for item in items]

    def _unit_vector(self, embedding: list[float]) -> np.ndarray:
        vector = np.asarray(embedding, dtype=np.float32)
        if vector.shape != (self._dimensions,):
            raise PermanentError(
                f"embedding model {self._model!r} returned {vector.shape[0]} dimensions; "
                f"expected {self._dimensions} (MEMORY_EMBEDDING_DIMENSIONS)"
            )
        norm = float(np.linalg.norm(vector))
        result: np.ndarray = vector / norm if norm > 0 else vector
        return result


#: The former name of :class:`OpenAIEmbedder` (it always took any OpenAI-compatible client).
AzureOpenAIEmbedder = OpenAIEmbedder
