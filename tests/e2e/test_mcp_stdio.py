"""`pager mcp` as a real subprocess, driven by the official SDK's stdio client, in front of a
real broker: the tools it advertises, forwarding, and the SPEC §7 session rules (`expired`
rejoins and retries once, `ended` is final, a held name is refused on every call)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.e2e.conftest import (
    FAST_WINDOWS,
    Broker,
    mcp_session,
    start_broker,
    structured,
    tool_error,
)
from tests.launch.conftest import PagerHome

TOOLS = {
    "whoami",
    "send",
    "fetch",
    "ack",
    "roster",
    "history",
    "message_status",
    "update_agent_alias",
    "move_to_workspace",
    "reserve",
    "release",
    "reservations",
}

#: A hang guard for polls, never a timing assertion.
POLL_BOUND = 30.0


@attrs.define
class StdioServer:
    """One running `pager mcp` and the file its stderr goes to."""

    client: Client
    log: Path

    def stderr(self) -> str:
        return self.log.read_text()

    async def whoami(self) -> dict[str, Any]:
        return structured(await self.client.call_tool("whoami", {}))


@asynccontextmanager
async def stdio_server(
    broker: Broker, *args: str, name: str = "mcp", **env: str
) -> AsyncIterator[StdioServer]:
    """`python -m pager mcp ARGS` with the broker's PAGER_HOME, extra env, cwd = workspace."""
    log = broker.workspace.parent / f"pager-mcp-{name}.log"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pager", "mcp", *args],
        env={**broker.home.env, **env},
        cwd=str(broker.workspace),
    )
    with log.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), cache=None) as client:
            yield StdioServer(client, log)


@pytest.fixture
def short_lease_broker(tmp_path: Path) -> Iterator[Broker]:
    """A broker whose sessions lapse one second after their last request."""
    broker = start_broker(
        PagerHome(tmp_path / "home"),
        tmp_path / "repo",
        **{**FAST_WINDOWS, "PAGER_WINDOW_LEASE_TTL": "1s", "PAGER_WINDOW_STREAM_GRACE": "1s"},
    )
    yield broker
    broker.home.kill_all()


def session_state(broker: Broker, session_id: str) -> str:
    """The session's state as the broker recorded it (its events say)."""
    return broker.sessions_sync()[session_id]


async def wait_for_state(broker: Broker, session_id: str, state: str) -> None:
    """Polls the broker until it recorded `state` for the session (what a direct
    authenticate would then answer)."""
    with trio.fail_after(POLL_BOUND):
        # A change in another process: nothing to wait on but the clock.
        while True:
            if session_state(broker, session_id) == state:
                return
            await trio.sleep(0.05)


async def test_lists_the_brokers_nine_tools_with_their_schemas(broker: Broker) -> None:
    other = await broker.register("lister")
    with trio.fail_after(60):
        async with (
            stdio_server(broker) as server,
            mcp_session(broker.url, other["token"]) as direct,
        ):
            proxied = {tool.name: tool for tool in (await server.client.list_tools()).tools}
            original = {tool.name: tool for tool in (await direct.list_tools()).tools}
    assert set(proxied) == TOOLS
    for name, tool in original.items():
        assert proxied[name].input_schema == tool.input_schema
        assert proxied[name].description == tool.description


