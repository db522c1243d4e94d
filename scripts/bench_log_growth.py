"""How much the broker's log grows for N identical requests that fail inside the broker.

A real broker (`pager start` on a fresh state directory) gets N `POST /v1/register` with the
local secret and a body nested 10,000 levels deep (an internal error while the edge lets such
depth through; a 400 once it does not: the figure then says so by its statuses). Printed: the
answers' statuses and the bytes added to `logs/` during the requests, then after a graceful
stop (when the summary of the held-back repeats is written).

    .venv/bin/python scripts/bench_log_growth.py --requests 1000
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx2

BODY = b'{"workspace": "/tmp", "x": ' + b"[" * 10_000 + b"]" * 10_000 + b"}"


def log_bytes(logs: Path) -> int:
    return sum(path.stat().st_size for path in logs.iterdir())


def wait_gone(pid: int, bound: float = 10.0) -> None:
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        home = Path(root)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PAGER_")}
        env["PAGER_HOME"] = str(home)
        started = subprocess.run(
            [sys.executable, "-m", "pager", "start", "--json"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd=root,
        )
        url = json.loads(started.stdout)["url"]
        pid = json.loads((home / "broker.json").read_text())["pid"]
        headers = {
            "Authorization": f"Bearer {(home / 'secret').read_text().strip()}",
            "Content-Type": "application/json",
        }
        logs = home / "logs"
        before = log_bytes(logs)
        statuses: Counter[int] = Counter()
        with httpx2.Client(timeout=30) as http:
            for _ in range(args.requests):
                response = http.post(f"{url}/v1/register", content=BODY, headers=headers)
                statuses[response.status_code] += 1
        during = log_bytes(logs) - before
        os.kill(pid, signal.SIGTERM)
        wait_gone(pid)
        after_stop = log_bytes(logs) - before
    print(
        f"{args.requests} requests, statuses {dict(statuses)}: the log grew {during} bytes"
        f" ({after_stop} bytes once the broker stopped)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
