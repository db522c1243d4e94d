"""Every retention window of SPEC §9, seen through the operator API of a real broker whose
windows are set to milliseconds with `PAGER_WINDOW_*` (the timer logic itself is unit-tested
on the mock clock in tests/messaging/test_sweeper.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from tests.e2e.conftest import BOTH, Broker, mcp_session, start_broker, structured
from tests.launch.conftest import PagerHome

#: A hang guard for polls of the API, not a timing assertion.
STORES = BOTH


BOUND = 30.0

BrokerFactory = Callable[..., Broker]


@pytest.fixture
def windows_broker(tmp_path: Path, store_env: dict[str, str]) -> Iterator[BrokerFactory]:
    """Start a broker (or restart one on the same home) with the given windows."""
    homes: list[PagerHome] = []

    def start(home: PagerHome | None = None, **windows: str) -> Broker:
        if home is None:
            home = PagerHome(tmp_path / f"home{len(homes)}")
            homes.append(home)
        home.env = {k: v for k, v in home.env.items() if not k.startswith("PAGER_WINDOW_")}
        env = {f"PAGER_WINDOW_{name.upper()}": value for name, value in windows.items()}
        return start_broker(home, tmp_path / "repo", **env, **store_env)

    yield start
    for home in homes:
        home.kill_all()


async def get(broker: Broker, path: str) -> tuple[int, dict[str, Any]]:
    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.get(
            broker.url + path, headers={"Authorization": f"Bearer {broker.secret}"}
        )
    return response.status_code, response.json()


async def eventually(what: str, check: Callable[[], Awaitable[bool]]) -> None:
    """Poll the API until `check` holds; fail (never pass) after the hang guard."""
    with trio.move_on_after(BOUND):
        while True:
            if await check():
                return
            await trio.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


async def agent_gone(broker: Broker, agent_id: str) -> bool:
    status, _ = await get(broker, f"/v1/agents/{agent_id}")
    return status == 404


async def agent_detached(broker: Broker, agent_id: str) -> bool:
    status, agent = await get(broker, f"/v1/agents/{agent_id}")
    assert status == 200, agent
    return not agent["attached"]


async def agent_archived(broker: Broker, agent_id: str) -> bool:
    status, agent = await get(broker, f"/v1/agents/{agent_id}")
    assert status == 200, agent
    return bool(agent["archived"])


async def sent_message(broker: Broker, sender_id: str, message_id: str) -> dict[str, Any]:
    status, page = await get(broker, f"/v1/agents/{sender_id}/messages?direction=out")
    assert status == 200, page
    [message] = [m for m in page["messages"] if m["message_id"] == message_id]
    return dict(message)


async def send(broker: Broker, token: str, to: str, body: str) -> str:
    async with mcp_session(broker.url, token) as client:
        sent = structured(await client.call_tool("send", {"to": to, "body": body}))
    return str(sent["message_id"])


async def test_ephemeral_identity_reaped_when_its_lease_lapses(
    windows_broker: BrokerFactory,
) -> None:
    """An unnamed identity without a conversation key disappears from the API once its
    lease lapses; a named one registered alongside stays."""
    broker = windows_broker(lease_ttl="300ms", stream_grace="10ms")
    with trio.fail_after(60):
        ephemeral = await broker.register()
        named = await broker.register("keeper")
        await eventually(
            "the ephemeral identity to be reaped", lambda: agent_gone(broker, ephemeral["agent_id"])
        )
        # Its lease lapsed too (its own timer, which may fire after the sweep that reaped the
        # other on a loaded machine): it ends detached, and stays.
        await eventually(
            "the named identity's lease to lapse", lambda: agent_detached(broker, named["agent_id"])
        )
        _, snapshot = await get(broker, "/v1/snapshot")
        listed = {a["agent_id"] for ws in snapshot["workspaces"] for a in ws["agents"]}
        assert ephemeral["agent_id"] not in listed
        assert named["agent_id"] in listed


async def test_named_identity_archived_then_reaped_with_its_mail_dead_lettered(
    windows_broker: BrokerFactory,
) -> None:
    """A detached named identity is archived after `named_archive`, reaped after
    `archive_retention`; the mail waiting for it is dead-lettered with reason `reaped`, and
    the sender's history keeps the message."""
    broker = windows_broker(named_archive="400ms", archive_retention="800ms")
    with trio.fail_after(60):
        api = await broker.register("api")
        bob = await broker.register("bob")
        # Sent before api detaches: once detached, api may be archived (and so unreachable by
        # its alias) within 400 ms, which a loaded host can take between two requests.
        message_id = await send(broker, bob["token"], "api", "are you there?")
        status, _ = await broker.post("/v1/sessions/current/detach", {}, token=api["token"])
        assert status == 200
        assert (await sent_message(broker, bob["agent_id"], message_id))["state"] == "queued"
        await eventually("api to be archived", lambda: agent_archived(broker, api["agent_id"]))
        # Archived: its mail still waits.
        assert (await sent_message(broker, bob["agent_id"], message_id))["state"] == "queued"
        await eventually("api to be reaped", lambda: agent_gone(broker, api["agent_id"]))
        dead = await sent_message(broker, bob["agent_id"], message_id)
        assert (dead["state"], dead["dead_reason"]) == ("dead", "reaped")
        # bob is attached: no window touches it.
        assert not await agent_archived(broker, bob["agent_id"])


async def test_unsettled_message_expires_to_a_dead_letter(windows_broker: BrokerFactory) -> None:
    """A message nobody fetches becomes a dead letter with reason `expired` after
    `message_expiry`; the recipient's inbox counts it as dead."""
    broker = windows_broker(message_expiry="400ms")
    with trio.fail_after(60):
        api = await broker.register("api")
        bob = await broker.register("bob")
        message_id = await send(broker, bob["token"], "api", "this will wait too long")

        async def expired() -> bool:
            state = (await sent_message(broker, bob["agent_id"], message_id))["state"]
            return bool(state == "dead")

        await eventually("the message to expire", expired)
        dead = await sent_message(broker, bob["agent_id"], message_id)
        assert dead["dead_reason"] == "expired"
        _, agent = await get(broker, f"/v1/agents/{api['agent_id']}")
        assert agent["inbox"] == {"queued": 0, "claimed": 0, "dead": 1}


async def test_restarted_broker_applies_windows_that_passed_while_down(
    windows_broker: BrokerFactory,
) -> None:
    """Identities detached under long windows; the broker stops; restarted with windows that
    have passed, its first sweep archives the named identity and reaps the unused
    resumable one (restarting takes far longer than those windows)."""
    broker = windows_broker()
    with trio.fail_after(60):
        named = await broker.register("api")
        resumable = await broker.register(conversation_key="conv-1")
        for session in (named, resumable):
            status, _ = await broker.post("/v1/sessions/current/detach", {}, token=session["token"])
            assert status == 200
        stopped = broker.home.run("exit")
        assert stopped.returncode == 0, stopped.stderr
        broker = windows_broker(broker.home, named_archive="10ms", unused="10ms")
        await eventually(
            "the unused identity to be reaped", lambda: agent_gone(broker, resumable["agent_id"])
        )
        await eventually("api to be archived", lambda: agent_archived(broker, named["agent_id"]))
