"""Pager's send beside the fastest broker peer (agent-inbox) and the floor, one raw-HTTP client.

Three servers, started in one run: Pager (`pager start`, a temporary PAGER_HOME, SQLite), the
floor of bench_floor.py (the same MCP stack, tools that do nothing) and agent-inbox 1.8.0 from
PyPI, installed once into a venv of its own under .cache/peers/ and started on a free port with
a throwaway data directory. All three are loaded by the same client: `http.client`, one
keep-alive connection per client, one POST per send (Pager and the floor: an MCP `tools/call`
of `send` on /mcp, stateless JSON; agent-inbox: its send, POST /actors/NAME/outbox). Clients run
in processes of their own (`--client`), never in a server's.

- sequential: one client, `--sends` (400) sends one at a time: p50, and the server's CPU per
  send (utime+stime of its process, /proc/<pid>/stat, as bench_floor.py measures);
- 8 clients: 2 processes of 4 threads, each thread its own agent sending to its pair's inbox
  (agent0 to agent1 and back, ...) for `--seconds` (6): calls/s. Nobody reads. With it, the
  clients' own CPU per call, and the ceiling of the machine on Pager's stack: its cores over
  the floor's server CPU plus its clients' CPU per call (no server on that stack, Pager's
  included, answers more on this machine, whatever it does per call).
- 8 clients in cycles: the same 8 clients, each looping send to its pair, read its own inbox,
  consume what it read (Pager and the floor: `send`, `fetch`, `ack`; agent-inbox: its send,
  GET of its inbox, `POST /objects/ID/read` per message listed), on servers started afresh
  for the phase: calls/s, and messages carried end to end per second (cycles/s).

Each round runs every server in turn, the order reversed every other round; figures are the
medians of `--runs` rounds (3). Targets (issue 27): Pager's p50 <= agent-inbox's; Pager's CPU
per send <= 1.4x the floor's; Pager's 8-client calls/s >= 4x agent-inbox's (the issue's own
baseline for that figure was measured in send/fetch/ack cycles: both are reported).

agent-inbox 1.8.0 requires Python 3.14 or newer (its Requires-Python; its code uses 3.14's
unparenthesized `except A, B:` and deferred annotations). Give one with `--peer-python` (or
PAGER_BENCH_PY314, or `python3.14` on PATH). Without one, and with a Python 3.13 found, the
bench backports the installed package to 3.13 in its own venv (two mechanical rewrites: the
except clauses parenthesized, `from __future__ import annotations` added to each module) and
says so beside its figures; with neither, the peer is reported as not run. The hub runs as it
comes (`agent-inbox serve`, auth off: the sender is named by its X-Agent-Name header; its
default log level), on a free port of 127.0.0.1, its SQLite file in a temporary directory.

    .venv/bin/python scripts/bench_peers.py [--runs 3] [--sends 400] [--seconds 6] [--json]
"""

from __future__ import annotations

import contextlib
import glob
import http.client
import json
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench_floor import floor_server
from bench_messaging import BODY, cpu_seconds, register, temporary_brokers
from benchlib import bench_parser, machine, ms, peer_venv, percentile, progress, report

SCRIPT = str(Path(__file__).resolve())
PEER = "agent-inbox==1.8.0"
PEER_PYTHON_NEEDED = (3, 14)
TARGETS = {"p50_over_peer": 1.0, "cpu_over_floor": 1.4, "clients_8_over_peer": 4.0}
#: The sessions (Pager) and actors (agent-inbox): client k sends as NAMES[k] to NAMES[k ^ 1].
NAMES = tuple(f"agent{k}" for k in range(8))
AS_CONTEXT = "https://www.w3.org/ns/activitystreams"
START_BOUND = 120.0  # a hang guard for the hub's start, not a timing
MCP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
}


# -- the client (--client SPEC) ----------------------------------------------------------------


def _post(
    conn: http.client.HTTPConnection, path: str, headers: dict[str, str], body: bytes
) -> tuple[int, bytes]:
    conn.request("POST", path, body=body, headers=headers)
    response = conn.getresponse()
    return response.status, response.read()


