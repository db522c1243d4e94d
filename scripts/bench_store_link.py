"""A database across a slow link: two brokers on one PostgreSQL store, one behind a delay.

Two real `pager start`s share one database of a throwaway cluster (tests/pg_cluster.py, as
bench_multihost.py). Each reaches the server through its own TCP proxy, run by this script in a
process of its own (`--proxy`, trio): `near`'s proxy forwards at once, `far`'s holds every chunk
`--delay-ms` (20) in each direction before passing it on, as a managed database or another
machine costs. Both go through the same proxy code so that the delay is the only difference.

- load: for 4 and 16 clients (threads of raw `http.client`, one keep-alive connection each,
  pairs sending to each other's inbox) sending over `/v1/me/send` for `--seconds` (8), while one
  more connection probes `/health` every 50 ms: `/health` p99, sends/s, send p50 and p99, on
  `near` and on `far` (the order alternates by client count).
- in turn: one client on each broker sends `SEQUENTIAL` (20) times each: a plain send, one
  with a new idempotency key, one repeating that key, and the first send to an identity
  registered on the other broker (a new one each time: its identity actor is not running on
  the sending broker, which the send starts); the p50 of each.
- cut: on `far`, the proxy closes every connection and refuses new ones for `--cut-seconds`
  (4): how long the first send after the cut waits for its answer (and which: 503 expected),
  then, once the proxy accepts again, how long until a send succeeds (one try every 100 ms).

Targets (issue 27): `/health` p99 on `far` within 10 ms of `near`'s; send p50 on `far` <= 120 ms
(3 round trips of the link); 4 clients >= 25 sends/s on `far`; 16 clients >= 3x 4 clients on
`far`; the cut answered within 5 s and recovered within 10 s. The machine has few cores that
brokers, clients, proxies and the database share: compare within one run.

    .venv/bin/python scripts/bench_store_link.py [--delay-ms 20] [--seconds 8] [--json]
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit, urlunsplit

from bench_messaging import BODY, Broker, register
from bench_multihost import Database, StoreBrokers
from benchlib import bench_parser, machine, ms, percentile, progress, report

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests/pg_cluster.py: the project's throwaway cluster

from tests.pg_cluster import PgCluster  # noqa: E402

SCRIPT = str(Path(__file__).resolve())
CLIENTS = (4, 16)
PROBE_EVERY = 0.05
#: Sends of each kind one client makes one after another (`sequential`).
SEQUENTIAL = 20
REQUEST_TIMEOUT = 60.0  # a hang guard, far above any answer the targets allow
TARGETS = {
    "health_p99_over_near_ms": 10.0,
    "send_p50_ms": 120.0,
    "sends_per_s_4": 25.0,
    "scaling_16_over_4": 3.0,
    "cut_answered_s": 5.0,
    "recovered_s": 10.0,
}


# -- the proxy (--proxy TARGET_PORT DELAY_MS) --------------------------------------------------


def proxy_main(target_port: int, delay_s: float) -> int:
    import trio

    trio.run(_proxy, target_port, delay_s)
    return 0


async def _proxy(target_port: int, delay_s: float) -> None:
    """Forward 127.0.0.1:<port> to the target, each chunk `delay_s` late; print the port, then
    obey `cut` (close every connection, stop listening) and `restore` lines on stdin."""
    import math

    import trio

    connections: set[trio.CancelScope] = set()

    async def pump(source: trio.SocketStream, sink: trio.SocketStream) -> None:
        queue_in, queue_out = trio.open_memory_channel[tuple[float, bytes]](math.inf)

        async def read() -> None:
            async with queue_in:
                while data := await source.receive_some(65536):
                    await queue_in.send((trio.current_time() + delay_s, data))

        async def write() -> None:
            async with queue_out:
                async for due, data in queue_out:
                    await trio.sleep_until(due)
                    await sink.send_all(data)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            nursery.start_soon(write)

    async def handle(client: trio.SocketStream) -> None:
        with trio.CancelScope() as scope:
            connections.add(scope)
            try:
                server = await trio.open_tcp_stream("127.0.0.1", target_port)
                async with client, server, trio.open_nursery() as nursery:
                    # Either side closing ends the connection, as a link that breaks would.
                    async def one_way(a: trio.SocketStream, b: trio.SocketStream) -> None:
                        with contextlib.suppress(
                            trio.BrokenResourceError, trio.ClosedResourceError
                        ):
                            await pump(a, b)
                        nursery.cancel_scope.cancel()

                    nursery.start_soon(one_way, client, server)
                    nursery.start_soon(one_way, server, client)
            except OSError:
                await client.aclose()
            finally:
                connections.discard(scope)

    port = 0
    async with trio.open_nursery() as nursery:
        while True:
            listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
            port = listeners[0].socket.getsockname()[1]
            listening = trio.CancelScope()
            nursery.start_soon(_serve, listeners, handle, listening)
            print(json.dumps({"port": port}), flush=True)
            command = await trio.to_thread.run_sync(sys.stdin.readline)
            if command.strip() != "cut":
                nursery.cancel_scope.cancel()
                return
            listening.cancel()
            for listener in listeners:
                await listener.aclose()
            for scope in list(connections):
                scope.cancel()
            print(json.dumps({"cut": True}), flush=True)
            await trio.to_thread.run_sync(sys.stdin.readline)  # `restore`


async def _serve(listeners: Any, handle: Any, scope: Any) -> None:
    import trio

    with scope, contextlib.suppress(trio.ClosedResourceError):
        await trio.serve_listeners(handle, listeners)


class Proxy:
    """A `--proxy` process: its port, and `cut()`/`restore()` of its link."""

    def __init__(self, target_port: int, delay_ms: float, log: IO[str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, SCRIPT, "--proxy", str(target_port), str(delay_ms)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            start_new_session=True,
        )
        self.port = int(self._answer()["port"])

    def _answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            line = self.process.stdout.readline() if selector.select(30) else ""
        if not line:
            raise RuntimeError(f"the proxy did not answer (status {self.process.poll()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def _say(self, command: str) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self._answer()

    def cut(self) -> None:
        self._say("cut")

    def restore(self) -> None:
        if self._say("restore")["port"] != self.port:
            raise RuntimeError("the proxy came back on another port")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# -- the clients (raw HTTP, threads) -----------------------------------------------------------


def _request(
    conn: http.client.HTTPConnection, method: str, path: str, token: str | None, body: Any = None
) -> int:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    try:
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        response.read()
    except (OSError, http.client.HTTPException):
        conn.close()  # reconnects on the next request
        return 0
    return response.status


def _connection(url: str) -> http.client.HTTPConnection:
    parts = urlsplit(url)
    return http.client.HTTPConnection(
        parts.hostname or "127.0.0.1", parts.port, timeout=REQUEST_TIMEOUT
    )


def send_once(broker: Broker, token: str, to: str, n: int) -> tuple[int, float]:
    """One send on a fresh connection: (status, seconds); status 0 when no answer came."""
    conn = _connection(broker.url)
    start = time.monotonic()
    try:
        status = _request(conn, "POST", "/v1/me/send", token, {"to": to, "body": f"{BODY} {n}"})
    finally:
        conn.close()
    return status, time.monotonic() - start


def load(broker: Broker, senders: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    """Every sender loops sends to its partner for `seconds` while /health is probed."""
    start = time.monotonic() + 0.2
    until = start + seconds
    sends: list[list[float]] = [[] for _ in senders]
    failures = [0 for _ in senders]
    health: list[float] = []

    def sender(k: int) -> None:
        conn = _connection(broker.url)
        me, partner = senders[k], senders[k ^ 1]
        time.sleep(max(0.0, start - time.monotonic()))
        n = 0
        while time.monotonic() < until:
            n += 1
            began = time.monotonic()
            body = {"to": partner["address"], "body": f"{BODY} {n}"}
            if _request(conn, "POST", "/v1/me/send", me["token"], body) == 200:
                sends[k].append(time.monotonic() - began)
            else:
                failures[k] += 1
        conn.close()

    def prober() -> None:
        conn = _connection(broker.url)
        due = start
        while due < until:
            time.sleep(max(0.0, due - time.monotonic()))
            began = time.monotonic()
            _request(conn, "GET", "/health", None)
            health.append(time.monotonic() - began)
            due = max(due + PROBE_EVERY, time.monotonic())
        conn.close()

    threads = [threading.Thread(target=sender, args=(k,)) for k in range(len(senders))]
    threads.append(threading.Thread(target=prober))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    latencies = [t for each in sends for t in each]
    return {
        "clients": len(senders),
        "sends_per_s": round(len(latencies) / seconds, 1),
        "send_p50_ms": ms(percentile(latencies, 50)) if latencies else None,
        "send_p99_ms": ms(percentile(latencies, 99)) if latencies else None,
        "failed_sends": sum(failures),
        "health_probes": len(health),
        "health_p50_ms": ms(percentile(health, 50)),
        "health_p99_ms": ms(percentile(health, 99)),
    }


def sequential(
    broker: Broker, pair: list[dict[str, Any]], elsewhere: list[str], count: int
) -> dict[str, Any]:
    """One client's sends one after another on one keep-alive connection, p50 of each kind:
    plain, with a new idempotency key, repeating a key (answered the original), and the
    first send to an identity attached through the other broker (`elsewhere`, one each: its
    actor is not running on this broker until the send starts it)."""
    conn = _connection(broker.url)
    token, to = pair[0]["token"], pair[1]["address"]
    stamp = time.monotonic_ns()
    kinds: dict[str, list[float]] = {"plain": [], "keyed": [], "repeated_key": [], "first": []}
    for n in range(count):
        for kind, body in (
            ("plain", {"to": to, "body": f"{BODY} {n}"}),
            ("keyed", {"to": to, "body": f"{BODY} k{n}", "idempotency_key": f"{stamp}-{n}"}),
            ("repeated_key", {"to": to, "body": f"{BODY} k{n}", "idempotency_key": f"{stamp}-{n}"}),
            ("first", {"to": elsewhere[n], "body": f"{BODY} f{n}"}),
        ):
            began = time.monotonic()
            if _request(conn, "POST", "/v1/me/send", token, body) == 200:
                kinds[kind].append(time.monotonic() - began)
    conn.close()
    return {f"{kind}_p50_ms": ms(percentile(times, 50)) for kind, times in kinds.items()}


def cut(broker: Broker, proxy: Proxy, pair: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    """Cut `broker`'s link for `seconds`: the first send's wait and answer, then the recovery."""
    token, to = pair[0]["token"], pair[1]["address"]
    for n in range(3):  # the link is up and the pool warm
        send_once(broker, token, to, n)
    proxy.cut()
    cut_at = time.monotonic()
    status, waited = send_once(broker, token, to, 10)
    during: list[int] = [status]
    while time.monotonic() < cut_at + seconds:
        time.sleep(0.25)
        during.append(send_once(broker, token, to, 11)[0])
    proxy.restore()
    restored_at = time.monotonic()
    recovered = None
    while time.monotonic() < restored_at + 60:
        if send_once(broker, token, to, 12)[0] == 200:
            recovered = time.monotonic() - restored_at
            break
        time.sleep(0.1)
    return {
        "cut_s": seconds,
        "first_answer_status": status,
        "first_answer_s": round(waited, 3),
        "statuses_during_cut": sorted(set(during)),
        "recovered_s": None if recovered is None else round(recovered, 3),
    }


# -- the measurement ---------------------------------------------------------------------------


def through(store: dict[str, str], port: int) -> dict[str, str]:
    """The broker environment `store`, its database reached on `port` of 127.0.0.1."""
    parts = urlsplit(store["PAGER_STORE"])
    user = parts.netloc.rpartition("@")[0]
    netloc = f"{user}@127.0.0.1:{port}"
    return {**store, "PAGER_STORE": urlunsplit(parts._replace(netloc=netloc))}


def measure(args: Any) -> dict[str, Any]:
    results: dict[str, Any] = {
        "machine": machine(),
        "runs": args.runs,
        "delay_ms_each_way": args.delay_ms,
        "seconds": args.seconds,
        "targets": TARGETS,
        "load": {},
    }
    with (
        tempfile.TemporaryDirectory(prefix="pager-bench-link-") as tmp,
        tempfile.TemporaryFile("w+") as log,
        PgCluster() as pg,
        contextlib.ExitStack() as stack,
    ):
        brokers = StoreBrokers(Path(tmp))
        stack.callback(brokers.stop_all)
        db = Database(pg, Path(tmp))
        store = db.fresh()
        target = urlsplit(store["PAGER_STORE"]).port
        assert target is not None
        progress("starting the proxies and the brokers")
        proxies = {}
        for name, delay in (("near", 0.0), ("far", args.delay_ms)):
            proxies[name] = Proxy(target, delay, log)
            stack.callback(proxies[name].close)
        hosts = {
            name: brokers.start_on(name, through(store, proxies[name].port), host=name)
            for name in proxies
        }
        sessions = {
            name: [register(broker, f"c{k}") for k in range(max(CLIENTS))]
            for name, broker in hosts.items()
        }
        for i, clients in enumerate(CLIENTS):
            order = ("near", "far") if i % 2 == 0 else ("far", "near")
            for name in order:
                progress(f"load: {clients} clients on {name}, {args.seconds:g} s")
                figures = load(hosts[name], sessions[name][:clients], args.seconds)
                results["load"].setdefault(name, {})[str(clients)] = figures
        for name, other in (("near", "far"), ("far", "near")):
            progress(f"sequential sends on {name}: plain, with a key, repeating it, first")
            # A pair of its own: the load's sends count against no rate here.
            pair = [register(hosts[name], f"seq{k}") for k in range(2)]
            elsewhere = [
                register(hosts[other], f"first-{name}-{k}")["address"] for k in range(SEQUENTIAL)
            ]
            results.setdefault("sequential", {})[name] = sequential(
                hosts[name], pair, elsewhere, SEQUENTIAL
            )
        progress(f"cut: the link of far, {args.cut_seconds:g} s")
        results["cut"] = cut(hosts["far"], proxies["far"], sessions["far"][:2], args.cut_seconds)
    near, far = results["load"]["near"], results["load"]["far"]
    results["health_p99_over_near_ms"] = round(
        far["4"]["health_p99_ms"] - near["4"]["health_p99_ms"], 2
    )
    results["scaling_16_over_4"] = round(
        far["16"]["sends_per_s"] / max(far["4"]["sends_per_s"], 0.1), 2
    )
    return results


def _mark(ok: bool) -> str:
    return "pass" if ok else "**miss**"


def table(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    delay = results["delay_ms_each_way"]
    for clients in map(str, CLIENTS):
        for name in ("near", "far"):
            one = results["load"][name][clients]
            label = "no delay" if name == "near" else f"{delay:g} ms each way"
            rows.append(
                (
                    f"{clients} clients, {label}",
                    f"/health p99 {one['health_p99_ms']} ms; {one['sends_per_s']} sends/s;"
                    f" send p50 {one['send_p50_ms']} ms, p99 {one['send_p99_ms']} ms;"
                    f" {one['failed_sends']} failed",
                    "",
                )
            )
    far4, far16 = results["load"]["far"]["4"], results["load"]["far"]["16"]
    t = TARGETS
    over = results["health_p99_over_near_ms"]
    rows.append(
        (
            "/health p99, delayed minus undelayed (4 clients)",
            f"{over} ms ({_mark(over <= t['health_p99_over_near_ms'])})",
            f"<= {t['health_p99_over_near_ms']:g} ms",
        )
    )
    p50 = far4["send_p50_ms"] or float("inf")
    rows.append(
        (
            "send p50, delayed, 4 clients",
            f"{p50} ms ({_mark(p50 <= t['send_p50_ms'])})",
            "<= 120 ms",
        )
    )
    rate = far4["sends_per_s"]
    rows.append(
        ("sends/s, delayed, 4 clients", f"{rate} ({_mark(rate >= t['sends_per_s_4'])})", ">= 25/s")
    )
    scale = results["scaling_16_over_4"]
    rows.append(
        (
            "sends/s, delayed, 16 clients / 4 clients",
            f"{scale}x ({far16['sends_per_s']}/s; {_mark(scale >= t['scaling_16_over_4'])})",
            ">= 3x",
        )
    )
    for name in ("near", "far"):
        one = results["sequential"][name]
        label = "no delay" if name == "near" else f"{delay:g} ms each way"
        rows.append(
            (
                f"one client's sends in turn, {label}: p50",
                f"plain {one['plain_p50_ms']} ms; with a new idempotency key"
                f" {one['keyed_p50_ms']} ms; repeating a key {one['repeated_key_p50_ms']} ms;"
                f" the first to an identity attached through the other broker"
                f" {one['first_p50_ms']} ms",
                "",
            )
        )
    cut = results["cut"]
    answered = cut["first_answer_s"]
    ok = cut["first_answer_status"] == 503 and answered <= t["cut_answered_s"]
    rows.append(
        (
            f"link cut {cut['cut_s']:g} s: first send answered",
            f"{answered} s, status {cut['first_answer_status']} ({_mark(ok)})",
            "503 within 5 s",
        )
    )
    back = cut["recovered_s"]
    rows.append(
        (
            "link restored: a send succeeds",
            f"{back} s ({_mark(back is not None and back <= t['recovered_s'])})",
            "<= 10 s",
        )
    )
    return rows


def main() -> int:
    if sys.argv[1:2] == ["--proxy"]:
        return proxy_main(int(sys.argv[2]), float(sys.argv[3]) / 1000)
    parser = bench_parser(__doc__, runs=1, runs_help="unused: one run (the figures are rates)")
    parser.add_argument("--delay-ms", type=float, default=20.0, help="each way (default 20)")
    parser.add_argument("--seconds", type=float, default=8.0, help="per load run (default 8)")
    parser.add_argument("--cut-seconds", type=float, default=4.0, help="link cut (default 4)")
    args = parser.parse_args()
    if args.delay_ms < 0 or args.seconds <= 0 or args.cut_seconds <= 0:
        parser.error("--delay-ms must be 0 or more, --seconds and --cut-seconds above 0")
    results = measure(args)
    return report(results, table(results), as_json=args.json)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
