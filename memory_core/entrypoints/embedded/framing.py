"""Where a request's body ends, read from its headers, or why the request cannot be read (RFC 9112 §6).

The embedded server frames HTTP itself, so each way two readers could disagree on where a body ends
(and the rest of it be read as a second, smuggled request) is refused with 400 and the connection
closed: a header line that is no header (a space before the colon, no colon: the standard library
would read it and every line after it as the body), a field folded over lines, ``Transfer-Encoding``
beside ``Content-Length``, a repeated ``Content-Length`` (even with equal values: RFC 9112 §6.3 lets a
recipient merge identical ones, refusing them is the safer choice), and a length that is not plain
ASCII digits (``+5``, ``-0``, ``5_0``, ``0x5``, ``5, 5``). A body sent with ``Transfer-Encoding``
alone is 411: this server reads only bodies of a stated length.
"""

from __future__ import annotations

import re
from email.message import Message

__all__ = ["FramingError", "body_length"]

#: A length: ASCII digits only (no sign, no separators, no other scripts' digits), at most 19 of them.
_LENGTH = re.compile(r"[0-9]{1,19}")


class FramingError(Exception):
    """A request whose body's end is unknown or ambiguous: answered with :attr:`status`, then closed.

    Attributes:
        status: 400 (ambiguous or malformed) or 411 (a body without a ``Content-Length``).
        code: The API's error code for it.
        message: What is wrong, for the caller.
    """

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def _malformed(message: str) -> FramingError:
    return FramingError(400, "bad_request", message)


def body_length(headers: Message) -> int:
    """The length of the request's body (0 when it has none) as its headers state it.

    Raises:
        FramingError: The headers leave the body's end unknown or ambiguous (see the module docstring).
    """
    if headers.defects:
        raise _malformed("a header line is malformed (no colon, or a space before it)")
    for name, value in headers.items():
        if "\r" in value or "\n" in value:
            raise _malformed(f"the header {name[:40]!r} is folded over several lines")
    lengths = headers.get_all("Content-Length") or []
    if headers.get_all("Transfer-Encoding"):
        if lengths:
            raise _malformed("Transfer-Encoding and Content-Length together: send the body with Content-Length only")
        raise FramingError(411, "length_required", "send the body with a Content-Length")
    if len(lengths) > 1:
        raise _malformed("Content-Length is repeated: send it once")
    if not lengths:
        return 0
    raw = lengths[0].strip(" \t")
    if not _LENGTH.fullmatch(raw):
        raise _malformed(f"Content-Length {raw[:20]!r} is not a valid length (ASCII digits only, no sign)")
    return int(raw)
