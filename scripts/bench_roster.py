"""Roster figures of issue 13 (item 5): does `roster(scope="all")` on a big store stall sends?

A broker is started once with `pager start` (creating and migrating its database), three
sessions register (alice sends, bob receives and never fetches, carol reads the roster), and it
is stopped; its store is then filled directly with sqlite3 (bench_messaging.py's scale store:
`--identities` identities, default 100,000, 100 per workspace, detached, with `--messages`
acknowledged messages between them, default 200,000), plus `--waiting` queued messages
(default 2,000) to random identities so that the waiting counts are not all zero; a broker is
started on it again.

Two MCP clients (the official SDK over Streamable HTTP), each in a worker process of this
script (`--worker`), start on one CLOCK_MONOTONIC instant: alice sends to bob one `send` at a
time for the whole run; carol alternates windows of `--window` seconds (default 3): idle in
even windows, and in odd ones loops `roster(scope="all", limit=--page)` pages (default 100,
the tool's default), following `next_cursor` and starting again at the end. A send counts as
loaded when a roster call was in flight at any moment of it, else as idle, which gives the
`send` latency p50 / p90 / max with and without roster load, measured alternately on one
broker; and the broker's CPU in idle and in loaded windows.

`--page 0` calls `roster` with `scope` only: on a broker from before the roster was paged,
that is one call answering every identity at once (the load the issue describes).

`--runs` scales the number of windows (15, the default, gives 10: 5 idle and 5 loaded).
Progress goes to stderr only when it is a terminal; `--json` prints the results as JSON.
"""

from __future__ import annotations

import bisect
import json
import random
import sqlite3
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

from bench_messaging import (  # scripts/, beside this file
    BODY,
    Brokers,
    Worker,
    _call,
    _encode,
    _handshake,
    _mcp_client,
    build_scale_store,
    cpu_seconds,
    register,
    temporary_brokers,
)
from bench_operator_api import settle
from benchlib import (  # scripts/benchlib.py, beside this file
    bench_parser,
    machine,
    ms,
    percentile,
    progress,
    report,
)

BASE_RUNS = 15
SCRIPT = str(Path(__file__).resolve())
# -- the store ---------------------------------------------------------------------------------


def add_waiting(db: Path, *, waiting: int, sender_id: str, seed: int = 13) -> int:
    """`waiting` queued messages from `sender_id` to random identities; how many got some."""
    rng = random.Random(seed)
    now = time.time()
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        everyone = [str(row[0]) for row in conn.execute("SELECT id FROM identities")]
        recipients = [rng.choice(everyone) for _ in range(waiting)]
        start_ms = int((now - 120) * 1000)
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO messages (id, sender_id, recipient_id, body, sent_at, state, attempts,"
            " available_at) VALUES (?, ?, ?, ?, ?, 'queued', 0, ?5)",
            (
                (
                    "msg_" + _encode(((start_ms + n) << 50) | (2**40 + n), 20),
                    sender_id,
                    recipient,
                    f"{BODY} waiting {n}",
                    (start_ms + n) / 1000,
                )
                for n, recipient in enumerate(recipients)
            ),
        )
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return len(set(recipients))


# -- workers (the client processes) ------------------------------------------------------------


def run_workers(
    specs: list[dict[str, Any]], *, windows: int, window: float, pid: int
) -> tuple[list[dict[str, Any]], list[float]]:
    """Both workers together from one start instant: their results, and the broker's CPU
    seconds in each window."""
    with tempfile.TemporaryFile("w+") as errors:
        workers = [Worker(spec, errors, SCRIPT) for spec in specs]
        try:
            for worker in workers:
                worker.line()  # ready: connected and warmed up
            start_at = time.monotonic() + 0.3
            for worker in workers:
                worker.go({"start_at": start_at, "until": start_at + windows * window})
            cpu = []
            for k in range(windows + 1):
                time.sleep(max(0.0, start_at + k * window - time.monotonic()))
                cpu.append(cpu_seconds(pid))
            results = [worker.line() for worker in workers]
        except BaseException:
            errors.seek(0)
            sys.stderr.write(errors.read()[-4000:])
            raise
        finally:
            for worker in workers:
                if worker.process.poll() is None:
                    worker.process.kill()
                worker.process.wait()
    return results, [b - a for a, b in pairwise(cpu)]


def worker_main() -> int:
    import trio

    spec: dict[str, Any] = json.loads(sys.stdin.readline())
    worker = _sender if spec["mode"] == "sender" else _reader
    print(json.dumps(trio.run(worker, spec)), flush=True)
    return 0


