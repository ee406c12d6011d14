"""A small in-memory stand-in for an Azure AI Search service, answering through the capturing transport.

Enough of the REST surface for the store contract to run offline against
:class:`~memory_core.adapters.azure.search_store.AzureSearchMemoryStore`: index create/get/delete,
document lookup, ``search.index`` (upload / merge / delete with per-document results) and
``search.post.search`` with the OData subset the adapter emits (``eq ne gt ge lt le``, ``and``, ``or``,
parentheses, ``null``, ``search.in``, ``not``, and ``any`` over string collections: ``c/any()`` holds
when the collection has a value, ``c/any(x: <condition on x>)`` when one of its values meets the
condition; neither holds for an empty or missing collection), BM25 text search over every searchable
string field of the index (string collections too, as the service searches all of them when the
request names no ``searchFields``), cosine kNN, RRF fusion, scoring profiles,
``$orderby`` (several clauses), ``$select``, ``top``, ``skip``, ``count`` and facets (``count:N``).
Every request body is validated against the REST contract subset first. It checks the adapter's logic (filters, paging, merges, recall, forgetting,
purge); it says nothing about how the real service ranks.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any

import numpy as np
from azure_transport import Captured, Scripted, json_response
from rest_contract import validate

from memory_core.domain.ranking import PROFILES
from memory_core.language.text import analyze

__all__ = ["FakeSearchService", "parse_filter"]

_PROFILES = {p.name: p for p in PROFILES.values() if p is not None}
_TOKEN = re.compile(
    r"\s*(?:(?P<any>[A-Za-z_]+/any\()|(?P<lp>\()|(?P<rp>\))|(?P<comma>,)|(?P<colon>:)|(?P<str>'(?:[^']|'')*')"
    r"|(?P<dt>\d{4}-\d{2}-\d{2}T[0-9:.]+(?:Z|[+-]\d{2}:\d{2}))|(?P<num>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_.]*))"
)
K1, B = 1.2, 0.75


def _tokens(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if not match or match.end() == position:
            raise ValueError(f"cannot parse filter at {text[position:]!r}")
        kind = match.lastgroup
        value = match.group(kind or "")
        if kind == "str":
            out.append(("lit", value[1:-1].replace("''", "'")))
        elif kind == "dt":
            out.append(("lit", datetime.fromisoformat(value.replace("Z", "+00:00"))))
        elif kind == "num":
            out.append(("lit", float(value)))
        elif kind == "word" and value == "null":
            out.append(("lit", None))
        else:
            out.append((kind or "", value))
        position = match.end()
    return out


Predicate = Callable[[dict[str, Any]], bool]


def _text(value: Any) -> str:
    """A field's text as analysed: a string, or the values of a string collection one after another."""
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    return str(value or "")


#: The index's Edm.DateTimeOffset fields besides the ``*_at`` ones.
_VALIDITY = frozenset({"valid_from", "valid_until", "event_until"})


def _value(document: dict[str, Any], field: str) -> Any:
    value = document.get(field)
    if isinstance(value, str) and (field.endswith("_at") or field in _VALIDITY):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value


def _compare(left: Any, op: str, right: Any) -> bool:
    if op == "eq":
        return bool(left == right)
    if op == "ne":
        return bool(left != right)
    if left is None or right is None:
        return False
    return bool({"gt": left > right, "ge": left >= right, "lt": left < right, "le": left <= right}[op])


def parse_filter(text: str) -> Predicate:
    """A predicate over documents for the OData subset the adapter emits (strict: raises otherwise)."""
    tokens = _tokens(text)
    position = 0

    def peek() -> tuple[str, Any] | None:
        return tokens[position] if position < len(tokens) else None

    def take(kind: str, value: Any = None) -> Any:
        nonlocal position
        token = peek()
        if token is None or token[0] != kind or (value is not None and token[1] != value):
            raise ValueError(f"expected {value or kind} in {text!r} at token {position}: {token}")
        position += 1
        return token[1]

    def primary() -> Predicate:
        token = peek()
        if token == ("lp", "("):
            take("lp")
            inner = disjunction()
            take("rp")
            return inner
        if token is not None and token[0] == "any":
            collection = take("any").split("/", 1)[0]
            if peek() == ("rp", ")"):
                take("rp")
                return lambda d: bool(d.get(collection))
            variable = take("word")
            take("colon")
            condition = disjunction()
            take("rp")
            return lambda d: any(condition({variable: value}) for value in d.get(collection) or [])
        if token == ("word", "not"):
            take("word", "not")
            negated = primary()
            return lambda d: not negated(d)
        field = take("word")
        if field == "search.in":
            take("lp")
            target = take("word")
            take("comma")
            values = str(take("lit")).split(",")
            take("comma")
            take("lit")
            take("rp")
            return lambda d: d.get(target) in values
        op = take("word")
        if op not in {"eq", "ne", "gt", "ge", "lt", "le"}:
            raise ValueError(f"unknown operator {op!r}")
        literal = take("lit")
        return lambda d: _compare(_value(d, field), op, literal)

    def conjunction() -> Predicate:
        parts = [primary()]
        while peek() == ("word", "and"):
            take("word", "and")
            parts.append(primary())
        return lambda d: all(p(d) for p in parts)

    def disjunction() -> Predicate:
        parts = [conjunction()]
        while peek() == ("word", "or"):
            take("word", "or")
            parts.append(conjunction())
        return lambda d: any(p(d) for p in parts)

    predicate = disjunction()
    if position != len(tokens):
        raise ValueError(f"trailing tokens in filter {text!r}")
    return predicate


