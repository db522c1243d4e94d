"""`pager send` writes its request itself (pager.small_json, without the json package): a body
reaches its recipient exactly as the command line or standard input had it, and only the
recipient it names.

The attacker is an agent holding its own session token, whose body tries to end its JSON
string early and add fields of its own (another recipient, a thread), or to smuggle characters
a hand-written escape would get wrong (backslashes, quotes, control characters, U+2028, lone
surrogates from argv bytes that are not UTF-8). Real processes, a real broker: the body is
read back from the broker's export."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import trio

from tests.e2e.conftest import Broker
from tests.e2e.test_everyday_cli import PAGER
from tests.launch.conftest import PROCESS_BOUND

#: Bodies that a hand-written JSON escape gets wrong, or that try to rewrite the request.
HOSTILE = [
    '", "to": "victim", "thread": "stolen", "body": "x',
    '\\", "to": "victim',
    "back\\slash \\\\ \\u0022 \\n not an escape",
    "\u2028 line and paragraph \u2029 separators",
    "esc \x1b[2J bell \x07 del \x7f c1 \x9b tab \t",
    "\U0001f600 astral, \u202e bidi override, \ufeff BOM, \u200d joiner",
]
#: Read from standard input: what argv cannot carry (NUL) and line ends kept as they are.
HOSTILE_STDIN = "nul \x00 here\r\nCRLF\rCR\nLF\n\n"


def _send(env: dict[str, str], cwd: Path, *args: bytes | str, stdin: bytes = b"") -> Any:
    return subprocess.run(
        [*PAGER, "send", *args],
        env=env,
        cwd=cwd,
        input=stdin,
        capture_output=True,
        timeout=PROCESS_BOUND,
        check=False,
    )


def _bodies_to(broker: Broker, agent_id: str) -> list[str]:
    return [
        r["body"] for r in broker.export_sync() if r["kind"] == "message" and r["to"] == agent_id
    ]


async def test_hostile_bodies_arrive_exact_and_only_where_they_were_sent(broker: Broker) -> None:
    sender = await broker.register("mallory")
    api = await broker.register("api")
    victim = await broker.register("victim")
    env = {**broker.home.env, "PAGER_TOKEN": sender["token"]}
    for body in HOSTILE:
        done = _send(env, broker.workspace, "api", body)
        assert done.returncode == 0, done.stderr
    done = _send(env, broker.workspace, "api", "-", stdin=HOSTILE_STDIN.encode())
    assert done.returncode == 0, done.stderr
    assert await _in_thread(_bodies_to, broker, api["agent_id"]) == [*HOSTILE, HOSTILE_STDIN]
    assert await _in_thread(_bodies_to, broker, victim["agent_id"]) == []
    threads = {r.get("thread") for r in await _in_thread(broker.export_sync)}
    assert "stolen" not in threads


async def test_argv_bytes_that_are_not_utf8_are_refused_and_nothing_is_sent(
    broker: Broker,
) -> None:
    """Python hands such bytes to the command as lone surrogates (`\\udce9`); the request
    carries them escaped as JSON does, and the broker refuses the body in its own words."""
    sender = await broker.register("mallory")
    api = await broker.register("api")
    env = {**broker.home.env, "PAGER_TOKEN": sender["token"]}
    done = _send(env, broker.workspace, b"api", b"caf\xe9 \xed\xa0\x80")
    assert done.returncode == 1
    assert b"lone UTF-16 surrogate" in done.stderr, done.stderr
    assert b"Traceback" not in done.stderr
    assert await _in_thread(_bodies_to, broker, api["agent_id"]) == []


async def _in_thread(function: Any, *args: Any) -> Any:
    return await trio.to_thread.run_sync(function, *args)
