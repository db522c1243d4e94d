"""What refused sends cost the store (issue 25), on a real broker over real HTTP.

A mailbox token allowed one page an hour pages its identity 2,000 more times, one kept-alive
client, one request after another: every page is refused `rate_limited` inside the store. The
figures: refusals a second, and how much the store grew, both live (`pager.db` and its WAL) and
after a clean stop (which checkpoints the WAL into `pager.db` and truncates it), against the
same store stopped cleanly before the refusals.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2
from benchlib import NO_SEND_LIMITS, bench_parser, machine, progress, report

PAGER = str(Path(sys.executable).parent / "pager")
REFUSALS = 2000


def kib(path: Path) -> float:
    """The file's size in KiB (0 when it does not exist)."""
    return round(path.stat().st_size / 1024, 1) if path.exists() else 0.0


def pager(env: dict[str, str], cwd: Path, *argv: str) -> str:
    return subprocess.run(
        [PAGER, *argv], env=env, cwd=cwd, capture_output=True, check=True
    ).stdout.decode()


def refuse(url: str, token: str, count: int) -> float:
    """Seconds for `count` pages that the token's hourly limit refuses, one after another."""
    with httpx2.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as client:
        start = time.perf_counter()
        for n in range(count):
            response = client.post("/v1/notify", json={"message": f"refused {n}"})
            if response.status_code != 429:
                raise SystemExit(f"page {n}: expected 429, got {response.status_code}")
            if n % 100 == 0:
                progress(f"refused pages {n}/{count}")
        return time.perf_counter() - start


def main() -> int:
    parser = bench_parser(__doc__, runs=1, runs_help="unused: one run of 2,000 refusals")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pager-bench-refusals-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PAGER_")}
        env.update(NO_SEND_LIMITS)
        env["PAGER_LIMIT_TOKEN_SENDS_PER_HOUR"] = "1"
        home = Path(tmp) / "home"
        env["PAGER_HOME"] = str(home)
        workspace = Path(tmp) / "repo"
        workspace.mkdir()
        database, wal = home / "pager.db", home / "pager.db-wal"
        try:
            pager(env, workspace, "start", "--json")
            me = json.loads(pager(env, workspace, "whoami", "--json"))["alias"]
            token = pager(env, workspace, "token", "create", me, "--label", "bench").strip()
            pager(env, workspace, "notify", "--token", token, me, "the hour's one page")
            pager(env, workspace, "exit")
            before = kib(database)
            url = json.loads(pager(env, workspace, "start", "--json"))["url"]
            seconds = refuse(url, token, REFUSALS)
            live = (kib(database), kib(wal))
            secret = (home / "secret").read_text().strip()
            snapshot = httpx2.get(
                f"{url}/v1/snapshot", params={"agents": "false"},
                headers={"Authorization": f"Bearer {secret}"},
            ).json()  # fmt: skip
        finally:
            subprocess.run([PAGER, "exit"], env=env, capture_output=True, check=False)
        after = kib(database)
    results = {
        "machine": machine(),
        "runs": 1,
        "refusals": REFUSALS,
        "refusals_per_s": round(REFUSALS / seconds),
        "db_kib_before": before,
        "db_kib_live": live[0],
        "wal_kib_live": live[1],
        "db_kib_after_clean_stop": after,
        "growth_kib": round(after - before, 1),
        "refused_sends": snapshot["totals"]["refused_sends"],
    }
    rows = [
        (f"{REFUSALS} refused pages (`POST /v1/notify`, sequential)",
         f"{results['refusals_per_s']} refusals/s", "(recorded)"),
        ("`pager.db` growth after a clean stop",
         f"{before} KiB -> {after} KiB = {results['growth_kib']} KiB", "< 100 KB"),
        ("live, before the stop: `pager.db` + WAL",
         f"{live[0]} KiB + {live[1]} KiB", "(WAL reused after each checkpoint)"),
    ]  # fmt: skip
    return report(results, rows, as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())
