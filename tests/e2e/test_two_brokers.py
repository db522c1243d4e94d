"""Two brokers sharing one PostgreSQL store (SPEC §13), as two hosts of one machine: mail
crosses by address and wakes the session on the other host, each host's sessions are its own,
and every broker sees every host, its identities and its events."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from tests.e2e.conftest import (
    FAST_WINDOWS,
    Broker,
    mcp_session,
    postgres_env,
    session_events,
    start_broker,
    structured,
)
from tests.fakes.delivery_inbox import running_inbox
from tests.launch.conftest import PagerHome

#: Heartbeats every 100 ms: a host silent for 300 ms is shown as not alive.
HEARTBEAT = {"PAGER_WINDOW_HOST_HEARTBEAT": "100ms"}


def _host_broker(tmp_path: Path, name: str, env: dict[str, str]) -> Broker:
    home = PagerHome(tmp_path / name)
    home.root.mkdir(mode=0o700, parents=True)
    (home.root / "config.toml").write_text(f'[host]\nname = "{name}"\n')
    return start_broker(home, tmp_path / f"repo-{name}", **{**FAST_WINDOWS, **HEARTBEAT, **env})


HostPair = Callable[..., tuple[Broker, Broker]]


@pytest.fixture
def host_pair(tmp_path: Path, pg_dsn: str) -> Iterator[HostPair]:
    """Starts brokers `alpha` then `beta` on one fresh database, each with its own state dir,
    with the given extra environment (e.g. windows)."""
    started: list[Broker] = []

    def start(**extra: str) -> tuple[Broker, Broker]:
        env = {**postgres_env(pg_dsn, tmp_path), **extra}
        started.append(_host_broker(tmp_path, "alpha", env))
        started.append(_host_broker(tmp_path, "beta", env))
        return started[0], started[1]

    yield start
    for broker in started:
        broker.home.kill_all()


@pytest.fixture
def hosts(host_pair: HostPair) -> tuple[Broker, Broker]:
    return host_pair()


async def _roster(broker: Broker, token: str) -> dict[str, dict[str, Any]]:
    """Every identity of the store as `roster` (scope all) shows it, by address."""
    async with mcp_session(broker.url, token) as client:
        page = structured(await client.call_tool("roster", {"scope": "all"}))
    return {entry["address"]: entry for entry in page["agents"]}


async def test_mail_crosses_hosts_and_wakes_the_waiting_session(
    hosts: tuple[Broker, Broker],
) -> None:
    alpha, beta = hosts
    alice = await alpha.register("alice")
    bob = await beta.register("bob")
    assert alice["address"] != bob["address"]
    with trio.fail_after(60):
        async with (
            mcp_session(alpha.url, alice["token"]) as a,
            mcp_session(beta.url, bob["token"]) as b,
        ):
            got: list[dict[str, Any]] = []

            async def wait_for_mail() -> None:
                answer = structured(await a.call_tool("fetch", {"wait_s": 30}))
                got.extend(answer["claims"])

            # Whichever lands first, the poll or the send, the poll gets the mail: a poll
            # already waiting is woken across hosts (the push test below shows the wake alone).
            async with trio.open_nursery() as nursery:
                nursery.start_soon(wait_for_mail)
                sent = structured(
                    await b.call_tool("send", {"to": alice["address"], "body": "from beta"})
                )
                assert sent["wake"] == "queued"  # attached elsewhere: that broker delivers
            [claim] = got
            assert claim["message"]["body"] == "from beta"
            assert claim["message"]["from"] == bob["address"]
            structured(await a.call_tool("ack", {"tokens": [claim["token"]]}))
            status = structured(
                await b.call_tool("message_status", {"message_id": sent["message_id"]})
            )
            assert status["state"] == "acknowledged"
            # The reply goes back the other way.
            structured(await a.call_tool("send", {"to": bob["address"], "body": "thanks"}))
            [back] = structured(await b.call_tool("fetch", {}))["claims"]
            assert back["message"]["body"] == "thanks"


async def test_a_send_on_one_host_pushes_to_a_session_on_the_other(
    hosts: tuple[Broker, Broker],
) -> None:
    """Only alpha, where alice attached, writes to her delivery address: a send on beta
    reaches it through the wake across hosts, with no fetch by anyone."""
    alpha, beta = hosts
    bob = await beta.register("bob")
    with running_inbox() as inbox, trio.fail_after(60):
        alice = await alpha.register("alice", delivery={"kind": "http", "url": inbox.url})
        async with mcp_session(beta.url, bob["token"]) as b:
            sent = structured(await b.call_tool("send", {"to": alice["address"], "body": "hi"}))
            [notification] = await trio.to_thread.run_sync(inbox.wait_for, 1)
        [claim] = notification["claims"]
        assert claim["message"]["id"] == sent["message_id"]


async def test_each_host_shows_every_identity_with_its_host_and_liveness(
    hosts: tuple[Broker, Broker],
) -> None:
    alpha, beta = hosts
    alice = await alpha.register("alice")
    bob = await beta.register("bob")
    seen = await _roster(beta, bob["token"])
    assert seen[alice["address"]]["host"] == "alpha"
    assert seen[alice["address"]]["host_alive"] is True
    assert seen[alice["address"]]["attached"] is True
    assert seen[bob["address"]]["host"] == "beta"
    snapshot = (await beta.get("/v1/snapshot")).json()
    names = {host["name"]: host for host in snapshot["broker"]["hosts"]}
    assert names["alpha"]["alive"]
    assert not names["alpha"]["this"]
    assert names["beta"]["this"]
    assert snapshot["broker"]["store"]["kind"] == "postgresql"
    agents = {a["address"]: a for ws in snapshot["workspaces"] for a in ws["agents"]}
    assert agents[alice["address"]]["host"] == "alpha"
    # alpha dies: after three missed heartbeats beta shows it down, its session not attached.
    alpha.home.kill_all()
    with trio.fail_after(30):
        while True:
            entry = (await _roster(beta, bob["token"]))[alice["address"]]
            if not entry["host_alive"]:
                break
            await trio.sleep(0.05)
    assert entry["attached"] is False
    status = beta.home.run("status")
    assert "alpha (not alive" in status.stdout, status.stdout


async def test_a_session_token_works_only_on_its_own_host(hosts: tuple[Broker, Broker]) -> None:
    """Tokens stay per host (SPEC §13): alice's, taken to beta, is refused there (on MCP and
    /v1 alike) and still works on alpha."""
    alpha, beta = hosts
    alice = await alpha.register("alice")
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {alice['token']}",
    }
    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.post(f"{beta.url}/mcp", json=rpc, headers=headers)
    assert response.status_code == 401
    error = response.json()["error"]
    assert error["code"] == "unauthenticated"
    assert "alpha" in error["message"]
    status, answer = await beta.post("/v1/sessions/current/prompted", {}, token=alice["token"])
    assert (status, answer["error"]["code"]) == (401, "unauthenticated")
    with trio.fail_after(30):
        async with mcp_session(alpha.url, alice["token"]) as a:
            assert structured(await a.call_tool("whoami", {}))["address"] == alice["address"]


async def test_every_broker_streams_every_hosts_events(hosts: tuple[Broker, Broker]) -> None:
    alpha, beta = hosts
    alice = await alpha.register("alice")
    with trio.fail_after(30):
        while True:
            kinds = [(e["type"], e["data"].get("agent_id")) for e in await beta.events()]
            if ("agent.attached", alice["agent_id"]) in kinds:
                break
            await trio.sleep(0.05)
    seqs = [e["seq"] for e in await beta.events()]
    assert seqs == sorted(set(seqs))


def test_status_names_the_store_this_host_and_the_others(hosts: tuple[Broker, Broker]) -> None:
    alpha, _ = hosts
    result = alpha.home.run("status", "--json")
    report = json.loads(result.stdout)
    assert report["store"]["kind"] == "postgresql"
    assert report["store"]["host"] == "alpha"
    password = Path(alpha.home.env["PGPASSFILE"]).read_text().strip().rsplit(":", 1)[1]
    shown = result.stdout + alpha.home.run("status").stdout
    logs = "".join(p.read_text(errors="replace") for p in alpha.home.root.rglob("*.log"))
    assert password not in shown + logs  # never shown, never logged (SPEC §13)
    assert {h["name"] for h in report["hosts"]} >= {"alpha", "beta"}
    health = httpx2.get(alpha.url + "/health", timeout=10).json()
    assert "store" not in health  # /health answers anyone: the store's address is not its


#: Sends per sender, and after how many of carol's alpha is killed.
CONCURRENT_SENDS = 30
KILL_AFTER = 10


async def test_sigkill_of_one_broker_during_concurrent_sends_loses_nothing(
    hosts: tuple[Broker, Broker],
) -> None:
    """carol (on alpha) sends to bob (on beta) while dave (on beta) sends to alice (on alpha);
    alpha is killed with SIGKILL mid-way and started again. Every send answered to its sender
    is delivered at least once, nothing is delivered that was not sent, and each pair's first
    deliveries keep its send order."""
    alpha, beta = hosts
    alice = await alpha.register("alice", conversation_key="alice-conv")
    carol = await alpha.register("carol")
    bob = await beta.register("bob", conversation_key="bob-conv")
    dave = await beta.register("dave")
    answered: dict[str, list[str]] = {"carol": [], "dave": []}
    alpha_pid = json.loads(alpha.home.run("status", "--json").stdout)["pid"]

    async def send_all(name: str, broker: Broker, token: str, to: str) -> None:
        try:
            async with mcp_session(broker.url, token) as client:
                for n in range(CONCURRENT_SENDS):
                    body = f"{name} {n}"
                    sent = structured(await client.call_tool("send", {"to": to, "body": body}))
                    answered[name].append(sent["message_id"])
                    if name == "carol" and n + 1 == KILL_AFTER:
                        os.kill(alpha_pid, signal.SIGKILL)
        except Exception:
            assert name == "carol"

    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(send_all, "carol", alpha, carol["token"], bob["address"])
            nursery.start_soon(send_all, "dave", beta, dave["token"], alice["address"])
        restarted = await trio.to_thread.run_sync(alpha.home.run, "start", "--json")
        assert restarted.returncode == 0, restarted.stderr
        alice = await alpha.register("alice", conversation_key="alice-conv")
        received = {
            "carol": await _drain(beta, bob["token"], len(answered["carol"])),
            "dave": await _drain(alpha, alice["token"], len(answered["dave"])),
        }
    assert len(answered["carol"]) >= KILL_AFTER
    assert len(answered["dave"]) == CONCURRENT_SENDS  # beta never stopped answering
    for sender, got in received.items():
        assert set(answered[sender]) <= {m for m, _ in got}, f"{sender}'s mail was lost"
        for message_id, body in got:  # an unanswered send may still arrive, never a made-up one
            assert body.startswith(f"{sender} "), (message_id, body)
        firsts = list(dict.fromkeys(m for m, _ in got))
        assert [m for m in firsts if m in set(answered[sender])] == answered[sender]


async def _drain(broker: Broker, token: str, at_least: int) -> list[tuple[str, str]]:
    """Fetch and ack until `at_least` distinct messages came: (id, body) in delivery order."""
    got: list[tuple[str, str]] = []
    async with mcp_session(broker.url, token) as client:
        while len({m for m, _ in got}) < at_least:
            answer = structured(await client.call_tool("fetch", {"limit": 100, "wait_s": 5}))
            assert answer["claims"], f"only {len(got)} of {at_least} arrived"
            got += [(c["message"]["id"], c["message"]["body"]) for c in answer["claims"]]
            tokens = [c["token"] for c in answer["claims"]]
            structured(await client.call_tool("ack", {"tokens": tokens}))
    return got


async def test_a_dead_hosts_sessions_end_once_their_leases_lapse(host_pair: HostPair) -> None:
    """alpha (the first broker, so the one that sweeps) is killed: beta takes over the sweeps
    and ends alice's session once its lease lapsed, as alpha can no longer do; her mail waits
    for her next attachment, on any host."""
    alpha, beta = host_pair(PAGER_WINDOW_LEASE_TTL="1s")
    alice = await alpha.register("alice")
    alpha.home.kill_all()
    with trio.fail_after(60):
        while True:
            snapshot = (await beta.get("/v1/snapshot")).json()
            agents = {a["agent_id"]: a for ws in snapshot["workspaces"] for a in ws["agents"]}
            if not agents[alice["agent_id"]]["sessions"]:
                break
            await trio.sleep(0.05)
    detached = [
        e for e in await beta.events("agent.detached") if e["data"]["agent_id"] == alice["agent_id"]
    ]
    assert detached, "the session's end is an event"


async def test_a_session_archived_from_another_host_is_told_it_ended(
    hosts: tuple[Broker, Broker],
) -> None:
    """The operator on beta archives alice, attached on alpha: alpha ends her binding and her
    open stream hears `ended`, as when it is done on alpha itself."""
    alpha, beta = hosts
    alice = await alpha.register("alice")
    live = trio.Event()
    seen: list[str] = []
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session_events, alpha, alice["token"], seen, live)
            await live.wait()
            status, answer = await beta.post(
                f"/v1/agents/{alice['agent_id']}/archive", {}, token=beta.secret
            )
            assert status == 200, answer
    assert seen[-1] == "ended"
