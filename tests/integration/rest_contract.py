"""JSON Schema validation of request bodies against the Azure AI Search REST contract subset.

``tests/specs/azure-search-2026-04-01.subset.json`` holds Swagger 2.0 definitions. This module turns
them into JSON Schema (draft 7) the way ``tests/specs/README.md`` describes:

- every object schema is closed (``additionalProperties: false``) unless the spec declares
  ``additionalProperties`` (documents in an ``IndexAction`` stay open) or it is a trimmed base;
- each discriminator subtype is flattened with its base and its discriminator pinned to its
  ``x-ms-discriminator-value``; each polymorphic base becomes an if/then/else dispatcher;
- ``x-nullable: true`` admits ``null``; ``SearchFieldDataType`` also admits ``Collection(<member>)``.
"""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator

__all__ = ["SPEC_PATH", "api_version", "operation", "validate", "validator"]

SPEC_PATH = Path(__file__).resolve().parents[1] / "specs" / "azure-search-2026-04-01.subset.json"

_DROP = {
    "description",
    "discriminator",
    "x-ms-discriminator-value",
    "x-ms-client-name",
    "x-ms-enum",
    "x-ms-client-flatten",
    "x-nullable",
    "readOnly",
    "allOf",
}


@cache
def _spec() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SPEC_PATH.read_text(encoding="utf-8"))
    return data


def api_version() -> str:
    """The api-version the contract describes."""
    return str(_spec()["source"]["apiVersion"])


def operation(method: str, path_template: str) -> dict[str, Any]:
    """The spec's description of one operation (required query and header parameters, body schema)."""
    entry: dict[str, Any] = _spec()["paths"][path_template][method.lower()]
    return entry


def _convert(node: Any) -> Any:
    """Swagger schema node -> JSON Schema node (recursively; objects closed when undeclared)."""
    if isinstance(node, list):
        return [_convert(n) for n in node]
    if not isinstance(node, dict):
        return node
    nullable = bool(node.get("x-nullable"))
    if "$ref" in node:
        out: dict[str, Any] = {"$ref": node["$ref"]}
    else:
        out = {k: _convert(v) for k, v in node.items() if k not in _DROP and not k.startswith("x-")}
        if "properties" in node:
            out["properties"] = {k: _convert(v) for k, v in node["properties"].items()}
        if "items" in node:
            out["items"] = _convert(node["items"])
        if node.get("type") == "object" and "properties" in node and "additionalProperties" not in node:
            out["additionalProperties"] = False
        elif "additionalProperties" in node and isinstance(node["additionalProperties"], dict):
            out["additionalProperties"] = _convert(node["additionalProperties"]) or True
    if nullable:
        return {"if": {"type": "null"}, "then": True, "else": out}
    return out


def _subtype_base(definition: dict[str, Any], definitions: dict[str, Any]) -> str | None:
    for part in definition.get("allOf", []):
        ref = part.get("$ref", "")
        name = ref.rsplit("/", 1)[-1]
        if name in definitions:
            return name
    return None


def _flatten(name: str, definitions: dict[str, Any]) -> dict[str, Any]:
    """A definition with its allOf bases merged in (properties and required)."""
    definition = definitions[name]
    properties: dict[str, Any] = {}
    required: list[str] = []
    base = _subtype_base(definition, definitions)
    if base is not None:
        flat_base = _flatten(base, definitions)
        properties.update(flat_base.get("properties", {}))
        required.extend(flat_base.get("required", []))
    properties.update(definition.get("properties", {}))
    required.extend(r for r in definition.get("required", []) if r not in required)
    merged = {k: v for k, v in definition.items() if k not in {"allOf", "properties", "required"}}
    merged["type"] = "object"
    merged["properties"] = properties
    if required:
        merged["required"] = required
    return merged


@cache
def _schema_root() -> dict[str, Any]:
    spec = _spec()
    definitions: dict[str, Any] = spec["definitions"]
    index: dict[str, Any] = spec["discriminatorIndex"]
    converted: dict[str, Any] = {}
    for name, definition in definitions.items():
        if "allOf" in definition:
            flat = _flatten(name, definitions)
            value = definition.get("x-ms-discriminator-value")
            base = _subtype_base(definition, definitions)
            schema = _convert(flat)
            if value is not None and base is not None and base in index:
                prop = index[base]["property"]
                schema["properties"][prop] = {"const": value}
                schema.setdefault("required", [])
                if prop not in schema["required"]:
                    schema["required"].append(prop)
            converted[name] = schema
        else:
            converted[name] = _convert(definition)
    for base, info in index.items():
        prop = info["property"]
        body = copy.deepcopy(converted[base])
        if info.get("trimmed"):
            body.pop("additionalProperties", None)  # subtype properties are unknown here
        chain: dict[str, Any] = body
        for value, subtype in reversed(list(info.get("subtypes", {}).items())):
            chain = {
                "if": {"properties": {prop: {"const": value}}, "required": [prop]},
                "then": {"$ref": f"#/definitions/{subtype}"},
                "else": chain,
            }
        if info.get("subtypes") and not info.get("trimmed"):
            values = list(info["subtypes"])
            chain = {"allOf": [{"required": [prop], "properties": {prop: {"enum": values}}}, chain]}
        converted[base] = chain
    members = definitions["SearchFieldDataType"]["enum"]
    pattern = "^Collection\\((" + "|".join(re.escape(m) for m in members) + ")\\)$"
    converted["SearchFieldDataType"] = {
        "type": "string",
        "anyOf": [{"enum": members}, {"pattern": pattern}],
    }
    return {"definitions": converted}


@cache
def validator(definition: str) -> Draft7Validator:
    """A validator for ``#/definitions/<definition>``."""
    root = dict(_schema_root())
    root["$ref"] = f"#/definitions/{definition}"
    Draft7Validator.check_schema(root)
    return Draft7Validator(root)


def validate(definition: str, instance: Any) -> None:
    """Raise ``AssertionError`` listing every violation of ``definition`` by ``instance``."""
    errors = sorted(validator(definition).iter_errors(instance), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors[:20]]
        raise AssertionError(f"body violates {definition}:\n" + "\n".join(lines))
