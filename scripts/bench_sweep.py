"""Authentication during a retention sweep (issue 13, item 2): does a sweep of 100,000
identities hold up requests?

For each revision (`--rev A --rev B`, each from a temporary Git worktree as in bench_ab.py;
default: the working tree's code), a broker is started once with `pager start` (creating and
migrating its database), one session registers, and the broker is stopped. Its store is then
filled directly with sqlite3: `--identities` identities (default 100,000), named, detached 40
days ago, so the named-archive window (30 days) has passed for every one of them.

One client calls `GET /v1/me` (authenticated by the session's token) back to back over one
keep-alive connection for `--seconds` (default 60) twice: first on the broker started with a
named-archive window of a century (nothing due: the idle yardstick), then on the broker
started as configured, from the first archive the store shows (its first sweep begins right
after start and works through them all). The figure is the p50 / p99 / max of each window and
their p99 ratio (target ≤ 2).

Progress goes to stderr only when it is a terminal; `--json` prints the results as JSON.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench_ab import each_revision, running_from
from bench_messaging import Brokers, _encode, register, temporary_brokers
from benchlib import machine, percentile, progress

DAY = 86400.0


def fill(db: Path, identities: int) -> None:
    """Named identities, detached 40 days ago: each one past the named-archive window."""
    now = time.time()
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("BEGIN")
        workspaces = max(1, identities // 100)
        conn.executemany(
            "INSERT INTO workspaces (key, slug, path, created_at) VALUES (?, ?, ?, ?)",
            ((f"/sweep/{w:05d}", f"sweep-{w:05d}", f"/sweep/{w:05d}", now - 50 * DAY)
             for w in range(workspaces)),
        )  # fmt: skip
        conn.executemany(
            "INSERT INTO identities (id, workspace_key, alias, alias_key, durable, implementation,"
            " created_at, last_seen, detached_at, exchanged) VALUES (?, ?, ?, ?, 1, 'shell',"
            " ?, ?, ?, 1)",
            ((f"agt_{_encode(n + (1 << 70), 16)}", f"/sweep/{n % workspaces:05d}", f"agent-{n}",
              f"agent-{n}", now - 50 * DAY, now - 40 * DAY, now - 40 * DAY)
             for n in range(identities)),
        )  # fmt: skip
        conn.execute("COMMIT")
    finally:
        conn.close()


def archived(db: Path) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        (count,) = conn.execute(
            "SELECT COUNT(*) FROM identities WHERE archived_at IS NOT NULL"
        ).fetchone()
        return int(count)
    finally:
        conn.close()


def authenticate_loop(url: str, token: str, stop: threading.Event) -> list[tuple[float, float]]:
    """(start, seconds) of each `GET /v1/me`, back to back, until `stop`."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
    samples = []
    headers = {"Authorization": f"Bearer {token}"}
    while not stop.is_set():
        begin = time.perf_counter()
        conn.request("GET", "/v1/me", headers=headers)
        response = conn.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"GET /v1/me answered {response.status}")
        samples.append((begin, time.perf_counter() - begin))
    conn.close()
    return samples


def probe(brokers: Brokers, name: str, token: str, db: Path, seconds: float, sweeping: bool
          ) -> list[float]:  # fmt: skip
    """Start the broker, call `GET /v1/me` back to back for `seconds` (from the first archive
    when `sweeping`), stop it; the calls' durations."""
    started, _ = brokers.start(name)
    stop = threading.Event()
    result: list[list[tuple[float, float]]] = []
    prober = threading.Thread(
        target=lambda: result.append(authenticate_loop(started.url, token, stop))
    )
    prober.start()
    try:
        begin = time.perf_counter()
        while sweeping and not archived(db):
            if time.perf_counter() - begin > 120:
                raise RuntimeError(f"{name}: no sweep began within 120 s")
            time.sleep(0.05)
        first = time.perf_counter()
        time.sleep(seconds)
        last = time.perf_counter()
    finally:
        stop.set()
        prober.join()
        brokers.stop(started)
    [samples] = result
    return [took for at, took in samples if first <= at <= last]


def measure(tree: Path | None, name: str, identities: int, seconds: float) -> dict[str, Any]:
    with running_from(tree), temporary_brokers("pager-bench-sweep-") as brokers:
        broker, _ = brokers.start(name)
        token = register(broker, "prober")["token"]
        brokers.stop(broker)
        db = broker.home / "pager.db"
        progress(f"{name}: filling {identities} identities")
        fill(db, identities)
        # First with no window passed (a century), so no sweep work: the yardstick.
        os.environ["PAGER_WINDOW_NAMED_ARCHIVE"] = str(100 * 365 * DAY)
        try:
            idle = probe(brokers, name, token, db, seconds, sweeping=False)
        finally:
            del os.environ["PAGER_WINDOW_NAMED_ARCHIVE"]
        progress(f"{name}: idle done; now during the sweep")
        during = probe(brokers, name, token, db, seconds, sweeping=True)
        swept = archived(db)

    def figures(values: list[float]) -> dict[str, float]:
        return {
            "calls": len(values),
            "p50_ms": round(1000 * percentile(values, 50), 2),
            "p99_ms": round(1000 * percentile(values, 99), 2),
            "max_ms": round(1000 * max(values), 2),
        }

    out: dict[str, Any] = {
        "revision": name,
        "archived_in_window": swept,
        "during": figures(during),
        "idle": figures(idle),
    }
    out["p99_ratio"] = round(out["during"]["p99_ms"] / out["idle"]["p99_ms"], 2)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--identities", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=60.0, help="each window (default 60)")
    parser.add_argument("--rev", action="append", default=[], help="a Git revision (repeat)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with each_revision(args.rev, "working tree") as revisions:
        results = [measure(tree, name, args.identities, args.seconds) for name, tree in revisions]
    out = {"machine": machine(), "identities": args.identities, "results": results}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for r in results:
            print(
                f"{r['revision']}: {r['archived_in_window']} archived; GET /v1/me during"
                f" p50 {r['during']['p50_ms']} / p99 {r['during']['p99_ms']} / max"
                f" {r['during']['max_ms']} ms ({r['during']['calls']} calls), idle p50"
                f" {r['idle']['p50_ms']} / p99 {r['idle']['p99_ms']} / max {r['idle']['max_ms']}"
                f" ms; p99 ratio {r['p99_ratio']}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
