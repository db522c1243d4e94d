"""Agents at work while the store fails under a real broker: the load and the faults that
tests/e2e/test_store_faults.py and scripts/bench_faults.py share.

The load is what an operator would try: senders on `POST /v1/me/send` one request after
another, receivers long-polling `POST /v1/me/claim` (`wait_s`) and acking what they get, and
`GET /health` probed every 50 ms, all over real HTTP with the sessions' own tokens. The faults
are real too: a full disk (a file grown until ENOSPC on a tmpfs under the state directory) and
`database is locked` (another process holding `BEGIN IMMEDIATE` on `pager.db`) on SQLite, and
the PostgreSQL server stopped.

A run records what each caller was answered and when, so that a test asserts the promise (the
broker process stays, `/health` answers and says `degraded`, every send is answered 2xx or
`503 unavailable`, sessions stay, every 2xx is delivered, sends succeed again) and a bench
prints the figures."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import attrs
import httpx2
import trio

from tests.pg_cluster import PgCluster

#: How often `/health` is probed (an operator's watchdog, tighter than any).
PROBE_INTERVAL_S = 0.05
#: What the issue asks of every `/health` answer (measured; the tests do not assert timing).
HEALTH_PROMPT_S = 1.0
#: Outcomes a send may have under a store fault: delivered later, or refused for the store.
PROMISED = frozenset({"2xx", "503 unavailable"})


class Unavailable(Exception):
    """This machine cannot make the fault (not root, no tmpfs): the reason."""


@contextlib.contextmanager
def tmpfs(directory: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (mount's syntax: "16m") mounted on `directory` (made if missing) and
    unmounted afterwards, however the body ends; `Unavailable` when it cannot be mounted."""
    if os.geteuid() != 0:
        raise Unavailable("mounting a tmpfs for the state directory needs root")
    directory.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        raise Unavailable(f"mount -t tmpfs failed: {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield directory
    finally:
        unmounted = subprocess.run(["umount", str(directory)], capture_output=True, check=False)
        if unmounted.returncode != 0:  # something still holds a file: detach it anyway
            subprocess.run(["umount", "-l", str(directory)], capture_output=True, check=False)


class Fault(Protocol):
    """A fault switched on, kept on and switched off from a worker thread."""

    name: str

    def begin(self) -> None: ...

    def keep(self) -> None:
        """Called every 100 ms while on: hold the fault against whatever undoes it."""

    def end(self) -> None: ...


class FullDisk:
    """The filesystem under `directory` full: one file grown until ENOSPC, grown again
    whenever the broker frees room (it deletes or truncates files of its own), then removed."""

    name = "full disk"

    def __init__(self, directory: Path) -> None:
        self.path = directory / "filler"
        self._fd: int | None = None

    def begin(self) -> None:
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        self.keep()

    def keep(self) -> None:
        assert self._fd is not None
        for size in (1 << 20, 4096):  # then the last pages
            block = b"\0" * size
            while True:
                try:
                    os.write(self._fd, block)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break

    def end(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.path.unlink(missing_ok=True)


#: The other process: `BEGIN IMMEDIATE` on the database until its stdin closes. The alarm bounds
#: it should the run die first (SIGALRM ends the process, and the lock with it).
_LOCK_HOLDER = """
import signal, sqlite3, sys
signal.alarm(int(sys.argv[2]))
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.read()
conn.execute("ROLLBACK")
"""


class DatabaseLocked:
    """Another process holding SQLite's write lock on `database` (`BEGIN IMMEDIATE`), as a
    backup tool or a person's `sqlite3` shell would; at most `bound_s` seconds in any case."""

    name = "database is locked"

    def __init__(self, database: Path, bound_s: int = 120) -> None:
        self.database = database
        self.bound_s = bound_s
        self._holder: subprocess.Popen[str] | None = None

    def begin(self) -> None:
        holder = self._holder = subprocess.Popen(
            [sys.executable, "-c", _LOCK_HOLDER, str(self.database), str(self.bound_s)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert holder.stdout is not None
        line = holder.stdout.readline()
        if line.strip() != "locked":
            holder.kill()
            raise RuntimeError(f"the lock holder did not take the lock (exit {holder.wait()})")

    def keep(self) -> None:
        holder = self._holder
        if holder is not None and holder.poll() is not None:
            raise RuntimeError(f"the lock holder ended early (exit {holder.returncode})")

    def end(self) -> None:
        holder, self._holder = self._holder, None
        if holder is None:
            return
        assert holder.stdin is not None
        holder.stdin.close()
        try:
            holder.wait(timeout=30)
        except subprocess.TimeoutExpired:
            holder.kill()
            holder.wait()


class StoppedDatabase:
    """The PostgreSQL server of the store stopped (`pg_ctl stop`), then started again on the
    same port with its data."""

    name = "database stopped"

    def __init__(self, cluster: PgCluster) -> None:
        self.cluster = cluster

    def begin(self) -> None:
        self.cluster.stop()

    def keep(self) -> None:
        pass

    def end(self) -> None:
        self.cluster.start()


@attrs.frozen
class Hold:
    """How long a fault stays on: at least `min_s` and until `refusals` sends were answered
    other than 2xx during it and /health said `degraded` during it (a fault ended the moment
    its first refusal is seen could end before a probe saw the mark), at most `max_s` (the
    bench: min_s == max_s, the issue's run)."""

    min_s: float
    max_s: float
    refusals: int = 0


@attrs.frozen
class Agent:
    alias: str
    token: str
    session_id: str


@attrs.define
class Record:
    """What every caller of one run was answered."""

    pid: int
    fault: str
    probes: int = 0
    probe_latencies: list[float] = attrs.Factory(list)  # of the answered probes, seconds
    probes_unanswered: Counter[str] = attrs.Factory(Counter)
    pids_seen: set[int] = attrs.Factory(set)
    degraded_during_fault: bool = False
    degraded_reasons: Counter[str] = attrs.Factory(Counter)
    sends: Counter[str] = attrs.Factory(Counter)  # "2xx", "503 unavailable", "unanswered"…
    refusals_during_fault: int = 0
    sent: dict[str, str] = attrs.Factory(dict)  # message id answered 2xx -> receiver alias
    received: set[str] = attrs.Factory(set)
    receiver_answers: Counter[str] = attrs.Factory(Counter)  # claims and acks, by outcome
    errors: Counter[str] = attrs.Factory(Counter)  # what the non-2xx answers said
    sessions_lost: list[str] = attrs.Factory(list)
    broker_alive_at_end: bool = False
    fault_s: float = 0.0
    recovery_s: float | None = None  # from freeing to a send made after it answered 2xx

    @property
    def same_pid(self) -> bool:
        return self.broker_alive_at_end and self.pids_seen <= {self.pid}

    @property
    def undelivered(self) -> set[str]:
        return set(self.sent) - self.received

    @property
    def health_answered(self) -> int:
        return len(self.probe_latencies)

    def summary(self) -> dict[str, Any]:
        """The figures, as the bench prints them (JSON-ready)."""
        latencies = sorted(self.probe_latencies)

        def at(q: float) -> float | None:
            if not latencies:
                return None
            return round(latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000, 1)

        return {
            "fault": self.fault,
            "fault_s": round(self.fault_s, 1),
            "broker_pid_same": self.same_pid,
            "health_probes": self.probes,
            "health_answered": self.health_answered,
            "health_within_1s": sum(x <= HEALTH_PROMPT_S for x in latencies),
            "health_p50_ms": at(0.50),
            "health_p99_ms": at(0.99),
            "health_max_ms": round(latencies[-1] * 1000, 1) if latencies else None,
            "health_unanswered": dict(self.probes_unanswered),
            "degraded_seen": self.degraded_during_fault,
            "degraded_reasons": dict(self.degraded_reasons.most_common(3)),
            "sends": dict(self.sends),
            "sends_2xx": self.sends["2xx"],
            "sends_503": self.sends["503 unavailable"],
            "sends_500": sum(n for k, n in self.sends.items() if k.startswith("500")),
            "sends_unanswered": self.sends["unanswered"],
            "receiver_answers": dict(self.receiver_answers),
            "sessions_kept": not self.sessions_lost,
            "sessions_lost": self.sessions_lost,
            "delivered": len(self.sent) - len(self.undelivered),
            "sent_2xx": len(self.sent),
            "recovery_s": None if self.recovery_s is None else round(self.recovery_s, 2),
            "errors": dict(self.errors.most_common(8)),
        }


def _outcome(response: httpx2.Response) -> tuple[str, dict[str, Any]]:
    """`2xx`, or the status and the Pager error code ("503 unavailable"), and the body."""
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    if 200 <= response.status_code < 300:
        return "2xx", body
    error = body.get("error")
    code = error.get("code", "?") if isinstance(error, dict) else "?"
    return f"{response.status_code} {code}", body


class FaultRun:
    """One run: 4 senders and 4 long-polling receivers registered on a running broker, the
    fault switched on once mail flows, held (`Hold`), switched off, then until sends succeed
    again and every send answered 2xx was claimed (each wait bounded)."""

    def __init__(
        self,
        url: str,
        secret: str,
        workspace: Path,
        *,
        pairs: int = 4,
        request_timeout_s: float = 30.0,
        recovery_bound_s: float = 30.0,
        drain_bound_s: float = 30.0,
        progress: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.url = url
        self.secret = secret
        self.workspace = workspace
        self.pairs = pairs
        self.request_timeout_s = request_timeout_s
        self.recovery_bound_s = recovery_bound_s
        self.drain_bound_s = drain_bound_s
        self.progress = progress
        self._fault_on = False
        self._freed_at: float | None = None
        self._sending = True
        self._senders = 0  # sender tasks still running (one may wait for its last answer)

    async def run(self, fault: Fault, hold: Hold) -> Record:
        senders = [await self._register(f"sender-{n}") for n in range(self.pairs)]
        receivers = [await self._register(f"receiver-{n}") for n in range(self.pairs)]
        async with httpx2.AsyncClient(timeout=10) as http:
            pid = int((await http.get(self.url + "/health")).json()["pid"])
        record = Record(pid=pid, fault=fault.name)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._probe, record)
            for n, receiver in enumerate(receivers):
                nursery.start_soon(self._receive, record, receiver)
                nursery.start_soon(self._send, record, senders[n], receivers)
            await self._drive(record, fault, hold, len(receivers))
            nursery.cancel_scope.cancel()
        record.broker_alive_at_end = _alive(pid)
        for agent in (*senders, *receivers):
            if not await self._same_session(agent):
                record.sessions_lost.append(agent.alias)
        return record

    async def _drive(self, record: Record, fault: Fault, hold: Hold, receivers: int) -> None:
        async def until(done: Callable[[], bool], bound: float) -> bool:
            """Polls observable state; False at the bound or once the broker is gone."""
            with trio.move_on_after(bound):
                while not done():
                    if not _alive(record.pid):
                        return False
                    await trio.sleep(0.02)
                return True
            return False

        self.progress("mail flowing before the fault")
        if not await until(lambda: len(record.received) >= receivers, 30):
            raise RuntimeError(f"no mail flowed before the fault: {record.summary()}")
        self.progress(f"{fault.name}: on")
        await trio.to_thread.run_sync(fault.begin)
        start = trio.current_time()
        self._fault_on = True
        try:
            while True:
                held = trio.current_time() - start
                if held >= hold.max_s or (
                    held >= hold.min_s
                    and record.refusals_during_fault >= hold.refusals
                    and record.degraded_during_fault
                ):
                    break
                await trio.sleep(0.1)
                await trio.to_thread.run_sync(fault.keep)
        finally:
            self._fault_on = False
            await trio.to_thread.run_sync(fault.end)
            self._freed_at = trio.current_time()
            record.fault_s = self._freed_at - start
        self.progress(f"{fault.name}: off after {record.fault_s:.1f} s; waiting for a send")
        if await until(lambda: record.recovery_s is not None, self.recovery_bound_s):
            settled = record.sends["2xx"] + 4 * self.pairs  # a little traffic after recovery
            await until(lambda: record.sends["2xx"] >= settled, self.recovery_bound_s)
        self._sending = False
        # Sends still waiting for their answer may yet be answered 2xx: the drain starts once
        # every sender has stopped, else it could end (all delivered so far) a moment before
        # such a 2xx is recorded, and that message would count as undelivered.
        await until(lambda: self._senders == 0, self.request_timeout_s + 5)
        self.progress("receivers draining")
        await until(lambda: not record.undelivered, self.drain_bound_s)

    async def _register(self, name: str) -> Agent:
        body = {"workspace": str(self.workspace), "implementation": "shell", "session_name": name}
        headers = {"Authorization": f"Bearer {self.secret}"}
        async with httpx2.AsyncClient(timeout=30) as http:
            response = await http.post(self.url + "/v1/register", json=body, headers=headers)
        answer = response.json()
        if response.status_code != 201:
            raise RuntimeError(f"register {name}: {response.status_code} {answer}")
        return Agent(str(answer["alias"]), str(answer["token"]), str(answer["session_id"]))

    async def _same_session(self, agent: Agent) -> bool:
        """The agent's token still names the session it registered with."""
        headers = {"Authorization": f"Bearer {agent.token}"}
        try:
            async with httpx2.AsyncClient(timeout=10) as http:
                response = await http.get(self.url + "/v1/me", headers=headers)
        except httpx2.HTTPError:
            return False
        session = response.json().get("session") if response.status_code == 200 else None
        return isinstance(session, dict) and session.get("id") == agent.session_id

    async def _call(
        self,
        http: httpx2.AsyncClient,
        path: str,
        body: object,
        errors: Counter[str],
    ) -> tuple[str, dict[str, Any]]:
        """One POST: its outcome and body, "unanswered" for a transport error or a timeout.
        After anything but 2xx a caller paces itself (a refused caller retrying at once would
        only spin)."""
        try:
            outcome, answer = _outcome(await http.post(path, json=body))
        except httpx2.HTTPError as exc:
            outcome, answer = "unanswered", {}
            errors[f"{path}: {type(exc).__name__}"] += 1
        if outcome == "2xx":
            return outcome, answer
        if outcome != "unanswered":
            message = str(answer.get("error", {}).get("message", ""))[:160]
            errors[f"{path}: {outcome}: {message}"] += 1
        await trio.sleep(0.02)
        return outcome, answer

    def _client(self, agent: Agent) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            base_url=self.url,
            headers={"Authorization": f"Bearer {agent.token}"},
            timeout=self.request_timeout_s,
        )

    async def _send(self, record: Record, sender: Agent, receivers: list[Agent]) -> None:
        self._senders += 1
        try:
            await self._send_until_stopped(record, sender, receivers)
        finally:
            self._senders -= 1

    async def _send_until_stopped(
        self, record: Record, sender: Agent, receivers: list[Agent]
    ) -> None:
        async with self._client(sender) as http:
            n = 0
            while self._sending:
                to = receivers[n % len(receivers)]
                n += 1
                started = trio.current_time()
                during = self._fault_on
                body = {"to": to.alias, "body": f"{sender.alias} #{n}"}
                outcome, answer = await self._call(http, "/v1/me/send", body, record.errors)
                if not self._sending and outcome != "2xx":
                    return  # the run ended while it waited
                record.sends[outcome] += 1
                if outcome == "2xx":
                    record.sent[str(answer["message_id"])] = to.alias
                    freed = self._freed_at
                    if freed is not None and started >= freed and record.recovery_s is None:
                        record.recovery_s = trio.current_time() - freed
                elif during or self._fault_on:
                    record.refusals_during_fault += 1

    async def _receive(self, record: Record, receiver: Agent) -> None:
        async with self._client(receiver) as http:
            while True:
                body = {"limit": 50, "wait_s": 5}
                outcome, answer = await self._call(http, "/v1/me/claim", body, record.errors)
                record.receiver_answers[f"claim {outcome}"] += 1
                if outcome != "2xx":
                    continue
                claims = answer["claims"]
                record.received.update(str(claim["message"]["id"]) for claim in claims)
                if claims:
                    tokens = [claim["token"] for claim in claims]
                    acked, _ = await self._call(
                        http, "/v1/me/ack", {"tokens": tokens}, record.errors
                    )
                    record.receiver_answers[f"ack {acked}"] += 1

    async def _probe(self, record: Record) -> None:
        """`GET /health` every 50 ms (a new probe as soon as a late one answers)."""
        async with httpx2.AsyncClient(timeout=self.request_timeout_s) as http:
            due = trio.current_time()
            while True:
                during = self._fault_on
                started = trio.current_time()
                try:
                    response = await http.get(self.url + "/health")
                except httpx2.HTTPError as exc:
                    record.probes += 1
                    record.probes_unanswered[type(exc).__name__] += 1
                except trio.Cancelled:  # the run ended: a probe still waiting is unanswered
                    if trio.current_time() - started > HEALTH_PROMPT_S:
                        record.probes += 1
                        record.probes_unanswered["still waiting at the end"] += 1
                    raise
                else:
                    record.probes += 1
                    if response.status_code == 200:
                        record.probe_latencies.append(trio.current_time() - started)
                        health = response.json()
                        record.pids_seen.add(int(health["pid"]))
                        if health.get("status") == "degraded":
                            record.degraded_during_fault |= during
                            for entry in health.get("degraded", []):
                                record.degraded_reasons[str(entry.get("message"))[:160]] += 1
                    else:
                        record.probes_unanswered[f"HTTP {response.status_code}"] += 1
                due += PROBE_INTERVAL_S
                await trio.sleep_until(max(due, trio.current_time()))


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"
