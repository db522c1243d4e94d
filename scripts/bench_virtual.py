"""Virtual identities of issue 13 (item 3): a broker whose store holds many identities, each
with one message waiting and no session, starts in bounded time and memory.

For each revision (default: HEAD only; `--rev A --rev B` compares side by side, each from a
temporary Git worktree as in bench_ab.py), a broker is started once with `pager start` (which
creates and migrates its database) and stopped; its store is then filled directly with sqlite3:
`--identities` identities (default 100,000), 100 per workspace, detached, each holding one
queued message sent a minute ago (its next due time, where the schema has one, is the
message's expiry, a week on). The broker is then started again `--runs` times (each stopped
before the next): the figure is `pager start`'s wall time until the broker answers (ready),
and the broker's resident memory (VmRSS) once it is ready and again after `--settle` seconds.

Progress goes to stderr only when it is a terminal; `--json` prints the results as JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sqlite3
import statistics
import time
from pathlib import Path
from typing import Any

from bench_ab import each_revision, running_from
from bench_messaging import _encode, temporary_brokers
from benchlib import machine, progress

WEEK = 7 * 86400.0


def fill(db: Path, identities: int) -> float:
    """Insert the identities, their workspaces and one waiting message each; seconds spent."""
    begin = time.perf_counter()
    rng = random.Random(5)
    now = time.time()
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("BEGIN")
        columns = {str(row[1]) for row in conn.execute("PRAGMA table_info(identities)")}
        workspaces = max(1, identities // 100)
        conn.executemany(
            "INSERT INTO workspaces (key, slug, path, created_at) VALUES (?, ?, ?, ?)",
            (
                (
                    f"/bench/repo-{w:05d}",
                    f"repo-{w:05d}-{hashlib.sha256(str(w).encode()).hexdigest()[:6]}",
                    f"/bench/repo-{w:05d}",
                    now - 86400,
                )
                for w in range(workspaces)
            ),
        )
        ids = [f"agt_{_encode(rng.getrandbits(80), 16)}" for _ in range(identities)]
        sent_at = now - 60
        conn.executemany(
            "INSERT INTO identities (id, workspace_key, alias, alias_key, durable, implementation,"
            " created_at, last_seen, detached_at, exchanged) VALUES (?, ?, ?, ?, 1, 'shell',"
            " ?, ?, ?, 1)",
            (
                (
                    agent_id,
                    f"/bench/repo-{n % workspaces:05d}",
                    f"agent-{n}",
                    f"agent-{n}",
                    now - 3600,
                    now - 3600,
                    now - 3600,
                )
                for n, agent_id in enumerate(ids)
            ),
        )
        conn.executemany(
            "INSERT INTO messages (id, sender_id, recipient_id, body, sent_at, state, attempts,"
            " available_at) VALUES (?, ?, ?, 'waiting for you', ?, 'queued', 0, ?)",
            (
                (
                    f"msg_{_encode((int(sent_at * 1000) << 50) | n, 20)}",
                    ids[n - 1],
                    agent_id,
                    sent_at,
                    sent_at,
                )
                for n, agent_id in enumerate(ids)
            ),
        )
        if "next_due" in columns:
            conn.execute("UPDATE identities SET next_due = ?", (sent_at + WEEK,))
        conn.execute("COMMIT")
    finally:
        conn.close()
    return time.perf_counter() - begin


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def measure(
    tree: Path | None, name: str, identities: int, runs: int, settle: float
) -> dict[str, Any]:
    with running_from(tree), temporary_brokers("pager-bench-virtual-") as brokers:
        broker, _ = brokers.start(name)
        brokers.stop(broker)
        progress(f"{name}: filling {identities} identities")
        filled = fill(broker.home / "pager.db", identities)
        ready, rss_ready, rss_later = [], [], []
        for run in range(runs):
            begin = time.perf_counter()
            try:
                started, wall = brokers.start(name)
            except RuntimeError as exc:  # `pager start` gave up waiting: report, go on
                failed = time.perf_counter() - begin
                progress(f"{name}: not ready after {failed:.1f} s: {exc}")
                return {"revision": name, "fill_s": round(filled, 1),
                        "not_ready_after_s": round(failed, 1)}  # fmt: skip
            ready.append(wall)
            rss_ready.append(rss_mib(started.pid))
            time.sleep(settle)  # what the start left running shows in memory by then
            rss_later.append(rss_mib(started.pid))
            brokers.stop(started)
            progress(f"{name}: run {run + 1}/{runs}: ready {wall:.2f} s")
    return {
        "revision": name,
        "fill_s": round(filled, 1),
        "ready_s": [round(x, 2) for x in ready],
        "ready_s_median": round(statistics.median(ready), 2),
        "rss_mib_ready": [round(x) for x in rss_ready],
        "rss_mib_after_settle": [round(x) for x in rss_later],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--identities", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--settle", type=float, default=5.0, help="seconds before RSS again")
    parser.add_argument("--rev", action="append", default=[], help="a Git revision (repeat)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with each_revision(args.rev, "HEAD") as revisions:
        results = [
            measure(tree, name, args.identities, args.runs, args.settle) for name, tree in revisions
        ]
    out = {"machine": machine(), "identities": args.identities, "results": results}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for r in results:
            if "not_ready_after_s" in r:
                print(f"{r['revision']}: not ready after {r['not_ready_after_s']} s (pager start)")
                continue
            print(
                f"{r['revision']}: ready {r['ready_s_median']} s (runs {r['ready_s']}),"
                f" RSS ready {r['rss_mib_ready']} MiB, after {args.settle:g} s"
                f" {r['rss_mib_after_settle']} MiB"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
