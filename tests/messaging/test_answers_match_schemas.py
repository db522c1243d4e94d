"""Each answer of the messaging API, made by the real service on a real store, is what its one
definition (`pager.domain.results`) says: it validates against the MCP tool's `outputSchema`
and against the OpenAPI component of its `/v1/me` route, and both schemas are the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import jsonschema  # type: ignore[import-untyped]  # no stubs installed
import pytest
import trio
from referencing import Registry
from referencing.jsonschema import DRAFT202012
from trio.testing import MockClock

from pager.domain import results
from pager.schema import object_schema, type_schema
from pager.web.mcp_tools import TOOLS
from pager.web.openapi import ANSWERS, build_document
from pager.wire import unstructure
from tests.messaging.conftest import Harness, http_delivery

DOCUMENT = build_document()
REGISTRY: Registry[Any] = Registry().with_resource(
    "urn:pager", DRAFT202012.create_resource(DOCUMENT)
)
COMPONENT_OF = {cls: name for name, cls in ANSWERS.items()}


def _check(answer: object, schema_cls: type) -> dict[str, Any]:
    """`answer` as JSON, validated against the inline schema of `schema_cls` (the tools'
    `outputSchema`) and its OpenAPI component."""
    data: dict[str, Any] = unstructure(answer)
    jsonschema.Draft202012Validator(object_schema(schema_cls)).validate(data)
    ref = {"$ref": f"urn:pager#/components/schemas/{COMPONENT_OF[schema_cls]}"}
    jsonschema.Draft202012Validator(ref, registry=REGISTRY).validate(data)
    return data


async def test_every_answer_validates_against_its_schemas(
    harness: Harness, autojump_clock: MockClock, tmp_path: Path
) -> None:
    service = harness.service.unwrapped
    with trio.fail_after(60):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob")
        me = await service.whoami(alice)
        assert _check(me, results.Me)["session"]["id"] == alice.session_id
        acting = results.MeActing(
            **attrs.asdict(me, recurse=False), acting_as=results.ActingAs.SESSION
        )
        assert _check(acting, results.MeActing)["acting_as"] == "session"
        sent = await service.send(alice, to="bob", body="hello", thread="t1")
        assert _check(sent, results.SendResult)["wake"] == "queued"
        assert _check(await service.inbox(bob), results.Waiting)["waiting"] == 1
        fetched = _check(await service.fetch(bob), results.Claims)
        [claim] = fetched["claims"]
        assert claim["message"]["from"].startswith("alice@")  # the wire name of `sender`
        assert "envelope" not in claim  # only /v1/me/claim adds it
        acked = await service.ack(bob, tokens=[claim["token"], "nonsense"])
        assert _check(acked, results.AckResult)["not_applied"][0]["reason"] == "unknown_token"
        roster = _check(await service.roster(alice), results.RosterPage)
        assert {agent["alias"] for agent in roster["agents"]} == {"alice", "bob"}
        history = _check(await service.history(alice), results.HistoryPage)
        assert history["messages"][0]["direction"] == "sent"
        _check(await service.sent(alice), results.SentPage)
        status = await service.message_status(alice, message_id=sent.message_id)
        assert _check(status, results.MessageStatus)["state"] == "acknowledged"
        renamed = _check(await service.update_agent_alias(bob, alias="robert"), results.AliasResult)
        assert set(renamed) == {"agent_id", "alias", "address"}  # no takeover, no move
        _, carol = await harness.register("carol", delivery=http_delivery())
        taken = await service.update_agent_alias(carol, alias="robert", force=True)
        assert set(_check(taken, results.AliasResult)) >= {"taken_over", "session"}
        moved = await service.move_to_workspace(alice, path=str(tmp_path))
        assert _check(moved, results.AliasResult)["workspace"] == str(tmp_path)


def test_each_tool_advertises_its_answers_schema_as_the_openapi_document_does() -> None:
    """One definition: a tool's `outputSchema` is its answer's OpenAPI component, inlined."""

    def inline(schema: Any) -> Any:
        if isinstance(schema, dict):
            if set(schema) == {"$ref"}:
                return inline(DOCUMENT["components"]["schemas"][schema["$ref"].split("/")[-1]])
            return {key: inline(value) for key, value in schema.items()}
        if isinstance(schema, list):
            return [inline(item) for item in schema]
        return schema

    for tool in TOOLS:
        component = COMPONENT_OF.get(tool.result)
        assert component is not None, f"{tool.name}: its answer has no OpenAPI component"
        assert tool.output_schema() == inline(DOCUMENT["components"]["schemas"][component])
        assert tool.output_schema()["type"] == "object"  # what MCP requires of outputSchema


def test_optional_keys_are_left_out_and_renamed_keys_renamed() -> None:
    plain = results.AliasResult(agent_id="agt_1", alias="bob", address="bob@ws-123456")
    assert unstructure(plain) == {"agent_id": "agt_1", "alias": "bob", "address": "bob@ws-123456"}
    schema = object_schema(results.AliasResult)
    assert schema["required"] == ["agent_id", "alias", "address"]
    assert schema["properties"]["workspace"] == {"type": "string"}  # absent, never null
    assert object_schema(results.MailMessage)["properties"]["from"]["type"] == "string"
    assert "sender" not in object_schema(results.MailMessage)["properties"]


def test_a_type_without_a_json_schema_is_refused() -> None:
    @attrs.frozen
    class Odd:
        when: complex

    with pytest.raises(TypeError, match="no JSON Schema"):
        object_schema(Odd)
    assert type_schema(int | None) == {"type": ["integer", "null"]}
