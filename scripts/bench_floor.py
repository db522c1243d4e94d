"""Pager's broker CPU per MCP call against a floor: the same stack serving tools that do nothing.

The floor (`--serve`) is a minimal MCP server built as Pager builds its endpoint
(pager/web/mcp.py, pager/web/server.py): the official SDK's `MCPServer` in stateless JSON mode,
its Streamable HTTP session manager called directly as the ASGI app, served by
`hypercorn.trio.serve` on a loopback socket bound to port 0, with Pager's Hypercorn settings, its
three compatibility shims (pager/web/_compat.py) and its collector thresholds, so that only
Pager's own work separates the two. Its tools `send`, `fetch` and `ack` take any arguments
and return a fixed answer shaped like Pager's (`fetch` always one claim, so every cycle acks).
`--stock` leaves out the shims and the thresholds: the SDK and Hypercorn as they come.

The measuring mode starts one Pager broker (`pager start`, the code of `--rev`, default HEAD,
checked out into a temporary worktree as bench_ab.py does) and one floor process on the same
revision, then loads both at the same moments from the same client processes (the official
MCP SDK client, as bench_ab.py's workers): each round runs two phases, in alternating order:

- send: one worker process, one session per server, each looping `send` (Pager's recipient
  never fetches);
- cycle: 4 worker processes with 2 sessions per server each (8 per server, in pairs), looping
  send -> fetch -> ack (Pager's ack only when the fetch claimed something).

Workers connect and warm up, then start on one CLOCK_MONOTONIC instant; each server's CPU
(utime+stime from /proc/<pid>/stat) is read at that instant and once every worker reported,
and divided by the calls it answered. The figure is Pager's CPU per call over the floor's,
per round and the median; targets (issue 13, item 7): <= 1.25x for `send`, <= 1.5x for the
cycle with 8 clients. Progress goes to stderr only when it is a terminal.

    .venv/bin/python scripts/bench_floor.py [--rounds 4] [--seconds 8] [--rev HEAD] [--stock]
        [--json]        (./scripts/bench --only floor passes --runs N: the same as --rounds N)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import selectors
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from bench_ab import start as start_broker
from bench_ab import worktrees
from bench_messaging import Worker, _call, _mcp_client, cpu_seconds, temporary_brokers
from benchlib import machine, print_table, progress

if TYPE_CHECKING:
    from mcp import Client
    from mcp.server.mcpserver.tools import Tool
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

SCRIPT = str(Path(__file__).resolve())
TARGETS = {"send": 1.25, "cycle": 1.5}
CYCLE_SESSIONS = 8
CYCLE_PROCESSES = 4  # as bench_messaging.py and bench_ab.py lay out 8 clients
SERVE_BOUND = 60.0  # a hang guard for the floor's start, not a timing
BODY = "benchmark message: " + "x" * 80  # as bench_messaging.py's

# Fixed answers, shaped like Pager's (ids and times as it spells them).
_CLAIM_TOKEN = "clm_g-Y7vzT9S-4NiSFzTRrg_W_a-lrsMK5GgmGCjSPiYX4"
SEND_ANSWER: dict[str, Any] = {
    "message_id": "msg_01m8xf6zq56y4s40n2c1",
    "state": "queued",
    "duplicate": False,
    "recipient": {"agent_id": "agt_vtqzz3grtyqmt5dz", "address": "c@floor-7ad99a"},
    "wake": "queued",
}
FETCH_ANSWER: dict[str, Any] = {
    "claims": [
        {
            "token": _CLAIM_TOKEN,
            "expires_at": "2026-12-03T08:10:26.057+00:00",
            "message": {
                "id": "msg_01m8xf6zq56y4s40n2c1",
                "from": "a@floor-7ad99a",
                "to": "c@floor-7ad99a",
                "body": BODY,
                "thread": None,
                "reply_to": None,
                "sent_at": "2026-12-03T08:09:25.989+00:00",
                "attempt": 1,
                "origin": "agent",
                "hop": 1,
                "fields": None,
            },
        }
    ]
}
ACK_ANSWER: dict[str, Any] = {"applied": [_CLAIM_TOKEN], "not_applied": []}

# Input schemas of the same shape as Pager's (pager/web/mcp_tools.py), for `tools/list` and
# for the SDK's header check when `--stock` leaves it on.
_NAME = {"type": "string", "minLength": 1, "maxLength": 200}
SCHEMAS: dict[str, dict[str, Any]] = {
    "send": {
        "type": "object",
        "properties": {"to": _NAME, "body": {"type": "string", "pattern": r"\S"}},
        "required": ["to", "body"],
        "additionalProperties": False,
    },
    "fetch": {
        "type": "object",
        "properties": {
            "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
            "wait_s": {"type": "number", "minimum": 0, "maximum": 60, "default": 0.0},
        },
        "additionalProperties": False,
    },
    "ack": {
        "type": "object",
        "properties": {"tokens": {"type": "array", "items": _NAME, "minItems": 1}},
        "required": ["tokens"],
        "additionalProperties": False,
    },
}
ANSWERS = {"send": SEND_ANSWER, "fetch": FETCH_ANSWER, "ack": ACK_ANSWER}


# -- the floor server (--serve) ----------------------------------------------------------------


def serve_main(stock: bool) -> int:
    import logging

    import trio

    if not stock:
        from pager.launch.serve import tune_gc

        tune_gc()
    # As `pager serve` at its default level: the SDK logs every stateless request at INFO.
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    logging.getLogger("mcp").setLevel(logging.WARNING)
    trio.run(_serve, stock)
    return 0


async def _serve(stock: bool) -> None:
    import socket
    from functools import partial

    import trio
    from hypercorn.config import Config as HypercornConfig
    from hypercorn.trio import serve

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    manager = _floor_manager(port)
    if stock:
        config = HypercornConfig()
        config.bind = [f"fd://{os.dup(sock.fileno())}"]
    else:
        from pager.web import _compat
        from pager.web.server import hypercorn_config

        shims = _compat.check_shims()  # the Hypercorn idle timer, as the broker's web server
        shims.record(_compat.drop_otel_middleware(manager.app))
        shims.record(_compat.skip_param_header_check(manager.app))  # no tool has x-mcp-header
        config = hypercorn_config(sock)
        if shims.degraded():
            print(f"floor: shims not in effect: {shims.degraded()}", file=sys.stderr)

    async def shutdown() -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                return

    async with manager.run(), trio.open_nursery() as nursery:
        # The SDK's app does not speak ASGI lifespan: Hypercorn warns once and serves on.
        app = manager.handle_request
        await nursery.start(partial(serve, app, config, shutdown_trigger=shutdown))  # type: ignore[arg-type]
        print(f"http://127.0.0.1:{port}", flush=True)
        sock.close()  # Hypercorn serves from its own copy of the descriptor


def _floor_manager(port: int) -> StreamableHTTPSessionManager:
    """The SDK's session manager for a server whose tools do nothing, set up as Pager's."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.transport_security import TransportSecuritySettings

    server: MCPServer[Any] = MCPServer(
        "floor",
        version="0",
        instructions="A floor for Pager's benchmarks: its tools do nothing.",
        tools=[_floor_tool(name) for name in ANSWERS],
        subscriptions=False,  # as Pager: no long-lived `subscriptions/listen` stream
    )
    hosts = sorted(f"{name}:{port}" for name in ("127.0.0.1", "localhost", "[::1]"))
    server.streamable_http_app(
        json_response=True,
        stateless_http=True,
        max_request_body_size=1 << 20,
        transport_security=TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=hosts,
            allowed_origins=[f"http://{name}" for name in hosts],
        ),
        host="127.0.0.1",
    )
    return server.session_manager


