"""Figures of a store several brokers share (issue 14, SPEC §13), beside the SQLite store's in
the same run, on real processes and a real PostgreSQL server on loopback.

The PostgreSQL server is a throwaway cluster made by tests/pg_cluster.py (initdb into a temporary
directory, as an unprivileged user when run as root; removed at the end), each figure on a fresh
database. Brokers are real `pager start`s; clients are the MCP workers of bench_messaging.py.
The machine has few cores that brokers, clients and the database all share: compare within one
run, not across runs.

- sequential: one client, one `send` at a time (as bench_messaging.py), on SQLite and on
  PostgreSQL, in the order SQLite, PostgreSQL, PostgreSQL, SQLite (`--rounds` times), so drift
  of the machine's speed falls on both alike: send p50 and the broker's CPU per send (and the
  database server's CPU per send beside it), the medians of the rounds.
- crosshost: a send on broker `beta` to a session attached to broker `alpha` through a delivery
  address (a listener in the sending worker's process): send -> claim arriving p50/p90; the
  same on one SQLite broker beside it.
- concurrent: send/fetch/ack loops for `--duration` seconds: 8 clients on one SQLite broker,
  8 on one PostgreSQL broker, and 4 on each of two PostgreSQL brokers (each client's partner
  on the other host): calls/s, errors, broker and database CPU per call.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from bench_messaging import (  # scripts/bench_messaging.py, beside this file
    Broker,
    Brokers,
    cpu_seconds,
    register,
    run_workers,
    worker_main,
)
from benchlib import bench_parser, chosen_figures, machine, ms, percentile, progress, report

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests/pg_cluster.py: the project's throwaway cluster

from tests.pg_cluster import PgCluster  # noqa: E402

BASE_RUNS = 15
FIGURES = ("sequential", "crosshost", "concurrent")
TARGETS = {
    "send_p50_ratio": 2.0,  # PostgreSQL / SQLite
    "broker_cpu_ratio": 1.5,  # PostgreSQL / SQLite, per send
    "crosshost_p50_ms": 20.0,
    "concurrent_errors": 0,
}


@dataclass
class StoreBrokers(Brokers):
    """Brokers whose environment names their store and whose config.toml names their host."""

    stores: dict[str, dict[str, str]] = field(default_factory=dict)

    def env(self, home: Path) -> dict[str, str]:
        return {**super().env(home), **self.stores.get(home.name, {})}

    def start_on(self, name: str, store: dict[str, str], host: str | None = None) -> Broker:
        home = self.root / name
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        if host is not None:
            (home / "config.toml").write_text(f'[host]\nname = "{host}"\n')
        self.stores[name] = store
        broker, _ = self.start(name)
        return broker


@dataclass
class Database:
    """The cluster, and a fresh database per figure (its broker environment)."""

    cluster: PgCluster
    root: Path
    made: int = 0

    def fresh(self) -> dict[str, str]:
        self.made += 1
        dsn = urlsplit(self.cluster.create_database(f"bench_{self.made}"))
        url = urlunsplit(
            ("postgresql", f"{dsn.username}@{dsn.hostname}:{dsn.port}", dsn.path, "", "")
        )
        passfile = self.root / "pgpass"
        passfile.write_text(f"*:*:*:{dsn.username}:{unquote(dsn.password or '')}\n")
        passfile.chmod(0o600)
        return {"PAGER_STORE": url, "PGPASSFILE": str(passfile)}

    def cpu(self) -> float:
        """CPU seconds of the server and every backend process it forked (one per connection)."""
        postmaster = self.cluster.pid
        total = cpu_seconds(postmaster)
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
                if int(fields[1]) == postmaster:
                    total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total


def _sequential_once(
    brokers: StoreBrokers, db: Database, store: str, count: int, run: int
) -> dict[str, float]:
    env = db.fresh() if store == "postgresql" else {}
    broker = brokers.start_on(f"seq-{store}-{run}", env)
    try:
        alice = register(broker, "alice")
        register(broker, "bob")
        spec = {"mode": "sequential", "url": broker.url, "token": alice["token"], "to": "bob"}
        marks: list[float] = []
        results, _, _ = run_workers(
            [{**spec, "count": count}],
            on_start=lambda: marks.extend((cpu_seconds(broker.pid), db.cpu())),
        )
        broker_cpu = cpu_seconds(broker.pid) - marks[0]
        db_cpu = db.cpu() - marks[1]
    finally:
        brokers.stop(broker)
    [result] = results
    return {
        "send_p50_ms": ms(percentile(result["latencies"], 50)),
        "send_p90_ms": ms(percentile(result["latencies"], 90)),
        "broker_cpu_ms": ms(broker_cpu / count),
        "db_cpu_ms": ms(db_cpu / count) if store == "postgresql" else 0.0,
        "errors": result["errors"],
    }


def figure_sequential(brokers: StoreBrokers, db: Database, count: int, rounds: int) -> Any:
    runs: dict[str, list[dict[str, float]]] = {"sqlite": [], "postgresql": []}
    for r in range(rounds):
        for n, store in enumerate(("sqlite", "postgresql", "postgresql", "sqlite")):
            progress(f"sequential: round {r + 1}, {store}, {count} sends")
            runs[store].append(_sequential_once(brokers, db, store, count, 4 * r + n))
    medians = {
        store: {key: round(statistics.median(run[key] for run in each), 2) for key in each[0]}
        for store, each in runs.items()
    }
    sqlite, pg = medians["sqlite"], medians["postgresql"]
    return {
        "sends_per_run": count,
        "runs_per_store": 2 * rounds,
        "sqlite": sqlite,
        "postgresql": pg,
        "send_p50_ratio": round(pg["send_p50_ms"] / sqlite["send_p50_ms"], 2),
        "broker_cpu_ratio": round(pg["broker_cpu_ms"] / sqlite["broker_cpu_ms"], 2),
    }


def _delivery(sender: Broker, recipient: Broker | None, count: int) -> dict[str, Any]:
    token = register(sender, "sender")["token"]
    spec: dict[str, Any] = {
        "mode": "delivery",
        "url": sender.url,
        "secret": sender.secret,
        "workspace": str(sender.workspace),
        "token": token,
        "count": count,
    }
    if recipient is not None:
        spec["recipient"] = {
            "url": recipient.url,
            "secret": recipient.secret,
            "workspace": str(recipient.workspace),
        }
    [result], _, _ = run_workers([spec])
    latencies = result["latencies"]
    return {
        "sends": count,
        "arrival_p50_ms": ms(percentile(latencies, 50)) if latencies else None,
        "arrival_p90_ms": ms(percentile(latencies, 90)) if latencies else None,
        "send_return_p50_ms": ms(percentile(result["send_latencies"], 50)),
        "wakes": result["wakes"],
        "errors": result["errors"],
    }


def figure_crosshost(brokers: StoreBrokers, db: Database, count: int) -> Any:
    progress(f"crosshost: {count} sends from beta to a session on alpha")
    env = db.fresh()
    alpha = brokers.start_on("cross-alpha", env, host="alpha")
    beta = brokers.start_on("cross-beta", env, host="beta")
    try:
        cross = _delivery(beta, alpha, count)
    finally:
        brokers.stop(alpha)
        brokers.stop(beta)
    progress(f"crosshost: {count} sends on one SQLite broker, for comparison")
    local = brokers.start_on("cross-sqlite", {})
    try:
        sqlite = _delivery(local, None, count)
    finally:
        brokers.stop(local)
    return {"postgresql_two_hosts": cross, "sqlite_one_host": sqlite}


def _cycles(
    brokers: StoreBrokers, db: Database, label: str, hosts: list[Broker], per_host: int, dur: float
) -> dict[str, Any]:
    """`per_host` clients on each broker, each looping send -> fetch -> ack for `dur` seconds;
    with two brokers each client's partner is the same-numbered client on the other one."""
    sessions: list[list[dict[str, Any]]] = []
    made = [[register(b, f"c{n}") for n in range(per_host)] for b in hosts]
    for h, broker_sessions in enumerate(made):
        other = made[(h + 1) % len(made)] if len(made) > 1 else None
        mine = []
        for n, registered in enumerate(broker_sessions):
            if other is not None:
                partner = other[n]["address"]
            else:  # one broker: pairs (0,1), (2,3)...
                partner = broker_sessions[n ^ 1]["address"]
            mine.append({"token": registered["token"], "partner": partner})
        sessions.append(mine)
    specs = [
        {"mode": "cycles", "url": broker.url, "sessions": mine[p::2]}
        for broker, mine in zip(hosts, sessions, strict=True)
        for p in range(2)
    ]
    marks: list[float] = []
    progress(f"concurrent: {label}, {dur:.0f} s")
    results, _, _ = run_workers(
        specs,
        duration=dur,
        on_start=lambda: marks.extend([*(cpu_seconds(b.pid) for b in hosts), db.cpu()]),
    )
    broker_cpu = sum(cpu_seconds(b.pid) for b in hosts) - sum(marks[: len(hosts)])
    db_cpu = db.cpu() - marks[-1]
    calls = sum(len(v) for r in results for v in r["latencies"].values())
    elapsed = max(r["elapsed"] for r in results)
    return {
        "brokers": len(hosts),
        "clients": per_host * len(hosts),
        "calls_per_s": round(calls / elapsed, 1),
        "errors": sum(r["errors"] for r in results),
        "error_samples": [s for r in results for s in r["error_samples"]][:3],
        "broker_cpu_ms_per_call": ms(broker_cpu / calls) if calls else None,
        "db_cpu_ms_per_call": ms(db_cpu / calls) if calls else None,
    }


