"""Figures of launch on mail (issue 15, docs/wake.md), on a real broker with a FAKE harness.

- Mail to a wake-enabled identity with no session → its harness process started: p50 <= 500 ms.
  Measured from just before `POST /v1/me/send` to the first thing the FAKE `claude` does (it
  writes the clock to a file, then exits), over one send per identity (each identity's first
  run: no redelivery delay or hourly bound in the way), one after another. The send's own
  answer time beside it.

The FAKE harness is a shell script, so what is measured is Pager's path: the identity actor's
decision, the run's registration (a commit), the per-launch files and the two process starts.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2
from benchlib import NO_SEND_LIMITS, bench_parser, machine, ms, percentile, progress, report

VENV_BIN = Path(sys.executable).parent
PAGER = str(VENV_BIN / "pager")
#: Identities (one run each) per round.
IDENTITIES = 20
#: Claude Code's headless resume, as its manifest has it (given here: the figure does not
#: depend on the manifest in use).
WAKE_ON = {"command": ["-p", "--resume", "{conversation_key}", "{prompt}"], "max_runs_per_hour": 60}


def fake_claude(directory: Path, stamps: Path) -> Path:
    """A `claude` that writes when it started (ns) and the run's guard pid, then exits."""
    bin_dir = directory / "bin"
    bin_dir.mkdir()
    script = bin_dir / "claude"
    script.write_text(f'#!/bin/sh\necho "$(date +%s%N) $PPID $PAGER_AGENT_ID" >> {stamps}\n')
    script.chmod(0o755)
    return bin_dir


def started_runs(stamps: Path) -> dict[str, int]:
    """Agent id -> the ns its harness started at."""
    if not stamps.exists():
        return {}
    found = {}
    for line in stamps.read_text().splitlines():
        at, _, agent = line.split()
        found[agent] = int(at)
    return found


def main() -> int:
    parser = bench_parser(__doc__, runs=1, runs_help=f"rounds of {IDENTITIES} sends (default 1)")
    args = parser.parse_args()
    rounds = max(args.runs, 1)
    with tempfile.TemporaryDirectory(prefix="pager-bench-wake-") as tmp:
        root = Path(tmp)
        stamps = root / "stamps"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PAGER_")}
        env.update(NO_SEND_LIMITS)
        env["PAGER_HOME"] = str(root / "home")
        env["PATH"] = f"{fake_claude(root, stamps)}:{env['PATH']}"
        workspace = root / "repo"
        workspace.mkdir()
        started = subprocess.run([PAGER, "start", "--json"], env=env, capture_output=True,
                                 check=True)  # fmt: skip
        url = json.loads(started.stdout)["url"]
        secret = (root / "home" / "secret").read_text().strip()
        to_start: list[float] = []
        answered: list[float] = []
        try:
            with httpx2.Client(base_url=url, headers={"Authorization": f"Bearer {secret}"}) as http:
                for round_ in range(rounds):
                    for n in range(IDENTITIES):
                        name = f"r{round_}n{n}"
                        agent = register_detached(http, workspace, name)
                        on = http.put(f"/v1/agents/{agent}/wake", json=WAKE_ON)
                        on.raise_for_status()
                        before = time.time_ns()
                        sent = http.post("/v1/me/send", params={"workspace": str(workspace)},
                                         json={"to": name, "body": "wake up"})  # fmt: skip
                        answered.append((time.time_ns() - before) / 1e9)
                        sent.raise_for_status()
                        deadline = time.monotonic() + 30
                        while agent not in (runs := started_runs(stamps)):
                            if time.monotonic() > deadline:
                                raise SystemExit(f"no run started for {name}")
                            time.sleep(0.002)
                        to_start.append((runs[agent] - before) / 1e9)
                        progress(f"wake runs {round_ * IDENTITIES + n + 1}/{rounds * IDENTITIES}")
        finally:
            subprocess.run([PAGER, "exit"], env=env, capture_output=True, check=False)
    results = {
        "machine": machine(),
        "runs": len(to_start),
        "mail_to_harness_p50_ms": ms(percentile(to_start, 50)),
        "mail_to_harness_p90_ms": ms(percentile(to_start, 90)),
        "mail_to_harness_max_ms": ms(max(to_start)),
        "send_answer_p50_ms": ms(statistics.median(answered)),
    }
    rows = [
        ("mail to a wake-enabled detached identity → its harness started, p50",
         f"{results['mail_to_harness_p50_ms']} ms (p90 {results['mail_to_harness_p90_ms']} ms,"
         f" max {results['mail_to_harness_max_ms']} ms; {results['runs']} runs)", "<= 500 ms"),
        ("the send's own answer, p50", f"{results['send_answer_p50_ms']} ms", ""),
    ]  # fmt: skip
    return report(results, rows, as_json=args.json)


def register_detached(http: httpx2.Client, workspace: Path, name: str) -> str:
    """A `claude` identity whose session named a conversation and left: its id."""
    body = {"workspace": str(workspace), "implementation": "claude", "session_name": name,
            "conversation_key": f"conversation-{name}"}  # fmt: skip
    registered = http.post("/v1/register", json=body)
    registered.raise_for_status()
    answer = registered.json()
    token = answer["token"]
    detached = http.post("/v1/sessions/current/detach", json={},
                         headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    detached.raise_for_status()
    return str(answer["agent_id"])


if __name__ == "__main__":
    sys.exit(main())
