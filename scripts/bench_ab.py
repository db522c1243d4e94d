"""Compare the broker's CPU per MCP call between Git revisions, side by side under one load.

Each revision is checked out into a temporary worktree and run as its own broker (`pager start`
with PYTHONPATH pointing at that worktree). Every round, the same client processes (the official
MCP SDK client) load all the brokers at once, 8 sessions each in pairs, looping send -> fetch ->
ack (or only send with --send-only: one session per broker). The broker's CPU per call
(utime+stime from /proc/<pid>/stat) is then compared within the round.

Why side by side: on a shared machine the speed drifts by a third within minutes, so runs one
after the other cannot tell a 5% change from noise; brokers loaded at the same moments see the
same machine. The figure is each revision's CPU per call divided by the first one's, the median
over the rounds. Calls/s are printed too, but with brokers sharing the cores they are lower
than a lone broker's.

    .venv/bin/python scripts/bench_ab.py d027509 HEAD [--rounds 4] [--seconds 8] [--send-only]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench_messaging import Brokers, _call, _mcp_client, register, temporary_brokers
from benchlib import machine

ROOT = Path(__file__).resolve().parent.parent
SESSIONS = 8
PROCESSES = 4


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])


@contextlib.contextmanager
def worktrees(revisions: list[str]) -> Iterator[list[Path]]:
    with tempfile.TemporaryDirectory(prefix="pager-ab-") as tmp:
        trees = []
        try:
            for n, revision in enumerate(revisions):
                tree = Path(tmp) / f"rev{n}"
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), revision],
                    check=True,
                    capture_output=True,
                )
                trees.append(tree)
            yield trees
        finally:
            for tree in trees:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                    check=False,
                    capture_output=True,
                )


@contextlib.contextmanager
def running_from(tree: Path | None) -> Iterator[None]:
    """Brokers started inside run the code of `tree` (a worktree; None: this checkout's):
    `Brokers.start` passes the environment, PYTHONPATH included, on to `pager start`."""
    if tree is None:
        yield
        return
    os.environ["PYTHONPATH"] = str(tree)
    try:
        yield
    finally:
        del os.environ["PYTHONPATH"]


@contextlib.contextmanager
def each_revision(revisions: list[str], default: str) -> Iterator[list[tuple[str, Path | None]]]:
    """(name, worktree) of each revision, checked out for the block; none given: this
    checkout's code under the name `default`."""
    if not revisions:
        yield [(default, None)]
        return
    with worktrees(revisions) as trees:
        yield list(zip(revisions, trees, strict=True))


def start(brokers: Brokers, tree: Path, name: str, sessions: int) -> dict[str, Any]:
    with running_from(tree):
        broker, _ = brokers.start(name)
    registered = [register(broker, f"s{n}") for n in range(sessions)]
    addresses = [r["address"] for r in registered]
    return {
        "pid": broker.pid,
        "url": broker.url,
        "sessions": [
            {"url": broker.url, "token": r["token"], "partner": addresses[n ^ 1]}
            for n, r in enumerate(registered)
        ],
    }


def run_round(
    setups: list[dict[str, Any]], seconds: float, send_only: bool
) -> list[dict[str, float]]:
    per_process = 1 if send_only else SESSIONS // PROCESSES
    processes = 1 if send_only else PROCESSES
    before = [cpu_ticks(s["pid"]) for s in setups]
    workers = []
    for p in range(processes):
        sessions = [
            session
            for setup in setups
            for session in setup["sessions"][p * per_process : (p + 1) * per_process]
        ]
        spec = {"sessions": sessions, "seconds": seconds, "send_only": send_only}
        workers.append(
            subprocess.Popen(
                [sys.executable, __file__, "--worker", json.dumps(spec)],
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    counts: dict[str, int] = {}
    for worker in workers:
        out, _ = worker.communicate()
        for url, n in json.loads(out).items():
            counts[url] = counts.get(url, 0) + n
    ticks = os.sysconf("SC_CLK_TCK")
    results = []
    for setup, start_ticks in zip(setups, before, strict=True):
        calls = counts.get(setup["url"], 0)
        cpu_s = (cpu_ticks(setup["pid"]) - start_ticks) / ticks
        results.append(
            {"calls_per_s": calls / seconds, "cpu_ms_per_call": 1000 * cpu_s / max(calls, 1)}
        )
    return results


def worker(spec: dict[str, Any]) -> None:
    import trio

    counts: dict[str, int] = {}
    go = trio.Event()

    async def session(s: dict[str, Any], until: list[float]) -> None:
        async with _mcp_client(s["url"], s["token"]) as client:
            await _call(client, "whoami", {})
            await go.wait()
            while time.monotonic() < until[0]:
                await _call(client, "send", {"to": s["partner"], "body": "side by side"})
                counts[s["url"]] = counts.get(s["url"], 0) + 1
                if spec["send_only"]:
                    continue
                claims = (await _call(client, "fetch", {"limit": 10}))["claims"]
                counts[s["url"]] += 1
                if claims:
                    await _call(client, "ack", {"tokens": [c["token"] for c in claims]})
                    counts[s["url"]] += 1

    async def main() -> None:
        until = [0.0]
        async with trio.open_nursery() as nursery:
            for s in spec["sessions"]:
                nursery.start_soon(session, s, until)
            await trio.sleep(1.0)  # connect and warm up
            until[0] = time.monotonic() + spec["seconds"]
            go.set()

    trio.run(main)
    print(json.dumps(counts))


def main() -> int:
    if sys.argv[1:2] == ["--worker"]:
        worker(json.loads(sys.argv[2]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("revisions", nargs="+", help="Git revisions; the first is the baseline")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=8.0, help="per round (default 8)")
    parser.add_argument("--send-only", action="store_true", help="one sequential sender each")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    rows: list[list[dict[str, float]]] = []
    with worktrees(args.revisions) as trees, temporary_brokers("pager-ab-") as brokers:
        sessions = 2 if args.send_only else SESSIONS
        setups = [start(brokers, t, f"b{n}", sessions) for n, t in enumerate(trees)]
        for round_no in range(args.rounds):
            result = run_round(setups, args.seconds, args.send_only)
            rows.append(result)
            print(
                f"round {round_no + 1}: "
                + " | ".join(
                    f"{rev} {r['calls_per_s']:.0f} calls/s, {r['cpu_ms_per_call']:.2f} ms CPU/call"
                    for rev, r in zip(args.revisions, result, strict=True)
                ),
                flush=True,
            )
    for n, revision in enumerate(args.revisions):
        ratios = [row[n]["cpu_ms_per_call"] / row[0]["cpu_ms_per_call"] for row in rows]
        print(f"{revision}: CPU per call {statistics.median(ratios):.3f}x {args.revisions[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
