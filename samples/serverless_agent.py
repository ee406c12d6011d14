"""An Agent Framework agent that remembers, on the serverless deployment (`azd up`).

Environment:

    MEMORY_API_URL       the Function App URL, https://APP.azurewebsites.net (required;
                         http://127.0.0.1:7071 for `memory-core serve`)
    MEMORY_API_SCOPE     the API's scope (azd output MEMORY_API_SCOPE, api://.../.default): the agent
                         sends a Microsoft Entra ID token of its identity (DefaultAzureCredential:
                         `az login` locally, the managed identity in Azure), which needs the
                         Memory.Agent app role and a binding to this agent id (docs/security.md)
    MEMORY_FUNCTION_KEY  a function key of the app, for a deployment without the app registration
                         (`az functionapp keys list`); empty locally
    MEMORY_USER_ID       whose memories to use (default sample-user)
    ServiceBusConnection__fullyQualifiedNamespace
                         NAME.servicebus.windows.net: publish turns straight to Service Bus
                         (Microsoft Entra ID; your identity needs "Azure Service Bus Data Sender"
                         on the queue). Empty: turns are posted to POST /api/turns instead.
    MEMORY_TURNS_QUEUE   the turns queue (default memory-turns)
    AZURE_CLIENT_ID      user-assigned managed identity to use, if any
    AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_MODEL, or OPENAI_API_KEY and OPENAI_MODEL
                         the model that answers, through Agent Framework's OpenAIChatClient (as in
                         embedded_agent.py; an offline stand-in otherwise)

Install and run:

    pip install 'memory-core[agent,azure]'
    python samples/serverless_agent.py

Search goes over HTTP (`POST /api/memories/search`, with the identity's bearer token or the function
key in `x-functions-key`); turns go to
Service Bus (or `POST /api/turns`) and are extracted and consolidated by the queue-triggered
function, so the second session waits until the new memories are searchable. A turn that cannot be
published in time waits in `.memory-core/serverless-outbox.db` and is delivered on a later run.
"""

from __future__ import annotations

import asyncio
import os
import time

from agent_framework import Agent, AgentSession, InMemoryHistoryProvider
from embedded_agent import chat_client  # the sample beside this one

from memory_core.bootstrap import build_publisher, load_settings
from memory_core.integrations.agent_framework import MemoryCoreContextProvider

AGENT_ID = "concierge"


def publisher() -> object | None:
    settings = load_settings()
    if not settings.servicebus_namespace:
        return None
    return build_publisher(settings)


async def main() -> None:
    base_url = os.environ.get("MEMORY_API_URL", "")
    if not base_url:
        raise SystemExit("set MEMORY_API_URL to the Function App URL (or http://127.0.0.1:7071)")
    user_id = os.environ.get("MEMORY_USER_ID", "sample-user")
    scope = os.environ.get("MEMORY_API_SCOPE") or None
    # With Entra ID the turns go through POST /api/turns, where the agent's bindings are checked; the
    # queue itself checks nothing, so only the app (not each agent) should hold Data Sender on it.
    turns = None if scope else publisher()  # ours to close: the provider closes only its HTTP client
    credential = None
    if scope:
        from azure.identity.aio import DefaultAzureCredential

        credential = DefaultAzureCredential(managed_identity_client_id=os.environ.get("AZURE_CLIENT_ID") or None)
    memory = MemoryCoreContextProvider.remote(
        base_url=base_url,
        credential=credential,  # ours to close too
        api_scope=scope,
        function_key=None if scope else os.environ.get("MEMORY_FUNCTION_KEY") or None,
        publisher=turns,  # type: ignore[arg-type]
        user_id=user_id,
        agent_id=AGENT_ID,
        search_timeout=3.0,  # a warm search; the first after idle may take first_search_timeout (10 s)
        publish_timeout=3.0,
        outbox_path=".memory-core/serverless-outbox.db",
    )
    client = chat_client()
    try:
        async with memory:
            agent = Agent(
                client=client,
                instructions="You are a helpful concierge. Be brief.",
                context_providers=[InMemoryHistoryProvider(), memory],
            )
            statement = "I'm vegetarian and I love green tea."
            print(f"[session 1] user: {statement}")
            print(f"[session 1] agent: {(await agent.run(statement, session=AgentSession())).text}")

            print("\nwaiting for the pipeline to extract and index the memory ...")
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                if (await memory.search_memories("vegetarian green tea")).hits:
                    break
                await asyncio.sleep(3)

            question = "Can you suggest something for dinner and a drink?"
            print(f"\n[session 2] user: {question}")
            print(f"[session 2] agent: {(await agent.run(question, session=AgentSession())).text}")
            for hit in (await memory.search_memories("dinner and drinks")).hits:
                print(f"  {hit.score:.4f}  [{hit.record.category}] {hit.record.memory}")
    finally:
        if turns is not None:
            await turns.close()  # type: ignore[attr-defined]
        if credential is not None:
            await credential.close()


if __name__ == "__main__":
    asyncio.run(main())
