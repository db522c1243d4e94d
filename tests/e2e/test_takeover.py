"""Forced takeovers (SPEC §7) on a real broker: the MCP tool `update_agent_alias` with
`force`, the operator event it records, and `allow_force = false` in config.toml."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from tests.e2e.conftest import (
    BOTH,
    FAST_WINDOWS,
    Broker,
    mcp_session,
    session_events,
    start_broker,
    structured,
    tool_error,
)
from tests.launch.conftest import PagerHome

STORES = BOTH


@pytest.fixture
def no_force_broker(tmp_path: Path, store_env: dict[str, str]) -> Iterator[Broker]:
    """A broker whose config.toml says `allow_force = false`."""
    home = PagerHome(tmp_path / "home")
    home.root.mkdir(mode=0o700, parents=True)
    (home.root / "config.toml").write_text("allow_force = false\n")
    yield start_broker(home, tmp_path / "repo", **FAST_WINDOWS, **store_env)
    home.kill_all()


async def _replayed_events(broker: Broker) -> list[dict[str, Any]]:
    """Every retained operator event (`Last-Event-ID: 0`), up to the `ready` frame."""
    headers = {"Authorization": f"Bearer {broker.secret}", "Last-Event-ID": "0"}
    events: list[dict[str, Any]] = []
    async with (
        httpx2.AsyncClient(timeout=30) as http,
        http.stream("GET", f"{broker.url}/v1/events", headers=headers) as response,
    ):
        assert response.status_code == 200
        event = ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
                if event == "ready":
                    break
            elif line.startswith("data: ") and "." in event:
                events.append(json.loads(line.removeprefix("data: ")))
    return events


async def test_mcp_update_agent_alias_force_hands_over_the_identity(broker: Broker) -> None:
    """carol's `update_agent_alias {alias: alice, force: true}` gives carol alice's identity
    and inbox; alice's stream is told `ended` and her next call runs as a fresh unnamed
    agent; `agent.taken_over` names both sessions."""
    alice = await broker.register("alice")
    bob = await broker.register("bob")
    carol = await broker.register("carol")
    alice_stream: list[str] = []
    live = trio.Event()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session_events, broker, alice["token"], alice_stream, live)
            async with (
                mcp_session(broker.url, bob["token"]) as b,
                mcp_session(broker.url, carol["token"]) as c,
                mcp_session(broker.url, alice["token"]) as a,
            ):
                structured(await b.call_tool("send", {"to": "alice", "body": "for alice"}))
                await live.wait()
                taken = structured(
                    await c.call_tool("update_agent_alias", {"alias": "alice", "force": True})
                )
                assert taken["agent_id"] == alice["agent_id"]
                assert taken["address"] == alice["address"]
                me = structured(await c.call_tool("whoami", {}))
                assert (me["agent_id"], me["alias"]) == (alice["agent_id"], "alice")
                [claim] = structured(await c.call_tool("fetch", {}))["claims"]
                assert claim["message"]["body"] == "for alice"
                fresh = structured(await a.call_tool("whoami", {}))
                assert fresh["agent_id"] not in (alice["agent_id"], carol["agent_id"])
                assert fresh["durable"] is False
                assert structured(await a.call_tool("fetch", {}))["claims"] == []
    assert alice_stream == ["ready", "ended"]
    with trio.fail_after(30):
        [event] = [e for e in await _replayed_events(broker) if e["type"] == "agent.taken_over"]
    assert event["data"]["agent_id"] == alice["agent_id"]
    assert event["data"]["via"] == "update_agent_alias"
    assert event["data"]["ended_session_id"] == alice["session_id"]
    assert event["data"]["session_id"] == me["session"]["id"]
    assert event["data"]["holder_agent_id"] == fresh["agent_id"]
    assert event["data"]["previous_session_id"] == carol["session_id"]


async def test_allow_force_false_refuses_force_on_both_edges(no_force_broker: Broker) -> None:
    """With `allow_force = false`, a forced registration is `409 conflict` and the forced
    alias tool a `conflict` tool error, both naming config.toml; alice keeps her identity."""
    broker = no_force_broker
    alice = await broker.register("alice")
    carol = await broker.register("carol")
    body = {
        "workspace": str(broker.workspace),
        "implementation": "shell",
        "session_name": "alice",
        "force": True,
    }
    with trio.fail_after(60):
        status, answer = await broker.post("/v1/register", body, token=broker.secret)
        assert status == 409
        assert answer["error"]["code"] == "conflict"
        assert "allow_force = false in config.toml" in answer["error"]["message"]
        async with (
            mcp_session(broker.url, carol["token"]) as c,
            mcp_session(broker.url, alice["token"]) as a,
        ):
            error = tool_error(
                await c.call_tool("update_agent_alias", {"alias": "alice", "force": True})
            )
            assert error["code"] == "conflict"
            assert "config.toml" in error["message"]
            assert structured(await c.call_tool("whoami", {}))["agent_id"] == carol["agent_id"]
            assert structured(await a.call_tool("whoami", {}))["agent_id"] == alice["agent_id"]
        events = await _replayed_events(broker)
    assert not [e for e in events if e["type"] == "agent.taken_over"]
