"""The embedded server's edges (issue 29, item 12), over raw sockets: connections are capped and a slow
request times out, a body whose end is ambiguous is refused and the connection closed, every answer
carries Cache-Control: no-store and nosniff, and anonymous health shows verdicts, not details."""

from __future__ import annotations

import contextlib
import http.client
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from runtime_helpers import RunningRuntime, running

TOKEN = "a-long-enough-token-for-the-tests"
HEALTH = b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
#: Generous bounds on waiting for the server (never assertions about its speed).
PATIENCE = 20.0


@pytest.fixture(scope="module")
def rt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRuntime]:
    with running(tmp_path_factory.mktemp("limits") / "memory.db", workers=1) as runtime:
        yield runtime


def port_of(rt: RunningRuntime) -> int:
    assert rt.runtime.server is not None
    return rt.runtime.server.port


def connect(port: int) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", port), timeout=PATIENCE)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


def read_until_closed(conn: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a reset counts as closed)."""
    received = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := conn.recv(65536):
            received += chunk
    return received


def send(conn: socket.socket, raw: bytes) -> None:
    """Send, unless the server already answered and closed (a refused connection)."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        conn.sendall(raw)


def exchange(port: int, raw: bytes) -> bytes:
    with connect(port) as conn:
        send(conn, raw)
        return read_until_closed(conn)


def connection_threads() -> int:
    """The server's threads that each serve one connection (the test process runs the server)."""
    return sum(1 for t in threading.enumerate() if "process_request_thread" in t.name)


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"gave up waiting for {what}")


def served(rt: RunningRuntime) -> bool:
    """Whether a fresh client's health request is answered 200 (a refused connection is not)."""
    try:
        return rt.client.get("/api/health").status == 200
    except (OSError, http.client.HTTPException):
        return False


def head_of(answer: bytes) -> tuple[int, dict[str, str]]:
    head = answer.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in head[1:])
    return int(head[0].split()[1]), {k.lower(): v for k, v in headers.items()}


# -- (1) connections are capped; a slow request times out -------------------------------------------


def test_connections_past_the_limit_are_refused_and_the_threads_stay_bounded(tmp_path: Path) -> None:
    limit, crowd = 8, 60
    with running(tmp_path / "memory.db", workers=1, max_connections=limit, read_timeout=600.0) as rt:
        port = port_of(rt)
        before = connection_threads()
        partial = b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n"  # the headers never end
        conns = []
        try:
            for _ in range(crowd):
                conn = connect(port)
                send(conn, partial)
                conns.append(conn)
            # The connections past the limit are answered (and closed) at once; the others are held.
            answered: dict[socket.socket, bytes] = {}
            deadline = time.monotonic() + PATIENCE
            while len(answered) < crowd - limit and time.monotonic() < deadline:
                ready, _, _ = select.select([c for c in conns if c not in answered], [], [], 0.5)
                for conn in ready:
                    answered[conn] = read_until_closed(conn)
            assert len(answered) == crowd - limit
            assert connection_threads() - before <= limit
            refusals = [head_of(a) for a in answered.values() if a]
            assert refusals, "no refused connection got the 503"
            for status, headers in refusals:
                assert status == 503 and headers["retry-after"] == "5" and headers["connection"] == "close"
                assert headers["cache-control"] == "no-store"
            # A new client is refused too while the limit is held ...
            fresh = exchange(port, HEALTH)
            assert not fresh or head_of(fresh)[0] == 503
        finally:
            for conn in conns:
                conn.close()
        # ... and served once the held connections are gone.
        wait_for(lambda: served(rt), "a fresh client to be served")
        wait_for(lambda: connection_threads() - before <= 1, "the connection threads to end")


def test_a_request_that_does_not_arrive_in_time_is_408_and_its_connection_freed(tmp_path: Path) -> None:
    with running(tmp_path / "memory.db", workers=1, max_connections=3, read_timeout=1.0) as rt:
        port = port_of(rt)
        headers_cut = connect(port)
        headers_cut.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        body_cut = connect(port)
        body_cut.sendall(
            b"POST /api/memories/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n{\"user_id\":"
        )
        idle = connect(port)  # sends nothing at all
        for conn in (headers_cut, body_cut):
            with conn:
                answer = read_until_closed(conn)
            status, headers = head_of(answer)
            assert status == 408 and headers["connection"] == "close", answer
        with idle:
            assert read_until_closed(idle) == b""  # closed without a word
        wait_for(lambda: served(rt), "the slots to be free again")


