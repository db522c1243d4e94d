"""The OpenAPI document of `/v1` (pager/web/openapi.py): it lists exactly the routes the app
serves, it is valid OpenAPI 3.1, and its schemas describe what the views really return."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import jsonschema  # type: ignore[import-untyped]  # no stubs installed
import pytest
import schemathesis
from quart import Blueprint
from referencing import Registry
from referencing.jsonschema import DRAFT202012

import pager.web
from pager.domain import ids
from pager.domain.records import Identity, MessageState
from pager.domain.views import AgentPage, Archived, MessagePage, Purged, Unarchived, encode_cursor
from pager.domain.workspace import Workspace
from pager.requests import cursor_pattern
from pager.store import close_database, open_database, views
from pager.store import messaging as ms
from pager.web.app import create_quart_app
from pager.web.openapi import ROUTES, build_document
from pager.wire import unstructure

NOW = 1_800_000_000.0
HEALTH = {
    "instance_id": "i1", "pid": 1, "version": "0", "schema_version": 4, "started_at": "t",
    "status": "ok",
}  # fmt: skip


def _blueprint_factories() -> Iterator[tuple[str, Any]]:
    """Every `*_blueprint` factory defined in a module of `pager.web`."""
    for info in pkgutil.iter_modules(pager.web.__path__):
        module = importlib.import_module(f"pager.web.{info.name}")
        for name, value in vars(module).items():
            if (
                name.endswith("_blueprint")
                and inspect.isfunction(value)
                and value.__module__ == module.__name__
            ):
                yield f"{module.__name__}.{name}", value


def _served_v1_routes() -> set[tuple[str, str]]:
    """(method, OpenAPI path) of every `/v1` rule of an app holding every blueprint."""
    blueprints = []
    for _name, factory in _blueprint_factories():
        arguments = {
            name: MagicMock()
            for name, parameter in inspect.signature(factory).parameters.items()
            if parameter.default is inspect.Parameter.empty
        }
        blueprint = factory(**arguments)
        assert isinstance(blueprint, Blueprint)
        blueprints.append(blueprint)
    app = create_quart_app(HEALTH, blueprints)
    served = set()
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith("/v1/"):
            continue
        path = re.sub(r"<(?:[a-z_]+:)?([a-z_]+)>", r"{\1}", rule.rule)
        for method in rule.methods or ():
            if method not in ("HEAD", "OPTIONS"):
                served.add((method.lower(), path))
    return served


def test_openapi_lists_exactly_the_served_v1_routes() -> None:
    """Every `/v1` route the app serves is described, and nothing else is."""
    factories = {name for name, _ in _blueprint_factories()}
    assert "pager.web.routes_operator.operator_blueprint" in factories
    assert "pager.web.routes_v1.v1_blueprint" in factories
    document = build_document()
    described = {(method, path) for path, item in document["paths"].items() for method in item}
    assert described == _served_v1_routes()
    assert len({route.operation_id for route in ROUTES}) == len(ROUTES)


def test_openapi_document_is_valid_openapi_31() -> None:
    """The document validates against the OpenAPI 3.1 schema (as schemathesis loads it),
    every component is a valid 2020-12 JSON Schema, and every `$ref` resolves."""
    document = build_document()
    assert document["openapi"] == "3.1.0"
    schemathesis.openapi.from_dict(document).validate()
    for schema in document["components"]["schemas"].values():
        jsonschema.Draft202012Validator.check_schema(schema)
    refs = re.findall(r'"\$ref": "#/components/schemas/([A-Za-z]+)"', json.dumps(document))
    assert refs
    assert set(refs) <= set(document["components"]["schemas"])


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = open_database(tmp_path / "pager.db")
    yield connection
    close_database(connection)


def _validator(name: str) -> jsonschema.Draft202012Validator:
    document = build_document()
    registry: Registry[Any] = Registry().with_resource(
        "urn:pager", DRAFT202012.create_resource(document)
    )
    schema = {"$ref": f"urn:pager#/components/schemas/{name}"}
    return jsonschema.Draft202012Validator(schema, registry=registry)


def test_openapi_schemas_describe_what_the_views_return(conn: sqlite3.Connection) -> None:
    """The snapshot, pages and action results built from a real store validate against the
    document's schemas (so the document is not a wish list)."""
    ms.ensure_workspace(conn, Workspace("/src/api", "api-0a1b2c", "/src/api"), NOW)
    made = []
    for alias in ("alice", "bob"):
        agent_id = ids.new_agent_id()
        ms.insert_identity(
            conn, Identity(agent_id, "/src/api", alias, True, "shell", NOW, NOW), alias
        )
        made.append(agent_id)
    alice, bob = made
    for body in ("one", "two"):
        ms.insert_message(
            conn,
            message_id=ids.new_message_id(),
            sender_id=alice,
            recipient_id=bob,
            body=body,
            thread="t",
            reply_to=None,
            now=NOW,
        )
    snapshot = views.snapshot(conn, {"ok": True, **HEALTH})
    agents, _ = views.list_agents(conn, workspace=None, archived=None, limit=1, after=None)
    messages, _ = views.agent_messages(
        conn, bob, state=MessageState.QUEUED, direction="both", limit=1, before=None
    )
    agent = views.get_agent(conn, bob)
    assert agent is not None
    samples = {
        "Snapshot": snapshot,
        "AgentPage": AgentPage(tuple(agents), "Y3Vyc29y"),
        "MessagePage": MessagePage(tuple(messages), None),
        "Agent": agent,
        "Archived": Archived(agent, 1),
        "Unarchived": Unarchived(agent),
        "Purged": Purged(bob, "bob", "bob@api-0a1b2c", 0, 2),
    }
    for name, value in samples.items():
        _validator(name).validate(unstructure(value))
    with pytest.raises(jsonschema.ValidationError):
        _validator("Agent").validate({**unstructure(agent), "extra": 1})


