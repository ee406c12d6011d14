"""Clean edges of the embedded HTTP API (issue 16, item 7): strict integers, repeated parameters refused,
a cursor no store issued refused with 422 (not a 500), and no request smuggled after an early answer."""

from __future__ import annotations

import contextlib
import io
import json
import socket
from collections.abc import Iterator

import pytest
from runtime_helpers import RunningRuntime, running

from memory_core.adapters.sqlite.queue import SQLiteQueue
from memory_core.cli.main import main
from memory_core.errors import ConflictError


@pytest.fixture(scope="module")
def rt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRuntime]:
    with running(tmp_path_factory.mktemp("edges") / "memory.db", workers=1) as runtime:
        yield runtime


@pytest.mark.parametrize(
    "raw", [" 5", "%EF%BC%95", "%2B5", "1_000", "5.0", "0x5", "", "99999999999999999999"]
)
def test_integers_are_strict(rt: RunningRuntime, raw: str) -> None:
    reply = rt.client.get(f"/api/memories?user_id=u1&agent_id=a1&limit={raw.replace(' ', '%20')}")
    if raw == "":  # empty means "not given"
        assert reply.status == 200
        return
    assert reply.status == 422, (raw, reply.body)
    assert reply.body["error"]["field"] == "limit"


def test_a_repeated_parameter_is_refused(rt: RunningRuntime) -> None:
    reply = rt.client.get("/api/memories?user_id=u1&agent_id=a1&user_id=u2")
    assert reply.status == 400 and "'user_id' is repeated" in reply.body["error"]["message"]


@pytest.mark.parametrize("cursor", ["99999999999999999999", "-1", "１２", "12abc", "9223372036854775808"])
def test_a_cursor_no_store_issued_is_422_not_500(rt: RunningRuntime, cursor: str) -> None:
    from urllib.parse import quote

    reply = rt.client.post(f"/api/forgetting?cursor={quote(cursor)}")
    assert reply.status == 422, (cursor, reply.status, reply.body)
    assert reply.body["error"]["field"] == "cursor"


def test_a_chunked_body_after_an_early_answer_closes_the_connection(rt: RunningRuntime) -> None:
    assert rt.runtime.server is not None
    smuggled = b"GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n"
    chunk = hex(len(smuggled))[2:].encode() + b"\r\n" + smuggled + b"\r\n0\r\n\r\n"
    request = b"POST /nowhere HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk
    with socket.create_connection(("127.0.0.1", rt.runtime.server.port), timeout=5) as conn:
        conn.sendall(request)
        received = b""
        while chunk_ := conn.recv(65536):
            received += chunk_
    assert received.count(b"HTTP/1.1 ") == 1  # one answer (404); the body was not read as a request
    assert b"Connection: close" in received


# -- a web page in the user's browser cannot drive the server (regression: with no token, a text/plain
# -- form POST wrote turns and ran forgetting, and a rebound host name read and purged a user) ----------


def test_a_foreign_host_is_refused(rt: RunningRuntime) -> None:
    reply = rt.client.get("/api/users/u1/export", headers={"Host": "rebind.evil.example"})
    assert reply.status == 403 and "is not this machine" in reply.body["error"]["message"]
    assert (
        rt.client.request(
            "DELETE", "/api/users/u1?confirm=true", headers={"Host": "rebind.evil.example:7071"}
        ).status
        == 403
    )


def test_a_cross_site_origin_is_refused(rt: RunningRuntime) -> None:
    reply = rt.client.post("/api/forgetting?dry_run=false", headers={"Origin": "https://evil.example"})
    assert reply.status == 403 and "cross-site request" in reply.body["error"]["message"]
    assert rt.runtime.server is not None
    own = f"http://127.0.0.1:{rt.runtime.server.port}"
    assert rt.client.post("/api/forgetting", headers={"Origin": own}).status == 200


def test_a_body_must_be_json(rt: RunningRuntime) -> None:
    reply = rt.client.request(
        "POST", "/api/turns", raw=b'{"schema": "memory-core.turn.v1"}', headers={"Content-Type": "text/plain"}
    )
    assert reply.status == 415 and reply.body["error"]["code"] == "unsupported_media_type"


def test_an_oversized_header_gets_the_json_error_shape(rt: RunningRuntime) -> None:
    assert rt.runtime.server is not None
    request = b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n"
    with socket.create_connection(("127.0.0.1", rt.runtime.server.port), timeout=5) as conn:
        conn.sendall(request)
        received = b""
        while part := conn.recv(65536):
            received += part
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431") and b"application/json" in head
    error = json.loads(body)["error"]
    assert error["code"] == "request_header_fields_too_large" and error["message"]


def test_a_damaged_store_or_queue_is_refused_with_one_line(tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = tmp_path_factory.mktemp("damaged")
    garbage = b"this is not a database, only some bytes that look nothing like SQLite's header " * 3
    (folder / "store.db").write_bytes(garbage)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(
            ["--db", str(folder / "store.db"), "list", "--user", "u", "--agent", "a"], out=io.StringIO()
        )
    assert (
        code != 0
        and "is not a readable SQLite database" in err.getvalue()
        and "Traceback" not in err.getvalue()
    )
    (folder / "fresh.db.queue").write_bytes(garbage)
    with pytest.raises(ConflictError, match=r"is not a readable SQLite database .* not a memory-core queue"):
        SQLiteQueue(folder / "fresh.db.queue")
