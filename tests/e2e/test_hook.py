"""`pager hook` against a real broker: inject, acknowledge after writing, fail open."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
import trio

from tests.e2e.conftest import Broker, mcp_session, structured


def _hook(broker: Broker, stdin: bytes, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "pager", "hook", *args],
        input=stdin,
        env=broker.home.env,
        capture_output=True,
        timeout=60,
        check=False,
    )


def _payload(session: str, event: str = "UserPromptSubmit") -> bytes:
    return json.dumps(
        {"session_id": session, "hook_event_name": event, "cwd": "/tmp", "prompt": "hi"}
    ).encode()


async def _send(broker: Broker, token: str, *bodies: str) -> list[str]:
    async with mcp_session(broker.url, token) as a:
        return [
            structured(await a.call_tool("send", {"to": "bob", "body": body}))["message_id"]
            for body in bodies
        ]


async def _status(broker: Broker, token: str, message_id: str) -> dict[str, Any]:
    async with mcp_session(broker.url, token) as a:
        return structured(await a.call_tool("message_status", {"message_id": message_id}))


async def test_hook_injects_waiting_mail_and_acks_after_writing(broker: Broker) -> None:
    """Waiting mail comes out as additionalContext JSON inside the envelope, then is acked."""
    alice = await broker.register("alice")
    await broker.register("bob", implementation="claude", conversation_key="conv-bob")
    with trio.fail_after(60):
        ids = await _send(broker, alice["token"], "first note", "second note")
        result = await trio.to_thread.run_sync(
            _hook, broker, _payload("conv-bob"), "--implementation", "claude", "UserPromptSubmit"
        )
        assert result.returncode == 0
        output = json.loads(result.stdout)
        context = output["hookSpecificOutput"]["additionalContext"]
        assert output["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
        assert "first note" in context
        assert "second note" in context
        assert alice["address"] in context
        assert context.index("first note") < context.index("second note")
        for message_id in ids:
            assert (await _status(broker, alice["token"], message_id))["state"] == "acknowledged"
        again = await trio.to_thread.run_sync(
            _hook, broker, _payload("conv-bob"), "--implementation", "claude"
        )
        assert again.stdout == b""  # nothing waits any more


async def test_hook_size_limit_hands_back_what_does_not_fit(broker: Broker) -> None:
    """Over the injection limit, the rest waits for the next hook run, in order."""
    alice = await broker.register("alice")
    await broker.register("bob", implementation="claude", conversation_key="conv-bob")
    with trio.fail_after(60):
        await _send(broker, alice["token"], *(f"note {n} " + "x" * 300 for n in range(4)))
        seen: list[str] = []
        for _ in range(10):
            result = await trio.to_thread.run_sync(
                _hook,
                broker,
                _payload("conv-bob"),
                "--implementation",
                "claude",
                "--max-chars",
                "900",
            )
            if not result.stdout:
                break
            context = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
            assert len(context) <= 900
            seen += [f"note {n} " for n in range(4) if f"note {n} " in context]
        assert seen == [f"note {n} " for n in range(4)]


@pytest.mark.parametrize(
    "stdin",
    [b"", b"garbage", b"[1,2]", b'{"no_session": 1}', b"{" + b" " * (2 * 1024 * 1024) + b"}"],
)
async def test_hook_bad_input_fails_open(broker: Broker, stdin: bytes) -> None:
    """Garbage, empty, foreign or oversized payloads: exit 0, no output, nothing claimed."""
    alice = await broker.register("alice")
    await broker.register("bob", implementation="claude", conversation_key="conv-bob")
    [message_id] = await _send(broker, alice["token"], "keep me")
    result = await trio.to_thread.run_sync(_hook, broker, stdin, "--implementation", "claude")
    assert (result.returncode, result.stdout) == (0, b"")
    assert (await _status(broker, alice["token"], message_id))["state"] == "queued"


async def test_hook_unknown_session_and_stopped_broker_fail_open(broker: Broker) -> None:
    """An unknown conversation prints nothing; with the broker stopped, still exit 0."""
    unknown = await trio.to_thread.run_sync(_hook, broker, _payload("nobody"))
    assert (unknown.returncode, unknown.stdout) == (0, b"")
    assert broker.home.run("exit").returncode == 0
    stopped = await trio.to_thread.run_sync(_hook, broker, _payload("conv-bob"))
    assert (stopped.returncode, stopped.stdout) == (0, b"")
    assert "skipped" in (broker.home.root / "logs" / "hook.log").read_text()


async def test_hook_wait_wakes_with_mail_on_stderr_and_exit_2(broker: Broker) -> None:
    """`--wait` blocks until mail arrives, then writes it to stderr, acks, and exits 2 (the
    asyncRewake signal); with nothing arriving it ends quietly at --wait-max."""
    alice = await broker.register("alice")
    await broker.register("bob", implementation="claude", conversation_key="conv-bob")
    with trio.fail_after(60):
        quiet = await trio.to_thread.run_sync(
            _hook, broker, _payload("conv-bob", "Stop"), "--wait", "--wait-max", "0.5"
        )
        assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, b"", b"")
        results: list[subprocess.CompletedProcess[bytes]] = []

        args = ("--implementation", "claude", "--wait", "--wait-max", "30")

        async def wait() -> None:
            payload = _payload("conv-bob", "Stop")
            results.append(await trio.to_thread.run_sync(_hook, broker, payload, *args))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait)
            [message_id] = await _send(broker, alice["token"], "wake up, bob")
        [woken] = results
        assert woken.returncode == 2
        assert woken.stdout == b""
        assert b"wake up, bob" in woken.stderr
        assert (await _status(broker, alice["token"], message_id))["state"] == "acknowledged"


async def test_hook_binds_a_new_conversation_to_the_wrapped_session(broker: Broker) -> None:
    """Inside a wrapped launch (PAGER_TOKEN set), a hook naming a conversation the broker does
    not know binds it to that session, so a harness whose ids the wrapper cannot choose still
    gets its mail."""
    alice = await broker.register("alice")
    bob = await broker.register("bob", implementation="codex")
    await _send(broker, alice["token"], "for the codex thread")
    broker.home.env["PAGER_TOKEN"] = bob["token"]
    done = await trio.to_thread.run_sync(
        _hook, broker, _payload("thread-abc"), "--implementation", "codex"
    )
    del broker.home.env["PAGER_TOKEN"]
    assert done.returncode == 0
    assert b"for the codex thread" in done.stdout
    again = await trio.to_thread.run_sync(
        _hook, broker, _payload("thread-abc"), "--implementation", "codex"
    )
    assert again.stdout == b""  # bound, and nothing more waits