def _floor_tool(name: str) -> Tool:
    from mcp.server.mcpserver.tools import Tool
    from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
    from mcp.types import CallToolResult, TextContent

    class RawArguments(FuncMetadata):
        """Hands the arguments over unchecked, as Pager's `_OwnValidation` (which then
        validates them itself: Pager's work, not the stack's)."""

        def validate_arguments(self, arguments_to_validate: dict[str, Any]) -> dict[str, Any]:
            return {"arguments": arguments_to_validate}

    answer = ANSWERS[name]
    text = json.dumps(answer, ensure_ascii=False, separators=(",", ":"))

    async def run(arguments: dict[str, Any]) -> CallToolResult:
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=answer
        )

    return Tool(
        fn=run,
        name=name,
        title=None,
        description=f"{name}, doing nothing",
        parameters=SCHEMAS[name],
        fn_metadata=RawArguments(arg_model=ArgModelBase),
        is_async=True,
        context_kwarg=None,
        annotations=None,
    )


@contextlib.contextmanager
def floor_server(tree: Path | None, stock: bool, log: IO[str]) -> Iterator[tuple[int, str]]:
    """A `--serve` process on `tree`'s Pager (its settings and shims): (pid, url)."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    command = [sys.executable, SCRIPT, "--serve", *(["--stock"] if stock else [])]
    # A session of its own, as `pager start` gives the broker: with the kernel's autogroups on,
    # each session is scheduled as one group, and a floor sharing the bench's group with the
    # client processes got less of the CPU than the broker (fewer calls/s than Pager's).
    process = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            url = process.stdout.readline().strip() if selector.select(SERVE_BOUND) else ""
        if not url.startswith("http://"):
            raise RuntimeError(f"the floor server did not start (status {process.poll()})")
        yield process.pid, url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# -- workers (the client processes) ------------------------------------------------------------


def worker_main() -> int:
    import trio

    spec: dict[str, Any] = json.loads(sys.stdin.readline())
    trio.run(_worker, spec)
    return 0


async def _worker(spec: dict[str, Any]) -> None:
    """Connect and warm up every session, say ready, loop from the shared start instant until
    `until`, then print the calls each server answered (before the clients close, so their
    teardown is outside the measured span)."""
    import trio

    calls: dict[str, dict[str, int]] = {}
    errors: dict[str, list[str]] = {}
    cycle = spec["mode"] == "cycle"

    async def call(server: str, client: Client, name: str, args: dict[str, Any]) -> Any:
        try:
            answer = await _call(client, name, args)
        except Exception as exc:
            errors.setdefault(server, []).append(repr(exc)[:200])
            return None
        counts = calls.setdefault(server, {"send": 0, "fetch": 0, "ack": 0})
        counts[name] += 1
        return answer

    async def one_round(server: str, client: Client, partner: str, n: int) -> None:
        await call(server, client, "send", {"to": partner, "body": f"{BODY} {n}"})
        if not cycle:
            return
        fetched = await call(server, client, "fetch", {"limit": 10})
        tokens = [claim["token"] for claim in (fetched or {}).get("claims", [])]
        if tokens:
            await call(server, client, "ack", {"tokens": tokens})

    async def loop(server: str, client: Client, partner: str, until: float) -> None:
        n = 0
        while time.monotonic() < until:
            n += 1
            await one_round(server, client, partner, n)

    async with contextlib.AsyncExitStack() as stack:
        sessions = spec["sessions"]
        clients = [
            await stack.enter_async_context(_mcp_client(s["url"], s["token"])) for s in sessions
        ]
        async with trio.open_nursery() as nursery:  # warm-up: not counted
            for client, s in zip(clients, sessions, strict=True):
                nursery.start_soon(one_round, "warm-up", client, s["partner"], 0)
        calls.clear()
        errors.clear()
        print(json.dumps({"ready": True}), flush=True)
        go: dict[str, Any] = json.loads(await trio.to_thread.run_sync(sys.stdin.readline))
        await trio.sleep(max(0.0, go["start_at"] - time.monotonic()))
        async with trio.open_nursery() as nursery:
            for client, s in zip(clients, sessions, strict=True):
                nursery.start_soon(loop, s["server"], client, s["partner"], go["until"])
        result = {
            "calls": calls,
            "errors": {k: len(v) for k, v in errors.items()},
            "error_samples": {k: v[:3] for k, v in errors.items()},
        }
        print(json.dumps(result), flush=True)


# -- the measurement ---------------------------------------------------------------------------


def run_phase(
    servers: dict[str, dict[str, Any]], mode: str, seconds: float
) -> dict[str, dict[str, Any]]:
    """Load every server at once from the same workers; per server its calls and CPU per call."""
    if mode == "send":
        layout = [[("pager", 8), ("floor", 8)]]  # Pager's session 8 sends to 9, who never fetches
    else:
        per = CYCLE_SESSIONS // CYCLE_PROCESSES
        layout = [
            [(name, n) for name in servers for n in range(p * per, (p + 1) * per)]
            for p in range(CYCLE_PROCESSES)
        ]
    specs = [
        {
            "mode": mode,
            "sessions": [{"server": name, **servers[name]["sessions"][n]} for name, n in sessions],
        }
        for sessions in layout
    ]
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryFile("w+") as errors:
        workers = [Worker(spec, errors, script=SCRIPT) for spec in specs]
        try:
            for worker in workers:
                worker.line()  # ready: connected and warmed up
            start_at = time.monotonic() + 0.3
            for worker in workers:
                worker.go({"start_at": start_at, "until": start_at + seconds})
            time.sleep(max(0.0, start_at - time.monotonic()))
            before = {name: cpu_seconds(s["pid"]) for name, s in servers.items()}
            results = [worker.line() for worker in workers]
            after = {name: cpu_seconds(s["pid"]) for name, s in servers.items()}
        except BaseException:
            for worker in workers:
                worker.process.kill()
            errors.seek(0)
            sys.stderr.write(errors.read()[-4000:])
            raise
        finally:
            for worker in workers:
                worker.close()
    figures: dict[str, dict[str, Any]] = {}
    for name in servers:
        by_tool = {"send": 0, "fetch": 0, "ack": 0}
        for result in results:
            for tool, n in result["calls"].get(name, {}).items():
                by_tool[tool] += n
        calls = sum(by_tool.values())
        cpu = after[name] - before[name]
        figures[name] = {
            "calls": by_tool,
            "calls_per_s": round(calls / seconds, 1),
            "cpu_s": round(cpu, 3),
            "cpu_ms_per_call": round(1000 * cpu / max(calls, 1), 3),
            "errors": sum(r["errors"].get(name, 0) for r in results),
            "error_samples": [e for r in results for e in r["error_samples"].get(name, [])][:3],
        }
    return figures


def measure(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {
        "machine": machine(),
        "rev": args.rev,
        "rounds_asked": args.rounds,
        "seconds": args.seconds,
        "stock_floor": args.stock,
        "targets": TARGETS,
        "rounds": [],
    }
    with (
        worktrees([args.rev]) as trees,
        temporary_brokers("pager-bench-floor-") as brokers,
        tempfile.TemporaryFile("w+") as floor_log,
    ):
        tree = trees[0]
        results["commit"] = subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        progress("starting the broker and the floor")
        pager = start_broker(brokers, tree, "pager", CYCLE_SESSIONS + 2)
        try:
            with floor_server(tree, args.stock, floor_log) as (floor_pid, floor_url):
                floor = {
                    "pid": floor_pid,
                    "url": floor_url,
                    "sessions": [
                        {"url": floor_url, "token": "floor", "partner": f"s{n ^ 1}"}
                        for n in range(CYCLE_SESSIONS + 2)
                    ],
                }
                servers = {"pager": pager, "floor": floor}
                for number in range(1, args.rounds + 1):
                    row: dict[str, Any] = {"round": number}
                    order = ("send", "cycle") if number % 2 else ("cycle", "send")
                    for mode in order:
                        progress(f"round {number}/{args.rounds}: {mode}")
                        figures = run_phase(servers, mode, args.seconds)
                        pager_ms = figures["pager"]["cpu_ms_per_call"]
                        floor_ms = figures["floor"]["cpu_ms_per_call"]
                        row[mode] = {**figures, "ratio": round(pager_ms / floor_ms, 3)}
                    results["rounds"].append(row)
        except BaseException:
            floor_log.seek(0)
            sys.stderr.write(floor_log.read()[-4000:])
            raise
    for mode in TARGETS:
        ratios = [row[mode]["ratio"] for row in results["rounds"]]
        results[f"{mode}_ratio_median"] = round(statistics.median(ratios), 3)
    results["errors"] = sum(
        row[mode][name]["errors"]
        for row in results["rounds"]
        for mode in TARGETS
        for name in ("pager", "floor")
    )
    return results


def _mark(ratio: float, target: float) -> str:
    return f"{ratio:.2f}x ({'met' if ratio <= target else '**missed**'})"


def print_results(results: dict[str, Any]) -> None:
    floor = "stock floor" if results["stock_floor"] else "floor"
    print(f"machine: {results['machine']}")
    print(
        f"Pager at {results['rev']} ({results['commit']}) against the {floor}; "
        f"{len(results['rounds'])} rounds of {results['seconds']:g} s per phase; "
        f"{results['errors']} errors"
    )
    print()
    print(
        "| round | `send`: Pager / floor, ms CPU per call | ratio "
        "| cycle, 8 clients: Pager / floor | ratio | calls/s (cycle): Pager / floor |"
    )
    print("|---|---|---|---|---|---|")
    for row in results["rounds"]:
        send, cycle = row["send"], row["cycle"]
        print(
            f"| {row['round']} "
            f"| {send['pager']['cpu_ms_per_call']:.2f} / {send['floor']['cpu_ms_per_call']:.2f} "
            f"| {send['ratio']:.2f}x "
            f"| {cycle['pager']['cpu_ms_per_call']:.2f} / {cycle['floor']['cpu_ms_per_call']:.2f} "
            f"| {cycle['ratio']:.2f}x "
            f"| {cycle['pager']['calls_per_s']:.0f} / {cycle['floor']['calls_per_s']:.0f} |"
        )
    print()
    print_table(
        [
            (
                "broker CPU per `send`, Pager / floor, median of the rounds",
                _mark(results["send_ratio_median"], TARGETS["send"]),
                f"<= {TARGETS['send']}x",
            ),
            (
                "broker CPU per call, send/fetch/ack with 8 clients, Pager / floor, median",
                _mark(results["cycle_ratio_median"], TARGETS["cycle"]),
                f"<= {TARGETS['cycle']}x",
            ),
        ]
    )


def main() -> int:
    if sys.argv[1:2] == ["--worker"]:
        return worker_main()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--serve", action="store_true", help="run the floor server only")
    parser.add_argument(
        "--stock", action="store_true", help="the floor without Pager's shims and GC thresholds"
    )
    # --runs: the name ./scripts/bench passes every group.
    parser.add_argument("--rounds", "--runs", type=int, default=4, help="rounds (default 4)")
    parser.add_argument("--seconds", type=float, default=8.0, help="per phase (default 8)")
    parser.add_argument("--rev", default="HEAD", help="Pager's revision (default HEAD)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    if args.serve:
        return serve_main(args.stock)
    if args.rounds < 1 or args.seconds <= 0:
        parser.error("--rounds must be at least 1 and --seconds above 0")
    results = measure(args)
    progress("")
    if sys.stderr.isatty() and not os.environ.get("PAGER_BENCH_QUIET"):
        print(file=sys.stderr)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print_results(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
