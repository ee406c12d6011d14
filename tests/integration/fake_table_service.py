"""An in-memory Azure Table service behind an ``azure-core`` async transport.

Hand :class:`FakeTableService` to ``azure.data.tables.aio.TableClient(transport=...)``. It answers the
REST calls the history store makes the way the service does: table creation, insert (``POST``),
point reads, filtered queries (``PartitionKey`` / ``RowKey`` ranges and property equality joined by
``and``), ``PUT`` / ``MERGE`` with ``If-Match`` (ETag concurrency), ``DELETE`` and entity-group
transactions (``POST /$batch``, multipart/mixed, all-or-nothing, the failing operation's index in
the error message). Every request is recorded (method, path, query, headers, body), and faults can
be scripted (``fail_next``) to exercise retries.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from collections import deque
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from azure.core.pipeline.transport import AsyncHttpTransport
from azure.core.rest import HttpRequest
from azure.core.rest._http_response_impl_async import AsyncHttpResponseImpl
from azure.core.utils import CaseInsensitiveDict

__all__ = ["FakeTableService", "Request", "TableFault"]

_KEYS = re.compile(r"^/(?:[^/]+/)?(?P<table>[A-Za-z][A-Za-z0-9]*)(?:\((?P<keys>.*)\))?$")
_KEY_PART = re.compile(r"(PartitionKey|RowKey)='((?:[^']|'')*)'")
_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+L?)|(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<paren>[()]))"
)


@dataclass(frozen=True)
class Request:
    """One request as the service saw it (batch operations are recorded one by one, ``batch=True``)."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    batch: bool = False


@dataclass
class TableFault:
    """A scripted failure: an HTTP status (with optional headers) or an exception to raise."""

    status: int = 503
    code: str = "ServerBusy"
    headers: dict[str, str] | None = None
    exception: BaseException | None = None


class _ServiceError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class _Response(AsyncHttpResponseImpl):
    def __init__(self, request: HttpRequest, status: int, body: bytes, headers: dict[str, str]) -> None:
        hdrs = CaseInsensitiveDict(headers)
        super().__init__(
            request=request,
            internal_response=None,
            status_code=status,
            reason={200: "OK", 201: "Created", 202: "Accepted", 204: "No Content"}.get(status, "Error"),
            content_type=hdrs.get("Content-Type"),
            headers=hdrs,
            stream_download_generator=None,
        )
        self._content = body
        self._is_closed = True
        self._is_stream_consumed = True

    async def close(self) -> None:
        return None

    def _body(self) -> bytes:  # the multipart parser reads the (already loaded) body synchronously
        return self._content


def _strip(entity: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entity.items() if "@odata" not in k and not k.startswith("odata.")}


def _error_body(code: str, message: str) -> bytes:
    return json.dumps(
        {"odata.error": {"code": code, "message": {"lang": "en-US", "value": message}}}
    ).encode()


class _Filter:
    """Evaluates the OData subset: ``a op b [and ...]`` with eq/ne/ge/gt/le/lt, strings and numbers."""

    def __init__(self, text: str) -> None:
        self.tokens: list[tuple[str, Any]] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                if text[pos:].strip() == "":
                    break
                raise _ServiceError(400, "InvalidInput", f"bad filter near {text[pos:]!r}")
            pos = m.end()
            if m.group("str") is not None:
                self.tokens.append(("value", m.group("str")[1:-1].replace("''", "'")))
            elif m.group("num") is not None:
                self.tokens.append(("value", int(m.group("num").rstrip("L"))))
            elif m.group("word") is not None:
                word = m.group("word")
                self.tokens.append(("bool", word == "true") if word in ("true", "false") else ("word", word))
            else:
                self.tokens.append(("paren", m.group("paren")))

    def matches(self, entity: dict[str, Any]) -> bool:
        clauses: list[list[tuple[str, Any]]] = [[]]
        for token in self.tokens:
            if token == ("word", "and"):
                clauses.append([])
            elif token[0] != "paren":
                clauses[-1].append(token)
        for clause in clauses:
            if len(clause) != 3 or clause[0][0] != "word" or clause[1][0] != "word":
                raise _ServiceError(400, "InvalidInput", f"unsupported filter clause {clause}")
            name, op, value = clause[0][1], clause[1][1], clause[2][1]
            if name not in entity:
                return False
            left = entity[name]
            if type(left) is not type(value) and not (isinstance(left, int) and isinstance(value, int)):
                return False
            ok = {
                "eq": left == value,
                "ne": left != value,
                "ge": left >= value,
                "gt": left > value,
                "le": left <= value,
                "lt": left < value,
            }.get(op)
            if ok is None:
                raise _ServiceError(400, "InvalidInput", f"unsupported operator {op}")
            if not ok:
                return False
        return True


