"""The embedded server's framing rules and connection clocks, without a server (issue 29, item 12)."""

from __future__ import annotations

import http.client
import io
import socket
import time

import pytest

from memory_core.entrypoints.embedded.connections import ConnectionGuard
from memory_core.entrypoints.embedded.framing import FramingError, body_length


def _headers(raw: bytes) -> http.client.HTTPMessage:
    return http.client.parse_headers(io.BytesIO(raw + b"\r\n"))


@pytest.mark.parametrize(
    ("raw", "length"),
    [(b"Host: x\r\n", 0), (b"Content-Length: 0\r\n", 0), (b"Content-Length: 12\r\n", 12), (b"Content-Length: \t7 \r\n", 7)],
)
def test_a_plain_length_is_read(raw: bytes, length: int) -> None:
    assert body_length(_headers(raw)) == length


@pytest.mark.parametrize(
    ("raw", "status", "says"),
    [
        (b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", 400, "together"),
        (b"Transfer-Encoding: chunked\r\n", 411, "Content-Length"),
        (b"Content-Length: 5\r\nContent-Length: 5\r\n", 400, "repeated"),
        (b"Content-Length: 5\r\nContent-Length: 6\r\n", 400, "repeated"),
        (b"Content-Length: 5, 5\r\n", 400, "not a valid length"),
        (b"Content-Length: +5\r\n", 400, "no sign"),
        (b"Content-Length: -0\r\n", 400, "no sign"),
        (b"Content-Length: 0_5\r\n", 400, "ASCII digits"),
        (b"Content-Length: 0x5\r\n", 400, "ASCII digits"),
        (b"Content-Length: 99999999999999999999\r\n", 400, "not a valid length"),
        (b"Content-Length : 5\r\n", 400, "malformed"),
        (b"Host: x\r\nno colon here\r\nContent-Length: 5\r\n", 400, "malformed"),
        (b"X-A: a\r\n Content-Length: 5\r\n", 400, "folded"),
    ],
)
def test_an_ambiguous_framing_is_refused_saying_why(raw: bytes, status: int, says: str) -> None:
    with pytest.raises(FramingError) as refused:
        body_length(_headers(raw))
    assert refused.value.status == status and says in refused.value.message


def test_a_late_request_has_its_reading_side_closed_and_an_answered_one_does_not() -> None:
    guard = ConnectionGuard(limit=2, read_timeout=5.0)
    late_server, late_client = socket.socketpair()
    kept_server, kept_client = socket.socketpair()
    with late_server, late_client, kept_server, kept_client:
        late, kept = guard.track(late_server), guard.track(kept_server)
        guard.expect(late)
        guard.expect(kept)
        guard.received(kept)  # its request arrived: answering it is not on the clock
        assert guard.expire(time.monotonic()) == 0
        assert guard.expire(time.monotonic() + 6) == 1
        assert late.expired and not kept.expired
        assert late_server.recv(1) == b""  # the reader wakes to the end of the stream
        kept_client.sendall(b"y")
        assert kept_server.recv(1) == b"y"
        guard.expect(late)  # an expired connection's clock does not start again
        assert late.at is None


def test_the_limit_is_never_waited_for() -> None:
    guard = ConnectionGuard(limit=2, read_timeout=1.0)
    assert guard.admit() and guard.admit()
    assert not guard.admit()
    guard.release()
    assert guard.admit()


@pytest.mark.parametrize(("limit", "timeout"), [(0, 1.0), (1, 0.0), (1, -1.0)])
def test_the_bounds_must_be_positive(limit: int, timeout: float) -> None:
    with pytest.raises(ValueError):
        ConnectionGuard(limit, timeout)
