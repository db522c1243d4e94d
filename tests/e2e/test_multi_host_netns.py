"""Two machines, end to end (SPEC §13, issue 14): brokers `alpha` and `beta`, each in a network
namespace of its own (tests/netns.py) with one veth link to the root namespace, share one
PostgreSQL cluster that listens on the links' root-side addresses. Every `pager` command for a
host runs inside its namespace (its broker listens on that namespace's 127.0.0.1).

- Mail by address crosses from one host to the other and back: a wrapped `pager shell` session
  on beta is woken from its waiting `pager read` by a send on alpha, and answers the person on
  alpha, whose waiting read is woken in turn.
- alpha's link is cut (`ip link set … down`) while its person sends: the sends are answered
  `unavailable` (bounded by the connections' TCP timeouts; the hang guard is no timing check),
  alpha's status says the store is degraded, beta shows alpha not alive and carries on. The link
  back up, alpha recovers by itself, and every send that was answered is delivered, nothing
  else.

tests/e2e/test_two_brokers.py shows the rest of two hosts on one machine (tokens per host,
events, a killed broker); this module is what only separate networks show."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import attrs
import pytest

from tests.e2e.conftest import FAST_WINDOWS, postgres_env
from tests.launch.conftest import PROCESS_BOUND, PagerHome, wait_for
from tests.netns import Host, Network, netns_unavailable
from tests.pg_cluster import PgCluster

#: Under pytest-xdist (`--dist loadgroup`) the module's tests run on one worker: its
#: namespaces and its cluster (module fixtures) are made once, never by two workers at a time.
pytestmark = pytest.mark.xdist_group("multi_host_netns")

#: Heartbeats every 200 ms: a host silent for 600 ms is shown as not alive.
HEARTBEAT = {"PAGER_WINDOW_HOST_HEARTBEAT": "200ms"}
#: How long a wrapped session's `pager read --wait` waits (one long poll: the most there is).
READ_WAIT = 60
#: The `pager` on PATH inside a wrapped launch: this checkout's.
BIN_DIR = Path(sys.executable).parent

#: One send as `pager send` makes it (its client, `Me().call`), printing the broker's answer as
#: JSON whatever it is: `{"message_id", "wake"}`, or `{"code", "message"}` when it was refused
#: (the CLI prints only the message), or `{"code": null, "message"}` when no broker answered.
SEND = """
import json, sys
from pager.commands.acting import CommandRefused, Me
from pager.commands.common import CommandError
try:
    sent = Me().call("POST", "/send", {"to": sys.argv[1], "body": sys.argv[2]})
except CommandRefused as refused:
    print(json.dumps({"code": refused.code, "message": str(refused)}))
except CommandError as error:
    print(json.dumps({"code": None, "message": str(error)}))
else:
    print(json.dumps({"message_id": sent["message_id"], "wake": sent["wake"]}))
