"""One definition per request shape (pager/requests.py): the MCP tools' `inputSchema` and the
OpenAPI document's request bodies and queries are generated from it, and the structurer
(`pager.wire.structure`) accepts exactly what each schema advertises."""

from __future__ import annotations

import inspect
import re
from typing import Any

import attrs
import jsonschema  # type: ignore[import-untyped]  # no stubs installed
import pytest

from pager import requests
from pager.domain.errors import PagerError
from pager.domain.views import encode_cursor
from pager.schema import request_schema, wire_name
from pager.web.mcp_tools import TOOLS
from pager.web.openapi import REQUESTS, build_document
from pager.wire import structure, structure_query

#: Every request class of pager/requests.py.
CLASSES = [
    cls
    for _, cls in inspect.getmembers(requests, inspect.isclass)
    if attrs.has(cls) and cls.__module__ == requests.__name__
]
#: Where each request is read: its OpenAPI operation, as a body or as the query.
ROUTES: dict[type, tuple[str, str, str]] = {
    requests.SendRequest: ("/v1/me/send", "post", "body"),
    requests.FetchRequest: ("/v1/me/claim", "post", "body"),
    requests.AckRequest: ("/v1/me/ack", "post", "body"),
    requests.RosterRequest: ("/v1/me/roster", "get", "query"),
    requests.HistoryRequest: ("/v1/me/history", "get", "query"),
    requests.UpdateAgentAliasRequest: ("/v1/me/alias", "post", "body"),
    requests.ListingRequest: ("/v1/me/inbox", "get", "query"),
    requests.ClaimIdentityRequest: ("/v1/me/claim-identity", "post", "body"),
    requests.NotifyRequest: ("/v1/me/notify", "post", "body"),
    requests.CreateTokenRequest: ("/v1/tokens", "post", "body"),
}
#: Values of the fields whose pattern a plain `a` does not meet.
SAMPLES: dict[str, object] = {
    "to": "bob",
    "with": "bob@web-1b2c3d",
    "alias": "parser",
    "name": "parser",
    "session_name": "parser",
    "workspace": "/",
    "implementation": "shell",
    "cursor": encode_cursor("roster", "web-1b2c3d/bob"),
    "url": "http://127.0.0.1:9/inbox",
    "path": "/run/pager.sock",
    "harness": "4242:1700000000",
    "page": {"message": "build done"},
    "kind": None,  # per variant, below
}


def _sample(name: str, schema: dict[str, Any]) -> object:
    """A value `schema` (one property's) admits."""
    if "default" in schema:
        return schema["default"]
    if schema.get("type") == "null":
        return None
    if "enum" in schema:
        return schema["enum"][0]
    if name in SAMPLES and SAMPLES[name] is not None:
        return SAMPLES[name]
    if "anyOf" in schema:
        return _sample(name, schema["anyOf"][0])
    kinds = schema.get("type")
    kind = kinds[0] if isinstance(kinds, list) else kinds
    if kind == "string":
        return "a" * max(1, schema.get("minLength", 1))
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return True
    if kind == "array":
        return [_sample(name, schema["items"])] * max(1, schema.get("minItems", 1))
    if kind == "object":
        return {
            key: _sample(key, prop)
            for key, prop in schema["properties"].items()
            if key in schema.get("required", ())
        }
    raise AssertionError(f"no sample for {name}: {schema}")


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


def _minimal(cls: type) -> dict[str, Any]:
    schema = request_schema(cls)
    return {name: _sample(name, schema["properties"][name]) for name in schema.get("required", ())}


def test_every_request_class_is_listed() -> None:
    """The classes this file walks are every request (a new one is checked too)."""
    assert len(CLASSES) >= 19
    assert {cls for cls in ROUTES} | set(REQUESTS.values()) <= set(CLASSES)


@pytest.mark.parametrize("spec", TOOLS, ids=lambda spec: spec.name)
def test_tool_input_schema_is_its_request_class_schema(spec: Any) -> None:
    """A tool advertises its request class's generated schema, and so does its `/v1/me` route."""
    assert spec.input_schema() == request_schema(spec.request)


@pytest.mark.parametrize("cls", list(ROUTES), ids=lambda cls: cls.__name__)
def test_openapi_request_is_generated_from_its_class(cls: type) -> None:
    """Each request body and query of the OpenAPI document is its class's schema."""
    path, method, where = ROUTES[cls]
    operation = build_document()["paths"][path][method]
    schema = request_schema(cls)
    if where == "body":
        assert operation["requestBody"]["content"]["application/json"]["schema"] == schema
    else:
        query = {p["name"]: p for p in operation["parameters"] if p["in"] == "query"}
        assert {name: p["schema"] for name, p in query.items()} == schema["properties"]
        required = {name for name, p in query.items() if p["required"]}
        assert required == set(schema.get("required", ()))