async def test_whoami_send_and_receive_through_stdio(broker: Broker) -> None:
    """The stdio session registers with the name and workspace it was given; mail goes both
    ways between it and an agent on the broker's HTTP MCP endpoint."""
    bob = await broker.register("bob")
    with trio.fail_after(60):
        async with (
            stdio_server(broker, PAGER_SESSION_NAME="stdio") as server,
            mcp_session(broker.url, bob["token"]) as b,
        ):
            me = await server.whoami()
            assert me["alias"] == "stdio"
            assert me["implementation"] == "mcp"
            assert me["workspace"] == str(broker.workspace)
            assert me["durable"] is True

            sent = structured(
                await server.client.call_tool("send", {"to": "bob", "body": "hello from stdio"})
            )
            assert sent["recipient"]["address"] == bob["address"]
            [claim] = structured(await b.call_tool("fetch", {}))["claims"]
            assert claim["message"]["body"] == "hello from stdio"
            assert claim["message"]["from"] == me["address"]
            acked = structured(await b.call_tool("ack", {"tokens": [claim["token"]]}))
            assert acked["applied"] == [claim["token"]]

            structured(await b.call_tool("send", {"to": me["address"], "body": "and back"}))
            [back] = structured(await server.client.call_tool("fetch", {}))["claims"]
            assert back["message"]["body"] == "and back"
            acked = structured(await server.client.call_tool("ack", {"tokens": [back["token"]]}))
            assert acked["applied"] == [back["token"]]
            status = structured(
                await server.client.call_tool("message_status", {"message_id": sent["message_id"]})
            )
            assert status["state"] == "acknowledged"

            refused = tool_error(await server.client.call_tool("send", {"to": "bob"}))
            assert refused["code"] == "validation_failed"  # the broker's own validation


async def test_options_override_the_environment(broker: Broker) -> None:
    with trio.fail_after(60):
        async with stdio_server(
            broker,
            "--session-name",
            "flagged",
            "--implementation",
            "codex",
            PAGER_SESSION_NAME="from-env",
        ) as server:
            me = await server.whoami()
    assert (me["alias"], me["implementation"]) == ("flagged", "codex")


async def test_detaches_when_stdin_closes(broker: Broker) -> None:
    """Closing stdin ends the server with a graceful detach: the name is free at once and
    rejoins the same identity."""
    with trio.fail_after(60):
        async with stdio_server(broker, PAGER_SESSION_NAME="leaving") as server:
            me = await server.whoami()
        assert session_state(broker, me["session"]["id"]) == "detached"
        again = await broker.register("leaving")
    assert again["agent_id"] == me["agent_id"]


async def test_holds_the_lease_while_running(short_lease_broker: Broker) -> None:
    """With a one-second lease, an idle `pager mcp` keeps its session: the event stream holds
    the lease as long as the harness keeps the server. A witness that holds no lease, whose
    last request came later, lapses first: only then is the idle session checked."""
    broker = short_lease_broker
    with trio.fail_after(60):
        async with stdio_server(broker, PAGER_SESSION_NAME="idle") as server:
            me = await server.whoami()
            async with stdio_server(
                broker, "--no-hold-lease", name="witness", PAGER_SESSION_NAME="witness"
            ) as witness:
                lapsing = await witness.whoami()
                await wait_for_state(broker, lapsing["session"]["id"], "expired")
            assert session_state(broker, me["session"]["id"]) == "attached"
            again = await server.whoami()
    assert again["session"]["id"] == me["session"]["id"]


async def test_expired_session_rejoins_by_conversation_key_and_retries(broker: Broker) -> None:
    """The lease lapses (lease holding off); the next call is answered `expired` by the broker,
    the server registers again with its conversation key and retries: the call succeeds as the
    same agent in a new session. Concurrent calls that meet `expired` together share one
    rejoin."""
    with trio.fail_after(90):
        async with stdio_server(
            broker, "--no-hold-lease", PAGER_CONVERSATION_KEY="conv-expire"
        ) as server:
            me = await server.whoami()
            await lapse_while_idle(broker, me["session"]["id"])
            answers: list[dict[str, Any]] = []

            async def call() -> None:
                answers.append(await server.whoami())

            async with trio.open_nursery() as nursery:
                for _ in range(4):
                    nursery.start_soon(call)
            assert {answer["agent_id"] for answer in answers} == {me["agent_id"]}
            [new_session] = {answer["session"]["id"] for answer in answers}
            assert new_session != me["session"]["id"]
            assert session_state(broker, new_session) == "attached"
            assert server.stderr().count("broker said expired") >= 1
            assert server.stderr().count("registered as") == 2  # at start, and one rejoin


