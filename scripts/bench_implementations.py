"""Figures of the implementations issue (4), on real processes against a real broker.

- `pager hook` with nothing waiting against a bare interpreter that imports json and
  http.client (`.venv/bin/python -I -c 'import json, http.client'`), alternating: ratio <= 1.0x.
- `pager hook` with 5 messages waiting (claim, print, ack) against the same baseline: <= 1.3x.
- Wrapped launch overhead: `pager shell -- true` against `true`, broker running: <= 400 ms.
- The everyday commands `pager send`, `inbox`, `read`, `ack` and `whoami` (as the person, in
  a workspace) against the same bare interpreter, alternating: each <= 1.5x.
- One MCP `whoami` call through a wrapped launch's relay (pager/launch/relay.py) against the
  same call straight to the broker, alternating, one official MCP client each (no target: the
  price of the hop every wrapped harness's call pays).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import trio
from benchlib import (  # scripts/benchlib.py, beside this file
    NO_SEND_LIMITS,
    bench_parser,
    print_table,
    progress,
)
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

VENV_BIN = Path(sys.executable).parent
PAGER = str(VENV_BIN / "pager")
BARE = [str(VENV_BIN / "python"), "-I", "-c", "import json, http.client"]


def timed(argv: list[str], env: dict[str, str], stdin: bytes = b"") -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, input=stdin, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:  # a failing command would measure the failure, not the work
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()}")
    return elapsed


def register(url: str, secret: str, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx2.post(
        f"{url}/v1/register", json=body, headers={"Authorization": f"Bearer {secret}"}
    )
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result


def everyday_commands(
    env: dict[str, str], workspace: Path, runs: int
) -> dict[str, tuple[list[float], list[float]]]:
    """Seconds per run of each everyday command and of the bare interpreter beside it. Each
    round sends one message to the person, lists it, reads it with --no-ack and acks it."""
    here = {**env, "PWD": str(workspace)}
    timings: dict[str, tuple[list[float], list[float]]] = {
        name: ([], []) for name in ("send", "inbox", "read", "ack", "whoami")
    }

    def run(name: str, argv: list[str]) -> str:
        start = time.perf_counter()
        done = subprocess.run(argv, env=here, cwd=workspace, capture_output=True, check=False)
        timings[name][0].append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.decode()}")
        timings[name][1].append(timed(BARE, env))
        return done.stdout.decode()

    me = json.loads(run("whoami", [PAGER, "whoami", "--json"]))["alias"]
    for name in timings:
        timings[name][0].clear()
        timings[name][1].clear()
    for round_ in range(runs):
        run("whoami", [PAGER, "whoami"])
        run("send", [PAGER, "send", me, f"bench {round_}"])
        run("inbox", [PAGER, "inbox"])
        [line] = run("read", [PAGER, "read", "1", "--no-ack", "--json"]).splitlines()
        run("ack", [PAGER, "ack", json.loads(line)["token"]])
        progress(f"everyday commands {round_ + 1}/{runs}")
    return timings


async def relay_against_direct(
    home: Path, url: str, session: dict[str, Any], body: dict[str, Any], runs: int
) -> tuple[list[float], list[float]]:
    """Seconds per `whoami` through a launch relay and straight to the broker, alternating."""
    from pager.launch.discovery import BrokerLocator, discover
    from pager.launch.paths import StatePaths
    from pager.launch.relay import Relay
    from pager.launch.wrapper import TerminalNotices
    from pager.session_client import SessionClient

    paths = StatePaths(home)
    broker = discover(paths).broker
    assert broker is not None
    relay = Relay.bind()
    wrapped = SessionClient(BrokerLocator(paths, broker), body, notices=TerminalNotices())
    wrapped.adopt(session)  # the bench registered it itself
    relayed: list[float] = []
    direct: list[float] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(relay.serve, wrapped)
        async with (
            mcp_client(relay.url, relay.credential) as through,
            mcp_client(url, session["token"]) as straight,
        ):
            for client in (through, straight):  # the first call of each warms up
                await client.call_tool("whoami", {})
            for run in range(runs):
                for client, times in ((through, relayed), (straight, direct)):
                    start = time.perf_counter()
                    await client.call_tool("whoami", {})
                    times.append(time.perf_counter() - start)
                progress(f"MCP call through the relay {run + 1}/{runs}")
        nursery.cancel_scope.cancel()
    return relayed, direct


@contextlib.asynccontextmanager
async def mcp_client(url: str, token: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http), cache=None) as client,
    ):
        yield client


async def send_many(url: str, token: str, to: str, count: int) -> None:
    async with mcp_client(url, token) as client:
        for n in range(count):
            await client.call_tool("send", {"to": to, "body": f"benchmark message {n}"})


def main() -> int:
    parser = bench_parser(__doc__, runs_help="runs per figure (default 15)")
    args = parser.parse_args()
    runs = max(args.runs, 3)
    with tempfile.TemporaryDirectory(prefix="pager-bench-impl-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PAGER_")}
        env.update(NO_SEND_LIMITS)
        env["PAGER_HOME"] = str(Path(tmp) / "home")
        workspace = Path(tmp) / "repo"
        workspace.mkdir()
        started = subprocess.run(
            [PAGER, "start", "--json"], env=env, capture_output=True, check=True
        )
        url = json.loads(started.stdout)["url"]
        secret = (Path(env["PAGER_HOME"]) / "secret").read_text().strip()
        try:
            here = {"workspace": str(workspace)}
            alice_body = {**here, "implementation": "shell", "session_name": "alice"}
            alice = register(url, secret, alice_body)
            bob = {
                "implementation": "claude",
                "session_name": "bob",
                "conversation_key": "bench-bob",
            }
            register(url, secret, {**here, **bob})
            payload = json.dumps({"session_id": "bench-bob", "hook_event_name": "UserPromptSubmit",
                                  "cwd": str(workspace), "prompt": "hi"}).encode()  # fmt: skip
            hook = [PAGER, "hook", "--implementation", "claude", "UserPromptSubmit"]
            idle: list[float] = []
            bare: list[float] = []
            for run in range(runs * 2):
                idle.append(timed(hook, env, payload))
                bare.append(timed(BARE, env))
                progress(f"hook, nothing waiting {run + 1}/{runs * 2}")
            busy: list[float] = []
            bare_busy: list[float] = []
            for run in range(runs):
                trio.run(send_many, url, alice["token"], "bob", 5)
                busy.append(timed(hook, env, payload))
                bare_busy.append(timed(BARE, env))
                progress(f"hook, 5 waiting {run + 1}/{runs}")
            true = shutil.which("true") or "/bin/true"
            wrapped: list[float] = []
            plain: list[float] = []
            for run in range(runs):
                wrapped.append(timed([PAGER, "shell", "--", true], {**env, "PWD": str(workspace)}))
                plain.append(timed([true], env))
                progress(f"wrapped launch {run + 1}/{runs}")
            everyday = everyday_commands(env, workspace, runs)
            relayed, direct = trio.run(
                relay_against_direct, Path(env["PAGER_HOME"]), url, alice, alice_body, runs * 4
            )
        finally:
            subprocess.run([PAGER, "exit"], env=env, capture_output=True, check=False)
            progress("")
    med = statistics.median
    results = {
        "hook_idle_ms": round(med(idle) * 1000, 1),
        "bare_ms": round(med(bare) * 1000, 1),
        "hook_idle_ratio": round(med(idle) / med(bare), 2),
        "hook_5_waiting_ms": round(med(busy) * 1000, 1),
        "hook_5_waiting_ratio": round(med(busy) / med(bare_busy), 2),
        "wrapped_launch_overhead_ms": round((med(wrapped) - med(plain)) * 1000, 1),
        **{f"{name}_ms": round(med(times) * 1000, 1) for name, (times, _) in everyday.items()},
        **{
            f"{name}_ratio": round(med(times) / med(bare_times), 2)
            for name, (times, bare_times) in everyday.items()
        },
        "mcp_call_relayed_ms": round(med(relayed) * 1000, 2),
        "mcp_call_direct_ms": round(med(direct) * 1000, 2),
    }
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    rows = [
        ("`pager hook`, nothing waiting / bare interpreter, medians",
         f"{results['hook_idle_ms']} ms / {results['bare_ms']} ms = {results['hook_idle_ratio']}x",
         "<= 1.0x"),
        ("`pager hook`, 5 waiting (claim, print, ack) / bare, medians",
         f"{results['hook_5_waiting_ms']} ms = {results['hook_5_waiting_ratio']}x", "<= 1.3x"),
        ("wrapped launch overhead, `pager shell -- true` minus `true`, medians",
         f"{results['wrapped_launch_overhead_ms']} ms", "<= 400 ms"),
        *(
            (f"`pager {name}` (the person) / bare interpreter, medians",
             f"{results[name + '_ms']} ms = {results[name + '_ratio']}x", "<= 1.5x")
            for name in everyday
        ),
        ("MCP `whoami` through the launch relay / straight to the broker, medians",
         f"{results['mcp_call_relayed_ms']} ms / {results['mcp_call_direct_ms']} ms",
         "(recorded)"),
    ]  # fmt: skip
    print(f"{runs} runs per figure")
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
