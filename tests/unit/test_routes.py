"""The route table is the one description of the HTTP contract: the OpenAPI document generated from it
equals the committed one, every route has its handler, target reader, parameters and models, and the
paths clients build come from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_core.contract.openapi import MODELS, build_openapi
from memory_core.contract.parameters import PATH, QUERY
from memory_core.contract.routes import API_PREFIX, INSPECTOR, ROUTES, Target, api_path, http_functions, route
from memory_core.entrypoints.http.handlers import HANDLERS
from memory_core.entrypoints.http.targets import READERS
from memory_core.version import __version__

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "openapi.json"


def test_the_generated_openapi_document_equals_the_committed_one() -> None:
    expected = json.loads(FIXTURE.read_text(encoding="utf-8"))
    expected["info"]["version"] = __version__
    assert json.loads(json.dumps(build_openapi())) == expected


def test_the_document_is_built_afresh_each_time() -> None:
    first = build_openapi()
    first["paths"]["/memories"]["get"]["parameters"][0]["schema"]["pattern"] = "changed"
    assert build_openapi()["paths"]["/memories"]["get"]["parameters"][0]["schema"]["pattern"] != "changed"


def test_every_route_has_a_handler_and_every_handler_a_route() -> None:
    assert set(HANDLERS) == {r.operation for r in ROUTES}


def test_every_target_has_a_reader() -> None:
    assert set(READERS) == set(Target)


def test_every_route_names_known_parameters_and_models() -> None:
    for r in ROUTES:
        assert set(r.parameters) <= set(PATH), r.operation
        assert set(r.query) <= set(QUERY), r.operation
        named = {reply.model for reply in r.replies if reply.model is not None}
        assert named | ({r.body} if r.body else set()) <= set(MODELS), r.operation
        assert r.replies and r.replies[0].status in {200, 202}, r.operation


def test_operations_and_method_paths_are_unique() -> None:
    assert len({r.operation for r in ROUTES}) == len(ROUTES)
    assert len({(r.method, r.path) for r in ROUTES}) == len(ROUTES)


def test_routes_of_one_function_share_its_path_and_binding() -> None:
    functions = http_functions()
    assert sum(len(f.routes) for f in functions) == len(ROUTES)
    for function in functions:
        assert {"/" + function.route} == {r.path for r in function.routes}, function.name
        assert {function.anonymous} == {r.anonymous for r in function.routes}, function.name
        assert function.methods == tuple(r.method for r in function.routes)
    assert INSPECTOR.name not in {f.name for f in functions}


def test_paths_are_built_from_the_table_with_every_parameter_quoted() -> None:
    assert api_path("search") == "/api/memories/search"
    assert api_path("get", memory_id="m/1 ?") == "/api/memories/m%2F1%20%3F"
    assert api_path("export", user_id="ユーザー") == "/api/users/%E3%83%A6%E3%83%BC%E3%82%B6%E3%83%BC/export"
    assert route("user_agents").path_for({"user_id": "u1"}) == "/users/u1/agents"
    assert api_path("health").startswith(API_PREFIX)
    with pytest.raises(KeyError):
        api_path("get")
    with pytest.raises(TypeError, match="no parameter"):
        api_path("search", memory_id="m1")
    with pytest.raises(KeyError):
        route("nope")
