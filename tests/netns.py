"""Network namespaces as machines, for the multi-host tests (issue 14): each `Host` is a network
namespace of its own (`ip netns add`) joined to the root namespace by a veth pair, its inside end
`10.231.N.2/30` and its root-side end `10.231.N.1/30`, with `lo` up. A process started through
`host.command(...)` (`ip netns exec NS …`) sees only that host's network: its own 127.0.0.1, and
the root namespace at `host.outside_ip`, so a server of the root namespace that should be
reachable from the host listens on that address. `host.cut()` takes the root-side end down (the
cable pulled at the switch: the host's end loses its carrier and nothing it sends arrives), and
`host.mend()` puts it back.

Needs root (CAP_NET_ADMIN) and iproute2; `netns_unavailable()` says why not when it cannot work.
Every name carries a random token and every subnet is one no interface of the machine uses, so
leftovers of another run do not clash; `Network.close()` kills whatever still runs in its
namespaces (only ours: the namespaces are made here) and removes the veths and namespaces, after
a failure too.

    with Network() as network:
        alpha = network.add("alpha")
        subprocess.run(alpha.command("ip", "addr"), check=True)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import attrs

#: The /16 the hosts' subnets are taken from: 10.231.N.0/30 for one N per host.
PREFIX = "10.231"
#: A hang guard for one `ip` command (they take milliseconds).
IP_TIMEOUT = 30.0
#: How long the processes left in a namespace may take to die after SIGKILL.
KILL_BOUND = 30.0
#: Held while a subnet is picked and its address assigned, so that two test processes making
#: hosts at the same moment (pytest-xdist workers, two checkouts' suites) never pick one N.
SUBNET_LOCK = Path("/tmp/pager-tests-netns.lock")


class NetnsError(RuntimeError):
    """An `ip` command failed (the message has its output), or a namespace was left behind."""


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`ip ARGS…`; NetnsError with its output when it fails and `check` is set."""
    command = ["ip", *args]
    try:
        done = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=IP_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise NetnsError(f"{' '.join(command)} took longer than {IP_TIMEOUT} s") from error
    if check and done.returncode != 0:
        raise NetnsError(
            f"{' '.join(command)} exited {done.returncode}: {done.stderr.strip()}".rstrip()
        )
    return done


def netns_unavailable() -> str | None:
    """Why network namespaces cannot be made here (not root, no iproute2, the kernel refused a
    probe namespace), or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN): `ip netns add` is refused"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2) to make network namespaces with"
    probe = f"pager-probe-{secrets.token_hex(4)}"
    try:
        made = ip("netns", "add", probe, check=False)
    except NetnsError as error:
        return str(error)
    ip("netns", "del", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` is refused here: {made.stderr.strip()}"
    return None


def _subnets_in_use() -> set[int]:
    """The N of every 10.231.N.x address on this machine's root namespace."""
    shown = ip("-o", "-4", "addr", "show").stdout
    return {int(n) for n in re.findall(rf"inet {re.escape(PREFIX)}\.(\d+)\.", shown)}