class FakeTableService(AsyncHttpTransport):  # type: ignore[misc]
    """An in-memory Table service (one account) that records every request."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
        self.etags: dict[tuple[str, str, str], str] = {}
        self.requests: list[Request] = []
        self.faults: deque[TableFault] = deque()
        self._etag_counter = itertools.count(1)
        self.closed = False

    # -- test helpers -----------------------------------------------------------------------------
    def fail_next(self, *faults: TableFault) -> None:
        self.faults.extend(faults)

    def rows(self, table: str = "memoryhistory") -> dict[tuple[str, str], dict[str, Any]]:
        return self.tables.get(table, {})

    def snapshot(self, table: str = "memoryhistory") -> dict[tuple[str, str], dict[str, Any]]:
        return copy.deepcopy(self.rows(table))

    # -- transport protocol -----------------------------------------------------------------------
    async def __aenter__(self) -> FakeTableService:
        return self

    async def __aexit__(self, *args: Any) -> None:
        return None

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        self.closed = True

    async def sleep(self, duration: float) -> None:
        return None

    async def send(self, request: HttpRequest, **kwargs: Any) -> _Response:
        raw = request.content if hasattr(request, "content") else request.data
        body = raw if isinstance(raw, bytes | bytearray) else (raw.encode() if isinstance(raw, str) else b"")
        parts = urlsplit(request.url)
        path = unquote(parts.path)
        headers = dict(request.headers)
        if path.endswith("/$batch"):
            self.requests.append(Request(request.method, path, parse_qs(parts.query), headers, None))
        else:
            self.requests.append(
                Request(
                    request.method, path, parse_qs(parts.query), headers, json.loads(body) if body else None
                )
            )
        if self.faults:
            fault = self.faults.popleft()
            if fault.exception is not None:
                raise fault.exception
            return self._error(
                request, _ServiceError(fault.status, fault.code, "scripted fault"), fault.headers
            )
        try:
            if path.endswith("/$batch"):
                return self._batch(request, bytes(body), headers)
            status, payload, out_headers = self._handle(
                request.method, request.url, headers, bytes(body), self.tables
            )
        except _ServiceError as exc:
            return self._error(request, exc)
        content = b"" if payload is None else json.dumps(payload).encode()
        if content:
            out_headers.setdefault("Content-Type", "application/json;odata=minimalmetadata")
        return _Response(request, status, content, out_headers)

    def _error(
        self, request: HttpRequest, exc: _ServiceError, extra: dict[str, str] | None = None
    ) -> _Response:
        headers = {"Content-Type": "application/json", "x-ms-error-code": exc.code, **(extra or {})}
        return _Response(request, exc.status, _error_body(exc.code, exc.message), headers)

    # -- the service --------------------------------------------------------------------------------
    def _new_etag(self) -> str:
        return f"W/\"datetime'2026-11-29T00%3A00%3A{next(self._etag_counter):08d}Z'\""

    def _handle(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        body: bytes,
        tables: dict[str, dict[tuple[str, str], dict[str, Any]]],
    ) -> tuple[int, Any, dict[str, str]]:
        parts = urlsplit(url)
        path = unquote(parts.path)
        query = parse_qs(parts.query)
        lowered = {k.lower(): v for k, v in headers.items()}
        if path.rstrip("/").endswith("/Tables") or path == "/Tables":
            name = json.loads(body)["TableName"]
            if method == "POST":
                if name in tables:
                    raise _ServiceError(409, "TableAlreadyExists", "The table specified already exists.")
                tables[name] = {}
                return 204, None, {}
            raise _ServiceError(400, "InvalidInput", f"unsupported table operation {method}")
        m = _KEYS.match(path)
        if not m:
            raise _ServiceError(400, "InvalidUri", f"bad path {path}")
        table_name = m.group("table")
        if table_name not in tables:
            raise _ServiceError(404, "TableNotFound", "The table specified does not exist.")
        table = tables[table_name]
        keys = m.group("keys")
        key: tuple[str, str] | None = None
        if keys:
            found = dict((k, v.replace("''", "'")) for k, v in _KEY_PART.findall(keys))
            key = (found["PartitionKey"], found["RowKey"])
        if method == "POST" and key is None:
            entity = _strip(json.loads(body))
            k = (entity["PartitionKey"], entity["RowKey"])
            if k in table:
                raise _ServiceError(409, "EntityAlreadyExists", "The specified entity already exists.")
            self._store(table_name, table, k, entity)
            etag = self.etags[(table_name, *k)]
            if "return-no-content" in lowered.get("prefer", ""):
                return 204, None, {"ETag": etag}
            return 201, {**entity, "odata.etag": etag}, {"ETag": etag}
        if method == "GET" and key is not None and keys != "":
            if key not in table:
                raise _ServiceError(404, "ResourceNotFound", "The specified resource does not exist.")
            etag = self.etags[(table_name, *key)]
            entity = dict(table[key])
            select = query.get("$select")
            if select:
                wanted = set(select[0].split(","))
                entity = {k: v for k, v in entity.items() if k in wanted}
            return 200, {**entity, "odata.etag": etag}, {"ETag": etag}
        if method == "GET":
            text = query.get("$filter", [""])[0]
            flt = _Filter(text) if text else None
            rows = [(k, dict(v)) for k, v in sorted(table.items()) if flt is None or flt.matches(v)]
            select = query.get("$select")
            values = []
            for k, entity in rows:
                if select:
                    wanted = set(select[0].split(","))
                    entity = {n: v for n, v in entity.items() if n in wanted}
                values.append({**entity, "odata.etag": self.etags[(table_name, *k)]})
            return 200, {"value": values}, {}
        if key is None:
            raise _ServiceError(400, "InvalidUri", f"{method} needs entity keys")
        if_match = lowered.get("if-match")
        if method == "DELETE":
            if key not in table:
                raise _ServiceError(404, "ResourceNotFound", "The specified resource does not exist.")
            if if_match not in (None, "*") and if_match != self.etags[(table_name, *key)]:
                raise _ServiceError(
                    412,
                    "UpdateConditionNotSatisfied",
                    "The update condition specified in the request was not satisfied.",
                )
            del table[key]
            self.etags.pop((table_name, *key), None)
            return 204, None, {}
        if method in ("PUT", "MERGE", "PATCH"):
            entity = _strip(json.loads(body))
            exists = key in table
            if if_match is not None:
                if not exists:
                    raise _ServiceError(404, "ResourceNotFound", "The specified resource does not exist.")
                if if_match != "*" and if_match != self.etags[(table_name, *key)]:
                    raise _ServiceError(
                        412,
                        "UpdateConditionNotSatisfied",
                        "The update condition specified in the request was not satisfied.",
                    )
            merged = {**table[key], **entity} if method != "PUT" and exists else entity
            merged["PartitionKey"], merged["RowKey"] = key
            self._store(table_name, table, key, merged)
            return 204, None, {"ETag": self.etags[(table_name, *key)]}
        raise _ServiceError(405, "UnsupportedHttpVerb", method)

    def _store(
        self,
        table_name: str,
        table: dict[tuple[str, str], dict[str, Any]],
        key: tuple[str, str],
        entity: dict[str, Any],
    ) -> None:
        for name, value in entity.items():
            if isinstance(value, str) and len(value.encode("utf-16-le")) > 64 * 1024:
                raise _ServiceError(400, "PropertyValueTooLarge", f"property {name} is larger than 64 KiB")
        table[key] = dict(entity)
        self.etags[(table_name, *key)] = self._new_etag()

    # -- entity-group transactions --------------------------------------------------------------
    def _batch(self, request: HttpRequest, body: bytes, headers: dict[str, str]) -> _Response:
        text = body.decode("utf-8")
        changeset = re.search(r"boundary=(changeset_[0-9a-f-]+)", text)
        if not changeset:
            raise _ServiceError(400, "InvalidInput", "no changeset")
        boundary = changeset.group(1)
        chunks = text.split(f"--{boundary}")[1:-1]
        operations = []
        for chunk in chunks:
            http = chunk.split("\r\n\r\n", 1)[1]
            head, _, op_body = http.partition("\r\n\r\n")
            lines = head.split("\r\n")
            method, url, _ = lines[0].split(" ", 2)
            op_headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
            op_body = op_body.rstrip("\r\n")
            operations.append((method, url, op_headers, op_body.encode()))
            parsed = urlsplit(url)
            self.requests.append(
                Request(
                    method,
                    unquote(parsed.path),
                    parse_qs(parsed.query),
                    op_headers,
                    json.loads(op_body) if op_body else None,
                    batch=True,
                )
            )
        if len(operations) > 100:
            raise _ServiceError(400, "InvalidInput", "a transaction has at most 100 operations")
        partitions = set()
        for _method, url, _, op_body in operations:
            m = _KEYS.match(unquote(urlsplit(url).path))
            if m and m.group("keys"):
                partitions.add(dict(_KEY_PART.findall(m.group("keys")))["PartitionKey"])
            elif op_body:
                partitions.add(json.loads(op_body)["PartitionKey"])
        if len(partitions) > 1:
            return self._batch_response(
                request,
                [(400, _error_body("CommandsInBatchActOnDifferentPartitions", "0:different partitions"))],
                fail=True,
            )
        working = copy.deepcopy(self.tables)
        saved_etags = dict(self.etags)
        results = []
        for index, (method, url, op_headers, op_body) in enumerate(operations):
            try:
                status, payload, _ = self._handle(method, url, op_headers, op_body, working)
            except _ServiceError as exc:
                self.etags = saved_etags
                return self._batch_response(
                    request, [(exc.status, _error_body(exc.code, f"{index}:{exc.message}"))], fail=True
                )
            results.append((status, b"" if payload is None else json.dumps(payload).encode()))
        self.tables = working
        return self._batch_response(request, results, fail=False)

    def _batch_response(
        self, request: HttpRequest, results: list[tuple[int, bytes]], *, fail: bool
    ) -> _Response:
        batch, changeset = "batchresponse_fake", "changesetresponse_fake"
        reasons = {
            200: "OK",
            201: "Created",
            204: "No Content",
            400: "Bad Request",
            404: "Not Found",
            409: "Conflict",
            412: "Precondition Failed",
        }
        lines = [f"--{batch}", f"Content-Type: multipart/mixed; boundary={changeset}", ""]
        for status, payload in results:
            lines += [
                f"--{changeset}",
                "Content-Type: application/http",
                "Content-Transfer-Encoding: binary",
                "",
                f"HTTP/1.1 {status} {reasons.get(status, 'Error')}",
                "X-Content-Type-Options: nosniff",
                "DataServiceVersion: 3.0;",
            ]
            if payload:
                lines += [
                    "Content-Type: application/json;odata=minimalmetadata;streaming=true;charset=utf-8",
                    "",
                    payload.decode(),
                ]
            else:
                lines += [""]
            lines.append("")
        lines += [f"--{changeset}--", f"--{batch}--", ""]
        content = "\r\n".join(lines).encode()
        del fail
        return _Response(request, 202, content, {"Content-Type": f"multipart/mixed; boundary={batch}"})