class FakeSearchService:
    """Callable ``fallback`` for :class:`~azure_transport.CapturingTransport`.

    Args:
        now: The service's clock (epoch seconds), used by freshness functions.
    """

    def __init__(self, now: Callable[[], float]) -> None:
        self.now = now
        self.index: dict[str, Any] | None = None
        self.documents: dict[str, dict[str, Any]] = {}

    # -- routing ----------------------------------------------------------------------------------
    def __call__(self, request: Captured) -> Scripted:
        path = request.path
        if request.method == "PUT" and re.fullmatch(r"/indexes\('[^']+'\)", path):
            validate("SearchIndex", request.body)
            self.index = {**request.body, "@odata.etag": '"1"'}
            return json_response(201, self.index)
        if request.method == "GET" and re.fullmatch(r"/indexes\('[^']+'\)", path):
            if self.index is None:
                return json_response(404, {"error": {"code": "ResourceNotFound", "message": "no index"}})
            return json_response(200, self.index)
        if request.method == "DELETE":
            self.index, self.documents = None, {}
            return Scripted(204)
        lookup = re.fullmatch(r"/indexes\('[^']+'\)/docs\('(.+)'\)", path)
        if request.method == "GET" and lookup:
            document = self.documents.get(lookup.group(1).replace("''", "'"))
            if document is None:
                return json_response(404, {"error": {"code": "NotFound", "message": "no document"}})
            return json_response(200, dict(document))
        if path.endswith("/docs/search.index"):
            validate("IndexBatch", request.body)
            return json_response(*self._index(request.body["value"]))
        if path.endswith("/docs/search.post.search"):
            validate("SearchRequest", request.body)
            if request.body.get("queryType") == "semantic" and request.body.get("orderby"):
                # What the service answers: sorting by a field would override the semantic ranker.
                return json_response(
                    400, {"error": {"code": "InvalidRequestParameter", "message": "orderby with semantic"}}
                )
            hidden = {f["name"] for f in self._fields() if f.get("retrievable") is False}
            if hidden & set(request.body.get("select", "id").split(",")):
                return json_response(
                    400, {"error": {"code": "InvalidRequestParameter", "message": "$select names a field that is not retrievable"}}
                )
            return json_response(200, self._search(request.body))
        raise AssertionError(f"unexpected request {request.method} {path}")

    # -- writes -----------------------------------------------------------------------------------
    def _index(self, actions: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
        results = []
        for action in actions:
            kind = action["@search.action"]
            key = action["id"]
            fields = {k: v for k, v in action.items() if k != "@search.action"}
            if kind == "upload":
                self.documents[key] = fields
                results.append({"key": key, "status": True, "statusCode": 201})
            elif kind == "merge":
                if key not in self.documents:
                    results.append(
                        {
                            "key": key,
                            "status": False,
                            "statusCode": 404,
                            "errorMessage": "Document not found.",
                        }
                    )
                    continue
                self.documents[key].update(fields)
                results.append({"key": key, "status": True, "statusCode": 200})
            elif kind == "delete":
                self.documents.pop(key, None)
                results.append({"key": key, "status": True, "statusCode": 200})
            else:
                raise AssertionError(f"unsupported action {kind}")
        status = 207 if any(not r["status"] for r in results) else 200
        return status, {"value": results}

    # -- search -----------------------------------------------------------------------------------
    def _bm25(self, documents: list[dict[str, Any]], terms: list[str]) -> np.ndarray:
        scores = np.zeros(len(documents))
        everyone = list(self.documents.values())  # global statistics
        for field in self._searchable():
            corpus = [Counter(analyze(_text(d.get(field)))) for d in everyone]
            lengths = [sum(c.values()) for c in corpus]
            average = (sum(lengths) / len(lengths)) if lengths else 0.0
            counts = [Counter(analyze(_text(d.get(field)))) for d in documents]
            for term in set(terms):
                df = sum(1 for c in corpus if term in c)
                if not df:
                    continue
                idf = math.log(1 + (len(corpus) - df + 0.5) / (df + 0.5))
                for i, c in enumerate(counts):
                    tf = c.get(term, 0)
                    if tf:
                        norm = K1 * (1 - B + B * sum(c.values()) / (average or 1.0))
                        scores[i] += idf * tf * (K1 + 1) / (tf + norm)
        return scores

    def _fields(self) -> list[dict[str, Any]]:
        return list((self.index or {}).get("fields") or [])

    def _searchable(self) -> list[str]:
        """The index's searchable string fields and string collections, in index order."""
        return [
            f["name"]
            for f in self._fields()
            if f.get("searchable") and f.get("type") in ("Edm.String", "Collection(Edm.String)")
        ]

    def _search(self, body: dict[str, Any]) -> dict[str, Any]:
        predicate = parse_filter(body["filter"]) if body.get("filter") else (lambda d: True)
        candidates = sorted((d for d in self.documents.values() if predicate(d)), key=lambda d: d["id"])
        if body.get("facets"):
            field, *settings = body["facets"][0].split(",")
            counts = Counter(str(d.get(field)) for d in candidates)
            limit = next((int(x.split(":")[1]) for x in settings if x.startswith("count:")), 10)
            facets = [{"value": v, "count": n} for v, n in sorted(counts.items())][:limit]
            return {"@search.facets": {field: facets}, "value": []}
        relevance = np.ones(len(candidates))
        selected = np.ones(len(candidates), dtype=bool)
        text = body.get("search")
        vector_queries = body.get("vectorQueries") or []
        ranks: list[np.ndarray] = []
        if text and text != "*":
            scores = self._bm25(candidates, analyze(text))
            matched = scores > 0
            ranks.append(self._ranks(scores, matched, 1000))
            relevance, selected = scores, matched
        for query in vector_queries:
            vector = np.asarray(query["vector"], dtype=np.float64)
            vector /= np.linalg.norm(vector) or 1.0
            scores = np.zeros(len(candidates))
            has = np.zeros(len(candidates), dtype=bool)
            for i, d in enumerate(candidates):
                if d.get("embedding"):
                    e = np.asarray(d["embedding"], dtype=np.float64)
                    cos = float(e @ vector / (np.linalg.norm(e) or 1.0))
                    scores[i], has[i] = 1.0 / (2.0 - cos), True
            ranks.append(self._ranks(scores, has, int(query.get("k") or 50)))
            if not (text and text != "*"):
                relevance, selected = scores, ranks[-1] >= 0
        if len(ranks) > 1:
            relevance = np.zeros(len(candidates))
            selected = np.zeros(len(candidates), dtype=bool)
            for r in ranks:
                leg = r >= 0
                relevance[leg] += 1.0 / (60 + r[leg])
                selected |= leg
        final = relevance.copy()
        profile = _PROFILES.get(body.get("scoringProfile", ""))
        if profile is not None and len(candidates):
            columns = {
                f: np.array([self._number(d, f) for d in candidates], dtype=np.float64)
                for f in profile.fields
            }
            multiplier, _ = profile.multiplier(columns, now_epoch=self.now())
            final = relevance * multiplier
        order = [i for i in np.argsort(-final, kind="stable") if selected[i]]
        if body.get("orderby"):  # stable sorts, last clause first; nulls last
            for clause in reversed(body["orderby"].split(",")):
                field, direction = clause.strip().split(" ")
                present = [i for i in order if candidates[i].get(field) is not None]
                missing = [i for i in order if candidates[i].get(field) is None]
                present.sort(key=lambda i, f=field: candidates[i][f], reverse=direction == "desc")
                order = present + missing
        total = len(order)
        skip = int(body.get("skip", 0))
        order = order[skip : skip + int(body.get("top", 50))]
        select = body.get("select", "id").split(",")
        values = []
        for i in order:
            hit = {"@search.score": float(final[i]), **{f: candidates[i].get(f) for f in select}}
            if body.get("queryType") == "semantic":  # (no reranker here: the fused score stands in)
                hit["@search.rerankerScore"] = float(relevance[i])
                if profile is not None and self._boosted_order(body.get("semanticConfiguration")):
                    hit["@search.rerankerBoostedScore"] = float(final[i])
            values.append(hit)
        return {"value": values, **({"@odata.count": total} if body.get("count") else {})}

    def _boosted_order(self, configuration: str | None) -> bool:
        """Whether the semantic configuration orders by the reranker score boosted by the profile."""
        semantic = (self.index or {}).get("semantic") or {}
        name = configuration or semantic.get("defaultConfiguration")
        found = [c for c in semantic.get("configurations") or [] if c.get("name") == name]
        return bool(found) and found[0].get("rankingOrder", "BoostedRerankerScore") == "BoostedRerankerScore"

    @staticmethod
    def _ranks(scores: np.ndarray, eligible: np.ndarray, limit: int) -> np.ndarray:
        ranks = np.full(len(scores), -1)
        order = [i for i in np.argsort(-scores, kind="stable") if eligible[i]][:limit]
        for rank, i in enumerate(order):
            ranks[i] = rank
        return ranks

    @staticmethod
    def _number(document: dict[str, Any], field: str) -> float:
        value = document.get(field)
        if value is None:
            return math.nan
        if isinstance(value, str):
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        return float(value)