@pytest.mark.parametrize(
    ("view", "keys"),
    [("agents", ["", "agt_0123456789abcdef", "é\u0000x" * 9]), ("messages", [0, -1, 2**63 - 1])],
)
def test_openapi_cursor_pattern_matches_every_cursor_its_view_hands_out(
    view: str, keys: list[str | int]
) -> None:
    """A view's cursor pattern admits any cursor `encode_cursor` makes for it, not others'."""
    other = "messages" if view == "agents" else "agents"
    for key in keys:
        cursor = encode_cursor(view, key)
        assert re.fullmatch(cursor_pattern(view), cursor)
        assert not re.fullmatch(cursor_pattern(other), cursor)


def test_the_roster_cursor_is_a_query_parameter_with_the_pattern_of_its_view() -> None:
    """`GET /v1/me/roster` takes the `roster` tool's arguments; its cursor has the shape
    every view's cursor has (the tool spells the pattern itself, not to import the server)."""
    document = build_document()
    parameters = {p["name"]: p for p in document["paths"]["/v1/me/roster"]["get"]["parameters"]}
    assert {"scope", "limit", "cursor"} <= set(parameters)
    assert parameters["limit"]["schema"] == {
        "type": "integer", "minimum": 1, "maximum": 500, "default": 100
    }  # fmt: skip
    string = parameters["cursor"]["schema"]
    assert string["type"] == ["string", "null"]
    assert string["pattern"] == cursor_pattern("roster")
    assert string["format"] == "roster-cursor"
    for key in ["repo-1b2c3d/bob", "/", "é\u0000/x" * 9]:
        cursor = encode_cursor("roster", key)
        assert re.fullmatch(cursor_pattern("roster"), cursor)
        assert not re.fullmatch(cursor_pattern("agents"), cursor)
    roster = document["components"]["schemas"]["Roster"]
    assert roster["properties"]["next_cursor"] == {"type": ["string", "null"]}
    assert "next_cursor" in roster["required"]
