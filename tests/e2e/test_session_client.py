"""The connector session client (pager/session_client.py) against a real broker on 127.0.0.1:
it registers, holds the lease, rejoins an expired session with its resume token, stops when
the broker ends the session, and detaches."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from pager.launch.discovery import BrokerLocator, discover
from pager.launch.paths import StatePaths
from pager.session_client import (
    SessionClient,
    SessionEnded,
    StreamRefusal,
    hold_lease,
)
from pager.sse import SseEvent
from tests.e2e import test_mcp_stdio
from tests.e2e.conftest import Broker
from tests.e2e.test_mcp_stdio import lapse_while_idle, session_state, wait_for_state

#: A hang guard, never a timing assertion.
BOUND = 60.0

#: A broker whose sessions lapse one second after their last request (the fixture's).
short_lease_broker = test_mcp_stdio.short_lease_broker


class Notices:
    """Records what the client tells (`SessionNotices`)."""

    def __init__(self) -> None:
        self.said: list[tuple[str, Any]] = []
        self.rejoined = trio.Event()

    def info(self, text: str) -> None:
        self.said.append(("info", text))

    def warn(self, text: str) -> None:
        self.said.append(("warn", text))

    def registered(self, url: str, answer: dict[str, Any], previous: dict[str, Any] | None) -> None:
        self.said.append(("registered", (url, answer, previous)))
        if previous is not None:
            self.rejoined.set()

    def refused(self, refusal: StreamRefusal) -> None:
        self.said.append(("refused", refusal))

    def ended(self, event: SseEvent) -> None:
        self.said.append(("ended", event))


def session_client(broker: Broker, token_file: Path | None = None, **fields: Any) -> SessionClient:
    """A client for a session in the broker's workspace (as the wrapper makes one)."""
    paths = StatePaths(broker.home.root)
    found = discover(paths).broker
    assert found is not None
    body = {"workspace": str(broker.workspace), "implementation": "shell", **fields}
    return SessionClient(
        BrokerLocator(paths, found), body, notices=Notices(), token_file=token_file
    )


def notices(client: SessionClient) -> Notices:
    assert isinstance(client.notices, Notices)
    return client.notices


async def whoami(broker: Broker, token: str) -> dict[str, Any]:
    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.get(
            f"{broker.url}/v1/me", headers={"Authorization": f"Bearer {token}"}
        )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def test_session_client_registers_holds_the_lease_and_detaches(
    short_lease_broker: Broker, tmp_path: Path
) -> None:
    """The first registration writes the token file; the event stream keeps the session
    attached past a one-second lease (a witness that holds none lapses meanwhile); the detach
    leaves the session detached, and a second detach sends nothing."""
    broker = short_lease_broker
    token_file = tmp_path / "session-token"
    client = session_client(broker, token_file, session_name="holder")
    with trio.fail_after(BOUND):
        answer = await client.register()
        assert client.token == answer["token"]
        assert token_file.read_text() == answer["token"] + "\n"
        assert [kind for kind, _ in notices(client).said] == ["registered"]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(hold_lease, client)
            witness = await broker.register("witness")
            await wait_for_state(broker, witness["session_id"], "expired")
            assert session_state(broker, answer["session_id"]) == "attached"
            nursery.cancel_scope.cancel()
        assert await client.detach()
        assert session_state(broker, answer["session_id"]) == "detached"
        assert not await client.detach()


async def test_session_client_rejoins_an_expired_session_with_its_resume_token(
    broker: Broker, tmp_path: Path
) -> None:
    """The session lapses while nothing holds it, and its identity was renamed meanwhile: the
    lease holder's stream is refused `expired`, the client registers again with the resume
    token (the same identity under its new name, in a new session), rewrites the token file
    and holds the new session's lease."""
    token_file = tmp_path / "session-token"
    client = session_client(broker, token_file, session_name="first")
    with trio.fail_after(3 * BOUND):
        first = await client.register()
        async with httpx2.AsyncClient(timeout=10) as http:
            renamed = await http.post(
                f"{broker.url}/v1/me/alias",
                json={"alias": "second"},
                headers={"Authorization": f"Bearer {first['token']}"},
            )
        assert renamed.status_code == 200, renamed.text
        await lapse_while_idle(broker, first["session_id"])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(hold_lease, client)
            await notices(client).rejoined.wait()
            nursery.cancel_scope.cancel()
    assert client.token != first["token"]
    assert token_file.read_text() == client.token + "\n"
    assert client.answer is not None
    assert client.answer["agent_id"] == first["agent_id"]
    assert client.answer["session_id"] != first["session_id"]
    me = await whoami(broker, client.token)
    assert (me["agent_id"], me["alias"]) == (first["agent_id"], "second")
    assert session_state(broker, client.answer["session_id"]) == "attached"
    assert client.ended is None


async def test_session_client_stops_on_ended_and_rejoins_no_more(
    short_lease_broker: Broker,
) -> None:
    """A newer registration with the same conversation key ends the session: the lease holder
    returns with the broker's `ended` event; the session is not registered again, and the
    detach sends nothing (the identity is the newer session's now)."""
    broker = short_lease_broker
    client = session_client(broker, conversation_key="conv-ended")
    with trio.fail_after(BOUND):
        mine = await client.register()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(hold_lease, client)
            # Once a witness that holds no lease lapsed and this session did not, its event
            # stream is open: the end comes as an event on it.
            witness = await broker.register("witness")
            await wait_for_state(broker, witness["session_id"], "expired")
            assert session_state(broker, mine["session_id"]) == "attached"
            newer = await broker.register(conversation_key="conv-ended")
        assert newer["agent_id"] == mine["agent_id"]
        assert client.ended == "ended"
        [event] = [what for kind, what in notices(client).said if kind == "ended"]
        assert event.event == "ended"
        assert not await client.rejoin(mine["token"])
        with pytest.raises(SessionEnded):
            await client.register(stale=mine["token"])
        assert not await client.detach()
    assert session_state(broker, mine["session_id"]) == "ended"
    assert session_state(broker, newer["session_id"]) == "attached"