def test_a_request_dripped_a_byte_at_a_time_still_times_out(tmp_path: Path) -> None:
    """Each byte arrives well within the per-read timeout; the request as a whole does not."""
    with running(tmp_path / "memory.db", workers=1, read_timeout=1.0) as rt:
        request = HEALTH[:-2] + b"X-Padding: " + b"p" * 400 + b"\r\n\r\n"
        stop = threading.Event()
        with connect(port_of(rt)) as conn:

            def drip() -> None:
                for byte in request:
                    if stop.wait(0.05):
                        return
                    with contextlib.suppress(OSError):
                        conn.send(bytes([byte]))

            dripper = threading.Thread(target=drip, daemon=True)
            dripper.start()
            try:
                answer = read_until_closed(conn)
            finally:
                stop.set()
                dripper.join(timeout=PATIENCE)
        assert head_of(answer)[0] == 408, answer[:200]


# -- (2) a body whose end is ambiguous is refused, and nothing after it is read -------------------------

_SMUGGLED = HEALTH
_SEARCH = b"POST /api/memories/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


@pytest.mark.parametrize(
    "framing",
    [
        b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
        b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
        b"Content-Length: 5\r\nContent-Length: 6\r\n",
        b"Content-Length: 5\r\nContent-Length: 5\r\n",  # equal values: refused as well
        b"Content-Length: 5, 5\r\n",
        b"Content-Length: +5\r\n",
        b"Content-Length: -0\r\n",
        b"Content-Length: 0_5\r\n",
        b"Content-Length : 5\r\n",  # a space before the colon
        b"X-Folded: a\r\n Content-Length: 5\r\n",  # a field folded over two lines
    ],
    ids=["te-cl", "cl-te", "two-lengths", "two-equal-lengths", "length-list", "plus", "minus-zero",
         "underscore", "space-before-colon", "obs-fold"],
)
def test_an_ambiguous_body_is_400_and_the_connection_closed(rt: RunningRuntime, framing: bytes) -> None:
    answer = exchange(port_of(rt), _SEARCH + framing + b"\r\n{}   " + _SMUGGLED)
    assert answer.count(b"HTTP/1.1 ") == 1, answer  # nothing after the refused request was read as one
    status, headers = head_of(answer)
    assert status == 400 and headers["connection"] == "close", answer


def test_a_plain_length_is_still_read_and_the_connection_kept(rt: RunningRuntime) -> None:
    body = b'{"user_id":"u1","agent_id":"a1","query":"tea"}'
    request = _SEARCH + b"Content-Length: \t%d \r\n\r\n" % len(body) + body
    with connect(port_of(rt)) as conn:
        conn.sendall(request + HEALTH)
        received = b""
        while received.count(b"HTTP/1.1 200") < 2:
            chunk = conn.recv(65536)
            assert chunk, received
            received += chunk


# -- (3) every answer says: not to be stored, not to be sniffed ----------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        HEALTH,
        b"GET /api/nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        b"GET /api/memories?user_id=u1&agent_id=a1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        _SEARCH + b"Content-Length: +2\r\n\r\n{}",
        b"GET /api/health HTTP/1.1\r\nHost: rebind.evil.example\r\n\r\n",
    ],
    ids=["health", "no-route", "list", "framing", "foreign-host"],
)
def test_every_api_answer_is_no_store_and_nosniff(rt: RunningRuntime, raw: bytes) -> None:
    with connect(port_of(rt)) as conn:
        conn.sendall(raw[:-4] + b"\r\nConnection: close\r\n\r\n" if raw.endswith(b"\r\n\r\n") else raw)
        _, headers = head_of(read_until_closed(conn))
    assert headers["cache-control"] == "no-store"
    assert headers["x-content-type-options"] == "nosniff"


# -- (4) anonymous health: verdicts only ---------------------------------------------------------------


def test_anonymous_health_shows_the_verdict_and_the_token_holder_every_fact(tmp_path: Path) -> None:
    with running(tmp_path / "memory.db", workers=1, token=TOKEN) as rt:
        anonymous = rt.client.get("/api/health")
        assert anonymous.status == 200
        assert set(anonymous.body) == {"status", "version", "details"}
        assert anonymous.body["details"] == {"ingestion": "ok"}
        wrong = rt.client.get("/api/health", headers={"Authorization": "Bearer not-the-token-at-all-0000"})
        assert wrong.body["details"] == {"ingestion": "ok"}
        holder = rt.client.get("/api/health", headers={"Authorization": f"Bearer {TOKEN}"})
        assert holder.status == 200
        assert {"ingestion", "queue", "workers"} <= set(holder.body["details"])