@contextlib.contextmanager
def _subnet_lock() -> Iterator[None]:
    """SUBNET_LOCK, held (an exclusive flock, let go when the file is closed, a crash too)."""
    with SUBNET_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _alive(pid: int) -> bool:
    """Whether `pid` is a process that has not exited (a zombie has: its files are closed)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


@attrs.frozen
class Host:
    """One machine: a network namespace and the veth pair that is its only link."""

    label: str
    namespace: str
    #: The veth's end in the root namespace, and its address (what the host reaches).
    outside: str
    outside_ip: str
    #: The veth's end in the host's namespace, and its address.
    inside: str
    inside_ip: str
    #: The pair's /30, as pg_hba.conf wants it.
    subnet: str

    def command(self, *argv: str | Path) -> list[str]:
        """`argv` run inside this host's namespace (environment and directory are kept)."""
        return ["ip", "netns", "exec", self.namespace, *(str(arg) for arg in argv)]

    def cut(self) -> None:
        """Take the link down at the root-side end: the host's end loses its carrier, and what
        either side sends over it is dropped."""
        ip("link", "set", self.outside, "down")

    def mend(self) -> None:
        """Put the link back up (harmless when it is up)."""
        ip("link", "set", self.outside, "up")

    def pids(self) -> list[int]:
        """Every live process in this host's namespace (ours: the namespace is made here)."""
        listed = ip("netns", "pids", self.namespace, check=False).stdout.split()
        return sorted(int(pid) for pid in listed if pid.isdigit() and _alive(int(pid)))

    def clients_of(self, port: int) -> dict[int, list[str]]:
        """The processes of this host with a TCP connection established to `port` (on any
        address of the host), each with its command line: who is in a request to a server
        there right now. Read from /proc, the sockets of each process matched against its
        namespace's TCP table."""
        found: dict[int, list[str]] = {}
        for pid in self.pids():
            proc = Path(f"/proc/{pid}")
            try:
                table = (proc / "net" / "tcp").read_text().splitlines()[1:]
                sockets = {os.readlink(fd) for fd in (proc / "fd").iterdir()}
                argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:  # it ended meanwhile
                continue
            for row in table:
                # sl local_address rem_address st … inode: st 01 is ESTABLISHED
                fields = row.split()
                remote = int(fields[2].rpartition(":")[2], 16)
                if (remote, fields[3]) == (port, "01") and f"socket:[{fields[9]}]" in sockets:
                    found[pid] = argv[:-1] if argv[-1:] == [""] else argv
        return found

    def kill_processes(self) -> None:
        """SIGKILL every process left in the namespace, by its id; until they are gone."""
        deadline = time.monotonic() + KILL_BOUND
        while pids := self.pids():
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                raise NetnsError(f"processes {pids} of {self.namespace} did not die")
            time.sleep(0.02)  # paces the check


class Network:
    """The hosts of one test run; a context manager that removes them all on exit."""

    def __init__(self) -> None:
        self.token = secrets.token_hex(3)
        self.hosts: list[Host] = []

    def add(self, label: str) -> Host:
        """A new host named `label` (a short word: it is part of the namespace's name)."""
        index = len(self.hosts)
        with _subnet_lock():
            taken = _subnets_in_use() | {int(h.outside_ip.split(".")[2]) for h in self.hosts}
            free = [n for n in range(1, 255) if n not in taken]
            if not free:
                raise NetnsError(f"every subnet of {PREFIX}.0.0/16 is in use on this machine")
            n = random.choice(free)  # random: another run's leftovers are not where we look first
            host = Host(
                label=label,
                namespace=f"pager-{self.token}-{label}",
                outside=f"pg{self.token}{index}o",  # an interface name is at most 15 bytes
                outside_ip=f"{PREFIX}.{n}.1",
                inside=f"pg{self.token}{index}i",
                inside_ip=f"{PREFIX}.{n}.2",
                subnet=f"{PREFIX}.{n}.0/30",
            )
            self.hosts.append(host)  # before anything is made: close() removes what was
            ns = host.namespace
            ip("netns", "add", ns)
            veth = ("type", "veth", "peer", "name", host.inside, "netns", ns)
            ip("link", "add", host.outside, *veth)
            # Once this address is on the root namespace, _subnets_in_use() sees N as taken.
            ip("addr", "add", f"{host.outside_ip}/30", "dev", host.outside)
        ip("link", "set", host.outside, "up")
        ip("-n", ns, "addr", "add", f"{host.inside_ip}/30", "dev", host.inside)
        ip("-n", ns, "link", "set", host.inside, "up")
        ip("-n", ns, "link", "set", "lo", "up")
        return host

    def close(self) -> None:
        """Kill what runs in the namespaces, delete the veths and the namespaces; NetnsError
        naming whatever could not be removed (after trying everything)."""
        problems: list[str] = []
        for host in self.hosts:
            try:
                host.kill_processes()
            except NetnsError as error:
                problems.append(str(error))
            # Deleting one end deletes the pair; then the namespace holds nothing of ours.
            ip("link", "del", host.outside, check=False)
            ip("netns", "del", host.namespace, check=False)
            if ip("-o", "link", "show", host.outside, check=False).returncode == 0:
                problems.append(f"the veth {host.outside} is still there")
            if host.namespace in ip("netns", "list", check=False).stdout.split():
                problems.append(f"the namespace {host.namespace} is still there")
        self.hosts.clear()
        if problems:
            raise NetnsError("; ".join(problems))

    def __enter__(self) -> Network:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