def _sender(target: dict[str, Any]) -> Any:
    """A function doing one send as `target` says on a connection; raises on a failure."""
    if target["kind"] == "mcp":

        def body(n: int) -> bytes:
            return _tool_call("send", {"to": target["to"], "body": f"{BODY} {n}"}, n)

        def send(conn: http.client.HTTPConnection, n: int) -> int:
            _mcp(conn, target["token"], body(n))
            return 1
    else:  # agent-inbox: an ActivityStreams Create of a Note, to the sender's outbox
        headers = {"Content-Type": "application/json", "X-Agent-Name": target["from"]}
        path = f"/actors/{target['from']}/outbox"

        def send(conn: http.client.HTTPConnection, n: int) -> int:
            note = {"type": "Note", "to": [target["to"]], "content": f"{BODY} {n}"}
            activity = {"@context": AS_CONTEXT, "type": "Create", "object": note}
            _checked(_post(conn, path, headers, json.dumps(activity).encode()), "send")
            return 1

    return send


def _cycler(target: dict[str, Any]) -> Any:
    """A function doing one cycle: a send to the pair, then reading and consuming what waits.

    Pager and the floor: `send`, `fetch` (up to 10 claims), and `ack` of the claimed tokens
    when there are any. agent-inbox: its send, a look at its inbox (GET, the summary view,
    which lists what waits unread), and `POST /objects/ID/read` for each message listed (its
    only call that consumes). Returns the calls made; raises on a failure.
    """
    send = _sender(target)
    if target["kind"] == "mcp":

        def cycle(conn: http.client.HTTPConnection, n: int) -> int:
            send(conn, n)
            fetched = _mcp(conn, target["token"], _tool_call("fetch", {"limit": 10}, n))
            claims = fetched["result"].get("structuredContent", {}).get("claims", [])
            if not claims:
                return 2
            tokens = [claim["token"] for claim in claims]
            _mcp(conn, target["token"], _tool_call("ack", {"tokens": tokens}, n))
            return 3
    else:
        me = {"X-Agent-Name": target["from"]}

        def cycle(conn: http.client.HTTPConnection, n: int) -> int:
            send(conn, n)
            conn.request("GET", f"/actors/{target['from']}/inbox", headers=me)
            response = conn.getresponse()
            page = json.loads(_checked((response.status, response.read()), "inbox"))
            items = page.get("items", [])
            for item in items:
                object_id = item["id"].rsplit("/", 1)[1]
                _checked(_post(conn, f"/objects/{object_id}/read", me, b""), "read")
            return 2 + len(items)

    return cycle


def _tool_call(name: str, arguments: dict[str, Any], n: int) -> bytes:
    call = {"name": name, "arguments": arguments}
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": call}).encode()


def _mcp(conn: http.client.HTTPConnection, token: str, body: bytes) -> Any:
    """One MCP call (stateless JSON): its answer, or RuntimeError when it failed."""
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    answer = json.loads(_checked(_post(conn, "/mcp", headers, body), "MCP call"))
    if answer.get("result", {}).get("isError") is not False:
        raise RuntimeError(f"call failed: {str(answer)[:200]}")
    return answer


def _checked(answered: tuple[int, bytes], what: str) -> bytes:
    status, body = answered
    if status >= 300:
        raise RuntimeError(f"{what} answered {status}: {body[:200]!r}")
    return body


