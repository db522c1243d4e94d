"""Nothing lost: SIGKILL the broker or a recipient at the worst moment, then count."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from tests.e2e.conftest import (
    BOTH,
    FAST_WINDOWS,
    Broker,
    mcp_session,
    start_broker,
    structured,
)
from tests.launch.conftest import PagerHome

STORES = BOTH


SENDS = 40


async def test_broker_sigkill_after_sends_loses_nothing(broker: Broker) -> None:
    """Sends returned, then the broker is killed before bob acks: after a restart every message
    is delivered once (none lost, none duplicated in the store)."""
    alice = await broker.register("alice")
    await broker.register("bob", conversation_key="bob-conv")
    with trio.fail_after(120):
        async with mcp_session(broker.url, alice["token"]) as a:
            sent_ids = [
                structured(await a.call_tool("send", {"to": "bob", "body": f"n{n}"}))["message_id"]
                for n in range(SENDS)
            ]
        pid = json.loads(broker.home.run("status", "--json").stdout)["pid"]
        os.kill(pid, signal.SIGKILL)
        restarted = await trio.to_thread.run_sync(broker.home.run, "start", "--json")
        assert restarted.returncode == 0, restarted.stderr
        assert json.loads(restarted.stdout)["pid"] != pid
        bob = await broker.register("bob", conversation_key="bob-conv")
        received: list[str] = []
        async with mcp_session(broker.url, bob["token"]) as b:
            while len(received) < SENDS:
                claims = structured(await b.call_tool("fetch", {"limit": 100, "wait_s": 5}))
                assert claims["claims"], f"only {len(received)} of {SENDS} arrived"
                received += [c["message"]["id"] for c in claims["claims"]]
                tokens = [c["token"] for c in claims["claims"]]
                structured(await b.call_tool("ack", {"tokens": tokens}))
    assert sorted(received) == sorted(sent_ids)
    # What survived, as the restarted broker shows it: each message once, every one acked.
    messages = await broker.messages()
    assert len(messages) == SENDS
    assert sorted(m["message_id"] for m in messages) == sorted(sent_ids)
    assert {m["state"] for m in messages} == {"acknowledged"}


@pytest.fixture
def slower_broker(tmp_path: Path, store_env: dict[str, str]) -> Iterator[Broker]:
    """A broker whose ack wait is long enough for a loaded machine to fetch and ack within it
    (600 ms was not, once, on PostgreSQL), and short enough to wait out."""
    home = PagerHome(tmp_path / "home")
    windows = {**FAST_WINDOWS, "PAGER_WINDOW_ACK_WAIT": "3s"}
    yield start_broker(home, tmp_path / "repo", **windows, **store_env)
    home.kill_all()


async def test_recipient_sigkill_before_ack_is_redelivered(slower_broker: Broker) -> None:
    """A recipient killed after fetching, before acking, gets the message again after the ack
    wait once it rejoins by its conversation key."""
    broker = slower_broker
    alice = await broker.register("alice")
    bob = await broker.register("bob", conversation_key="bob-conv")
    with trio.fail_after(120):
        async with mcp_session(broker.url, alice["token"]) as a:
            sent = structured(await a.call_tool("send", {"to": "bob", "body": "crash test"}))
        recipient = await trio.lowlevel.open_process(
            [sys.executable, "-m", "tests.fakes.mcp_recipient", broker.url, bob["token"]],
            stdout=subprocess.PIPE,
            cwd=Path(__file__).parents[2],
        )
        try:
            assert recipient.stdout is not None
            line = b""
            while not line.endswith(b"\n"):
                chunk = await recipient.stdout.receive_some()
                assert chunk, "the recipient exited before printing its claims"
                line += chunk
            [claim] = json.loads(line)["claims"]
            assert claim["message"]["id"] == sent["message_id"]
            recipient.send_signal(signal.SIGKILL)  # after fetch, before ack
            await recipient.wait()
        finally:
            if recipient.returncode is None:
                recipient.kill()
        again = await broker.register("bob", conversation_key="bob-conv")
        assert again["agent_id"] == bob["agent_id"]
        async with mcp_session(broker.url, again["token"]) as b:
            [redelivered] = structured(await b.call_tool("fetch", {"wait_s": 30}))["claims"]
            assert redelivered["message"]["id"] == sent["message_id"]
            assert redelivered["message"]["attempt"] == 2
            acked = structured(await b.call_tool("ack", {"tokens": [redelivered["token"]]}))
            assert acked["applied"] == [redelivered["token"]]
