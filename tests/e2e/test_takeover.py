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
from tests.e2e.test_everyday_cli import pager
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
    # `mail` (bob's message waiting, when it came after the stream opened) is only a hint.
    assert [event for event in alice_stream if event != "mail"] == ["ready", "ended"]
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
            assert "retry without force" in error["message"]
            assert "--force" not in error["message"]
            assert structured(await c.call_tool("whoami", {}))["agent_id"] == carol["agent_id"]
            assert structured(await a.call_tool("whoami", {}))["agent_id"] == alice["agent_id"]
        events = await _replayed_events(broker)
    assert not [e for e in events if e["type"] == "agent.taken_over"]
    # The command line (inside carol's session) is told its flag, not the tool.
    done = pager(broker, broker.workspace, "alias", "alice", "--force", PAGER_TOKEN=carol["token"])
    assert done.returncode == 1
    assert "run it again without --force" in done.stderr
    assert "update_agent_alias" not in done.stderr
    assert "retry without force" not in done.stderr


async def _whoami(broker: Broker, token: str) -> dict[str, Any]:
    """`GET /v1/me` with a session token: who that token acts as now."""
    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.get(
            f"{broker.url}/v1/me", headers={"Authorization": f"Bearer {token}"}
        )
    assert response.status_code == 200, response.text
    me: dict[str, Any] = response.json()
    return me


async def _attached(broker: Broker, *aliases: str) -> list[str]:
    """Those of `aliases` whose agent has a live session, each once per session (the
    snapshot's)."""
    [workspace] = (await broker.snapshot())["workspaces"]
    return [
        agent["alias"]
        for agent in workspace["agents"]
        if agent["alias"] in aliases
        for _ in agent["sessions"]
    ]


async def test_repeated_claim_identity_moves_the_session_each_time(broker: Broker) -> None:
    """A malicious agent claims one detached identity after another and back again over
    `/v1/me/claim-identity` (alpha, beta, alpha…, with and without force, and back to its
    own): every claim answers 200 and carries its token, resume token and only session to
    the identity it names; the identities it left stay detached and whole."""
    alpha = await broker.register("alpha")
    beta = await broker.register("beta")
    for held in (alpha, beta):
        status, _ = await broker.post("/v1/sessions/current/detach", {}, token=held["token"])
        assert status == 200
    mallory = await broker.register("mallory")
    ids = {"alpha": alpha["agent_id"], "beta": beta["agent_id"], "mallory": mallory["agent_id"]}
    claims = ["alpha", "beta", "alpha", "beta", "mallory", "alpha", "beta"]
    with trio.fail_after(60):
        for round_, name in enumerate(claims):
            body = {"name": name, "force": round_ % 2 == 1}
            status, answer = await broker.post(
                "/v1/me/claim-identity", body, token=mallory["token"]
            )
            assert status == 200, (round_, answer)
            assert answer["agent_id"] == ids[name]
            me = await _whoami(broker, mallory["token"])
            assert (me["agent_id"], me["alias"]) == (ids[name], name)
            assert await _attached(broker, "alpha", "beta", "mallory") == [name]
        records = {r["alias"]: r["agent_id"] for r in await broker.identities()}
        assert records == ids
        resumed = await broker.register(None, resume_token=mallory["resume_token"])
    assert resumed["agent_id"] == beta["agent_id"]


async def test_repeated_forced_alias_takeovers_over_mcp_never_fail(broker: Broker) -> None:
    """Over MCP, `update_agent_alias {force: true}` again and again between an identity a
    victim holds and a detached one, then `/v1/me/claim-identity` with the same token: each
    answer is a takeover, never an internal error, and whoami follows the last one."""
    victim = await broker.register("alpha")
    beta = await broker.register("beta")
    status, _ = await broker.post("/v1/sessions/current/detach", {}, token=beta["token"])
    assert status == 200
    mallory = await broker.register("mallory")
    ids = {"alpha": victim["agent_id"], "beta": beta["agent_id"]}
    with trio.fail_after(60):
        async with mcp_session(broker.url, mallory["token"]) as m:
            for name in ["alpha", "beta", "alpha", "beta", "alpha"]:
                taken = structured(
                    await m.call_tool("update_agent_alias", {"alias": name, "force": True})
                )
                assert taken["agent_id"] == ids[name]
                me = structured(await m.call_tool("whoami", {}))
                assert (me["agent_id"], me["alias"]) == (ids[name], name)
                assert await _attached(broker, "alpha", "beta", "mallory") == [name]
            status, answer = await broker.post(
                "/v1/me/claim-identity", {"name": "beta"}, token=mallory["token"]
            )
            assert status == 200, answer
            me = structured(await m.call_tool("whoami", {}))
            assert (me["agent_id"], me["alias"]) == (ids["beta"], "beta")
    fresh = await _whoami(broker, victim["token"])  # the victim's token runs on, elsewhere
    assert fresh["agent_id"] not in ids.values()
    assert fresh["durable"] is False