"""


@attrs.define
class HostBroker:
    """A host's broker (`pager start` inside its namespace) and the `pager` commands run there,
    by default in `desk`: the same directory on every host, so each host's person has a
    workspace of its own there."""

    host: Host
    home: PagerHome
    desk: Path
    #: The broker's port (on the host's 127.0.0.1), once started.
    port: int = 0

    def start(self) -> None:
        started = self.answer("start", "--json")
        self.port = int(str(started["url"]).rpartition(":")[2])

    def waiting(self, *command: str) -> bool:
        """Whether a `pager COMMAND…` of this host (`read`, `--wait`: a long poll) has its
        request open to this broker: once it has, a send that commits after it finds the poll
        waiting (no API shows a waiting poll; its TCP connection does)."""
        n = len(command)
        return any(
            any(argv[i : i + n] == list(command) for i in range(len(argv)))
            for argv in self.host.clients_of(self.port).values()
        )

    def argv(self, *args: str) -> list[str]:
        return self.host.command(sys.executable, "-m", "pager", *args)

    def pager(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self._run(self.argv(*args))

    def _run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv,
            env=self.home.env,
            cwd=self.desk,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=PROCESS_BOUND,
            check=False,
        )

    def popen(self, *args: str, env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv(*args),
            env={**self.home.env, **(env or {})},
            cwd=self.desk,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def answer(self, *args: str) -> Any:
        """A command's `--json` answer; it must succeed."""
        done = self.pager(*args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return json.loads(done.stdout)

    def status(self) -> dict[str, Any]:
        """`pager status --json` (whatever its exit status: 3 when no broker answered)."""
        report: dict[str, Any] = json.loads(self.pager("status", "--json").stdout)
        return report

    def roster(self) -> dict[str, dict[str, Any]]:
        """`pager who --all --json`, by address."""
        return {a["address"]: a for a in self.answer("who", "--all", "--json")["agents"]}

    def send(self, to: str, body: str) -> dict[str, Any]:
        """The person's send (SEND): the broker's answer, success or not."""
        done = self._run(self.host.command(sys.executable, "-c", SEND, to, body))
        assert done.returncode == 0, done.stderr
        answer: dict[str, Any] = json.loads(done.stdout)
        return answer

    def read_all(self, at_least: int) -> list[dict[str, Any]]:
        """`pager read --json` (claimed, printed, acknowledged) until `at_least` distinct
        messages came: every message read, in order."""
        got: list[dict[str, Any]] = []
        while len({m["id"] for m in got}) < at_least:
            done = self.pager("read", "100", "--wait", "10", "--json")
            assert done.returncode == 0, done.stderr
            batch = [json.loads(line)["message"] for line in done.stdout.splitlines()]
            assert batch, f"only {len(got)} of {at_least} messages came"
            got += batch
        return got

    def stop(self) -> None:
        """`pager exit` inside the namespace, then SIGKILL whatever broker of this home is
        left (by its PAGER_HOME)."""
        with contextlib.suppress(subprocess.SubprocessError):
            self.pager("exit")
        self.home.kill_all()


def via(dsn: str, address: str) -> str:
    """`dsn` with its host replaced by `address` (the cluster as a host reaches it)."""
    parts = urlsplit(dsn)
    netloc = f"{parts.netloc.rpartition('@')[0]}@{address}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


@pytest.fixture(scope="module")
def network() -> Iterator[tuple[Host, Host]]:
    """Hosts `alpha` and `beta`, each a network namespace with its own link."""
    reason = netns_unavailable()
    if reason is not None:
        pytest.skip(reason)
    with Network() as made:
        yield made.add("alpha"), made.add("beta")


@pytest.fixture(scope="module")
def cluster(network: tuple[Host, Host]) -> Iterator[PgCluster]:
    """A PostgreSQL cluster of this module's own that also listens on the links' root-side
    addresses and lets the hosts' subnets in (SCRAM passwords, as on 127.0.0.1).

    Not the session's `pg_cluster`: opening that one to the hosts would take a restart (for
    `listen_addresses`) that drops every other test's connections, a change to its files would
    outlive a failure here, and a cut link leaves the server holding the cut host's backends
    (it learns of a dead client only from its TCP keepalives, 2 h by default), which would eat
    into the connections the other tests share. This one costs an initdb and goes with the
    module."""
    server = PgCluster()
    server.create()
    try:
        addresses = ",".join(["127.0.0.1", *(host.outside_ip for host in network)])
        # Appended as root to files the server's user owns: owner and mode are kept. The last
        # `listen_addresses` in the file wins over the one pg_cluster.py wrote.
        with (server.data_dir / "postgresql.conf").open("a") as conf:
            conf.write(f"\n# {__name__}\nlisten_addresses = '{addresses}'\n")
        with (server.data_dir / "pg_hba.conf").open("a") as hba:
            hba.writelines(f"host all all {host.subnet} scram-sha-256\n" for host in network)
        server.start()
        yield server
    finally:
        server.destroy()


@pytest.fixture
def brokers(
    network: tuple[Host, Host], cluster: PgCluster, tmp_path: Path
) -> Iterator[tuple[HostBroker, HostBroker]]:
    """Brokers `alpha` and `beta`, each in its host's namespace, on one fresh database."""
    database = f"netns_{secrets.token_hex(6)}"
    dsn = cluster.create_database(database)
    desk = tmp_path / "shop"
    desk.mkdir()
    started: list[HostBroker] = []
    try:
        for host in network:
            host.mend()  # whatever a failed test before left
            home = PagerHome(tmp_path / host.label)
            home.root.mkdir(mode=0o700)
            (home.root / "config.toml").write_text(f'[host]\nname = "{host.label}"\n')
            secrets_dir = tmp_path / f"{host.label}-pg"
            secrets_dir.mkdir()
            home.env.update(FAST_WINDOWS)
            home.env.update(HEARTBEAT)
            home.env.update(postgres_env(via(dsn, host.outside_ip), secrets_dir))
            broker = HostBroker(host, home, desk)
            started.append(broker)
            broker.start()
        yield started[0], started[1]
    finally:
        for broker in started:
            broker.host.mend()
            broker.stop()
        for host in network:
            host.kill_processes()  # a wrapped session or a read a failed test left
        cluster.drop_database(database)


def _follow(broker: HostBroker, out: Path) -> subprocess.Popen[str]:
    """`pager read --follow --json` of the host's person, its output in `out`: the person
    shows as attached while it runs (its session is on that host)."""
    with out.open("w") as sink:
        return subprocess.Popen(
            broker.argv("read", "--follow", "--json"),
            env=broker.home.env,
            cwd=broker.desk,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.PIPE,
            text=True,
        )


@attrs.frozen
class Wrapped:
    """A wrapped `pager shell` session that says who it is (`whoami`), then waits in
    `pager read --wait 60` (one long poll: it ends empty unless mail comes or a wake
    reaches its broker), then runs `then`."""

    broker: HostBroker
    process: subprocess.Popen[str]
    who: Path
    got: Path

    @classmethod
    def start(cls, broker: HostBroker, name: str, directory: Path, then: str = "") -> Wrapped:
        who, got = directory / f"{name}-whoami.json", directory / f"{name}-read.jsonl"
        script = (
            f"pager whoami --json > {who}.tmp && mv {who}.tmp {who};"
            f" pager read --wait {READ_WAIT} --json > {got}" + (f" && {then}" if then else "")
        )
        process = broker.popen(
            "shell", "--session-name", name, "--", "sh", "-c", script,
            env={"PATH": f"{BIN_DIR}:{os.environ['PATH']}"},
        )  # fmt: skip
        return cls(broker, process, who, got)

    def waiting(self) -> dict[str, Any]:
        """Its whoami, once its read waits for mail."""
        wait_for(self.who.exists, f"{self.who.name} to be written")
        wait_for(lambda: self.broker.waiting("read", "--wait"), f"{self.got.name}'s read")
        answer: dict[str, Any] = json.loads(self.who.read_text())
        return answer

    def finish(self) -> dict[str, Any]:
        """The one message its read got; the launch must have ended with status 0. (The hang
        guard covers the read's own 60 s: a read no wake reached ends empty, and says so.)"""
        _, err = self.process.communicate(timeout=READ_WAIT + PROCESS_BOUND)
        got = _read(self.got)
        assert got, f"{self.got.name}: the read ended without mail (no wake reached it); {err}"
        assert self.process.returncode == 0, err
        [message] = got
        return message


def _read(out: Path) -> list[dict[str, Any]]:
    """The messages a `read --json` wrote to `out` so far (whole lines only)."""
    text = out.read_text() if out.exists() else ""
    return [json.loads(line)["message"] for line in text.splitlines(keepends=True)
            if line.endswith("\n")]  # fmt: skip


def _end(*processes: subprocess.Popen[str] | None) -> None:
    """Interrupt each process still running (a follower detaches its session), kill it if it
    does not end within the hang guard."""
    for process in processes:
        if process is None or process.poll() is not None:
            continue
        process.send_signal(signal.SIGINT)
        try:
            process.communicate(timeout=PROCESS_BOUND)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


def test_mail_by_address_crosses_hosts_both_ways_and_wakes_the_waiting_readers(
    brokers: tuple[HostBroker, HostBroker], tmp_path: Path
) -> None:
    """The person on alpha reads with `--follow` (attached on alpha); `bob`, a wrapped
    `pager shell` session on beta, waits in `pager read --wait 60`. The person sends to bob's
    address: bob's read is woken on beta, and bob answers by the person's address: the
    person's read, waiting on alpha, gets it.

    (`--follow`, which attaches the person: a plain `pager read --wait` of a person with no
    session attached is not woken by a send from another host, only by its next long poll.)"""
    alpha, beta = brokers
    ada = alpha.answer("whoami", "--json")
    ben = beta.answer("whoami", "--json")
    assert (ada["host"], ben["host"]) == ("alpha", "beta")
    assert ada["workspace"] == ben["workspace"]  # one directory, a workspace on each host
    assert ada["address"] != ben["address"]
    follower = bob = None
    ada_got, bob_sent = tmp_path / "ada-read.jsonl", tmp_path / "bob-sent.json"
    try:
        follower = _follow(alpha, ada_got)
        wait_for(lambda: beta.roster()[ada["address"]]["attached"], "beta to see ada attached")
        wait_for(lambda: alpha.waiting("read", "--follow"), "ada's read to wait")
        bob = Wrapped.start(
            beta, "bob", tmp_path, f"pager send {ada['address']} 'thanks, from beta' --json"
            f" > {bob_sent}"
        )  # fmt: skip
        me_bob = bob.waiting()
        assert (me_bob["alias"], me_bob["implementation"], me_bob["host"]) == (
            "bob",
            "shell",
            "beta",
        )
        seen = alpha.roster()[me_bob["address"]]
        assert (seen["host"], seen["host_alive"], seen["attached"]) == ("beta", True, True)
        sent = alpha.answer("send", me_bob["address"], "hello from alpha", "--json")
        assert sent["recipient"]["address"] == me_bob["address"]
        assert sent["wake"] == "queued"  # attached through beta: beta's broker is told
        got = bob.finish()
        assert (got["id"], got["from"], got["body"]) == (
            sent["message_id"],
            ada["address"],
            "hello from alpha",
        )
        answer = json.loads(bob_sent.read_text())
        assert answer["wake"] == "queued"  # the person is attached through alpha
        wait_for(lambda: _read(ada_got), "the answer to reach the person on alpha")
        [back] = _read(ada_got)
        assert (back["id"], back["from"], back["body"]) == (
            answer["message_id"],
            me_bob["address"],
            "thanks, from beta",
        )
    finally:
        _end(follower, None if bob is None else bob.process)
    assert alpha.answer("sent", sent["message_id"], "--json")["state"] == "acknowledged"


#: Sends over the cut link, each answered `unavailable`.
REFUSED_SENDS = 3


def test_a_cut_link_answers_unavailable_and_recovers_with_nothing_lost(
    brokers: tuple[HostBroker, HostBroker], tmp_path: Path
) -> None:
    """alpha's person sends to beta's, and alpha's link is cut between two sends: the next
    sends are answered `unavailable`, alpha says its store is degraded, beta shows alpha not
    alive and still takes mail. The link back, alpha recovers by itself: its sends go through,
    beta's mail from the cut reaches alpha's person, and a wake from beta reaches alpha again.
    The sends answered with an id are what beta's person reads, in order, and nothing else."""
    alpha, beta = brokers
    ada = alpha.answer("whoami", "--json")
    ben = beta.answer("whoami", "--json")
    answered: list[tuple[str, str]] = []  # (message id, body) of each send given an id

    def send(body: str) -> dict[str, Any]:
        answer = alpha.send(ben["address"], body)
        if "message_id" in answer:
            answered.append((answer["message_id"], body))
        return answer

    for n in range(3):
        assert "message_id" in send(f"before {n}")
    assert beta.roster()[ada["address"]]["host_alive"] is True
    alpha.host.cut()
    try:
        for n in range(REFUSED_SENDS):
            refused = send(f"cut {n}")  # bounded by the connections' TCP timeouts (~10 s)
            assert refused["code"] == "unavailable", refused
            assert "cannot reach its PostgreSQL store" in refused["message"], refused
        by_cli = alpha.pager("send", ben["address"], "cut, from the command line")
        assert by_cli.returncode == 1, (by_cli.stdout, by_cli.stderr)
        assert "cannot reach its PostgreSQL store" in by_cli.stderr
        report = alpha.status()
        assert (report["running"], report["status"]) == (True, "degraded"), report
        assert "store" in [d["kind"] for d in report["degraded"]], report
        wait_for(
            lambda: beta.roster()[ada["address"]]["host_alive"] is False,
            "beta to show alpha not alive",
        )
        hosts = {host["name"]: host for host in beta.status()["hosts"]}
        assert (hosts["alpha"]["alive"], hosts["beta"]["alive"]) == (False, True)
        during = beta.send(ada["address"], "from beta, while alpha is cut off")
        assert "message_id" in during, during  # beta carries on
    finally:
        alpha.host.mend()
    wait_for(lambda: alpha.status().get("status") == "ok", "alpha's store to recover")
    assert "message_id" in send("after the cut")
    wait_for(lambda: beta.roster()[ada["address"]]["host_alive"], "beta to see alpha again")

    [caught_up] = [json.loads(line)["message"] for line in
                   alpha.pager("read", "--json").stdout.splitlines()]  # fmt: skip
    assert (caught_up["id"], caught_up["body"]) == (
        during["message_id"],
        "from beta, while alpha is cut off",
    )
    carol = Wrapped.start(alpha, "carol", tmp_path)
    try:
        me_carol = carol.waiting()
        welcome = beta.send(me_carol["address"], "welcome back")
        assert welcome.get("wake") == "queued", welcome  # attached through alpha: told
        got = carol.finish()  # woken: alpha listens for beta's commits again
        assert (got["id"], got["body"]) == (welcome["message_id"], "welcome back")
    finally:
        _end(carol.process)

    got_all = beta.read_all(len(answered))
    assert [(m["id"], m["body"]) for m in got_all] == answered  # nothing lost or invented
    assert {m["from"] for m in got_all} == {ada["address"]}
    assert beta.answer("inbox", "--json")["waiting"] == 0
