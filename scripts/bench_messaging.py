"""Messaging figures of the Messaging over MCP issue (3), measured on real processes.

Every broker is a real `pager start` against a temporary PAGER_HOME. Clients are the official
MCP SDK client (`mcp.Client` over Streamable HTTP, the session token as a bearer header), run
in worker processes of this same script (`--worker`, a JSON spec on stdin, JSON results on
stdout), never in the broker's process. Workers connect and warm up first, then all start on
one `go` line, at one CLOCK_MONOTONIC instant (system-wide on Linux, so comparable across
processes).

- sequential: one client, one `send` at a time to a pull-only partner: latency p50/p90/p99 and
  tool calls/s; the broker's CPU per call (utime+stime from /proc/<pid>/stat, before/after).
- concurrent: 1, 8 and 32 clients in pairs, each looping send -> fetch -> ack (ack only when
  the fetch claimed something) for a fixed time: aggregate tool calls/s, errors, broker CPU
  per call and the clients' CPU per call. The 8-client figure (the one with a target) is the
  median of --repeats runs (default 3), each on a fresh broker.
- server CPU: the broker's utime+stime (/proc/<pid>/stat) over the sequential and concurrent
  runs, per tool call, next to the clients' own CPU per call.
- delivery: send -> the claim arriving at a registered delivery address (an HTTP listener in
  the sending worker's process, timed with the same clock), p50/p90/p99.
- scale: a store built directly with sqlite3 (identities, settled messages with their
  acknowledged claims, one inbox with waiting mail) behind a broker that a `pager start`
  brings up: ready time, resident memory, `fetch` (limit 10) latency from the big inbox.
  Sizes: --scale-identities, --scale-messages, --scale-inbox (building the default 1,000,000
  messages takes about half a minute on 2 cores).

`--runs` scales the sample sizes (15, the default, gives 500 sends, 200 deliveries, 50 fetch
rounds and 10 s per concurrent run), as in bench_lifecycle.py. Progress goes to stderr only
when it is a terminal.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from benchlib import (  # scripts/benchlib.py, beside this file
    NO_SEND_LIMITS,
    bench_parser,
    chosen_figures,
    machine,
    ms,
    percentile,
    progress,
    report,
)

if TYPE_CHECKING:
    from mcp import Client

VENV_BIN = Path(sys.executable).parent
PAGER = str(VENV_BIN / "pager")
SCRIPT = str(Path(__file__).resolve())

BASE_RUNS = 15
WORKER_BOUND = 300.0  # a hang guard for worker handshakes, not a timing
BODY = "benchmark message: " + "x" * 80  # ~100 bytes, a short agent note

#: Crockford base32 as pager.domain.ids spells it (ids are built here without the broker).
ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"

TARGETS = {
    "send_p50_ms": 5.0,
    "sequential_calls_per_s": 200.0,
    "concurrent_8_calls_per_s": 500.0,
    "concurrent_8_errors": 0,
    "delivery_p50_ms": 10.0,
    "scale_ready_s": 2.0,
    "scale_rss_mb": 200.0,
    "scale_fetch_p50_ms": 10.0,
}


# -- brokers -----------------------------------------------------------------------------------


@dataclass
class Broker:
    home: Path
    env: dict[str, str]
    url: str
    pid: int
    secret: str
    workspace: Path


@dataclass
class Brokers:
    """Every broker started here, so each one is stopped (or killed) whatever happens."""

    root: Path
    started: list[Broker] = field(default_factory=list)

    def env(self, home: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PAGER_")}
        env["PAGER_HOME"] = str(home)
        return {**env, **NO_SEND_LIMITS}

    def start(self, name: str) -> tuple[Broker, float]:
        """`pager start` on `root/name`; the broker and the command's wall time."""
        home = self.root / name
        env = self.env(home)
        begin = time.perf_counter()
        done = subprocess.run(
            [PAGER, "start", "--json"], env=env, capture_output=True, text=True, check=False
        )
        wall = time.perf_counter() - begin
        report: dict[str, Any] = {}
        with contextlib.suppress(ValueError):
            report = json.loads(done.stdout)
        if isinstance(report.get("pid"), int):
            # Tracked before any check, so even a half-started broker is cleaned up.
            self.started.append(Broker(home, env, "", int(report["pid"]), "", home))
        if done.returncode != 0 or not report.get("url"):
            raise RuntimeError(f"pager start failed ({done.returncode}): {done.stderr.strip()}")
        workspace = self.root / f"{name}-repo"
        workspace.mkdir(exist_ok=True)
        broker = Broker(
            home=home,
            env=env,
            url=str(report["url"]),
            pid=int(report["pid"]),
            secret=(home / "secret").read_text().strip(),
            workspace=workspace,
        )
        self.started[-1] = broker
        return broker, wall

    def stop(self, broker: Broker) -> None:
        subprocess.run(
            [PAGER, "exit"],
            env=broker.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
            timeout=60,
        )
        deadline = time.monotonic() + 10
        while _alive(broker.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        if _alive(broker.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(broker.pid, signal.SIGKILL)
        self.started = [b for b in self.started if b.pid != broker.pid]

    def stop_all(self) -> None:
        for broker in list(self.started):
            with contextlib.suppress(Exception):
                self.stop(broker)
            if _alive(broker.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(broker.pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def register(broker: Broker, name: str, delivery_url: str | None = None) -> dict[str, Any]:
    """POST /v1/register with the local secret; the 201 answer (token, agent_id, …)."""
    body: dict[str, Any] = {
        "workspace": str(broker.workspace),
        "implementation": "shell",
        "session_name": name,
    }
    if delivery_url is not None:
        body["delivery"] = {"kind": "http", "url": delivery_url}
    request = urllib.request.Request(
        broker.url + "/v1/register",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {broker.secret}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


# -- workers (the client processes) ------------------------------------------------------------


class Worker:
    """One `--worker` process: spec in, `ready`, `go`, result out (one JSON line each)."""

    def __init__(self, spec: dict[str, Any], stderr: IO[str], script: str = SCRIPT) -> None:
        """Starts `script --worker` (this one, or another bench's with the same protocol)."""
        self.process = subprocess.Popen(
            [sys.executable, script, "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(spec) + "\n")
        self.process.stdin.flush()

    def line(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        text = self.process.stdout.readline()
        if not text:
            self.process.wait(timeout=WORKER_BOUND)
            raise RuntimeError(f"a worker exited with status {self.process.returncode}")
        answer: dict[str, Any] = json.loads(text)
        return answer

    def go(self, payload: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(payload) + "\n")
        self.process.stdin.flush()

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def run_workers(
    specs: Sequence[dict[str, Any]],
    *,
    duration: float | None = None,
    on_start: Callable[[], None] | None = None,
) -> tuple[list[dict[str, Any]], float, float]:
    """Run workers to completion together: (results, start instant, all-done instant)."""
    with tempfile.TemporaryFile("w+") as errors:
        workers = [Worker(spec, errors) for spec in specs]
        try:
            for worker in workers:
                worker.line()  # ready: imported, connected, warmed up
            start_at = time.monotonic() + 0.3
            until = None if duration is None else start_at + duration
            for worker in workers:
                worker.go({"start_at": start_at, "until": until})
            time.sleep(max(0.0, start_at - time.monotonic()))
            if on_start is not None:
                on_start()
            results = [worker.line() for worker in workers]
            finished = time.monotonic()
        except BaseException:
            for worker in workers:
                worker.process.kill()
            errors.seek(0)
            sys.stderr.write(errors.read()[-4000:])
            raise
        finally:
            for worker in workers:
                worker.close()
    return results, start_at, finished


def worker_main() -> int:
    import trio

    spec: dict[str, Any] = json.loads(sys.stdin.readline())
    result = trio.run(_worker, spec)
    print(json.dumps(result), flush=True)
    return 0


async def _worker(spec: dict[str, Any]) -> dict[str, Any]:
    mode = spec["mode"]
    if mode == "sequential":
        return await _worker_sequential(spec)
    if mode == "cycles":
        return await _worker_cycles(spec)
    if mode == "delivery":
        return await _worker_delivery(spec)
    if mode == "fetch":
        return await _worker_fetch(spec)
    raise ValueError(f"unknown worker mode {mode!r}")


@contextlib.asynccontextmanager
async def _mcp_client(url: str, token: str) -> Any:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        transport = streamable_http_client(f"{url}/mcp", http_client=http)
        async with Client(transport, cache=None) as client:
            yield client


async def _call(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One tool call; raises on a tool error so callers count it."""
    result = await client.call_tool(name, arguments)
    if result.is_error or result.structured_content is None:
        text = getattr(result.content[0], "text", "") if result.content else ""
        raise RuntimeError(f"{name}: {text[:200]}")
    return dict(result.structured_content)


async def _handshake() -> tuple[float, float | None]:
    """Say ready, wait for `go`, sleep until the shared start instant."""
    import trio

    print(json.dumps({"ready": True}), flush=True)
    go: dict[str, Any] = json.loads(await trio.to_thread.run_sync(sys.stdin.readline))
    await trio.sleep(max(0.0, go["start_at"] - time.monotonic()))
    return float(go["start_at"]), go["until"]


async def _warm_up(client: Client, partner: str) -> None:
    """First calls list the tools and fill connection pools; not measured."""
    await _call(client, "whoami", {})
    await _call(client, "send", {"to": partner, "body": "warm-up"})
    claims = (await _call(client, "fetch", {"limit": 10}))["claims"]
    if claims:
        await _call(client, "ack", {"tokens": [c["token"] for c in claims]})


async def _worker_sequential(spec: dict[str, Any]) -> dict[str, Any]:
    async with _mcp_client(spec["url"], spec["token"]) as client:
        for _ in range(3):
            await _warm_up(client, spec["to"])
        await _handshake()
        cpu = time.process_time()
        latencies: list[float] = []
        errors: list[str] = []
        begin = time.perf_counter()
        for n in range(spec["count"]):
            start = time.perf_counter()
            try:
                await _call(client, "send", {"to": spec["to"], "body": f"{BODY} {n}"})
            except Exception as exc:
                errors.append(repr(exc)[:200])
            latencies.append(time.perf_counter() - start)
        elapsed = time.perf_counter() - begin
        return {
            "latencies": latencies,
            "elapsed": elapsed,
            "errors": len(errors),
            "error_samples": errors[:3],
            "client_cpu": time.process_time() - cpu,
        }


async def _worker_cycles(spec: dict[str, Any]) -> dict[str, Any]:
    import trio

    latencies: dict[str, list[float]] = {"send": [], "fetch": [], "ack": []}
    errors: list[str] = []
    last_end = [0.0]

    async def timed(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        start = time.monotonic()
        try:
            answer: dict[str, Any] | None = await _call(client, name, arguments)
        except Exception as exc:
            errors.append(repr(exc)[:200])
            answer = None
        end = time.monotonic()
        latencies[name].append(end - start)
        last_end[0] = max(last_end[0], end)
        return answer

    async def loop(client: Client, partner: str, until: float) -> None:
        n = 0
        while time.monotonic() < until:
            n += 1
            await timed(client, "send", {"to": partner, "body": f"{BODY} {n}"})
            fetched = await timed(client, "fetch", {"limit": 10})
            tokens = [claim["token"] for claim in (fetched or {}).get("claims", [])]
            if tokens:
                await timed(client, "ack", {"tokens": tokens})

    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(_mcp_client(spec["url"], session["token"]))
            for session in spec["sessions"]
        ]
        async with trio.open_nursery() as nursery:
            for client, session in zip(clients, spec["sessions"], strict=True):
                nursery.start_soon(_warm_up, client, session["partner"])
        start_at, until = await _handshake()
        assert until is not None
        cpu = time.process_time()
        async with trio.open_nursery() as nursery:
            for client, session in zip(clients, spec["sessions"], strict=True):
                nursery.start_soon(loop, client, session["partner"], until)
        return {
            "latencies": latencies,
            "elapsed": last_end[0] - start_at,
            "errors": len(errors),
            "error_samples": errors[:3],
            "client_cpu": time.process_time() - cpu,
        }


async def _worker_delivery(spec: dict[str, Any]) -> dict[str, Any]:
    """Registers a recipient whose delivery address is a listener in this process, then sends
    to it one message at a time; latency = arrival at the listener - start of the send.
    With `recipient` ({url, secret, workspace}) the recipient is registered on that broker
    (another host of a shared store, bench_multihost.py) and addressed by its address."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import trio

    arrivals: dict[str, float] = {}
    tokens: list[str] = []
    lock = threading.Condition()

    def arrival(message_id: str) -> None:
        with lock:
            lock.wait_for(lambda: message_id in arrivals, timeout=10)

    class Inbox(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the broker's pooled client allows
        # One segment per answer and no Nagle: headers and body written separately would
        # wait for a delayed ACK (~40 ms) on a kept-alive connection.
        wbufsize = -1
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            now = time.perf_counter()
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            accepted = [claim["token"] for claim in body["claims"]]
            with lock:
                for claim in body["claims"]:
                    arrivals.setdefault(claim["message"]["id"], now)
                tokens.extend(accepted)
                lock.notify_all()
            payload = json.dumps({"accepted": accepted}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Inbox)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        inbox_url = f"http://127.0.0.1:{server.server_address[1]}/inbox"
        where = spec.get("recipient", spec)
        recipient = await _register_async(where, "inbox", inbox_url)
        to = recipient["address"] if "recipient" in spec else "inbox"
        async with (
            _mcp_client(spec["url"], spec["token"]) as sender,
            _mcp_client(where["url"], recipient["token"]) as receiver,
        ):

            async def ack_all() -> None:
                with lock:
                    pending = tokens[:]
                    tokens.clear()
                for i in range(0, len(pending), 100):
                    await _call(receiver, "ack", {"tokens": pending[i : i + 100]})

            for _ in range(5):
                await _call(sender, "send", {"to": to, "body": "warm-up"})
            await _call(receiver, "whoami", {})
            await ack_all()
            await _handshake()
            latencies: list[float] = []
            send_latencies: list[float] = []
            wakes: dict[str, int] = {}
            errors: list[str] = []
            for n in range(spec["count"]):
                start = time.perf_counter()
                try:
                    sent = await _call(sender, "send", {"to": to, "body": f"{BODY} {n}"})
                except Exception as exc:
                    errors.append(repr(exc)[:200])
                    continue
                send_latencies.append(time.perf_counter() - start)
                wakes[sent["wake"]] = wakes.get(sent["wake"], 0) + 1
                # Usually there already: the send answers after the inbox did.
                if sent["message_id"] not in arrivals:
                    await trio.to_thread.run_sync(arrival, sent["message_id"])
                arrived = arrivals.get(sent["message_id"])
                if arrived is None:
                    errors.append(f"{sent['message_id']} never arrived")
                else:
                    latencies.append(arrived - start)
            await ack_all()
            return {
                "latencies": latencies,
                "send_latencies": send_latencies,
                "wakes": wakes,
                "errors": len(errors),
                "error_samples": errors[:3],
            }
    finally:
        server.shutdown()
        server.server_close()


async def _register_async(spec: dict[str, Any], name: str, delivery_url: str) -> dict[str, Any]:
    import httpx2

    body = {
        "workspace": spec["workspace"],
        "implementation": "shell",
        "session_name": name,
        "delivery": {"kind": "http", "url": delivery_url},
    }
    async with httpx2.AsyncClient(timeout=30) as http:
        response = await http.post(
            spec["url"] + "/v1/register",
            json=body,
            headers={"Authorization": f"Bearer {spec['secret']}"},
        )
    answer: dict[str, Any] = response.json()
    if response.status_code != 201:
        raise RuntimeError(f"register {name}: {answer}")
    return answer


async def _worker_fetch(spec: dict[str, Any]) -> dict[str, Any]:
    """Rounds of fetch (limit 10) + ack on the session's inbox; optionally sends into it."""
    async with _mcp_client(spec["url"], spec["token"]) as client:
        await _call(client, "whoami", {})
        for _ in range(2):  # warm-up rounds
            claims = (await _call(client, "fetch", {"limit": 10}))["claims"]
            await _call(client, "ack", {"tokens": [c["token"] for c in claims]})
        await _handshake()
        fetches: list[float] = []
        acks: list[float] = []
        claimed = 0
        for _ in range(spec["rounds"]):
            start = time.perf_counter()
            claims = (await _call(client, "fetch", {"limit": 10}))["claims"]
            fetches.append(time.perf_counter() - start)
            claimed += len(claims)
            if claims:
                start = time.perf_counter()
                await _call(client, "ack", {"tokens": [c["token"] for c in claims]})
                acks.append(time.perf_counter() - start)
        sends: list[float] = []
        for n in range(spec.get("sends", 0)):
            start = time.perf_counter()
            await _call(client, "send", {"to": spec["send_to"], "body": f"{BODY} {n}"})
            sends.append(time.perf_counter() - start)
        return {"fetch": fetches, "ack": acks, "claimed": claimed, "send": sends}


# -- figures -----------------------------------------------------------------------------------


def figure_sequential(brokers: Brokers, count: int) -> dict[str, Any]:
    """One client sends `count` messages one at a time to a partner that never fetches."""
    progress(f"sequential: {count} sends")
    broker, _ = brokers.start("sequential")
    try:
        alice = register(broker, "alice")
        register(broker, "bob")
        spec = {"mode": "sequential", "url": broker.url, "token": alice["token"], "to": "bob"}
        cpu: list[float] = []
        results, _, _ = run_workers(
            [{**spec, "count": count}], on_start=lambda: cpu.append(cpu_seconds(broker.pid))
        )
        broker_cpu = cpu_seconds(broker.pid) - cpu[0]
    finally:
        brokers.stop(broker)
    [result] = results
    latencies = result["latencies"]
    return {
        "sends": count,
        "send_p50_ms": ms(percentile(latencies, 50)),
        "send_p90_ms": ms(percentile(latencies, 90)),
        "send_p99_ms": ms(percentile(latencies, 99)),
        "calls_per_s": round(count / result["elapsed"], 1),
        "errors": result["errors"],
        "error_samples": result["error_samples"],
        "broker_cpu_ms_per_call": ms(broker_cpu / count),
        "broker_cpu_share": round(broker_cpu / result["elapsed"], 2),
        "client_cpu_ms_per_call": ms(result["client_cpu"] / count),
    }


def figure_server_cpu(results: dict[str, Any]) -> dict[str, dict[str, float]]:
    """The broker's CPU per tool call (utime+stime from /proc/<pid>/stat read when the clients
    start and once they all finished, divided by the calls), from the throughput runs:
    label -> broker ms per call, client ms per call, broker CPU share (cores)."""
    runs = [("sequential `send`", results.get("sequential"))]
    runs += [
        (f"send/fetch/ack, {_count(run['clients'], 'client')}", run)
        for run in results.get("concurrent", [])
    ]
    return {
        label: {
            "broker_ms_per_call": run["broker_cpu_ms_per_call"],
            "client_ms_per_call": run["client_cpu_ms_per_call"],
            "broker_cores": run["broker_cpu_share"],
        }
        for label, run in runs
        if run
    }


def figure_concurrent(
    brokers: Brokers, clients: int, max_procs: int, duration: float, run: int = 0
) -> dict[str, Any]:
    """`clients` sessions in pairs (one alone sends to itself), spread over worker processes,
    each looping send -> fetch -> ack for `duration` seconds."""
    procs = min(clients, max_procs)
    progress(f"concurrent: {clients} clients in {procs} processes, {duration:.0f} s")
    broker, _ = brokers.start(f"concurrent-{clients}-{run}")
    try:
        names = [f"c{n}" for n in range(clients)]
        tokens = [register(broker, name)["token"] for name in names]
        partners = [names[n ^ 1] if (n ^ 1) < clients else names[n] for n in range(clients)]
        sessions = [
            {"token": token, "partner": partner}
            for token, partner in zip(tokens, partners, strict=True)
        ]
        specs = [
            {"mode": "cycles", "url": broker.url, "sessions": sessions[p::procs]}
            for p in range(procs)
        ]
        cpu: list[float] = []
        results, _, _ = run_workers(
            specs, duration=duration, on_start=lambda: cpu.append(cpu_seconds(broker.pid))
        )
        broker_cpu = cpu_seconds(broker.pid) - cpu[0]
    finally:
        brokers.stop(broker)
    per_tool: dict[str, list[float]] = {"send": [], "fetch": [], "ack": []}
    for result in results:
        for tool, values in result["latencies"].items():
            per_tool[tool].extend(values)
    calls = sum(len(values) for values in per_tool.values())
    errors = sum(result["errors"] for result in results)
    elapsed = max(result["elapsed"] for result in results)
    every = [v for values in per_tool.values() for v in values]
    return {
        "clients": clients,
        "processes": procs,
        "duration_s": round(elapsed, 2),
        "calls": calls,
        "calls_per_s": round(calls / elapsed, 1),
        "errors": errors,
        "error_samples": [s for r in results for s in r["error_samples"]][:3],
        "call_p50_ms": ms(percentile(every, 50)) if every else None,
        "call_p99_ms": ms(percentile(every, 99)) if every else None,
        "calls_by_tool": {tool: len(values) for tool, values in per_tool.items()},
        "broker_cpu_ms_per_call": ms(broker_cpu / calls) if calls else None,
        "broker_cpu_share": round(broker_cpu / elapsed, 2),
        "client_cpu_ms_per_call": (
            ms(sum(r["client_cpu"] for r in results) / calls) if calls else None
        ),
    }


def repeated_concurrent(
    brokers: Brokers, clients: int, max_procs: int, duration: float, repeats: int
) -> dict[str, Any]:
    """`figure_concurrent` `repeats` times: the run with the median calls/s, with every run's
    calls/s and errors beside it. The machine's speed drifts by a third over minutes (shared
    cores), so one run says little on its own."""
    runs = [
        figure_concurrent(brokers, clients, max_procs, duration, run)
        for run in range(max(repeats, 1))
    ]
    ranked = sorted(runs, key=lambda run: run["calls_per_s"])
    median = dict(ranked[len(ranked) // 2])
    median["repeats_calls_per_s"] = [run["calls_per_s"] for run in runs]
    median["repeats_errors"] = sum(run["errors"] for run in runs)
    return median


def figure_delivery(brokers: Brokers, count: int) -> dict[str, Any]:
    progress(f"delivery: {count} sends to a delivery address")
    broker, _ = brokers.start("delivery")
    try:
        sender = register(broker, "sender")
        spec = {
            "mode": "delivery",
            "url": broker.url,
            "secret": broker.secret,
            "workspace": str(broker.workspace),
            "token": sender["token"],
            "count": count,
        }
        [result], _, _ = run_workers([spec])
    finally:
        brokers.stop(broker)
    latencies = result["latencies"]
    return {
        "sends": count,
        "arrival_p50_ms": ms(percentile(latencies, 50)) if latencies else None,
        "arrival_p90_ms": ms(percentile(latencies, 90)) if latencies else None,
        "arrival_p99_ms": ms(percentile(latencies, 99)) if latencies else None,
        "send_return_p50_ms": (
            ms(percentile(result["send_latencies"], 50)) if result["send_latencies"] else None
        ),
        "wakes": result["wakes"],
        "errors": result["errors"],
        "error_samples": result["error_samples"],
    }


def _encode(value: int, length: int) -> str:
    return "".join(ALPHABET[(value >> (5 * i)) & 31] for i in range(length - 1, -1, -1))


def build_scale_store(
    db: Path, *, identities: int, messages: int, inbox: int, inbox_id: str, feeder_id: str
) -> float:
    """Bulk-insert the scale scenario into a migrated, stopped broker's database; seconds spent.

    - `identities` in all (the two registered ones included), 100 per workspace, detached;
    - `messages` acknowledged messages between random identities over the last 30 days, each
      with the acknowledged claim its ack left behind;
    - `inbox` queued messages from `feeder_id` to `inbox_id`, sent within the last minute.
    """
    begin = time.perf_counter()
    rng = random.Random(3)
    now = time.time()
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("PRAGMA cache_size = -262144")  # 256 MiB while building
        conn.execute("BEGIN")
        existing = [str(row[0]) for row in conn.execute("SELECT id FROM identities")]
        workspaces = max(1, identities // 100)
        conn.executemany(
            "INSERT INTO workspaces (key, slug, path, created_at) VALUES (?, ?, ?, ?)",
            (
                (
                    f"/bench/repo-{w:05d}",
                    f"repo-{w:05d}-{hashlib.sha256(str(w).encode()).hexdigest()[:6]}",
                    f"/bench/repo-{w:05d}",
                    now - 40 * 86400,
                )
                for w in range(workspaces)
            ),
        )
        new_ids = [f"agt_{_encode(rng.getrandbits(80), 16)}" for _ in range(identities)]
        new_ids = new_ids[: max(0, identities - len(existing))]
        rows = [
            (
                agent_id,
                f"/bench/repo-{n % workspaces:05d}",
                f"agent-{n}",
                f"agent-{n}",
                now - 40 * 86400,
                now - 86400,
                now - 86400,
            )
            for n, agent_id in enumerate(new_ids)
        ]
        conn.executemany(
            "INSERT INTO identities (id, workspace_key, alias, alias_key, durable, implementation,"
            " created_at, last_seen, detached_at, exchanged) VALUES (?, ?, ?, ?, 1, 'shell',"
            " ?, ?, ?, 1)",
            rows,
        )
        conn.executemany(
            "INSERT INTO alias_reservations (workspace_key, alias_key, identity_id)"
            " VALUES (?, ?, ?)",
            ((row[1], row[3], row[0]) for row in rows),
        )
        everyone = existing + new_ids
        progress(f"scale: {len(everyone)} identities")

        first_ms = int((now - 30 * 86400) * 1000)
        step_ms = 30 * 86400 * 1000 / max(1, messages)
        chunk = 50_000
        for low in range(0, messages, chunk):
            batch = []
            claims = []
            for n in range(low, min(messages, low + chunk)):
                sent_ms = first_ms + int(n * step_ms)
                message_id = f"msg_{_encode((sent_ms << 50) | n, 20)}"
                sent_at = sent_ms / 1000
                batch.append(
                    (
                        message_id,
                        everyone[rng.randrange(len(everyone))],
                        everyone[rng.randrange(len(everyone))],
                        f"{BODY} {n}",
                        sent_at,
                        sent_at + 2,
                    )
                )
                token_hash = hashlib.sha256(b"bench-claim-%d" % n).hexdigest()
                claims.append((token_hash, message_id, batch[-1][2], sent_at, sent_at + 60))
            conn.executemany(
                "INSERT INTO messages (id, sender_id, recipient_id, body, sent_at, state,"
                " attempts, available_at, settled_at) VALUES (?, ?, ?, ?, ?, 'acknowledged', 1,"
                " ?5, ?6)",
                batch,
            )
            conn.executemany(
                "INSERT INTO claims (token_hash, message_id, identity_id, attempt, via,"
                " claimed_at, expires_at, state) VALUES (?, ?, ?, 1, 'fetch', ?, ?,"
                " 'acknowledged')",
                claims,
            )
            progress(f"scale: {min(messages, low + chunk)}/{messages} settled messages")
        start_ms = int((now - 60) * 1000)
        conn.executemany(
            "INSERT INTO messages (id, sender_id, recipient_id, body, sent_at, state, attempts,"
            " available_at) VALUES (?, ?, ?, ?, ?, 'queued', 0, ?5)",
            (
                (
                    f"msg_{_encode(((start_ms + n // 200) << 50) | (messages + n), 20)}",
                    feeder_id,
                    inbox_id,
                    f"{BODY} waiting {n}",
                    (start_ms + n // 200) / 1000,
                )
                for n in range(inbox)
            ),
        )
        conn.execute("COMMIT")
        progress("scale: checkpointing the WAL")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return time.perf_counter() - begin


def figure_scale(
    brokers: Brokers, *, identities: int, messages: int, inbox: int, rounds: int, sends: int
) -> dict[str, Any]:
    progress("scale: registering the inbox")
    broker, _ = brokers.start("scale")
    try:
        big = register(broker, "big")
        feeder = register(broker, "feeder")
    finally:
        brokers.stop(broker)
    db = broker.home / "pager.db"
    build_s = build_scale_store(
        db,
        identities=identities,
        messages=messages,
        inbox=inbox,
        inbox_id=big["agent_id"],
        feeder_id=feeder["agent_id"],
    )
    db_mb = round(db.stat().st_size / 2**20, 1)
    # One start to warm the page cache with the new file, as on a machine in use; then the
    # measured starts.
    ready: list[float] = []
    for n in range(3):
        progress(f"scale: pager start {n + 1}/3")
        broker, wall = brokers.start("scale")
        ready.append(wall)
        if n < 2:
            brokers.stop(broker)
    try:
        rss_start = rss_mb(broker.pid)
        progress(f"scale: {rounds} fetch rounds")
        spec = {
            "mode": "fetch",
            "url": broker.url,
            "token": big["token"],
            "rounds": rounds,
            "sends": sends,
            "send_to": "big",
        }
        [result], _, _ = run_workers([spec])
        rss_after = rss_mb(broker.pid)
    finally:
        brokers.stop(broker)
    return {
        "identities": identities,
        "settled_messages": messages,
        "inbox_waiting": inbox,
        "build_s": round(build_s, 1),
        "database_mb": db_mb,
        "ready_s": [round(v, 2) for v in ready],
        "ready_median_s": round(sorted(ready)[1], 2),
        "rss_after_start_mb": rss_start,
        "rss_after_fetches_mb": rss_after,
        "fetch_rounds": rounds,
        "claimed": result["claimed"],
        "fetch_p50_ms": ms(percentile(result["fetch"], 50)),
        "fetch_p90_ms": ms(percentile(result["fetch"], 90)),
        "ack_p50_ms": ms(percentile(result["ack"], 50)) if result["ack"] else None,
        "send_to_big_inbox_p50_ms": ms(percentile(result["send"], 50)) if result["send"] else None,
    }


# -- report ------------------------------------------------------------------------------------


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}{'es' if noun.endswith('s') else 's'}"


def _mark(value: float | None, target: float, *, at_least: bool = False) -> str:
    if value is None:
        return "n/a"
    met = value >= target if at_least else value <= target
    return "met" if met else "MISSED"


def table(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    seq = results.get("sequential")
    if seq:
        rows += [
            (
                f"one client, sequential `send` latency p50 / p90 / p99 ({seq['sends']} sends)",
                f"{seq['send_p50_ms']} / {seq['send_p90_ms']} / {seq['send_p99_ms']} ms"
                f" ({_mark(seq['send_p50_ms'], TARGETS['send_p50_ms'])})",
                "p50 <= 5 ms",
            ),
            (
                "one client, sequential `send` tool calls/s",
                f"{seq['calls_per_s']}/s"
                f" ({_mark(seq['calls_per_s'], TARGETS['sequential_calls_per_s'], at_least=True)})",
                ">= 200/s",
            ),
        ]
    runs = results.get("concurrent", [])
    if len(runs) > 1:
        rates = [run["calls_per_s"] for run in runs]
        rows.append(
            (
                "aggregate tool calls/s as clients grow: "
                + " -> ".join(str(run["clients"]) for run in runs),
                " -> ".join(f"{rate}/s" for rate in rates)
                + " ("
                + ", ".join(f"x{round(rate / rates[0], 2)}" for rate in rates[1:])
                + ")",
                "(reported)",
            )
        )
    for run in runs:
        n = run["clients"]
        target = "(reported)"
        verdict = ""
        repeats = run.get("repeats_calls_per_s", [run["calls_per_s"]])
        errors = run.get("repeats_errors", run["errors"])
        if n == 8:
            target = ">= 500/s, 0 errors"
            ok_rate = _mark(run["calls_per_s"], TARGETS["concurrent_8_calls_per_s"], at_least=True)
            ok = "met" if ok_rate == "met" and errors == 0 else "MISSED"
            verdict = f" ({ok})"
        spread = ""
        if len(repeats) > 1:
            spread = f" (median of {len(repeats)} runs: {', '.join(f'{r}/s' for r in repeats)})"
        rows.append(
            (
                f"{_count(n, 'client')} in {_count(run['processes'], 'process')},"
                f" send/fetch/ack cycles for {run['duration_s']:.0f} s:"
                " aggregate tool calls/s, errors",
                f"{run['calls_per_s']}/s, {errors} errors{verdict}{spread}",
                target,
            )
        )
        rows.append(
            (
                f"{_count(n, 'client')}: tool call latency p50 / p99",
                f"{run['call_p50_ms']} / {run['call_p99_ms']} ms",
                "(reported)",
            )
        )
    cpu = results.get("server_cpu")
    if cpu:
        for label, run in cpu.items():
            rows.append(
                (
                    f"broker CPU per tool call, {label} (client CPU per call)",
                    f"{run['broker_ms_per_call']} ms, broker at {run['broker_cores']} cores"
                    f" ({run['client_ms_per_call']} ms)",
                    "(reported)",
                )
            )
    dlv = results.get("delivery")
    if dlv:
        rows += [
            (
                f"`send` -> claim at a delivery address, p50 / p90 / p99 ({dlv['sends']} sends)",
                f"{dlv['arrival_p50_ms']} / {dlv['arrival_p90_ms']} / {dlv['arrival_p99_ms']} ms"
                f" ({_mark(dlv['arrival_p50_ms'], TARGETS['delivery_p50_ms'])})",
                "p50 <= 10 ms",
            ),
            (
                "`send` to a delivery address returns (after the inbox answered), p50",
                f"{dlv['send_return_p50_ms']} ms ("
                + ", ".join(f"wake {wake} x{n}" for wake, n in sorted(dlv["wakes"].items()))
                + ")",
                "(reported)",
            ),
        ]
    scale = results.get("scale")
    if scale:
        what = (
            f"{scale['identities']:,} identities, {scale['settled_messages']:,} settled messages,"
            f" {scale['inbox_waiting']:,} waiting ({scale['database_mb']} MB)"
        )
        rows += [
            (
                f"scale ({what}): `pager start` until ready, median of 3",
                f"{scale['ready_median_s']} s"
                f" ({_mark(scale['ready_median_s'], TARGETS['scale_ready_s'])})",
                "<= 2 s",
            ),
            (
                "scale: broker resident memory after start (after the fetch rounds)",
                f"{scale['rss_after_start_mb']} MB ({scale['rss_after_fetches_mb']} MB)"
                f" ({_mark(scale['rss_after_start_mb'], TARGETS['scale_rss_mb'])})",
                "<= 200 MB",
            ),
            (
                f"scale: `fetch` (limit 10) from the big inbox, p50 / p90"
                f" ({scale['fetch_rounds']} fetch+ack rounds)",
                f"{scale['fetch_p50_ms']} / {scale['fetch_p90_ms']} ms"
                f" ({_mark(scale['fetch_p50_ms'], TARGETS['scale_fetch_p50_ms'])})",
                "p50 <= 10 ms",
            ),
            (
                "scale: `ack` of 10 p50; `send` into the big inbox p50",
                f"{scale['ack_p50_ms']} ms; {scale['send_to_big_inbox_p50_ms']} ms",
                "(reported)",
            ),
        ]
    return rows


@contextlib.contextmanager
def temporary_brokers(prefix: str = "pager-bench-msg-") -> Iterator[Brokers]:
    """Brokers under a temporary directory; every one is stopped and the directory removed."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        brokers = Brokers(Path(tmp))
        try:
            yield brokers
        finally:
            brokers.stop_all()


FIGURES = ("sequential", "concurrent", "delivery", "scale")


def main() -> int:
    if sys.argv[1:2] == ["--worker"]:
        return worker_main()
    parser = bench_parser(__doc__, runs=BASE_RUNS, figures=FIGURES)
    parser.add_argument(
        "--clients",
        default="1,8,32",
        help="client counts of the concurrent figure (default 1,8,32; 8 carries the target)",
    )
    parser.add_argument(
        "--procs",
        type=int,
        default=4,
        help="most worker processes the concurrent clients spread over (default 4)",
    )
    parser.add_argument(
        "--duration", type=float, default=None, help="seconds per concurrent run (default 10)"
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="runs of the 8-client figure, each on a fresh broker; the median counts (default 3)",
    )
    parser.add_argument(
        "--scale-identities", type=int, default=100_000, help="identities (default 100,000)"
    )
    parser.add_argument(
        "--scale-messages",
        type=int,
        default=1_000_000,
        help="settled messages (default 1,000,000; ~30 s to build)",
    )
    parser.add_argument(
        "--scale-inbox", type=int, default=10_000, help="waiting messages in one inbox (10,000)"
    )
    args = parser.parse_args()
    figures = chosen_figures(parser, args.figures, FIGURES)
    factor = max(args.runs, 1) / BASE_RUNS
    duration = args.duration or max(2.0, round(10 * factor, 1))
    results: dict[str, Any] = {"machine": machine(), "runs": args.runs, "targets": TARGETS}

    with temporary_brokers() as brokers:
        if "sequential" in figures:
            results["sequential"] = figure_sequential(brokers, max(50, round(500 * factor)))
        if "concurrent" in figures:
            results["concurrent"] = [
                repeated_concurrent(
                    brokers, int(n), args.procs, duration, args.repeats if int(n) == 8 else 1
                )
                for n in args.clients.split(",")
                if n
            ]
        if "delivery" in figures:
            results["delivery"] = figure_delivery(brokers, max(20, round(200 * factor)))
        results["server_cpu"] = figure_server_cpu(results)
        if "scale" in figures:
            results["scale"] = figure_scale(
                brokers,
                identities=args.scale_identities,
                messages=args.scale_messages,
                inbox=args.scale_inbox,
                rounds=max(10, round(50 * factor)),
                sends=max(10, round(50 * factor)),
            )
    return report(results, table(results), as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())