@pytest.mark.parametrize("name", list(REQUESTS))
def test_openapi_request_components_are_generated_from_their_class(name: str) -> None:
    """The request components (register, hook, wake) are their classes' schemas."""
    components = build_document()["components"]["schemas"]
    generated = request_schema(
        REQUESTS[name], lambda cls: {"$ref": f"#/components/schemas/{cls.__name__}"}
    )
    assert components[name] == generated


def _fields(cls: type) -> list[tuple[type, str]]:
    return [(cls, name) for name in request_schema(cls)["properties"]]


@pytest.mark.parametrize(
    ("cls", "name"),
    [pair for cls in CLASSES for pair in _fields(cls)],
    ids=lambda value: value if isinstance(value, str) else value.__name__,
)
def test_every_advertised_field_is_accepted_and_a_wrong_type_refused(cls: type, name: str) -> None:
    """A value the schema admits for a field is structured; a value of another JSON type that
    the schema refuses is refused naming that field (schema and parser cannot disagree)."""
    schema = request_schema(cls)
    body = {**_minimal(cls), name: _sample(name, schema["properties"][name])}
    jsonschema.Draft202012Validator(schema).validate(body)
    structure(body, cls, what="t")
    wrongs: tuple[object, ...] = ("1", 1, 1.5, True, [], {})
    for wrong in wrongs:
        candidate = {**body, name: wrong}
        same_type = _json_type(wrong) == _json_type(body[name])  # bounds: the next test's
        if same_type or jsonschema.Draft202012Validator(schema).is_valid(candidate):
            continue
        with pytest.raises(PagerError) as refused:
            structure(candidate, cls, what="t")
        assert refused.value.details["arguments"] == [name], (cls.__name__, name, wrong)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_every_field_not_advertised_is_refused(cls: type) -> None:
    """A key the schema does not list (an unknown one, a Python name unlike its wire name)
    is refused by the structurer, as the schema's `additionalProperties: false` says."""
    schema = request_schema(cls)
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == {wire_name(f) for f in attrs.fields(cls)}
    others = {"unknown", *(f.name for f in attrs.fields(cls))} - set(schema["properties"])
    for key in others:
        with pytest.raises(PagerError) as refused:
            structure({**_minimal(cls), key: "a"}, cls, what="t")
        assert refused.value.details["arguments"] == [key]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_the_bounds_a_schema_advertises_are_the_structurers(cls: type) -> None:
    """Each bound the structurer checks is in the schema; at it the value is accepted, one
    past it refused naming the field."""
    schema = request_schema(cls)
    for field in attrs.fields(cls):
        check = field.metadata.get("check", {})
        name = wire_name(field)
        advertised = schema["properties"][name]
        for keyword, bound in check.items():
            shown = advertised["items"] if keyword == "items" else advertised[keyword]
            assert shown == bound or keyword == "items", (cls.__name__, name, keyword)
        edges: list[tuple[object, bool]] = []
        if "maxLength" in check and "pattern" not in advertised:  # `a`s meet no pattern
            edges += [("a" * check["maxLength"], True), ("a" * (check["maxLength"] + 1), False)]
        if "minimum" in check:
            edges += [(check["minimum"], True), (check["minimum"] - 1, False)]
        if "maximum" in check:
            edges += [(check["maximum"], True), (check["maximum"] + 1, False)]
        if "maxItems" in check:
            edges += [(["a"] * check["maxItems"], True), (["a"] * (check["maxItems"] + 1), False)]
        for value, admitted in edges:
            body = {**_minimal(cls), name: value}
            if admitted:
                structure(body, cls, what="t")
                continue
            with pytest.raises(PagerError) as refused:
                structure(body, cls, what="t")
            assert refused.value.details["arguments"] == [name]


def test_query_values_are_read_as_their_field_types() -> None:
    """On a query string numbers and booleans come as text; anything else stays refused."""
    parsed = structure_query(
        {"limit": "5", "full": "true", "with": "bob"}, requests.HistoryRequest, what="history"
    )
    assert (parsed.limit, parsed.full, parsed.with_) == (5, True, "bob")
    for bad in ({"limit": "five"}, {"limit": "nan"}, {"full": "maybe"}, {"colour": "red"}):
        with pytest.raises(PagerError):
            structure_query(bad, requests.HistoryRequest, what="history")


def test_a_pattern_ends_at_the_end_of_the_text() -> None:
    """`$` in a schema's pattern is the end of the text (as JSON Schema reads it), so a label
    with a trailing newline is refused, as the document's pattern says."""
    pattern = request_schema(requests.CreateTokenRequest)["properties"]["label"]["pattern"]
    assert re.search(pattern, "ok\n")  # Python's own `$` would admit it
    with pytest.raises(PagerError):
        structure({"to": "bob", "workspace": "/", "label": "ok\n"}, requests.CreateTokenRequest)