def client_main(spec: dict[str, Any]) -> int:
    host, port = spec["host"], spec["port"]
    make = _cycler if spec["mode"] == "cycle" else _sender
    operations = [make(target) for target in spec["targets"]]
    latencies: list[list[float]] = [[] for _ in range(spec["threads"])]
    calls = [0] * spec["threads"]
    errors = [0] * spec["threads"]

    def loop(k: int) -> None:
        operation = operations[k]
        conn = http.client.HTTPConnection(host, port, timeout=60)
        operation(conn, -1)  # warm-up: the connection is open
        while time.monotonic() < spec["start_at"]:
            time.sleep(max(0.0, spec["start_at"] - time.monotonic()))
        n = 0
        while (spec["count"] and n < spec["count"]) or (
            not spec["count"] and time.monotonic() < spec["until"]
        ):
            n += 1
            began = time.perf_counter()
            try:
                calls[k] += operation(conn, n)
                latencies[k].append(time.perf_counter() - began)
            except (OSError, http.client.HTTPException, RuntimeError):
                errors[k] += 1
                conn.close()
        conn.close()

    threads = [threading.Thread(target=loop, args=(k,)) for k in range(spec["threads"])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [t for each in latencies for t in each]
    print(json.dumps({"latencies": every, "calls": sum(calls), "errors": sum(errors)}))
    return 0


def load(
    server: dict[str, Any],
    processes: int,
    threads: int,
    count: int,
    seconds: float,
    mode: str = "send",
) -> dict[str, Any]:
    """Run client processes against `server` from one start instant; the server's CPU over it.

    `mode` "send": each operation one send; "cycle": send, read and consume (`_cycler`).
    """
    start_at = time.monotonic() + 1.0
    specs = [
        {
            "host": "127.0.0.1",
            "port": server["port"],
            "targets": server["targets"][p * threads : (p + 1) * threads],
            "threads": threads,
            "mode": mode,
            "count": count,
            "start_at": start_at,
            "until": start_at + seconds,
        }
        for p in range(processes)
    ]
    children = [
        subprocess.Popen(
            [sys.executable, SCRIPT, "--client", json.dumps(spec)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for spec in specs
    ]
    clients_before = _children_cpu()
    time.sleep(max(0.0, start_at - time.monotonic()))
    before = cpu_seconds(server["pid"])
    outputs = [child.communicate(timeout=600)[0] for child in children]
    elapsed = time.monotonic() - start_at
    cpu = cpu_seconds(server["pid"]) - before
    clients_cpu = _children_cpu() - clients_before
    results = [json.loads(out) for out in outputs]
    latencies = [t for r in results for t in r["latencies"]]
    operations = len(latencies)  # sends, or cycles (each one message carried end to end)
    calls = sum(r["calls"] for r in results)
    span = seconds if not count else elapsed
    return {
        "operations": operations,
        "calls": calls,
        "errors": sum(r["errors"] for r in results),
        "p50_ms": ms(percentile(latencies, 50)) if latencies else None,
        "calls_per_s": round(calls / span, 1),
        "operations_per_s": round(operations / span, 1),
        # Per call: for sends alone, per send.
        "cpu_ms_per_send": round(1000 * cpu / max(calls, 1), 3),
        # The client processes' own CPU (their start and warm-up included: a few ms each).
        "client_cpu_ms_per_send": round(1000 * clients_cpu / max(calls, 1), 3),
    }


def _children_cpu() -> float:
    """utime + stime of this process's children that ended (the client processes)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# -- the servers -------------------------------------------------------------------------------


def peer_python(given: str | None) -> str | None:
    """A Python new enough for agent-inbox 1.8.0, or None."""
    candidates = [given, os.environ.get("PAGER_BENCH_PY314"), shutil.which("python3.14")]
    for candidate in candidates:
        if not candidate:
            continue
        check = "import sys; sys.exit(sys.version_info < (3, 14))"
        if subprocess.run([candidate, "-c", check], capture_output=True).returncode == 0:
            return candidate
    return None


def _python_313() -> str | None:
    """A Python 3.13 that runs (a pyenv shim on PATH may name one that is not selected)."""
    found = [shutil.which("python3.13"), *sorted(glob.glob(os.path.expanduser(
        "~/.pyenv/versions/3.13*/bin/python3.13")))]  # fmt: skip
    check = "import sys; sys.exit(sys.version_info[:2] != (3, 13))"
    for candidate in filter(None, found):
        if subprocess.run([candidate, "-c", check], capture_output=True).returncode == 0:
            return candidate
    return None


#: `except A, B:` (3.14) -> `except (A, B):`; the same with `as name`.
_BARE_EXCEPT = re.compile(
    r"^(\s*except\s+)(?!\()([^:\n]+?,[^:\n]+?)(\s*(?:as\s+\w+)?\s*:)", re.MULTILINE
)
_FUTURE = "from __future__ import annotations\n"


def _backport(bin_dir: Path) -> None:
    """Rewrite the installed agent_inbox package for Python 3.13, once (a stamp says so)."""
    import ast

    stamp = bin_dir.parent / ".bench-backported"
    if stamp.exists():
        return
    [package] = bin_dir.parent.glob("lib/python3.*/site-packages/agent_inbox")
    for module in package.rglob("*.py"):
        text = _BARE_EXCEPT.sub(r"\1(\2)\3", module.read_text())
        if _FUTURE not in text:
            tree = ast.parse(text)
            first = tree.body[0] if tree.body else None
            docstring = (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            )
            at = (first.end_lineno or 0) if docstring and first is not None else 0
            lines = text.splitlines(keepends=True)
            text = "".join([*lines[:at], _FUTURE, *lines[at:]])
        module.write_text(text)
    stamp.write_text("backported to Python 3.13\n")


def peer_install(given: str | None) -> tuple[Path | None, str]:
    """agent-inbox's bin directory and how it runs, or None and why it cannot."""
    python = peer_python(given)
    if python is not None:
        return peer_venv("agent-inbox-1.8.0", PEER, python), "as published"
    py313 = _python_313()
    if py313 is None:
        return None, (
            f"not run: {PEER} requires Python >= 3.14 (its Requires-Python, and its code uses"
            " 3.14 syntax) and neither 3.14 nor 3.13 was found; pass --peer-python"
        )
    bin_dir = peer_venv(
        "agent-inbox-1.8.0-py313-backport", PEER, py313, ["--ignore-requires-python"]
    )
    _backport(bin_dir)
    return bin_dir, (
        "backported to Python 3.13 by the bench (no 3.14 here): except clauses"
        " parenthesized, deferred annotations by `from __future__ import annotations`"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _post_json(port: int, path: str, headers: dict[str, str], body: dict[str, Any]) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        status, _ = _post(conn, path, {"Content-Type": "application/json", **headers},
                          json.dumps(body).encode())  # fmt: skip
    finally:
        conn.close()
    return status


@contextlib.contextmanager
def agent_inbox(bin_dir: Path) -> Iterator[dict[str, Any]]:
    """`agent-inbox serve` on a free port with a throwaway database; alice and bob joined."""
    port = _free_port()
    with (
        tempfile.TemporaryDirectory(prefix="pager-bench-agent-inbox-") as tmp,
        tempfile.TemporaryFile("w+") as log,
    ):
        env = {
            **os.environ,
            "AGENT_INBOX_DB": str(Path(tmp) / "agent-mailbox.db"),
            "AGENT_INBOX_HOST": "127.0.0.1",
            "AGENT_INBOX_PORT": str(port),
        }
        hub = subprocess.Popen(
            [str(bin_dir / "agent-inbox"), "serve"],
            env=env,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + START_BOUND
            while True:
                with contextlib.suppress(OSError):
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                    conn.request("GET", "/health")
                    if conn.getresponse().status == 200:
                        break
                if hub.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise SystemExit(f"bench: agent-inbox did not start:\n{log.read()[-3000:]}")
                time.sleep(0.1)
            for name in NAMES:
                joined = _post_json(port, "/actors", {"X-Agent-Name": name},
                                    {"preferredUsername": name})  # fmt: skip
                if joined != 201:
                    raise SystemExit(f"bench: agent-inbox refused to join {name} ({joined})")
            targets = [
                {"kind": "activitypub", "from": name, "to": NAMES[k ^ 1]}
                for k, name in enumerate(NAMES)
            ]
            yield {"pid": hub.pid, "port": port, "targets": targets}
        finally:
            hub.terminate()
            try:
                hub.wait(timeout=10)
            except subprocess.TimeoutExpired:
                hub.kill()
                hub.wait()


@contextlib.contextmanager
def pager_server() -> Iterator[dict[str, Any]]:
    with temporary_brokers("pager-bench-peers-") as brokers:
        broker, _ = brokers.start("pager")
        tokens = [register(broker, name)["token"] for name in NAMES]
        targets = [
            {"kind": "mcp", "token": token, "to": NAMES[k ^ 1]} for k, token in enumerate(tokens)
        ]
        port = int(broker.url.rsplit(":", 1)[1])
        yield {"pid": broker.pid, "port": port, "targets": targets}


@contextlib.contextmanager
def floor() -> Iterator[dict[str, Any]]:
    with tempfile.TemporaryFile("w+") as log, floor_server(None, False, log) as (pid, url):
        targets = [{"kind": "mcp", "token": "floor", "to": NAMES[k ^ 1]} for k in range(len(NAMES))]
        yield {"pid": pid, "port": int(url.rsplit(":", 1)[1]), "targets": targets}


def measure(args: Any) -> dict[str, Any]:
    peer_bin, how = peer_install(args.peer_python)
    results: dict[str, Any] = {
        "machine": machine(),
        "runs": args.runs,
        "targets": TARGETS,
        "peer": PEER,
        "peer_runs": how,
        "rounds": [],
    }
    starts: dict[str, Any] = {"pager": pager_server, "floor": floor}
    if peer_bin is None:
        results["peer_not_run"] = how
    else:
        starts["agent-inbox"] = lambda: agent_inbox(peer_bin)
    with contextlib.ExitStack() as stack:
        progress("starting the servers")
        servers = {name: stack.enter_context(start()) for name, start in starts.items()}
        for r in range(args.runs):
            order = list(servers) if r % 2 == 0 else list(reversed(servers))
            row: dict[str, Any] = {}
            for name in order:
                progress(f"round {r + 1}/{args.runs}: {name}, sequential")
                row.setdefault(name, {})["sequential"] = load(servers[name], 1, 1, args.sends, 0)
                progress(f"round {r + 1}/{args.runs}: {name}, 8 clients")
                row[name]["clients_8"] = load(servers[name], 2, 4, 0, args.seconds)
                # Cycles on a server of their own, started for them: what a hub keeps (the
                # sends above, never read) changes what reading it costs.
                progress(f"round {r + 1}/{args.runs}: {name}, 8 clients in cycles")
                with starts[name]() as fresh:
                    row[name]["cycle_8"] = load(fresh, 2, 4, 0, args.seconds, "cycle")
            results["rounds"].append(row)
    med: dict[str, Any] = {}
    for name in results["rounds"][0]:
        med[name] = {
            "sequential_p50_ms": statistics.median(
                r[name]["sequential"]["p50_ms"] for r in results["rounds"]
            ),
            "cpu_ms_per_send": statistics.median(
                r[name]["sequential"]["cpu_ms_per_send"] for r in results["rounds"]
            ),
            "clients_8_calls_per_s": statistics.median(
                r[name]["clients_8"]["calls_per_s"] for r in results["rounds"]
            ),
            "clients_8_cpu_ms_per_send": statistics.median(
                r[name]["clients_8"]["cpu_ms_per_send"] for r in results["rounds"]
            ),
            "clients_8_client_cpu_ms_per_send": statistics.median(
                r[name]["clients_8"]["client_cpu_ms_per_send"] for r in results["rounds"]
            ),
            "cycle_8_calls_per_s": statistics.median(
                r[name]["cycle_8"]["calls_per_s"] for r in results["rounds"]
            ),
            "cycle_8_messages_per_s": statistics.median(
                r[name]["cycle_8"]["operations_per_s"] for r in results["rounds"]
            ),
            "cycle_8_cpu_ms_per_call": statistics.median(
                r[name]["cycle_8"]["cpu_ms_per_send"] for r in results["rounds"]
            ),
            "errors": sum(
                r[name][f]["errors"]
                for r in results["rounds"]
                for f in ("sequential", "clients_8", "cycle_8")
            ),
        }
    results["medians"] = med
    pager = med["pager"]
    results["cpu_over_floor"] = round(pager["cpu_ms_per_send"] / med["floor"]["cpu_ms_per_send"], 2)
    if "agent-inbox" in med:
        peer = med["agent-inbox"]
        results["p50_over_peer"] = round(pager["sequential_p50_ms"] / peer["sequential_p50_ms"], 2)
        results["clients_8_over_peer"] = round(
            pager["clients_8_calls_per_s"] / peer["clients_8_calls_per_s"], 2
        )
        results["clients_8_target_calls_per_s"] = round(4 * peer["clients_8_calls_per_s"], 1)
        results["cycle_8_over_peer"] = round(
            pager["cycle_8_calls_per_s"] / peer["cycle_8_calls_per_s"], 2
        )
        results["cycle_8_messages_over_peer"] = round(
            pager["cycle_8_messages_per_s"] / peer["cycle_8_messages_per_s"], 2
        )
    # What this machine can answer at most with 8 clients on Pager's stack: every core busy
    # with nothing but the floor's server and its clients, at their CPU per call.
    floor_8 = med["floor"]
    per_call_ms = floor_8["clients_8_cpu_ms_per_send"] + floor_8["clients_8_client_cpu_ms_per_send"]
    results["cores"] = os.cpu_count()
    results["floor_ceiling_calls_per_s"] = round(1000 * (os.cpu_count() or 1) / per_call_ms, 1)
    return results


def _mark(value: float, target: float, at_least: bool = False) -> str:
    ok = value >= target if at_least else value <= target
    return f"{value}x ({'pass' if ok else '**miss**'})"


def table(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    for name, one in results["medians"].items():
        rows.append(
            (
                f"{name}: sequential send; 8 clients",
                f"p50 {one['sequential_p50_ms']} ms, {one['cpu_ms_per_send']} ms CPU/send;"
                f" {one['clients_8_calls_per_s']} calls/s; {one['errors']} errors",
                "",
            )
        )
        rows.append(
            (
                f"{name}: 8 clients in send, read, consume cycles",
                f"{one['cycle_8_calls_per_s']} calls/s, {one['cycle_8_messages_per_s']}"
                f" messages carried/s, {one['cycle_8_cpu_ms_per_call']} ms CPU/call",
                "",
            )
        )
    rows.append((PEER, results["peer_runs"], ""))
    if "peer_not_run" not in results:
        rows.append(
            ("send p50, Pager / agent-inbox", _mark(results["p50_over_peer"], 1.0), "<= 1x")
        )
        rows.append(
            (
                "8 clients calls/s, Pager / agent-inbox",
                _mark(results["clients_8_over_peer"], 4.0, at_least=True),
                ">= 4x",
            )
        )
        rows.append(
            (
                "8 clients in cycles, calls/s, Pager / agent-inbox",
                _mark(results["cycle_8_over_peer"], 4.0, at_least=True),
                ">= 4x",
            )
        )
        rows.append(
            (
                "8 clients in cycles, messages carried/s, Pager / agent-inbox",
                f"{results['cycle_8_messages_over_peer']}x",
                "",
            )
        )
    rows.append(("CPU per send, Pager / floor", _mark(results["cpu_over_floor"], 1.4), "<= 1.4x"))
    floor_8 = results["medians"]["floor"]
    rows.append(
        (
            "8 clients: the most this machine answers on Pager's stack",
            f"{results['floor_ceiling_calls_per_s']} calls/s: {results['cores']} cores over the"
            f" floor's {floor_8['clients_8_cpu_ms_per_send']} ms CPU per call and its clients'"
            f" {floor_8['clients_8_client_cpu_ms_per_send']} ms",
            f"target {results.get('clients_8_target_calls_per_s', '-')} calls/s",
        )
    )
    return rows


def main() -> int:
    if sys.argv[1:2] == ["--client"]:
        return client_main(json.loads(sys.argv[2]))
    parser = bench_parser(__doc__, runs=3, runs_help="rounds (default 3)")
    parser.add_argument("--sends", type=int, default=400, help="sequential sends (400)")
    parser.add_argument("--seconds", type=float, default=6.0, help="per 8-client run (6)")
    parser.add_argument("--peer-python", help="a Python >= 3.14 for agent-inbox")
    args = parser.parse_args()
    if args.runs < 1 or args.sends < 1 or args.seconds <= 0:
        parser.error("--runs and --sends must be at least 1, --seconds above 0")
    results = measure(args)
    return report(results, table(results), as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())
