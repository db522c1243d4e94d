"""The MCP tools over real HTTP on 127.0.0.1, driven by the official MCP SDK client.

Each behaviour runs under both protocol eras the SDK serves: the handshake era (`legacy`,
what today's harnesses speak) and the 2026-07-28 per-request era (`auto` negotiates it).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import httpx2
import pytest
import trio
import trio.lowlevel
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from pager.domain.api import Caller
from pager.domain.views import encode_cursor
from pager.web.mcp import INSTRUCTIONS, _declares_header_params, call_tool
from pager.web.mcp_tools import TOOLS, Whoami
from pager.web.server import bind_listener, run_web_server
from tests.fakes.fake_messaging import ALICE, BOB, INTERNAL_SECRET, Call, FakeMessagingApi

HEALTH = {"instance_id": "i1", "pid": 1, "version": "0", "schema_version": 3, "started_at": "t"}
CAP = 64 * 1024
MODES = ["legacy", "auto"]

#: Every tool, its argument names and which of them are required (SPEC §8).
TOOL_ARGUMENTS: dict[str, tuple[set[str], set[str]]] = {
    "whoami": (set(), set()),
    "send": ({"to", "body", "thread", "reply_to", "idempotency_key"}, {"to", "body"}),
    "fetch": ({"limit", "wait_s"}, set()),
    "ack": ({"tokens"}, {"tokens"}),
    "roster": ({"scope", "limit", "cursor"}, set()),
    "history": ({"with", "thread", "limit", "full"}, set()),
    "message_status": ({"message_id"}, {"message_id"}),
    "update_agent_alias": ({"alias", "force"}, {"alias"}),
    "move_to_workspace": ({"path"}, {"path"}),
    "reserve": ({"paths", "shared", "ttl_s", "reason"}, {"paths"}),
    "release": ({"paths"}, set()),
    "reservations": ({"scope"}, set()),
}


@asynccontextmanager
async def serving(api: FakeMessagingApi, *, cap: int = CAP, **options: Any) -> AsyncIterator[int]:
    """The web server with /mcp mounted over `api` (`options` go to `run_web_server`); yields
    its port, stops gracefully."""
    sock = bind_listener("127.0.0.1", None, None)
    stop = trio.Event()
    try:
        async with trio.open_nursery() as nursery:
            serve = partial(
                run_web_server,
                host="127.0.0.1",
                sock=sock,
                health=HEALTH,
                request_cap=cap,
                shutdown_trigger=stop.wait,
                api=api,
                **options,
            )
            await nursery.start(serve)
            try:
                yield sock.getsockname()[1]
            finally:
                stop.set()
    finally:
        sock.close()


@asynccontextmanager
async def connect(port: int, mode: str, token: str = "alice-token") -> AsyncIterator[Client]:
    """An SDK client session on /mcp carrying `token` as its static bearer header."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers) as http:
        transport = streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)
        async with Client(transport, mode=mode, cache=None) as client:
            yield client


@pytest.fixture
def fake() -> FakeMessagingApi:
    return FakeMessagingApi()


@pytest.fixture
async def port(fake: FakeMessagingApi) -> AsyncIterator[int]:
    async with serving(fake) as port:
        yield port


def error_of(result: CallToolResult) -> dict[str, Any]:
    """The JSON error a failed tool call carries in its one text block."""
    assert result.is_error
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, TextContent)
    error: dict[str, Any] = json.loads(block.text)
    return error


@pytest.mark.parametrize("mode", MODES)
async def test_list_tools_are_exactly_the_spec_tools(port: int, mode: str) -> None:
    """tools/list offers the nine tools of SPEC §8, each refusing arguments it does not name."""
    with trio.fail_after(10):
        async with connect(port, mode) as client:
            tools = (await client.list_tools()).tools
    assert sorted(tool.name for tool in tools) == sorted(TOOL_ARGUMENTS)
    for tool in tools:
        names, required = TOOL_ARGUMENTS[tool.name]
        schema = tool.input_schema
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False, tool.name
        assert set(schema["properties"]) == names, tool.name
        assert set(schema.get("required", [])) == required, tool.name
        assert tool.description
        assert "\n" not in tool.description


async def test_initialize_names_pager_with_instructions(port: int) -> None:
    """The handshake names the server `pager` and carries the short instructions."""
    with trio.fail_after(10):
        async with connect(port, "legacy") as client:
            assert client.server_info is not None
            assert client.server_info.name == "pager"
            assert client.instructions == INSTRUCTIONS