async def test_expired_session_rejoins_its_renamed_identity(broker: Broker) -> None:
    """Without a conversation key, the rejoin uses the registration's resume token, so an
    identity renamed since it registered (its first name now reserved) is rejoined too."""
    with trio.fail_after(90):
        async with stdio_server(broker, "--no-hold-lease", PAGER_SESSION_NAME="first") as server:
            me = await server.whoami()
            renamed = structured(
                await server.client.call_tool("update_agent_alias", {"alias": "second"})
            )
            assert renamed["alias"] == "second"
            await lapse_while_idle(broker, me["session"]["id"])
            again = await server.whoami()
    assert (again["agent_id"], again["alias"]) == (me["agent_id"], "second")
    assert again["session"]["id"] != me["session"]["id"]


async def lapse_while_idle(broker: Broker, session_id: str) -> None:
    """Lets the idle session's lease lapse, with no lapse anywhere else: the broker (30 s
    lease) is restarted with a one-second lease until the session is recorded `expired`, then
    with a 30 s lease again, on the same state directory and so the same kept port. The
    registrations and calls around it then never race a one-second lease, however slow the
    host (a first MCP request alone can take a second: the broker imports the MCP stack on it)."""
    await trio.to_thread.run_sync(restart_broker, broker, "1s")
    await wait_for_state(broker, session_id, "expired")
    await trio.to_thread.run_sync(restart_broker, broker, "30s")


def restart_broker(broker: Broker, lease_ttl: str) -> None:
    stopped = broker.home.run("exit")
    assert stopped.returncode == 0, stopped.stderr
    again = start_broker(broker.home, broker.workspace, PAGER_WINDOW_LEASE_TTL=lease_ttl)
    assert again.url == broker.url, "the restarted broker did not keep the port"


async def test_ended_session_is_final(broker: Broker) -> None:
    """Another registration with the same conversation key replaces the stdio session
    (SPEC §7: the older session is ended). Its calls then answer `ended` and it does not
    take the identity back."""
    with trio.fail_after(60):
        async with stdio_server(broker, PAGER_CONVERSATION_KEY="conv-end") as server:
            me = await server.whoami()
            newer = await broker.register(implementation="mcp", conversation_key="conv-end")
            assert newer["agent_id"] == me["agent_id"]
            for _ in range(2):
                error = tool_error(await server.client.call_tool("whoami", {}))
                assert error["code"] == "ended"
                assert "restart" in error["message"].lower()
            async with mcp_session(broker.url, newer["token"]) as direct:
                still = structured(await direct.call_tool("whoami", {}))
            assert still["session"]["id"] == newer["session_id"]
            assert session_state(broker, me["session"]["id"]) == "ended"


async def test_forced_takeover_leaves_a_fresh_unnamed_agent(broker: Broker) -> None:
    """A forced registration of the stdio session's name takes the identity over; per SPEC §7
    the holder's next call runs as a fresh unnamed agent (not `ended`)."""
    with trio.fail_after(60):
        async with stdio_server(broker, PAGER_SESSION_NAME="taken") as server:
            me = await server.whoami()
            taker = await broker.register("taken", force=True)
            assert taker["agent_id"] == me["agent_id"]
            after = await server.whoami()
    assert after["agent_id"] != me["agent_id"]
    assert after["durable"] is False


async def test_registration_conflict_is_reported_on_every_call(broker: Broker) -> None:
    """A second `pager mcp` with a name held by an attached session still serves, lists the
    tools, and answers every call with `alias_conflict` naming the holder (also on stderr)."""
    with trio.fail_after(60):
        async with stdio_server(broker, PAGER_SESSION_NAME="dup", name="first") as first:
            holder = await first.whoami()
            async with stdio_server(broker, PAGER_SESSION_NAME="dup", name="second") as second:
                tools = {tool.name for tool in (await second.client.list_tools()).tools}
                assert tools == TOOLS
                for tool, arguments in (("whoami", {}), ("send", {"to": "x", "body": "y"})):
                    error = tool_error(await second.client.call_tool(tool, arguments))
                    assert error["code"] == "alias_conflict"
                    assert error["holder"]["agent_id"] == holder["agent_id"]
                    assert holder["address"] in error["message"]
                assert holder["address"] in second.stderr()
            assert (await first.whoami())["agent_id"] == holder["agent_id"]


