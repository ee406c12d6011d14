"""What a request acts on: the scope authorisation checks and the parsed input, read as its route says."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memory_core.contract.routes import Target
from memory_core.contract.views import SearchRequest, UpdateMemoryRequest
from memory_core.domain.chat import read_turn
from memory_core.domain.messages import Turn
from memory_core.domain.records import Scope
from memory_core.domain.validation import (
    parse_model,
    utcnow,
    validate_entity_id,
    validate_memory_id,
    validate_scope_id,
)
from memory_core.entrypoints.http.kit import ApiRequest, Query, json_body
from memory_core.errors import ValidationError

__all__ = ["READERS", "AddInput", "Subject", "TargetReader"]


@dataclass(frozen=True, slots=True)
class AddInput:
    """The body of ``POST /api/memories``: the turn, and whether to extract from it."""

    turn: Turn
    infer: bool


@dataclass(frozen=True, slots=True)
class Subject:
    """What a request acts on: the scope authorisation checks, and the parsed input its handler uses.

    Attributes:
        user_id: The user whose memories the request touches (``None``: no single user).
        agent_id: The agent whose memories it touches (``None``: every agent of the user, or none).
        memory_id: The memory of ``/memories/{memory_id}``.
        entity_id: The entity of ``/entities/{entity_id}``.
        body: The validated request body (``SearchRequest``, ``Turn``), if the route has one.
    """

    user_id: str | None = None
    agent_id: str | None = None
    memory_id: str | None = None
    body: Any = None
    entity_id: str | None = None

    @property
    def scope(self) -> Scope:
        return Scope.of(self.user_id, self.agent_id)


#: Reads a request's subject from the request and its path parameters.
TargetReader = Callable[[ApiRequest, dict[str, str]], Subject]


def _nothing(request: ApiRequest, params: dict[str, str]) -> Subject:
    return Subject()


def _search_body(request: ApiRequest, params: dict[str, str]) -> Subject:
    body = parse_model(SearchRequest, json_body(request))
    return Subject(body.user_id, body.agent_id, body=body)


def _query_scope(request: ApiRequest, params: dict[str, str]) -> Subject:
    scope = Query(request.query).scope()
    return Subject(scope.user_id, scope.agent_id)


def _memory(request: ApiRequest, params: dict[str, str]) -> Subject:
    memory_id = validate_memory_id(params["memory_id"], "memory_id")
    scope = Query(request.query).scope()
    return Subject(scope.user_id, scope.agent_id, memory_id)


def _entity(request: ApiRequest, params: dict[str, str]) -> Subject:
    entity_id = validate_entity_id(params["entity_id"], "entity_id")
    scope = Query(request.query).scope()
    return Subject(scope.user_id, scope.agent_id, entity_id=entity_id)


def _path_user(request: ApiRequest, params: dict[str, str]) -> Subject:
    """The user of the path alone (every agent of the user): no query parameter widens or narrows it."""
    return Subject(validate_scope_id(params["user_id"], "user_id"))


def _user(request: ApiRequest, params: dict[str, str]) -> Subject:
    user_id = validate_scope_id(params["user_id"], "user_id")
    return Subject(user_id, Query(request.query).scope_id("agent_id", required=False))


def _turn_body(request: ApiRequest, params: dict[str, str]) -> Subject:
    turn = read_turn(json_body(request), utcnow())
    return Subject(turn.user_id, turn.agent_id, body=turn)


def _add_body(request: ApiRequest, params: dict[str, str]) -> Subject:
    body = json_body(request)
    infer = body.pop("infer", True)
    if not isinstance(infer, bool):
        raise ValidationError("infer", "must be true or false")
    turn = read_turn(body, utcnow())
    return Subject(turn.user_id, turn.agent_id, body=AddInput(turn, infer))


def _memory_body(request: ApiRequest, params: dict[str, str]) -> Subject:
    subject = _memory(request, params)
    body = parse_model(UpdateMemoryRequest, json_body(request))
    return Subject(subject.user_id, subject.agent_id, subject.memory_id, body)


#: The reader of each kind of target a route names.
READERS: dict[Target, TargetReader] = {
    Target.NONE: _nothing,
    Target.SEARCH_BODY: _search_body,
    Target.QUERY_SCOPE: _query_scope,
    Target.MEMORY: _memory,
    Target.PATH_USER: _path_user,
    Target.USER: _user,
    Target.TURN_BODY: _turn_body,
    Target.ADD_BODY: _add_body,
    Target.MEMORY_BODY: _memory_body,
    Target.ENTITY: _entity,
}