#: (tool, arguments, the API keyword arguments it must be called with)
ROUND_TRIPS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("whoami", {}, {}),
    (
        "send",
        {"to": "bob", "body": "the parser is yours", "thread": "t1", "idempotency_key": "k1"},
        {
            "to": "bob",
            "body": "the parser is yours",
            "thread": "t1",
            "reply_to": None,
            "idempotency_key": "k1",
        },
    ),
    ("fetch", {}, {"limit": 10, "wait_s": 0.0}),
    ("fetch", {"limit": 3, "wait_s": 0.01}, {"limit": 3, "wait_s": 0.01}),
    ("ack", {"tokens": ["c1", "c2"]}, {"tokens": ["c1", "c2"]}),
    ("roster", {}, {"scope": "workspace", "limit": 100, "cursor": None}),
    ("roster", {"scope": "all"}, {"scope": "all", "limit": 100, "cursor": None}),
    (
        "roster",
        {"limit": 500, "cursor": encode_cursor("roster", "web-1b2c3d/bob")},
        {"scope": "workspace", "limit": 500, "cursor": encode_cursor("roster", "web-1b2c3d/bob")},
    ),
    (
        "history",
        {"with": "bob@web-1b2c3d", "limit": 5},
        {"with_": "bob@web-1b2c3d", "thread": None, "limit": 5},
    ),
    ("message_status", {"message_id": "msg_1"}, {"message_id": "msg_1"}),
    ("update_agent_alias", {"alias": "parser", "force": True}, {"alias": "parser", "force": True}),
    ("move_to_workspace", {"path": "/src/web"}, {"path": "/src/web"}),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("tool", "arguments", "expected"), ROUND_TRIPS)
async def test_tool_calls_api_as_caller_and_returns_structured_json(
    fake: FakeMessagingApi,
    port: int,
    mode: str,
    tool: str,
    arguments: dict[str, Any],
    expected: dict[str, Any],
) -> None:
    """Each tool calls the same-named API method as the token's Caller with its arguments,
    and returns the API's dict as structured content plus a text copy: JSON, except for the
    tools that show message bodies, whose text is the envelope rendering."""
    with trio.fail_after(10):
        async with connect(port, mode) as client:
            result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert fake.calls == [Call(tool, ALICE, expected)]
    assert isinstance(result.structured_content, dict)
    block = result.content[0]
    assert isinstance(block, TextContent)
    if tool in ("fetch", "history"):
        assert block.text in ("No messages waiting.", "No messages.")
    else:
        assert json.loads(block.text) == result.structured_content


@pytest.mark.parametrize("mode", MODES)
async def test_concurrent_sessions_each_run_as_their_own_caller(
    fake: FakeMessagingApi, port: int, mode: str
) -> None:
    """Two sessions calling at once: every call runs as the Caller of its own token."""

    async def session(token: str, expected: Caller) -> None:
        async with connect(port, mode, token) as client:
            for _ in range(5):
                result = await client.call_tool("whoami", {})
                assert result.structured_content is not None
                assert result.structured_content["agent_id"] == expected.agent_id
                await trio.lowlevel.checkpoint()  # let the other session interleave

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session, "alice-token", ALICE)
            nursery.start_soon(session, "bob-token", BOB)
    assert (
        sorted(call.caller.agent_id for call in fake.calls) == ["agt_alice"] * 5 + ["agt_bob"] * 5
    )


@pytest.mark.parametrize("mode", MODES)
async def test_pager_error_is_a_tool_error_with_its_json(
    fake: FakeMessagingApi, port: int, mode: str
) -> None:
    """A PagerError from the API reaches the model as a tool error whose text is its JSON."""
    with trio.fail_after(10):
        async with connect(port, mode) as client:
            result = await client.call_tool("send", {"to": "nobody", "body": "hi"})
    assert error_of(result) == {
        "code": "unknown_recipient",
        "message": "no agent is reachable as 'nobody'",
        "to": "nobody",
    }
    assert result.structured_content is None
    assert [call.method for call in fake.calls] == ["send"]


