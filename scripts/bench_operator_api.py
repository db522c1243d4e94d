"""Operator API figures of issue 5: `GET /v1/snapshot` at scale, on a real broker.

A broker is started once with `pager start` (creating and migrating its database) and
stopped; its store is then filled directly with sqlite3 — `--agents` identities (default
1,000) in workspaces of 50, 5% archived and 10% attached, and `--messages` messages (default
100,000) between them: about 90% acknowledged (each with its acknowledged claim), 5% queued,
2% claimed or delivered (with an open claim), 3% dead — and a broker is started on it again.

Measured over HTTP on one kept-alive connection with the local secret, one request at a time
after warm-up requests: `GET /v1/snapshot` latency p50/p95 (target p50 <= 50 ms) and its size;
for reference, `GET /v1/agents?limit=200` and one agent's `GET /v1/agents/{id}/messages`.
The snapshot's totals are checked against what was written.

`--runs` scales the sample size (15, the default, gives 200 snapshots). Progress goes to
stderr only when it is a terminal; `--json` prints the results as JSON.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench_messaging import (  # scripts/, beside this file
    Broker,
    Brokers,
    cpu_seconds,
    temporary_brokers,
)
from benchlib import (  # scripts/benchlib.py, beside this file
    bench_parser,
    machine,
    ms,
    percentile,
    progress,
    report,
)

from pager.domain import ids

BASE_RUNS = 15
BODY = "benchmark message: " + "x" * 80  # ~100 bytes, a short agent note
PER_WORKSPACE = 50
TARGETS = {"snapshot_p50_ms": 50.0}
#: How the snapshot's inbox counts name each unsettled or dead state.
COUNTED_AS = {"queued": "queued", "claimed": "claimed", "delivered": "claimed", "dead": "dead"}


# -- the store ---------------------------------------------------------------------------------


def build_store(db: Path, *, agents: int, messages: int, seed: int = 5) -> dict[str, int]:
    """Fill a migrated, stopped broker's database; the totals a snapshot must then show."""
    rng = random.Random(seed)
    now = time.time()
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("BEGIN")
        workspaces = max(1, -(-agents // PER_WORKSPACE))
        conn.executemany(
            "INSERT INTO workspaces (key, slug, path, created_at) VALUES (?, ?, ?, ?)",
            (
                (
                    f"/bench/repo-{w:04d}",
                    f"repo-{w:04d}-{hashlib.sha256(str(w).encode()).hexdigest()[:6]}",
                    f"/bench/repo-{w:04d}",
                    now - 40 * 86400,
                )
                for w in range(workspaces)
            ),
        )
        everyone = [ids.new_agent_id() for _ in range(agents)]
        archived = set(rng.sample(everyone, agents // 20))
        attached = set(rng.sample([a for a in everyone if a not in archived], agents // 10))
        rows = []
        for n, agent_id in enumerate(everyone):
            gone = agent_id in archived
            rows.append(
                (
                    agent_id,
                    f"/bench/repo-{n % workspaces:04d}",
                    f"agent-{n}",
                    now - 30 * 86400,
                    now - 3600,
                    None if agent_id in attached else now - 3600,  # detached an hour ago
                    now - 1800 if gone else None,
                )
            )
        conn.executemany(
            "INSERT INTO identities (id, workspace_key, alias, alias_key, durable, implementation,"
            " created_at, last_seen, detached_at, archived_at, first_archived_at, exchanged)"
            " VALUES (?1, ?2, ?3, ?3, 1, 'shell', ?4, ?5, ?6, ?7, ?7, 1)",
            rows,
        )
        conn.executemany(
            "INSERT INTO alias_reservations (workspace_key, alias_key, identity_id)"
            " VALUES (?, ?, ?)",
            ((row[1], row[2], row[0]) for row in rows),
        )
        conn.executemany(
            "INSERT INTO sessions (id, identity_id, epoch, token_hash, resume_hash, state,"
            " created_at, lease_expires_at) VALUES (?, ?, 1, ?, ?, 'attached', ?, ?)",
            (
                (
                    ids.new_session_id(),
                    agent_id,
                    hashlib.sha256(b"token " + agent_id.encode()).hexdigest(),
                    hashlib.sha256(b"resume " + agent_id.encode()).hexdigest(),
                    now - 600,
                    now + 3600,
                )
                for agent_id in sorted(attached)
            ),
        )
        totals = {"queued": 0, "claimed": 0, "dead": 0}
        first_ms = int((now - 3 * 86400) * 1000)  # within the message expiry
        step_ms = 3 * 86400 * 1000 / max(1, messages)
        batch: list[tuple[Any, ...]] = []
        claims: list[tuple[Any, ...]] = []
        for n in range(messages):
            sent_ms = first_ms + int(n * step_ms)
            sent_at = sent_ms / 1000
            message_id = ids.new_message_id(now_ms=sent_ms)
            sender, recipient = rng.choice(everyone), rng.choice(everyone)
            roll = rng.random()
            settled: float | None = sent_at + 2
            state, attempts, reason = "acknowledged", 1, None
            if roll < 0.05:
                state, attempts, settled = "queued", 0, None
            elif roll < 0.07:
                state, settled = rng.choice(("claimed", "delivered")), None
            elif roll < 0.10:
                state, reason = "dead", "expired"
            body = f"{BODY} {n}"
            batch.append(
                (
                    message_id,
                    sender,
                    recipient,
                    body,
                    sent_at,
                    state,
                    attempts,
                    sent_at,
                    reason,
                    settled,
                )
            )
            if state in ("acknowledged", "claimed", "delivered"):
                open_claim = state != "acknowledged"
                claims.append(
                    (
                        hashlib.sha256(b"claim %d" % n).hexdigest(),
                        message_id,
                        recipient,
                        sent_at,
                        now + 3600 if open_claim else sent_at + 60,
                        "open" if open_claim else "acknowledged",
                        "fetch" if state != "delivered" else "delivery",
                    )
                )
            if state != "acknowledged":
                totals[
                    "queued" if state == "queued" else "dead" if state == "dead" else "claimed"
                ] += 1
            if len(batch) >= 20_000 or n == messages - 1:
                conn.executemany(
                    "INSERT INTO messages (id, sender_id, recipient_id, body, sent_at, state,"
                    " attempts, available_at, dead_reason, settled_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    batch,
                )
                conn.executemany(
                    "INSERT INTO claims (token_hash, message_id, identity_id, attempt, via,"
                    " claimed_at, expires_at, state) VALUES (?1, ?2, ?3, 1, ?7, ?4, ?5, ?6)",
                    claims,
                )
                batch, claims = [], []
                progress(f"store: {n + 1:,}/{messages:,} messages")
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
    finally:
        conn.close()
    return {
        "workspaces": workspaces,
        "agents": agents,
        "attached": len(attached),
        "archived": len(archived),
        **totals,
        "refused_sends": 0,
    }


# -- requests ----------------------------------------------------------------------------------


class Client:
    """One kept-alive HTTP/1.1 connection with the local secret."""

    def __init__(self, broker: Broker) -> None:
        host, port = broker.url.removeprefix("http://").rsplit(":", 1)
        self.conn = http.client.HTTPConnection(host, int(port), timeout=60)
        self.headers = {"Authorization": f"Bearer {broker.secret}"}

    def get(self, path: str) -> tuple[float, bytes]:
        start = time.perf_counter()
        self.conn.request("GET", path, headers=self.headers)
        response = self.conn.getresponse()
        body = response.read()
        elapsed = time.perf_counter() - start
        if response.status != 200:
            raise RuntimeError(f"GET {path} answered {response.status}: {body[:200]!r}")
        return elapsed, body

    def close(self) -> None:
        self.conn.close()


def measure(client: Client, path: str, count: int) -> tuple[list[float], bytes]:
    for _ in range(5):  # warm-up: caches, first-use imports
        client.get(path)
    times = []
    body = b""
    for n in range(count):
        progress(f"{path.split('?')[0]}: {n + 1}/{count}")
        elapsed, body = client.get(path)
        times.append(elapsed)
    return times, body


def settle(pid: int, *, idle: float = 0.05, bound: float = 30.0) -> float:
    """Wait until the broker's start-up work (first sweep, inbox activation) is done: it used
    under `idle` of a core over 200 ms. Seconds waited (a hang guard bounds it)."""
    begin = time.monotonic()
    while time.monotonic() - begin < bound:
        before = cpu_seconds(pid)
        time.sleep(0.2)
        if cpu_seconds(pid) - before < idle * 0.2:
            break
    return time.monotonic() - begin


def figure_snapshot(brokers: Brokers, *, agents: int, messages: int, count: int) -> dict[str, Any]:
    progress("starting a broker to create the database")
    broker, _ = brokers.start("operator")
    brokers.stop(broker)
    db = broker.home / "pager.db"
    begin = time.perf_counter()
    expected = build_store(db, agents=agents, messages=messages)
    build_s = time.perf_counter() - begin
    progress("starting the broker on the filled store")
    broker, _ = brokers.start("operator")
    settled_s = settle(broker.pid)
    client = Client(broker)
    try:
        snapshot_times, body = measure(client, "/v1/snapshot", count)
        snapshot = json.loads(body)
        if snapshot["totals"] != expected:
            raise RuntimeError(f"snapshot totals {snapshot['totals']} != written {expected}")
        agents_times, _ = measure(client, "/v1/agents?limit=200", max(10, count // 4))
        busiest = max(
            (a for w in snapshot["workspaces"] for a in w["agents"]),
            key=lambda a: sum(a["inbox"].values()),
        )
        messages_path = f"/v1/agents/{busiest['agent_id']}/messages?limit=50"
        messages_times, _ = measure(client, messages_path, max(10, count // 4))
    finally:
        client.close()
        brokers.stop(broker)
    return {
        "agents": agents,
        "messages": messages,
        "build_s": round(build_s, 1),
        "settled_after_start_s": round(settled_s, 1),
        "database_mb": round(db.stat().st_size / 2**20, 1),
        "totals": expected,
        "snapshots": count,
        "snapshot_bytes": len(body),
        "snapshot_p50_ms": ms(percentile(snapshot_times, 50)),
        "snapshot_p95_ms": ms(percentile(snapshot_times, 95)),
        "agents_page_p50_ms": ms(percentile(agents_times, 50)),
        "messages_page_p50_ms": ms(percentile(messages_times, 50)),
    }


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def figure_export(brokers: Brokers, *, agents: int, messages: int) -> dict[str, Any]:
    """`pager export -o FILE` of a store of `messages`: records/s, the command's peak RSS
    and how far the broker's RSS rose while it streamed (constant memory: neither grows with
    the store)."""
    progress("starting a broker to create the export database")
    broker, _ = brokers.start("export")
    brokers.stop(broker)
    build_store(broker.home / "pager.db", agents=agents, messages=messages)
    broker, _ = brokers.start("export")
    settle(broker.pid)
    out = broker.home / "export.jsonl"
    pager = str(Path(sys.executable).parent / "pager")
    before = _rss_mb(broker.pid)
    peak = before
    progress(f"exporting {agents + messages:,} records")
    begin = time.perf_counter()
    child = subprocess.Popen(
        [pager, "export", "-o", str(out)], env=broker.env, stderr=subprocess.DEVNULL
    )
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        peak = max(peak, _rss_mb(broker.pid))
        time.sleep(0.1)  # sampling the broker's memory, not waiting for a timer
    seconds = time.perf_counter() - begin
    brokers.stop(broker)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError("pager export failed")
    with out.open("rb") as file:
        records = sum(1 for _ in file)
    if records != agents + messages:
        raise RuntimeError(f"exported {records} records, not {agents + messages}")
    return {
        "records": records,
        "seconds": round(seconds, 1),
        "records_per_s": round(records / seconds),
        "file_mb": round(out.stat().st_size / 2**20, 1),
        "cli_peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "broker_rss_before_mb": round(before, 1),
        "broker_rss_rise_mb": round(peak - before, 1),
    }


# -- report ------------------------------------------------------------------------------------


def table(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    snap = results["snapshot"]
    p50 = snap["snapshot_p50_ms"]
    verdict = "met" if p50 <= TARGETS["snapshot_p50_ms"] else "MISSED"
    what = f"{snap['agents']:,} agents, {snap['messages']:,} messages"
    return [
        (
            f"`GET /v1/snapshot` ({what}; {snap['snapshot_bytes'] // 1024} KiB) p50 / p95,"
            f" {snap['snapshots']} requests",
            f"{p50} / {snap['snapshot_p95_ms']} ms ({verdict})",
            "p50 <= 50 ms",
        ),
        (
            "`GET /v1/agents?limit=200` p50; one agent's `messages?limit=50` p50",
            f"{snap['agents_page_p50_ms']} ms; {snap['messages_page_p50_ms']} ms",
            "(reported)",
        ),
        *(
            [
                (
                    f"`pager export -o FILE` of {exp['records']:,} records"
                    f" ({exp['file_mb']} MiB): records/s; the command's peak RSS; the broker's"
                    " RSS rise while it streamed",
                    f"{exp['records_per_s']:,}/s ({exp['seconds']} s); {exp['cli_peak_rss_mb']}"
                    f" MiB; +{exp['broker_rss_rise_mb']} MiB (from {exp['broker_rss_before_mb']})",
                    "constant memory",
                )
            ]
            if (exp := results.get("export"))
            else []
        ),
    ]


def main() -> int:
    parser = bench_parser(__doc__, runs=BASE_RUNS, runs_help="scales the sample size (default 15)")
    parser.add_argument("--agents", type=int, default=1_000, help="identities (default 1,000)")
    parser.add_argument("--messages", type=int, default=100_000, help="messages (default 100,000)")
    parser.add_argument(
        "--export-messages",
        type=int,
        default=1_000_000,
        help="messages of the store `pager export` streams (default 1,000,000; 0: skip)",
    )
    args = parser.parse_args()
    count = max(20, round(200 * max(args.runs, 1) / BASE_RUNS))
    results: dict[str, Any] = {"machine": machine(), "runs": args.runs, "targets": TARGETS}
    with temporary_brokers("pager-bench-op-") as brokers:
        results["snapshot"] = figure_snapshot(
            brokers, agents=args.agents, messages=args.messages, count=count
        )
        if args.export_messages:
            results["export"] = figure_export(
                brokers, agents=args.agents, messages=args.export_messages
            )
    return report(results, table(results), as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())
