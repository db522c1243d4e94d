"""The operator API of SPEC §6 on a real broker (`pager start`) over real HTTP: snapshot,
agents, messages, archive / unarchive / purge, and the refusals that must change nothing."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from pager.versions import SCHEMA_VERSION
from tests.e2e.conftest import Broker, mcp_session, start_broker, structured
from tests.fakes.delivery_inbox import running_inbox
from tests.launch.conftest import PagerHome

#: A claim stays open for the whole test; one refused delivery dead-letters a message.
WINDOWS = {
    "PAGER_WINDOW_ACK_WAIT": "60s",
    "PAGER_WINDOW_REDELIVERY": "200ms",
    "PAGER_WINDOW_LEASE_TTL": "30s",
    "PAGER_WINDOW_MAX_ATTEMPTS": "1",
}


@pytest.fixture
def op(tmp_path: Path) -> Iterator[Broker]:
    """A real broker with the windows above, and a workspace directory."""
    home = PagerHome(tmp_path / "home")
    yield start_broker(home, tmp_path / "api", **WINDOWS)
    home.kill_all()


async def _call(
    broker: Broker,
    method: str,
    path: str,
    *,
    token: str | None = "SECRET",
    content: bytes | None = None,
) -> tuple[int, Any]:
    headers = {}
    if token is not None:
        headers["Authorization"] = f"Bearer {broker.secret if token == 'SECRET' else token}"
    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.request(method, broker.url + path, headers=headers, content=content)
    return response.status_code, response.json()


async def _get(broker: Broker, path: str, **kwargs: Any) -> Any:
    status, answer = await _call(broker, "GET", path, **kwargs)
    assert status == 200, answer
    return answer


async def _wait_until(holds: Callable[[], Awaitable[bool]]) -> None:
    """Poll the broker until `holds` (a hang guard bounds it, not a timing)."""
    with trio.fail_after(30):
        while True:
            if await holds():
                return
            await trio.sleep(0.02)


async def test_snapshot_counts_agents_in_two_workspaces(op: Broker, tmp_path: Path) -> None:
    """alice, bob (api) and carol, dave, eve (web, eve archived): the snapshot's inbox counts
    per state, live sessions and totals match what was sent, fetched, acknowledged and
    refused, and its seq is the store's latest event."""
    web = tmp_path / "web"
    web.mkdir()
    alice = await op.register("alice")
    bob = await op.register("bob")
    carol = await op.register("carol", workspace=str(web))
    with running_inbox() as inbox, trio.fail_after(60):
        inbox.refuse = True
        dave = await op.register(
            "dave", workspace=str(web), delivery={"kind": "http", "url": inbox.url}
        )
        async with (
            mcp_session(op.url, alice["token"]) as a,
            mcp_session(op.url, bob["token"]) as b,
            mcp_session(op.url, carol["token"]) as c,
        ):
            for n in range(3):
                structured(await a.call_tool("send", {"to": "bob", "body": f"to bob {n}"}))
            fetched = structured(await b.call_tool("fetch", {"limit": 1}))["claims"]
            assert len(fetched) == 1
            structured(await c.call_tool("send", {"to": alice["address"], "body": "hi"}))
            [claim] = structured(await a.call_tool("fetch", {}))["claims"]
            structured(await a.call_tool("ack", {"tokens": [claim["token"]]}))
            structured(await b.call_tool("send", {"to": carol["address"], "body": "x"}))
            structured(await a.call_tool("send", {"to": dave["address"], "body": "refused"}))
        await trio.to_thread.run_sync(inbox.wait_for, 1)

        async def dave_dead_lettered() -> bool:
            mail = [m for m in await op.messages() if m["to"] == dave["agent_id"]]
            return [(m["state"], m["dead_reason"]) for m in mail] == [("dead", "max_attempts")]

        await _wait_until(dave_dead_lettered)

    eve = await op.register("eve", workspace=str(web))
    status, _ = await _call(op, "POST", f"/v1/agents/{eve['agent_id']}/archive")
    assert status == 200

    snap = await _get(op, "/v1/snapshot")

    assert snap["broker"]["ok"] is True
    assert snap["broker"]["schema_version"] == SCHEMA_VERSION
    assert snap["seq"] == (await op.events())[-1]["seq"]  # the latest event
    slugs = {alice["address"].split("@")[1], carol["address"].split("@")[1]}
    assert {w["slug"] for w in snap["workspaces"]} == slugs
    agents = {a["alias"]: a for w in snap["workspaces"] for a in w["agents"]}
    assert set(agents) == {"alice", "bob", "carol", "dave", "eve"}
    assert (agents["eve"]["archived"], agents["eve"]["attached"]) == (True, False)
    assert agents["bob"]["inbox"] == {"queued": 2, "claimed": 1, "dead": 0}
    assert agents["alice"]["inbox"] == {"queued": 0, "claimed": 0, "dead": 0}
    assert agents["carol"]["inbox"] == {"queued": 1, "claimed": 0, "dead": 0}
    assert agents["dave"]["inbox"] == {"queued": 0, "claimed": 0, "dead": 1}
    for name, registered in (("alice", alice), ("bob", bob), ("carol", carol), ("dave", dave)):
        agent = agents[name]
        assert agent["agent_id"] == registered["agent_id"]
        assert agent["address"] == registered["address"]
        assert agent["workspace"] == registered["address"].split("@")[1]
        assert agent["attached"] is True
        assert [s["session_id"] for s in agent["sessions"]] == [registered["session_id"]]
        assert agent["archived"] is False
        assert agent["archived_at"] is None
    assert snap["totals"] == {
        "workspaces": 2,
        "agents": 5,
        "attached": 4,
        "archived": 1,
        "queued": 3,
        "claimed": 1,
        "dead": 1,
        "refused_sends": 0,
    }


