"""In-process Agent Framework pieces for benchmarks and offline examples.

An :class:`InstantChatClient` answers at once without a model, so what is measured around it is the
framework and the context providers, never a network call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_framework import Agent, AgentSession, BaseChatClient, ChatResponse, ContextProvider, Message

__all__ = ["InstantChatClient", "new_agent", "new_session"]


class InstantChatClient(BaseChatClient):
    """A chat client that answers every request at once with a fixed text.

    Args:
        answer: The assistant's reply.
    """

    def __init__(self, answer: str = "Noted.") -> None:
        super().__init__()
        self.answer = answer

    async def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Any, **kwargs: Any
    ) -> ChatResponse:
        return ChatResponse(messages=[Message(role="assistant", contents=[self.answer])])


def new_agent(
    *,
    client: BaseChatClient | None = None,
    context_providers: Sequence[ContextProvider] = (),
    instructions: str | None = None,
) -> Agent:
    """An ``Agent`` on ``client`` (an :class:`InstantChatClient` by default) with the given providers."""
    return Agent(
        client=client or InstantChatClient(),
        instructions=instructions,
        context_providers=list(context_providers),
    )


def new_session() -> AgentSession:
    """A fresh agent session (its own history and state)."""
    return AgentSession()
