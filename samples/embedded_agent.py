"""An Agent Framework agent that remembers, on the embedded mode (no cloud needed).

Environment (all optional):

    MEMORY_SQLITE_PATH   embedded store file          (default .memory-core/sample-agent.db)
    MEMORY_EMBEDDER      e5-local | hash               (default e5-local: multilingual, offline)
    The model that answers, through Agent Framework's OpenAIChatClient (the Responses API):
    AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_MODEL (or AZURE_OPENAI_CHAT_DEPLOYMENT)
                         an Azure OpenAI deployment, with Microsoft Entra ID (DefaultAzureCredential:
                         `az login` locally, the managed identity in Azure; AZURE_CLIENT_ID picks a
                         user-assigned one)
    OPENAI_API_KEY and OPENAI_MODEL (OPENAI_BASE_URL for another OpenAI-compatible server)
                         OpenAI
    neither              an in-process offline model answers, and shows what it was given

Install and run:

    pip install 'memory-core[agent]'          # add [azure] for Azure OpenAI (azure-identity)
    python samples/embedded_agent.py

What happens: in a first session the user tells the agent a few things about themselves. Each turn
is published to the embedded durable queue (the agent does not wait for extraction) and the
provider's in-process worker ingests it in the background. In a second session (new history) the
agent is asked something related: the provider waits until the earlier turns are ingested, finds the
memories and adds them to the model input as reference data.
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

from memory_core.integrations.agent_framework import MemoryCoreContextProvider
from memory_core.integrations.recall_format import MEMORY_HEADER

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


def chat_client() -> BaseChatClient:
    """Agent Framework's ``OpenAIChatClient`` for Azure OpenAI or OpenAI, from the environment; the
    offline stand-in when neither is configured."""
    endpoint = os.environ.get("AZURE_OPENAI_ENDPOINT", "")
    deployment = os.environ.get("AZURE_OPENAI_MODEL") or os.environ.get("AZURE_OPENAI_CHAT_DEPLOYMENT", "")
    if endpoint and deployment:
        from agent_framework.openai import OpenAIChatClient
        from azure.identity import DefaultAzureCredential

        credential = DefaultAzureCredential(managed_identity_client_id=os.environ.get("AZURE_CLIENT_ID") or None)
        return OpenAIChatClient(model=deployment, azure_endpoint=endpoint, credential=credential)
    if os.environ.get("OPENAI_API_KEY"):
        from agent_framework.openai import OpenAIChatClient

        return OpenAIChatClient()  # OPENAI_MODEL, and OPENAI_BASE_URL if set
    # The stand-in has no tool calling; the framework's warning about it is noise here.
    logging.getLogger("agent_framework").setLevel(logging.ERROR)
    return OfflineChatClient()


async def main() -> None:
    # Turns go to the embedded durable queue (after_run returns at once); a worker inside the provider
    # ingests them in the background while it is open (worker=False when `memory-core serve` runs).
    memory = MemoryCoreContextProvider.local(
        sqlite_path=os.environ.get("MEMORY_SQLITE_PATH", ".memory-core/sample-agent.db"),
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


if __name__ == "__main__":
    asyncio.run(main())