async def test_unexpected_failure_is_internal_without_details(
    port: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Any other exception is `internal` to the model, with the traceback only in the log."""
    with trio.fail_after(10):
        async with connect(port, "legacy") as client:
            result = await client.call_tool("message_status", {"message_id": "boom"})
    error = error_of(result)
    assert error["code"] == "internal"
    assert INTERNAL_SECRET not in json.dumps(error)
    logged = [r for r in caplog.records if r.name == "pager.web.mcp" and r.exc_info]
    assert logged
    assert INTERNAL_SECRET in str(logged[0].exc_info[1])  # type: ignore[index]


async def test_tool_outside_an_authenticated_request_fails_closed(fake: FakeMessagingApi) -> None:
    """Without the dispatcher's Caller (a mount that skipped it), no tool runs as anyone."""
    result = await call_tool(fake, Whoami, {})
    assert error_of(result)["code"] == "unauthenticated"
    assert fake.calls == []


#: (tool, arguments, the argument the error must name)
INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("send", {"body": "hi"}, "to"),  # missing
    ("send", {"to": "bob", "body": "hi", "cc": "carol"}, "cc"),  # extra
    ("send", {"to": 7, "body": "hi"}, "to"),  # wrong type
    ("send", {"to": "", "body": "hi"}, "to"),  # too short
    ("send", {"to": "bob", "body": "hi", "idempotency_key": "k" * 201}, "idempotency_key"),
    ("fetch", {"limit": 0}, "limit"),
    ("fetch", {"limit": "10"}, "limit"),  # no coercion from strings
    ("fetch", {"wait_s": 61}, "wait_s"),
    ("ack", {"tokens": []}, "tokens"),
    ("ack", {"tokens": ["t" * 201]}, "tokens"),
    ("ack", {"tokens": "c1"}, "tokens"),
    ("roster", {"scope": "galaxy"}, "scope"),
    ("roster", {"limit": 501}, "limit"),
    ("roster", {"cursor": "0"}, "cursor"),
    ("roster", {"cursor": encode_cursor("agents", "agt_x")}, "cursor"),  # another view's
    ("history", {"with_": "bob"}, "with_"),  # the Python name is not an argument
    ("history", {"limit": 201}, "limit"),
    ("message_status", {}, "message_id"),
    ("update_agent_alias", {"alias": "a" * 65}, "alias"),
    ("update_agent_alias", {"alias": "parser", "force": "yes"}, "force"),
    ("move_to_workspace", {"path": None}, "path"),
    ("whoami", {"me": True}, "me"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("tool", "arguments", "argument"), INVALID)
async def test_invalid_arguments_are_validation_failed_and_change_nothing(
    fake: FakeMessagingApi,
    port: int,
    mode: str,
    tool: str,
    arguments: dict[str, Any],
    argument: str,
) -> None:
    """Bad arguments: a `validation_failed` tool error naming the argument; no API call."""
    with trio.fail_after(10):
        async with connect(port, mode) as client:
            result = await client.call_tool(tool, arguments)
    error = error_of(result)
    assert error["code"] == "validation_failed"
    assert error["arguments"] == [argument]
    assert repr(argument) in error["message"]
    assert fake.calls == []


async def test_validation_message_never_echoes_values(port: int) -> None:
    """The error names the problem, not the rejected value (which may be a message body)."""
    with trio.fail_after(10):
        async with connect(port, "legacy") as client:
            result = await client.call_tool("send", {"to": "bob", "body": ["secret-body"]})
    error = error_of(result)
    assert error["arguments"] == ["body"]
    assert "secret-body" not in json.dumps(error)


async def test_shutdown_ends_an_in_flight_long_poll(fake: FakeMessagingApi) -> None:
    """A graceful stop does not wait out a long poll: the server is gone within the bound."""
    outcome: list[BaseException] = []

    async def long_poll(port: int) -> None:
        try:
            async with connect(port, "legacy") as client:
                await client.call_tool("fetch", {"wait_s": 60})
        except Exception as exc:  # the server went away mid-call, as it should
            outcome.append(exc)

    with trio.fail_after(15):
        async with trio.open_nursery() as outer:
            async with serving(fake) as port:
                outer.start_soon(long_poll, port)
                await fake.long_poll_started.wait()
                stopping = trio.current_time()
            # `serving` returns only when run_web_server has returned.
            assert trio.current_time() - stopping < 3
    assert outcome, "the long poll cannot have been answered"


async def test_tool_errors_are_not_logged_with_tokens(
    port: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing the MCP edge logs carries a session token."""
    caplog.set_level(logging.DEBUG)
    with trio.fail_after(10):
        async with connect(port, "legacy") as client:
            await client.call_tool("send", {"to": "nobody", "body": "hi"})
            await client.call_tool("fetch", {"limit": 0})
    assert caplog.records
    assert not [r for r in caplog.records if "alice-token" in r.getMessage()]


def test_no_tool_declares_header_params_so_the_sdk_skips_its_schema_walk() -> None:
    """`create_mcp` tells the SDK there is no `x-mcp-header` to check only while that holds."""
    assert not any(_declares_header_params(spec.input_schema()) for spec in TOOLS)
    declared = {"properties": {"to": {"type": "string", "x-mcp-header": "To"}}}
    assert _declares_header_params(declared)