async def _sender(spec: dict[str, Any]) -> dict[str, Any]:
    """Sends one at a time until the run ends: (start instant, latency) of each."""
    async with _mcp_client(spec["url"], spec["token"]) as client:
        for n in range(20):
            await _call(client, "send", {"to": spec["to"], "body": f"warm-up {n}"})
        _, until = await _handshake()
        assert until is not None  # this script's runs always end
        sends: list[tuple[float, float]] = []
        errors = 0
        n = 0
        while time.monotonic() < until:
            start = time.monotonic()
            try:
                await _call(client, "send", {"to": spec["to"], "body": f"{BODY} {n}"})
            except Exception:
                errors += 1
            sends.append((start, time.monotonic() - start))
            n += 1
        return {"sends": sends, "errors": errors}


async def _reader(spec: dict[str, Any]) -> dict[str, Any]:
    """Roster calls in odd windows (a call never starts after its window closed, but may run
    past it), idle in even ones: each call's start, end and size, the time of each whole pass
    (its calls' time), and this process's CPU seconds while it loaded."""
    import trio

    window, page = spec["window"], spec["page"]

    def arguments(cursor: str | None) -> dict[str, Any]:
        if page == 0:  # one call for everyone (brokers before the roster was paged)
            return {"scope": "all"}
        return {"scope": "all", "limit": page, **({"cursor": cursor} if cursor else {})}

    async with _mcp_client(spec["url"], spec["token"]) as client:
        for _ in range(3):
            await _call(client, "roster", arguments(None))
        start_at, until = await _handshake()
        assert until is not None
        calls: list[tuple[float, float, int]] = []
        passes: list[float] = []
        spent = 0.0  # calls' time in the current pass
        cpu = 0.0
        cursor: str | None = None
        k = 0
        while start_at + k * window < until:
            end = min(start_at + (k + 1) * window, until)
            if k % 2 == 1:
                began_cpu = time.process_time()
                while time.monotonic() < end:
                    begin = time.monotonic()
                    answer = await _call(client, "roster", arguments(cursor))
                    calls.append((begin, time.monotonic(), len(answer["agents"])))
                    spent += calls[-1][1] - begin
                    cursor = answer.get("next_cursor") if page else None
                    if cursor is None:
                        passes.append(spent)
                        spent = 0.0
                cpu += time.process_time() - began_cpu
            await trio.sleep(max(0.0, end - time.monotonic()))
            k += 1
        return {"calls": calls, "passes": passes, "cpu": cpu}


# -- the figure --------------------------------------------------------------------------------


def split_by_load(
    sends: list[tuple[float, float]], calls: list[tuple[float, float]]
) -> dict[str, list[float]]:
    """Send latencies: `loaded` when a roster call was in flight at any time during the send,
    `idle` when none was (whatever the window: a long call may run past its own)."""
    found: dict[str, list[float]] = {"idle": [], "loaded": []}
    calls = sorted(calls)
    ends = [end for _, end in calls]
    for start, latency in sends:
        # Calls are one at a time (one client), so the first that ends after the send
        # started is the only one that can overlap it.
        n = bisect.bisect_right(ends, start)
        overlaps = n < len(calls) and calls[n][0] < start + latency
        found["loaded" if overlaps else "idle"].append(latency)
    return found


