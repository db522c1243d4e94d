"""Operator event stream figures (issue 5, part 4), measured on real processes.

Every broker is a real `pager start` against a temporary PAGER_HOME. Senders are the official
MCP SDK client; stream clients read `GET /v1/events` over raw sockets (HTTP/1.1, chunked),
all in worker processes of this same script (`--worker`, a JSON spec on stdin, JSON results on
stdout), never in the broker's process. Workers connect and warm up first, then all start on
one `go` line, at one CLOCK_MONOTONIC instant (system-wide on Linux, so comparable across
processes).

- latency: one stream client and one sender in one process; the sender sends one message at a
  time and waits for its `message.queued` frame. Reported: frame arrival - `send` return
  (0 when the frame came first), and frame arrival - `send` start, p50/p90/p99.
- load: 8 clients send in a loop (each to a partner that never fetches) through alternating
  windows with 0 and with 50 stream clients open (quiet, streams, quiet, streams, quiet), on
  one broker: sends/s per window, and the ratio of each stream window's rate to the mean of the
  quiet windows on either side (measured within one run, and so that a drift of the shared
  machine over the run cancels out). Stream clients connect before a window starts and must
  receive every event (none may be cut off); the CPU of the broker (utime+stime from /proc),
  of the senders and of the stream clients is taken at each window's edges.

`--runs` scales the sample sizes (15, the default, gives 300 latency sends and 6 s windows).
Progress goes to stderr only when it is a terminal.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench_messaging import (  # scripts/bench_messaging.py, beside this file
    BODY,
    Brokers,
    Worker,
    cpu_seconds,
    register,
    temporary_brokers,
)
from benchlib import (  # scripts/benchlib.py, beside this file
    bench_parser,
    chosen_figures,
    machine,
    ms,
    percentile,
    progress,
    report,
)

SCRIPT = str(Path(__file__).resolve())
BASE_RUNS = 15
SENDERS = 8
STREAMS = 50
SENDER_PROCS = 4
STREAM_PROCS = 2
GAP = 1.5  # seconds between load windows: stream clients connect and leave in them

TARGETS = {"event_p50_ms": 10.0, "stream_load_ratio": 0.8}

_MESSAGE_ID = re.compile(rb'"message_id": "(msg_[0-9a-z]+)"')


# -- workers -----------------------------------------------------------------------------------


class EventWorker(Worker):
    """A `--worker` process of this script (bench_messaging's protocol: spec, ready, go)."""

    def __init__(self, spec: dict[str, Any], stderr: Any) -> None:
        import subprocess

        self.process = subprocess.Popen(
            [sys.executable, SCRIPT, "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(spec) + "\n")
        self.process.stdin.flush()


def run_event_workers(
    specs: list[dict[str, Any]], *, on_start: Callable[[float], None] | None = None
) -> list[dict[str, Any]]:
    """Start workers, wait until all are ready, give them one start instant (told to
    `on_start` too); their results."""
    with tempfile.TemporaryFile("w+") as errors:
        workers = [EventWorker(spec, errors) for spec in specs]
        try:
            for worker in workers:
                worker.line()
            start_at = time.monotonic() + 0.5
            if on_start is not None:
                on_start(start_at)
            for worker in workers:
                worker.go({"start_at": start_at, "until": None})
            results = [worker.line() for worker in workers]
        except BaseException:
            for worker in workers:
                worker.process.kill()
            errors.seek(0)
            sys.stderr.write(errors.read()[-4000:])
            raise
        finally:
            for worker in workers:
                worker.close()
    return results


def worker_main() -> int:
    import trio

    spec: dict[str, Any] = json.loads(sys.stdin.readline())
    modes = {"latency": _worker_latency, "senders": _worker_senders, "streams": _worker_streams}
    result = trio.run(modes[spec["mode"]], spec)
    print(json.dumps(result), flush=True)
    return 0


async def _ready_and_go() -> float:
    import trio

    print(json.dumps({"ready": True}), flush=True)
    go: dict[str, Any] = json.loads(await trio.to_thread.run_sync(sys.stdin.readline))
    return float(go["start_at"])


class Stream:
    """A raw `/v1/events` client: counts event frames, notes when each message id arrives."""

    def __init__(self, url: str, secret: str) -> None:
        self.host, port = url.removeprefix("http://").split(":")
        self.port = int(port)
        self.secret = secret
        self.frames = 0
        self.overflow = False
        self.arrivals: dict[str, float] = {}
        self._waiters: dict[str, Any] = {}  # message id -> trio.Event
        self._buffer = b""
        self._tail = b""
        self.stream: Any = None

    async def open(self) -> None:
        import trio

        self.stream = await trio.open_tcp_stream(self.host, self.port)
        request = (
            f"GET /v1/events HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Authorization: Bearer {self.secret}\r\n\r\n"
        )
        await self.stream.send_all(request.encode())
        while b"event: ready" not in self._buffer:
            data = await self.stream.receive_some(65536)
            if not data:
                raise RuntimeError("the event stream closed before `ready`")
            self._buffer += data
        if b" 200 " not in self._buffer.split(b"\r\n", 1)[0]:
            raise RuntimeError(self._buffer[:300].decode(errors="replace"))
        self._buffer = self._buffer[self._buffer.index(b"event: ready") :]
        self._frames(track=False)

    def _count(self, data: bytes) -> None:
        """Count frames by their blank-line ends, in C (`bytes.count`): the load readers must
        cost as little as they can. The last byte read is carried over, so a frame end split
        between two reads counts once (an SSE stream never has three newlines in a row)."""
        text = self._tail + data
        self.frames += text.count(b"\n\n")
        if b"event: overflow" in self._tail + data:
            self.overflow = True
        self._tail = data[-1:]

    def _frames(self, *, track: bool, now: float = 0.0) -> None:
        *complete, self._buffer = self._buffer.split(b"\n\n")
        for frame in complete:
            if b"event: message." in frame or b"event: agent." in frame:
                self.frames += 1
                if track:
                    match = _MESSAGE_ID.search(frame)
                    if match:
                        message_id = match[1].decode()
                        self.arrivals.setdefault(message_id, now)
                        if message_id in self._waiters:
                            self._waiters.pop(message_id).set()
            elif b"event: overflow" in frame:
                self.overflow = True

    async def arrival(self, message_id: str) -> None:
        """Wait until the frame of this message has arrived (tracking readers only)."""
        import trio

        if message_id not in self.arrivals:
            event = self._waiters.setdefault(message_id, trio.Event())
            await event.wait()

    async def read(self, *, track: bool = False) -> None:
        """Read until the connection ends or the task is cancelled: frames parsed (and
        message ids noted) when tracking, else only counted."""
        while True:
            data = await self.stream.receive_some(65536)
            if not data:
                return
            if not track:
                self._count(data)
                continue
            self._buffer += data
            self._frames(track=True, now=time.perf_counter())

    async def close(self) -> None:
        if self.stream is not None:
            await self.stream.aclose()


async def _worker_latency(spec: dict[str, Any]) -> dict[str, Any]:
    import trio
    from bench_messaging import _call, _mcp_client

    stream = Stream(spec["url"], spec["secret"])
    await stream.open()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(stream.read, track=True))
        async with _mcp_client(spec["url"], spec["token"]) as client:
            for _ in range(5):  # warm-up: tool list, pools
                await _call(client, "send", {"to": spec["to"], "body": "warm-up"})
            await _ready_and_go()
            after_return: list[float] = []
            after_start: list[float] = []
            missing = 0
            for n in range(spec["count"]):
                start = time.perf_counter()
                sent = await _call(client, "send", {"to": spec["to"], "body": f"{BODY} {n}"})
                returned = time.perf_counter()
                message_id = sent["message_id"]
                with trio.move_on_after(5):
                    await stream.arrival(message_id)
                arrived = stream.arrivals.get(message_id)
                if arrived is None:
                    missing += 1
                    continue
                after_return.append(max(0.0, arrived - returned))
                after_start.append(arrived - start)
        nursery.cancel_scope.cancel()
    await stream.close()
    return {"after_return": after_return, "after_start": after_start, "missing": missing}


async def _worker_senders(spec: dict[str, Any]) -> dict[str, Any]:
    """Each session sends in a loop inside every window; sends counted per window."""
    import trio
    from bench_messaging import _call, _mcp_client

    windows: list[list[float]] = spec["windows"]  # offsets from the start instant
    counts = [[0] * len(windows) for _ in spec["sessions"]]
    errors: list[str] = []

    async def loop(index: int, client: Any, partner: str, start_at: float) -> None:
        n = 0
        for w, (begin, end) in enumerate(windows):
            await trio.sleep_until(_trio_at(start_at + begin))
            while time.monotonic() < start_at + end:
                n += 1
                try:
                    await _call(client, "send", {"to": partner, "body": f"{BODY} {n}"})
                except Exception as exc:
                    errors.append(repr(exc)[:200])
                    continue
                if time.monotonic() <= start_at + end:
                    counts[index][w] += 1

    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(_mcp_client(spec["url"], session["token"]))
            for session in spec["sessions"]
        ]
        for client, session in zip(clients, spec["sessions"], strict=True):
            for _ in range(3):
                await _call(client, "send", {"to": session["partner"], "body": "warm-up"})
        start_at = await _ready_and_go()
        cpu: list[float] = []

        async def cpu_marks() -> None:
            for begin, end in windows:
                for instant in (begin, end):
                    await trio.sleep_until(_trio_at(start_at + instant))
                    cpu.append(time.process_time())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(cpu_marks)
            for index, (client, session) in enumerate(zip(clients, spec["sessions"], strict=True)):
                nursery.start_soon(loop, index, client, session["partner"], start_at)
    return {
        "per_window": [sum(c[w] for c in counts) for w in range(len(windows))],
        "cpu_per_window": [cpu[2 * w + 1] - cpu[2 * w] for w in range(len(windows))],
        "errors": len(errors),
        "error_samples": errors[:3],
    }


async def _worker_streams(spec: dict[str, Any]) -> dict[str, Any]:
    """`count` stream clients, open through every window listed in `open_in` (connected
    before it starts, closed after it ends); event frames counted per window."""
    import trio

    windows: list[list[float]] = spec["windows"]
    frames: list[list[int]] = []
    cpu_in_window: list[float] = []
    overflows = 0
    start_at = await _ready_and_go()
    for w in spec["open_in"]:
        begin, end = windows[w]
        await trio.sleep_until(_trio_at(start_at + begin - GAP * 0.8))
        streams = [Stream(spec["url"], spec["secret"]) for _ in range(spec["count"])]
        async with trio.open_nursery() as nursery:
            for stream in streams:
                nursery.start_soon(stream.open)
        async with trio.open_nursery() as nursery:
            for stream in streams:
                nursery.start_soon(stream.read)
            await trio.sleep_until(_trio_at(start_at + begin))
            cpu = time.process_time()
            await trio.sleep_until(_trio_at(start_at + end))
            cpu_in_window.append(time.process_time() - cpu)
            # A little past the window, so frames of its last sends arrive.
            await trio.sleep_until(_trio_at(start_at + end + 0.5))
            nursery.cancel_scope.cancel()
        frames.append([stream.frames for stream in streams])
        overflows += sum(stream.overflow for stream in streams)
        for stream in streams:
            await stream.close()
    return {"frames": frames, "overflows": overflows, "cpu_per_window": cpu_in_window}


def _trio_at(monotonic_instant: float) -> float:
    """A `time.monotonic()` instant on trio's clock."""
    import trio

    return trio.current_time() + (monotonic_instant - time.monotonic())


# -- figures -----------------------------------------------------------------------------------


def figure_latency(brokers: Brokers, count: int) -> dict[str, Any]:
    progress(f"latency: {count} sends, each to its frame")
    broker, _ = brokers.start("latency")
    try:
        sender = register(broker, "sender")
        register(broker, "inbox")
        spec = {
            "mode": "latency",
            "url": broker.url,
            "secret": broker.secret,
            "token": sender["token"],
            "to": "inbox",
            "count": count,
        }
        [result] = run_event_workers([spec])
    finally:
        brokers.stop(broker)
    after_return, after_start = result["after_return"], result["after_start"]
    return {
        "sends": count,
        "missing": result["missing"],
        "after_return_p50_ms": ms(percentile(after_return, 50)),
        "after_return_p90_ms": ms(percentile(after_return, 90)),
        "after_return_p99_ms": ms(percentile(after_return, 99)),
        "first_before_return": sum(1 for v in after_return if v == 0.0),
        "after_start_p50_ms": ms(percentile(after_start, 50)),
        "after_start_p99_ms": ms(percentile(after_start, 99)),
    }


def figure_load(brokers: Brokers, window: float, pairs: int = 2) -> dict[str, Any]:
    """8 senders through quiet and stream windows of `window` seconds, alternating."""
    # Quiet windows on both sides of each stream window: each stream window is compared with
    # the mean of its neighbours, which cancels a drift of the whole machine over the run.
    plan = ["quiet", "streams"] * pairs + ["quiet"]
    windows = []
    offset = GAP
    for _ in plan:
        windows.append([offset, offset + window])
        offset += window + GAP
    progress(f"load: {SENDERS} senders, windows of {window:.0f} s, {STREAMS} streams in 2 of 4")
    broker, _ = brokers.start("load")
    try:
        names = [f"s{n}" for n in range(SENDERS)]
        tokens = [register(broker, name)["token"] for name in names]
        for name in names:
            register(broker, f"{name}-inbox")
        sessions = [
            {"token": token, "partner": f"{name}-inbox"}
            for token, name in zip(tokens, names, strict=True)
        ]
        streams_in = [w for w, kind in enumerate(plan) if kind == "streams"]
        specs: list[dict[str, Any]] = [
            {
                "mode": "senders",
                "url": broker.url,
                "windows": windows,
                "sessions": sessions[p::SENDER_PROCS],
            }
            for p in range(SENDER_PROCS)
        ]
        specs += [
            {
                "mode": "streams",
                "url": broker.url,
                "secret": broker.secret,
                "windows": windows,
                "open_in": streams_in,
                "count": STREAMS // STREAM_PROCS,
            }
            for _ in range(STREAM_PROCS)
        ]
        cpu_marks: list[tuple[float, float]] = []

        def sample_cpu(start_at: float) -> None:
            """The broker's CPU seconds at each window's edges."""
            for begin, end in windows:
                for instant in (begin, end):
                    time.sleep(max(0.0, start_at + instant - time.monotonic()))
                    cpu_marks.append((time.monotonic(), cpu_seconds(broker.pid)))

        samplers: list[threading.Thread] = []

        def on_start(start_at: float) -> None:
            samplers.append(threading.Thread(target=sample_cpu, args=(start_at,), daemon=True))
            samplers[0].start()

        results = run_event_workers(specs, on_start=on_start)
        samplers[0].join(timeout=60)
        broker_events = _event_count(broker.home / "pager.db")
    finally:
        brokers.stop(broker)
    senders = [r for r in results if "per_window" in r]
    streams = [r for r in results if "frames" in r]
    sends = [sum(r["per_window"][w] for r in senders) for w in range(len(plan))]
    rates = [round(n / window, 1) for n in sends]
    quiet = [rates[w] for w, kind in enumerate(plan) if kind == "quiet"]
    loud = [rates[w] for w, kind in enumerate(plan) if kind == "streams"]
    ratios = [rates[w] / ((rates[w - 1] + rates[w + 1]) / 2) for w in streams_in]
    cores = []
    for w in range(len(plan)):
        (t0, c0), (t1, c1) = cpu_marks[2 * w], cpu_marks[2 * w + 1]
        cores.append(round((c1 - c0) / (t1 - t0), 2))
    frames = [f for r in streams for window_frames in r["frames"] for f in window_frames]
    sender_cores = [
        round(sum(r["cpu_per_window"][w] for r in senders) / window, 2) for w in range(len(plan))
    ]
    stream_cores = [0.0] * len(plan)
    for r in streams:
        for w, used in zip(streams_in, r["cpu_per_window"], strict=True):
            stream_cores[w] += used / window
    stream_cores = [round(c, 2) for c in stream_cores]
    ratio = sum(ratios) / len(ratios)
    return {
        "senders": SENDERS,
        "streams": STREAMS,
        "window_s": window,
        "plan": plan,
        "sends_per_s": rates,
        "quiet_per_s": round(sum(quiet) / len(quiet), 1),
        "streams_per_s": round(sum(loud) / len(loud), 1),
        "ratio": round(ratio, 3),
        "ratios": [round(r, 3) for r in ratios],
        "drop_pct": round((1 - ratio) * 100, 1),
        "broker_cores": cores,
        "sender_cores": sender_cores,
        "stream_client_cores": stream_cores,
        "broker_ms_per_send": [
            round(c * 1000 / r, 2) if r else None for c, r in zip(cores, rates, strict=True)
        ],
        "errors": sum(r["errors"] for r in senders),
        "error_samples": [s for r in senders for s in r["error_samples"]][:3],
        "stream_frames_min": min(frames) if frames else 0,
        "stream_frames_max": max(frames) if frames else 0,
        "stream_overflows": sum(r["overflows"] for r in streams),
        "events_logged": broker_events,
    }


def _event_count(db: Path) -> int:
    import sqlite3

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM events").fetchone()[0])
    finally:
        conn.close()


# -- report ------------------------------------------------------------------------------------


def _mark(met: bool) -> str:
    return "met" if met else "MISSED"


def table(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    lat = results.get("latency")
    if lat:
        rows += [
            (
                f"`send` returns -> its `message.queued` frame at an SSE client, p50 / p90 / p99"
                f" ({lat['sends']} sends; {lat['first_before_return']} frames came first)",
                f"{lat['after_return_p50_ms']} / {lat['after_return_p90_ms']} /"
                f" {lat['after_return_p99_ms']} ms"
                f" ({_mark(lat['after_return_p50_ms'] <= TARGETS['event_p50_ms'])})",
                "p50 <= 10 ms",
            ),
            (
                "`send` starts -> its frame arrives, p50 / p99 (frames missing)",
                f"{lat['after_start_p50_ms']} / {lat['after_start_p99_ms']} ms"
                f" ({lat['missing']} missing)",
                "(reported)",
            ),
        ]
    load = results.get("load")
    if load:
        rows += [
            (
                f"{load['senders']} clients sending: sends/s with 0 vs {load['streams']} stream"
                f" clients, same broker, alternating {load['window_s']:.0f} s windows"
                " (ratio of each stream window to its quiet neighbours)",
                f"{load['quiet_per_s']}/s vs {load['streams_per_s']}/s (x{load['ratio']},"
                f" -{load['drop_pct']}%; " + ", ".join(f"x{r}" for r in load["ratios"]) + ")"
                f" ({_mark(load['ratio'] >= TARGETS['stream_load_ratio'])})",
                "drop <= 20%",
            ),
            (
                "load: sends/s per window (" + ", ".join(load["plan"]) + ")",
                ", ".join(f"{r}/s" for r in load["sends_per_s"]),
                "(reported)",
            ),
            (
                "load: CPU per window, cores: broker / 8 senders / 50 stream clients;"
                " broker ms per send",
                "; ".join(
                    f"{b} / {s} / {c}"
                    for b, s, c in zip(
                        load["broker_cores"],
                        load["sender_cores"],
                        load["stream_client_cores"],
                        strict=True,
                    )
                )
                + "; "
                + ", ".join(str(v) for v in load["broker_ms_per_send"]),
                "(reported)",
            ),
            (
                "load: event frames per stream client per stream window (min-max),"
                " clients cut off, send errors",
                f"{load['stream_frames_min']}-{load['stream_frames_max']},"
                f" {load['stream_overflows']} cut off, {load['errors']} errors",
                "0 cut off, 0 errors",
            ),
        ]
    return rows


FIGURES = ("latency", "load")


def main() -> int:
    if sys.argv[1:2] == ["--worker"]:
        return worker_main()
    parser = bench_parser(__doc__, runs=BASE_RUNS, figures=FIGURES)
    parser.add_argument(
        "--pairs",
        type=int,
        default=2,
        help="load: (quiet, streams) window pairs, alternating on one broker (default 2)",
    )
    args = parser.parse_args()
    figures = chosen_figures(parser, args.figures, FIGURES)
    factor = max(args.runs, 1) / BASE_RUNS
    results: dict[str, Any] = {"machine": machine(), "runs": args.runs, "targets": TARGETS}
    with temporary_brokers("pager-bench-events-") as brokers:
        if "latency" in figures:
            results["latency"] = figure_latency(brokers, max(50, round(300 * factor)))
        if "load" in figures:
            results["load"] = figure_load(brokers, max(2.0, round(6 * factor, 1)), args.pairs)
    return report(results, table(results), as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())
