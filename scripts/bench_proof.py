"""The broker's CPU for what a `pager send` asks of it: the proof (`GET /health?challenge=…`)
alone, and the proof then the send, on two connections or on one.

    .venv/bin/python scripts/bench_proof.py [--requests N] [--rounds R]

A broker of this checkout (`pager start`, a throwaway PAGER_HOME, send limits off) with two
shell sessions; the client speaks to it as a command does (pager/client.py), one request after
another. The broker's CPU (utime+stime of its process, /proc/PID/stat) is read before and after
each series of N; the figure is its difference divided by N, the median of R rounds (the
series interleaved in each round). Clock ticks are 10 ms: keep N times the cost well above that.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pager import client
from pager.client import request_json
from pager.launch.proof import new_challenge

NO_SEND_LIMITS = {
    "PAGER_LIMIT_MAX_HOPS": "0",
    "PAGER_LIMIT_AGENT_SENDS_PER_HOUR": "0",
    "PAGER_LIMIT_PAIR_SENDS_PER_HOUR": "0",
    "PAGER_LIMIT_TOKEN_SENDS_PER_HOUR": "0",
}


def cpu_seconds(pid: int) -> tuple[float, float]:
    """The process's user and system CPU so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PAGER_")}
        env.update(NO_SEND_LIMITS, PAGER_HOME=str(Path(tmp) / "home"))
        pager = [sys.executable, "-m", "pager"]
        started = subprocess.run([*pager, "start", "--json"], env=env, capture_output=True)
        if started.returncode:
            print(started.stderr.decode(), file=sys.stderr)
            return 1
        try:
            return run(json.loads(started.stdout), Path(env["PAGER_HOME"]), tmp, args)
        finally:
            subprocess.run([*pager, "exit"], env=env, capture_output=True, check=False)


def run(started: dict[str, Any], home: Path, workspace: str, args: argparse.Namespace) -> int:
    url = started["url"]
    pid = int(json.loads((home / "broker.json").read_text())["pid"])
    secret = (home / "secret").read_text().strip()
    tokens = {}
    for name in ("alice", "bob"):
        body = {"workspace": workspace, "implementation": "shell", "session_name": name}
        status, answer = request_json(url, "POST", "/v1/register", token=secret, body=body)
        assert status in (200, 201), answer
        tokens[name] = answer["token"]
    proof = f"/health?challenge={new_challenge()}"
    send = {"to": "bob", "body": "hello"}

    def proof_alone() -> None:
        assert request_json(url, "GET", proof)[0] == 200

    def two_connections() -> None:
        assert request_json(url, "GET", proof)[0] == 200
        status, _ = request_json(url, "POST", "/v1/me/send", token=tokens["alice"], body=send)
        assert status in (200, 201)

    def one_connection() -> None:
        connection = client.Connection(url)
        assert connection.request("GET", proof)[0] == 200
        answer = connection.request(
            "POST", "/v1/me/send", token=tokens["alice"], body=send, last=True
        )
        assert answer[0] in (200, 201)

    series: dict[str, Callable[[], None]] = {
        "proof (GET /health?challenge)": proof_alone,
        "proof + send, two connections": two_connections,
    }
    if hasattr(client, "Connection"):
        series["proof + send, one connection"] = one_connection
    figures: dict[str, list[tuple[float, float, float]]] = {name: [] for name in series}
    per = 1000 / args.requests  # seconds of a series -> ms of a step
    for _ in range(args.rounds):
        for name, step in series.items():
            step()  # warm
            (user0, sys0), wall0 = cpu_seconds(pid), time.perf_counter()
            for _ in range(args.requests):
                step()
            wall, (user, system) = time.perf_counter() - wall0, cpu_seconds(pid)
            figures[name].append(((user - user0) * per, (system - sys0) * per, wall * per))
    for name, rows in figures.items():
        user_ms, sys_ms, wall_ms = (statistics.median(row[i] for row in rows) for i in range(3))
        print(
            f"{name}: broker CPU {user_ms + sys_ms:.2f} ms ({user_ms:.2f} user,"
            f" {sys_ms:.2f} system), client wall {wall_ms:.2f} ms, per step"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