async def test_restarts_a_vanished_broker_and_retries(broker: Broker) -> None:
    """The broker is killed under a running server: a call that finds nothing listening starts
    a broker and runs as the same agent (attachments survive a restart). A call whose
    connection is reset mid-request is reported, not retried (it may have taken effect)."""
    with trio.fail_after(90):
        async with stdio_server(broker, PAGER_SESSION_NAME="survivor") as server:
            me = await server.whoami()
            await trio.to_thread.run_sync(broker.home.kill_all)
            first = await server.client.call_tool("whoami", {})
            if first.is_error:
                text = first.content[0].text  # type: ignore[union-attr]
                assert "dropped the request" in text
                assert "Call again" in text
            again = await server.whoami()
            assert again["agent_id"] == me["agent_id"]
            assert broker.home.broker_pids(), "the server started a new broker"


async def test_inside_a_wrapped_launch_uses_the_wrappers_session(broker: Broker) -> None:
    """With the wrapper's PAGER_TOKEN in its environment, `pager mcp` registers nothing: it
    acts as the wrapped session, and leaves that session attached when it exits."""
    wrapped = await broker.register("wrapped")
    env = {"PAGER_TOKEN": wrapped["token"], "PAGER_AGENT_ID": wrapped["agent_id"],
           "PAGER_ADDRESS": wrapped["address"], "PAGER_URL": broker.url}  # fmt: skip
    before = await broker.sessions()
    with trio.fail_after(60):
        async with stdio_server(broker, **env) as server:
            me = await server.whoami()
            assert me["agent_id"] == wrapped["agent_id"]
    assert await broker.sessions() == before  # no session added, none ended
    assert before[wrapped["session_id"]] == "attached"


async def test_inside_a_wrapped_launch_takes_the_wrappers_rejoined_token(
    broker: Broker, tmp_path: Path
) -> None:
    """When the broker refuses the wrapped session's token, `pager mcp` does not register a
    session of its own: it takes the token the wrapper rejoined with from PAGER_TOKEN_FILE."""
    body = {"workspace": str(broker.workspace), "implementation": "claude",
            "session_name": "wrapped"}  # fmt: skip
    status, wrapped = await broker.post("/v1/register", body, token=broker.secret)
    assert status == 201
    token_file = tmp_path / "session-token"
    token_file.write_text(wrapped["token"] + "\n")
    env = {"PAGER_TOKEN": "prl_the_relays_credential", "PAGER_TOKEN_FILE": str(token_file),
           "PAGER_AGENT_ID": wrapped["agent_id"], "PAGER_ADDRESS": wrapped["address"]}  # fmt: skip
    with trio.fail_after(60):
        async with stdio_server(broker, **env) as server:
            me = await server.whoami()
            assert me["session"]["id"] == wrapped["session_id"]
            await lapse_while_idle(broker, wrapped["session_id"])
            # What the wrapper does on `expired`: rejoin with the resume token, write the file.
            resume = {**body, "resume_token": wrapped["resume_token"]}
            status, rejoined = await broker.post("/v1/register", resume, token=broker.secret)
            assert status == 201
            token_file.write_text(rejoined["token"] + "\n")
            again = await server.whoami()
    assert again["agent_id"] == wrapped["agent_id"]
    assert again["session"]["id"] == rejoined["session_id"]
    sessions = await broker.sessions()
    assert len(sessions) == 2  # the wrapped one and its rejoin: none of `pager mcp`'s own
    assert set(sessions) == {wrapped["session_id"], rejoined["session_id"]}
