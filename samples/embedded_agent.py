"""An Agent Framework agent that remembers, on the embedded mode (no cloud needed).

Environment (all optional):

    MEMORY_SQLITE_PATH   embedded store file          (default .memory-core/sample-agent.db)
    MEMORY_EMBEDDER      e5-local | hash               (default e5-local: multilingual, offline)
    AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_CHAT_DEPLOYMENT
                         answer with an Azure OpenAI deployment (Microsoft Entra ID via
                         DefaultAzureCredential, `az login` locally); without them an in-process
                         offline model answers, and shows what it was given
    AZURE_OPENAI_API_VERSION                           (default v1: the /openai/v1 endpoint)

Install and run:

    pip install 'memory-core[agent]'          # add [azure] for the Azure OpenAI model
    python samples/embedded_agent.py

What happens: in a first session the user tells the agent a few things about themselves. The turn is
published to the embedded durable queue (the agent does not wait for extraction) and the queue is
drained here, as `memory-core serve` would do in the background. In a second session (new history)
the agent is asked something related: the provider finds the memories and adds them to the model
input as reference data.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from typing import Any

from agent_framework import (
    Agent,
    AgentSession,
    BaseChatClient,
    ChatResponse,
    InMemoryHistoryProvider,
    Message,
)

from memory_core.integrations.agent_framework import MEMORY_HEADER, MemoryContextProvider

USER_ID = "sample-user"
AGENT_ID = "concierge"


class OfflineChatClient(BaseChatClient):
    """A stand-in model that runs in-process: it answers with what memory it was given."""

    async def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Any, **kwargs: Any
    ) -> ChatResponse:
        memories = [m.text for m in messages if MEMORY_HEADER in m.text]
        if memories:
            lines = memories[-1].split("\n")[3:-1]  # the entries: after the heading, before the end marker
            answer = "(offline model) From what I remember about you:\n  " + "\n  ".join(lines)
        else:
            answer = "(offline model) Thanks, I'll keep that in mind."
        return ChatResponse(messages=[Message(role="assistant", contents=[answer])])


class AzureOpenAIChat(BaseChatClient):
    """Chat completions on an Azure OpenAI deployment, with Microsoft Entra ID tokens."""

    def __init__(self, *, endpoint: str, deployment: str, api_version: str) -> None:
        super().__init__()
        from memory_core.adapters.openai_models import azure_openai_client

        self._client, self._credential = azure_openai_client(
            endpoint=endpoint,
            deployment=deployment,
            api_version=api_version,
            client_id=os.environ.get("AZURE_CLIENT_ID"),
        )
        self._deployment = deployment

    async def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Any, **kwargs: Any
    ) -> ChatResponse:
        wire: list[dict[str, str]] = []
        if options.get("instructions"):
            wire.append({"role": "system", "content": str(options["instructions"])})
        wire += [{"role": str(m.role), "content": m.text} for m in messages if m.text]
        completion = await self._client.chat.completions.create(model=self._deployment, messages=wire)  # type: ignore[arg-type]
        text = completion.choices[0].message.content or ""
        return ChatResponse(messages=[Message(role="assistant", contents=[text])])

    async def close(self) -> None:
        await self._client.close()
        await self._credential.close()


def chat_client() -> BaseChatClient:
    endpoint = os.environ.get("AZURE_OPENAI_ENDPOINT", "")
    deployment = os.environ.get("AZURE_OPENAI_CHAT_DEPLOYMENT", "")
    if endpoint and deployment:
        return AzureOpenAIChat(
            endpoint=endpoint,
            deployment=deployment,
            api_version=os.environ.get("AZURE_OPENAI_API_VERSION", "v1"),
        )
    # The stand-in has no tool calling; the framework's warning about it is noise here.
    logging.getLogger("agent_framework").setLevel(logging.ERROR)
    return OfflineChatClient()


async def main() -> None:
    memory = MemoryContextProvider.local(
        sqlite_path=os.environ.get("MEMORY_SQLITE_PATH", ".memory-core/sample-agent.db"),
        queue=True,  # turns go to the embedded durable queue; after_run returns at once
        user_id=USER_ID,
        agent_id=AGENT_ID,
        outbox_path=".memory-core/sample-outbox.db",
    )
    client = chat_client()
    async with memory:
        agent = Agent(
            client=client,
            name="concierge",
            instructions="You are a helpful concierge. Be brief.",
            context_providers=[InMemoryHistoryProvider(), memory],
        )

        first = AgentSession()
        for text in ["I'm vegetarian and I love green tea.", "I live in Kyoto and I have two cats."]:
            print(f"\n[session 1] user: {text}")
            print(f"[session 1] agent: {(await agent.run(text, session=first)).text}")

        # `memory-core serve` drains the queue in the background; a script can do it in-process.
        handled = await memory.client.drain()  # type: ignore[attr-defined]
        print(f"\n(ingested {handled} queued message(s) into long-term memory)")

        second = AgentSession()  # a new conversation: no shared history
        question = "Can you suggest a place for dinner and something to drink?"
        print(f"\n[session 2] user: {question}")
        print(f"[session 2] agent: {(await agent.run(question, session=second)).text}")

        print("\nDirect search, with scores:")
        for hit in (await memory.search_memories("dinner and drinks")).hits:
            record = hit.record
            print(
                f"  {hit.score:.4f}  [{record.category}; importance={record.importance:.2f}] {record.memory}"
            )
    if isinstance(client, AzureOpenAIChat):
        await client.close()


if __name__ == "__main__":
    asyncio.run(main())