async def test_agents_list_pages_and_filters(op: Broker, tmp_path: Path) -> None:
    """`GET /v1/agents` pages through every agent once in a stable order; the workspace and
    archived filters narrow it; `GET /v1/agents/{id}` shows the same agent."""
    web = tmp_path / "web"
    web.mkdir()
    made = [await op.register(f"api{n}") for n in range(4)]
    made += [await op.register(f"web{n}", workspace=str(web)) for n in range(3)]
    status, _ = await _call(op, "POST", f"/v1/agents/{made[0]['agent_id']}/archive")
    assert status == 200
    seen: list[str] = []
    cursor = None
    with trio.fail_after(30):
        while True:
            page = await _get(op, "/v1/agents?limit=3" + (f"&cursor={cursor}" if cursor else ""))
            seen += [agent["agent_id"] for agent in page["agents"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
    assert seen == sorted(m["agent_id"] for m in made)
    slug = made[4]["address"].split("@")[1]
    in_web = await _get(op, f"/v1/agents?workspace={slug}")
    assert {a["alias"] for a in in_web["agents"]} == {"web0", "web1", "web2"}
    archived = await _get(op, "/v1/agents?archived=true")
    assert [a["alias"] for a in archived["agents"]] == ["api0"]
    visible = await _get(op, "/v1/agents?archived=false&limit=200")
    assert len(visible["agents"]) == 6
    one = await _get(op, f"/v1/agents/{made[1]['agent_id']}")
    assert one == next(a for a in visible["agents"] if a["alias"] == "api1")


async def test_messages_page_newest_first_with_cursor_and_filters(op: Broker) -> None:
    """An agent's messages come newest first, a page at a time, every one exactly once; the
    state and direction filters narrow them; correspondents are named."""
    alice = await op.register("alice")
    bob = await op.register("bob")
    with trio.fail_after(60):
        async with (
            mcp_session(op.url, alice["token"]) as a,
            mcp_session(op.url, bob["token"]) as b,
        ):
            ids = []
            for n in range(7):
                sent = structured(await a.call_tool("send", {"to": "bob", "body": f"a{n}"}))
                ids.append(sent["message_id"])
            for n in range(2):
                sent = structured(await b.call_tool("send", {"to": "alice", "body": f"b{n}"}))
                ids.append(sent["message_id"])
            claims = structured(await b.call_tool("fetch", {"limit": 2}))["claims"]
            structured(await b.call_tool("ack", {"tokens": [c["token"] for c in claims]}))
    path = f"/v1/agents/{bob['agent_id']}/messages"
    seen: list[dict[str, Any]] = []
    cursor = None
    with trio.fail_after(30):
        while True:
            page = await _get(op, f"{path}?limit=4" + (f"&cursor={cursor}" if cursor else ""))
            assert len(page["messages"]) <= 4
            seen += page["messages"]
            cursor = page["next_cursor"]
            if cursor is None:
                break
    assert [m["message_id"] for m in seen] == list(reversed(ids))
    first = seen[-1]
    assert first["direction"] == "in"
    assert first["sender"] == {
        "agent_id": alice["agent_id"],
        "alias": "alice",
        "address": alice["address"],
    }
    assert first["recipient"]["address"] == bob["address"]
    assert (first["state"], first["attempts"], first["body"]) == ("acknowledged", 1, "a0")
    assert first["settled_at"] is not None
    queued = await _get(op, f"{path}?state=queued&direction=in")
    assert [m["body"] for m in queued["messages"]] == ["a6", "a5", "a4", "a3", "a2"]
    acked = await _get(op, f"{path}?state=acknowledged&direction=in")
    assert [m["body"] for m in acked["messages"]] == ["a1", "a0"]
    out = await _get(op, f"{path}?direction=out")
    assert [(m["body"], m["direction"]) for m in out["messages"]] == [("b1", "out"), ("b0", "out")]
    assert (await _get(op, f"{path}?state=dead"))["messages"] == []


async def test_reading_views_never_changes_delivery_state(op: Broker) -> None:
    """Snapshot, agents, one agent and messages leave messages, claims, sessions, identities
    and the event log exactly as they were."""
    alice = await op.register("alice")
    bob = await op.register("bob")
    with trio.fail_after(60):
        async with mcp_session(op.url, alice["token"]) as a, mcp_session(op.url, bob["token"]) as b:
            for n in range(3):
                structured(await a.call_tool("send", {"to": "bob", "body": f"m{n}"}))
            structured(await b.call_tool("fetch", {"limit": 1}))
    before = await op.state()
    for path in (
        "/v1/snapshot",
        "/v1/agents",
        f"/v1/agents/{bob['agent_id']}",
        f"/v1/agents/{bob['agent_id']}/messages",
        f"/v1/agents/{bob['agent_id']}/messages?state=queued",
        f"/v1/agents/{alice['agent_id']}/messages?direction=out&limit=1",
    ):
        await _get(op, path)
    assert await op.state() == before


async def test_archive_and_unarchive_an_attached_agent(op: Broker) -> None:
    """Archive ends the session (its token answers `ended`), hides the agent and keeps its
    mail; a second archive is 409 and changes nothing; unarchive shows it again (a second
    unarchive is 409); both record their operator events."""
    alice = await op.register("alice")
    bob = await op.register("bob")
    with trio.fail_after(60):
        async with mcp_session(op.url, alice["token"]) as a:
            structured(await a.call_tool("send", {"to": "bob", "body": "waits"}))
    agent_id = bob["agent_id"]

    status, archived = await _call(op, "POST", f"/v1/agents/{agent_id}/archive", content=b"{}")

    assert status == 200, archived
    assert archived["ended_sessions"] == 1
    agent = archived["agent"]
    assert (agent["archived"], agent["attached"], agent["sessions"]) == (True, False, [])
    assert agent["archived_at"] is not None
    assert agent["inbox"] == {"queued": 1, "claimed": 0, "dead": 0}
    status, answer = await op.post("/v1/sessions/current/detach", {}, token=bob["token"])
    assert (status, answer["error"]["code"]) == (401, "ended")
    before = await op.state()
    status, answer = await _call(op, "POST", f"/v1/agents/{agent_id}/archive")
    assert (status, answer["error"]["code"]) == (409, "conflict")
    assert await op.state() == before

    status, shown = await _call(op, "POST", f"/v1/agents/{agent_id}/unarchive")

    assert status == 200, shown
    assert shown["agent"]["archived"] is False
    assert shown["agent"]["archived_at"] is None
    assert shown["agent"]["inbox"]["queued"] == 1
    before = await op.state()
    status, answer = await _call(op, "POST", f"/v1/agents/{agent_id}/unarchive")
    assert (status, answer["error"]["code"]) == (409, "conflict")
    assert await op.state() == before
    logged = await op.events("agent.archived", "agent.unarchived")
    assert [event["type"] for event in logged] == ["agent.archived", "agent.unarchived"]
    data = logged[0]["data"]
    assert (data["agent_id"], data["address"], data["reason"]) == (
        agent_id,
        bob["address"],
        "operator",
    )
    assert data["workspace"] == bob["address"].split("@")[1]


async def test_purge_of_an_attached_agent_ends_its_session(op: Broker) -> None:
    """Purging an attached agent: its event stream says `ended`, its token answers `ended`
    (purged), its waiting mail is dead-lettered `purged`, the sender keeps the history with
    the purged recipient unnamed, and the agent is gone (404 on a second purge)."""
    alice = await op.register("alice")
    bob = await op.register("bob")
    with trio.fail_after(60):
        async with mcp_session(op.url, alice["token"]) as a:
            sent = structured(await a.call_tool("send", {"to": "bob", "body": "never read"}))
        events: list[tuple[str, dict[str, Any]]] = []
        purged: list[dict[str, Any]] = []
        async with (
            httpx2.AsyncClient(timeout=30) as http,
            http.stream(
                "GET",
                f"{op.url}/v1/sessions/current/events",
                headers={"Authorization": f"Bearer {bob['token']}"},
            ) as response,
        ):
            assert response.status_code == 200
            kind = ""
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    kind = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    events.append((kind, json.loads(line.removeprefix("data: "))))
                    if kind == "ready":
                        status, answer = await _call(
                            op, "POST", f"/v1/agents/{bob['agent_id']}/purge"
                        )
                        assert status == 200, answer
                        purged.append(answer)
                    else:
                        break
    assert [kind for kind, _ in events] == ["ready", "ended"]
    assert events[1][1]["code"] == "ended"
    assert events[1][1]["reason"] == "purged"
    assert purged == [
        {
            "agent_id": bob["agent_id"],
            "alias": "bob",
            "address": bob["address"],
            "ended_sessions": 1,
            "dead_lettered": 1,
        }
    ]
    status, answer = await op.post("/v1/sessions/current/detach", {}, token=bob["token"])
    assert (status, answer["error"]["code"]) == (401, "ended")
    history = await _get(op, f"/v1/agents/{alice['agent_id']}/messages")
    [message] = history["messages"]
    assert message["message_id"] == sent["message_id"]
    assert (message["state"], message["dead_reason"]) == ("dead", "purged")
    assert message["recipient"] == {"agent_id": bob["agent_id"], "alias": None, "address": None}
    snap = await _get(op, "/v1/snapshot")
    assert [a["alias"] for w in snap["workspaces"] for a in w["agents"]] == ["alice"]
    [event] = await op.events("agent.purged")
    assert event["data"]["dead_lettered"] == 1
    status, answer = await _call(op, "POST", f"/v1/agents/{bob['agent_id']}/purge")
    assert (status, answer["error"]["code"]) == (404, "not_found")


async def test_unknown_agent_is_not_found_on_every_route(op: Broker) -> None:
    """An id that names no agent is 404 `not_found` on reads and actions; nothing changes."""
    await op.register("alice")
    before = await op.state()
    for method, path in (
        ("GET", "/v1/agents/agt_0000000000000000"),
        ("GET", "/v1/agents/agt_0000000000000000/messages"),
        ("GET", "/v1/agents/not-an-id/messages?state=dead"),
        ("POST", "/v1/agents/agt_0000000000000000/archive"),
        ("POST", "/v1/agents/agt_0000000000000000/unarchive"),
        ("POST", "/v1/agents/agt_0000000000000000/purge"),
    ):
        status, answer = await _call(op, method, path)
        assert (status, answer["error"]["code"]) == (404, "not_found"), (path, answer)
    assert await op.state() == before


async def test_operator_routes_refuse_missing_or_wrong_credentials(op: Broker) -> None:
    """No token, a wrong secret and a session token are 401 `unauthenticated` on every
    operator route; no action happens."""
    alice = await op.register("alice")
    agent = alice["agent_id"]
    before = await op.state()
    routes = (
        ("GET", "/v1/snapshot"),
        ("GET", "/v1/agents"),
        ("GET", f"/v1/agents/{agent}"),
        ("GET", f"/v1/agents/{agent}/messages"),
        ("POST", f"/v1/agents/{agent}/archive"),
        ("POST", f"/v1/agents/{agent}/unarchive"),
        ("POST", f"/v1/agents/{agent}/purge"),
    )
    for method, path in routes:
        for token in (None, "wrong-secret", alice["token"]):
            status, answer = await _call(op, method, path, token=token)
            assert (status, answer["error"]["code"]) == (401, "unauthenticated"), (path, token)
    assert await op.state() == before
    status, document = await _call(op, "GET", "/v1/openapi.json", token=None)
    assert status == 200
    assert document["openapi"] == "3.1.0"


async def test_operator_routes_refuse_bad_query_naming_the_parameter(op: Broker) -> None:
    """Bad limits, cursors, states, directions, filters, unknown and repeated parameters are
    400 `validation_failed` naming the parameter; nothing changes."""
    alice = await op.register("alice")
    messages = f"/v1/agents/{alice['agent_id']}/messages"
    await op.register("bob")
    page = await _get(op, "/v1/agents?limit=1")
    agents_cursor = page["next_cursor"]
    assert agents_cursor is not None
    before = await op.state()
    for path, parameter in (
        ("/v1/agents?limit=0", "limit"),
        ("/v1/agents?limit=201", "limit"),
        ("/v1/agents?limit=ten", "limit"),
        ("/v1/agents?limit=-1", "limit"),
        ("/v1/agents?cursor=garbage!", "cursor"),
        ("/v1/agents?cursor=", "cursor"),
        ("/v1/agents?archived=yes", "archived"),
        ("/v1/agents?workspace=", "workspace"),
        ("/v1/agents?color=blue", "color"),
        ("/v1/agents?limit=1&limit=2", "limit"),
        ("/v1/snapshot?full=1", "full"),
        ("/v1/snapshot?agents=no", "agents"),
        (f"{messages}?state=lost", "state"),
        (f"{messages}?direction=up", "direction"),
        (f"{messages}?limit=1000", "limit"),
        (f"{messages}?cursor={agents_cursor}", "cursor"),
        (f"/v1/agents?cursor={agents_cursor}x", "cursor"),
        (f"/v1/agents/{alice['agent_id']}/archive?now=1", "now"),
    ):
        method = "POST" if path.count("/archive") else "GET"
        status, answer = await _call(op, method, path)
        assert status == 400, (path, answer)
        assert answer["error"]["code"] == "validation_failed"
        assert answer["error"]["parameter"] == parameter, (path, answer)
    assert await op.state() == before


@pytest.mark.parametrize("action", ["archive", "purge"])
async def test_operator_actions_refuse_bodies_that_are_not_empty(op: Broker, action: str) -> None:
    """An action's body must be empty or `{}`: anything else is 400 and the agent is left as
    it was; `{}` and an empty body are taken."""
    alice = await op.register("alice")
    path = f"/v1/agents/{alice['agent_id']}/{action}"
    before = await op.state()
    for body in (b'{"force": true}', b"[]", b"null", b'"x"', b"{not json", b"0", b"{}{}"):
        status, answer = await _call(op, "POST", path, content=body)
        assert (status, answer["error"]["code"]) == (400, "validation_failed"), body
    assert await op.state() == before
    status, _ = await _call(op, "POST", path, content=b" {} ")
    assert status == 200
    gone = [identity["archived_at"] is not None for identity in await op.identities()]
    assert gone == ([True] if action == "archive" else [])
