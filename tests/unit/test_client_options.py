"""The names the provider passes on to the clients are the clients' own keyword arguments."""

from __future__ import annotations

import inspect

from memory_core.client.local import OPEN_OPTIONS, LocalMemoryClient
from memory_core.client.remote import CLIENT_OPTIONS, RemoteMemoryClient


def _keywords(function: object) -> set[str]:
    parameters = inspect.signature(function).parameters.values()  # type: ignore[arg-type]
    return {p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY}


def test_open_options_are_every_keyword_of_open() -> None:
    assert set(OPEN_OPTIONS) == _keywords(LocalMemoryClient.open)


def test_client_options_are_every_keyword_of_the_remote_client_but_its_timeout() -> None:
    assert set(CLIENT_OPTIONS) == _keywords(RemoteMemoryClient.__init__) - {"timeout"}