def figure_roster(
    brokers: Brokers,
    *,
    identities: int,
    messages: int,
    waiting: int,
    windows: int,
    window: float,
    page: int,
) -> dict[str, Any]:
    progress("starting a broker to create the database")
    broker, _ = brokers.start("roster")
    try:
        alice = register(broker, "alice")
        register(broker, "bob")
        carol = register(broker, "carol")
    finally:
        brokers.stop(broker)
    db = broker.home / "pager.db"
    begin = time.perf_counter()
    build_scale_store(
        db,
        identities=identities,
        messages=messages,
        inbox=0,
        inbox_id=alice["agent_id"],
        feeder_id=alice["agent_id"],
    )
    with_mail = add_waiting(db, waiting=waiting, sender_id=alice["agent_id"])
    build_s = time.perf_counter() - begin
    progress("starting the broker on the filled store")
    broker, _ = brokers.start("roster")
    try:
        settle(broker.pid)
        progress(f"{windows} windows of {window} s")
        specs = [
            {"mode": "sender", "url": broker.url, "token": alice["token"], "to": "bob"},
            {
                "mode": "reader",
                "url": broker.url,
                "token": carol["token"],
                "window": window,
                "page": page,
            },
        ]
        (sent, read), cpu = run_workers(specs, windows=windows, window=window, pid=broker.pid)
    finally:
        brokers.stop(broker)
    sends = [(float(start), float(latency)) for start, latency in sent["sends"]]
    calls = [(float(begin), float(end)) for begin, end, _ in read["calls"]]
    by_load = split_by_load(sends, calls)
    idle, loaded = by_load["idle"], by_load["loaded"]
    call_times = [end - begin for begin, end in calls]
    call_sizes = [int(n) for _, _, n in read["calls"]]
    loaded_s = sum(call_times)
    return {
        "identities": identities,
        "settled_messages": messages,
        "waiting": waiting,
        "identities_with_waiting": with_mail,
        "build_s": round(build_s, 1),
        "database_mb": round(db.stat().st_size / 2**20, 1),
        "windows": windows,
        "window_s": window,
        "page": page,
        "send_errors": sent["errors"],
        "broker_cores_idle": round(sum(cpu[0::2]) / (len(cpu[0::2]) * window), 2),
        "broker_cores_loaded": round(sum(cpu[1::2]) / (len(cpu[1::2]) * window), 2),
        "sends_idle": len(idle),
        "sends_loaded": len(loaded),
        "send_idle_p50_ms": ms(percentile(idle, 50)),
        "send_idle_p90_ms": ms(percentile(idle, 90)),
        "send_idle_max_ms": ms(max(idle)),
        "send_loaded_p50_ms": ms(percentile(loaded, 50)),
        "send_loaded_p90_ms": ms(percentile(loaded, 90)),
        "send_loaded_max_ms": ms(max(loaded)),
        # Sends done per second of each: a stall shows here even when it holds few sends.
        "sends_per_s_idle": round(len(idle) / (windows * window - loaded_s), 1),
        "sends_per_s_loaded": round(len(loaded) / loaded_s, 1),
        "roster_calls": len(calls),
        "roster_agents_per_call": round(sum(call_sizes) / max(1, len(call_sizes))),
        "roster_call_p50_ms": ms(percentile(call_times, 50)),
        "roster_pass_s": round(percentile(read["passes"], 50), 2) if read["passes"] else None,
        "reader_cores_loaded": round(float(read["cpu"]) / loaded_s, 2),
    }


# -- report ------------------------------------------------------------------------------------


def table(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    r = results["roster"]
    what = (
        f"{r['identities']:,} identities, {r['waiting']:,} waiting messages, {r['database_mb']} MB"
    )
    calls = f"`roster(scope=all, limit={r['page']})`" if r["page"] else "`roster(scope=all)`"
    return [
        (
            f"sequential `send` p50 / p90 (max), no roster call in flight ({what};"
            f" {r['sends_idle']} sends); sends/s",
            f"{r['send_idle_p50_ms']} / {r['send_idle_p90_ms']} ms ({r['send_idle_max_ms']} ms);"
            f" {r['sends_per_s_idle']}/s",
            "(reported)",
        ),
        (
            f"sequential `send` p50 / p90 (max) while another client's {calls} call is in"
            f" flight ({r['sends_loaded']} sends); sends/s",
            f"{r['send_loaded_p50_ms']} / {r['send_loaded_p90_ms']} ms"
            f" ({r['send_loaded_max_ms']} ms); {r['sends_per_s_loaded']}/s",
            "(reported)",
        ),
        (
            f"{calls}: call p50 ({r['roster_agents_per_call']} agents a call); a whole pass"
            " (its calls' time)",
            f"{r['roster_call_p50_ms']} ms; "
            + (f"{r['roster_pass_s']} s" if r["roster_pass_s"] else "no pass ended in the run"),
            "(reported)",
        ),
        (
            "the broker's CPU (cores) in idle windows; in loaded ones; the roster client's",
            f"{r['broker_cores_idle']}; {r['broker_cores_loaded']}; {r['reader_cores_loaded']}",
            "(reported)",
        ),
    ]


def main() -> int:
    if sys.argv[1:2] == ["--worker"]:
        return worker_main()
    parser = bench_parser(__doc__, runs=BASE_RUNS, runs_help="scales the windows (default 15)")
    parser.add_argument("--identities", type=int, default=100_000, help="default 100,000")
    parser.add_argument("--messages", type=int, default=200_000, help="settled messages")
    parser.add_argument("--waiting", type=int, default=2_000, help="queued messages (2,000)")
    parser.add_argument("--window", type=float, default=3.0, help="seconds a window (3)")
    parser.add_argument(
        "--page",
        type=int,
        default=100,
        help="roster limit (default 100, the tool's; 0: no limit or cursor at all)",
    )
    args = parser.parse_args()
    windows = max(4, round(10 * max(args.runs, 1) / BASE_RUNS / 2) * 2)
    results: dict[str, Any] = {"machine": machine(), "runs": args.runs}
    with temporary_brokers("pager-bench-roster-") as brokers:
        results["roster"] = figure_roster(
            brokers,
            identities=args.identities,
            messages=args.messages,
            waiting=args.waiting,
            windows=windows,
            window=args.window,
            page=args.page,
        )
    return report(results, table(results), as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())