def figure_concurrent(brokers: StoreBrokers, db: Database, duration: float) -> Any:
    results = {}
    one = brokers.start_on("conc-sqlite", {})
    try:
        results["sqlite_1x8"] = _cycles(brokers, db, "SQLite, 1 broker x 8", [one], 8, duration)
    finally:
        brokers.stop(one)
    one = brokers.start_on("conc-pg", db.fresh(), host="solo")
    try:
        label = "PostgreSQL, 1 broker x 8"
        results["postgresql_1x8"] = _cycles(brokers, db, label, [one], 8, duration)
    finally:
        brokers.stop(one)
    env = db.fresh()
    pair = [
        brokers.start_on("conc-alpha", env, host="alpha"),
        brokers.start_on("conc-beta", env, host="beta"),
    ]
    try:
        label = "PostgreSQL, 2 brokers x 4"
        results["postgresql_2x4"] = _cycles(brokers, db, label, pair, 4, duration)
    finally:
        for broker in pair:
            brokers.stop(broker)
    return results


def table(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    seq = results.get("sequential")
    if seq:
        for store in ("sqlite", "postgresql"):
            one = seq[store]
            rows.append(
                (
                    f"sequential send, {store}",
                    f"p50 {one['send_p50_ms']} ms, broker {one['broker_cpu_ms']} ms CPU/send"
                    + (f", database {one['db_cpu_ms']} ms CPU/send" if one["db_cpu_ms"] else ""),
                    "",
                )
            )
        rows.append(("send p50, PostgreSQL / SQLite", f"{seq['send_p50_ratio']}x", "<= 2x"))
        rows.append(("broker CPU/send, PG / SQLite", f"{seq['broker_cpu_ratio']}x", "<= 1.5x"))
    cross = results.get("crosshost")
    if cross:
        two, one = cross["postgresql_two_hosts"], cross["sqlite_one_host"]
        rows.append(
            (
                "send -> claim on the other host (PG)",
                f"p50 {two['arrival_p50_ms']} ms, p90 {two['arrival_p90_ms']} ms",
                "p50 <= 20 ms",
            )
        )
        rows.append(
            ("send -> claim, one SQLite broker", f"p50 {one['arrival_p50_ms']} ms", "(reference)")
        )
    for name, run in (results.get("concurrent") or {}).items():
        rows.append(
            (
                f"send/fetch/ack, {name}",
                f"{run['calls_per_s']} calls/s, {run['errors']} errors, broker"
                f" {run['broker_cpu_ms_per_call']} ms, database {run['db_cpu_ms_per_call']} ms"
                " CPU/call",
                "0 errors" if name == "postgresql_2x4" else "",
            )
        )
    return rows


@contextlib.contextmanager
def setup() -> Iterator[tuple[StoreBrokers, Database]]:
    with tempfile.TemporaryDirectory(prefix="pager-bench-multihost-") as tmp, PgCluster() as pg:
        brokers = StoreBrokers(Path(tmp))
        try:
            yield brokers, Database(pg, Path(tmp))
        finally:
            brokers.stop_all()


def main() -> int:
    if sys.argv[1:2] == ["--worker"]:
        return worker_main()
    parser = bench_parser(__doc__, runs=BASE_RUNS, figures=FIGURES)
    parser.add_argument("--rounds", type=int, default=2, help="sequential A-B-B-A rounds (2)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per loop run (10)")
    args = parser.parse_args()
    figures = chosen_figures(parser, args.figures, FIGURES)
    factor = max(args.runs, 1) / BASE_RUNS
    results: dict[str, Any] = {"machine": machine(), "runs": args.runs, "targets": TARGETS}
    with setup() as (brokers, db):
        if "sequential" in figures:
            count = max(50, round(300 * factor))
            results["sequential"] = figure_sequential(brokers, db, count, args.rounds)
        if "crosshost" in figures:
            results["crosshost"] = figure_crosshost(brokers, db, max(20, round(200 * factor)))
        if "concurrent" in figures:
            results["concurrent"] = figure_concurrent(brokers, db, args.duration)
    return report(results, table(results), as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())
