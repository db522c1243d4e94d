"""A throwaway PostgreSQL cluster for the tests: `initdb` into a fresh temporary directory, a
server on a free port of 127.0.0.1 only, SCRAM passwords, removed again on exit.

It serves TLS as well as plain TCP (libpq's default `sslmode=prefer` takes TLS; `disable` still
connects): a throwaway CA made with the `openssl` command signs the server's certificate, for
IP:127.0.0.1 and DNS:localhost, so `sslmode=verify-full&sslrootcert=<ca_file>` verifies it;
`other_ca_file` is an unrelated CA, which must not. `create_tls_only_role` makes a role the
server refuses without TLS.

The server binaries come from the machine (`pg_config --bindir`, else `initdb`/`pg_ctl`/
`postgres` on PATH, else the newest /usr/lib/postgresql/<version>/bin); `./scripts/test`
installs Debian's `postgresql` package when they are missing. PostgreSQL refuses to run as root,
so when the tests run as root, `initdb` and the server run as an unprivileged system user
(`postgres`, else `nobody`) through `runuser` (or `setpriv`), in a temporary directory owned by
that user; otherwise they run as the current user.

    with PgCluster() as cluster:
        dsn = cluster.create_database("t1")   # postgresql://pager:…@127.0.0.1:PORT/t1
        cluster.restart()                      # drops every connection, same port and password
        cluster.ca_file                        # the CA that signed the server's certificate
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Literal
from urllib.parse import quote

import psycopg
from psycopg import sql

#: How long `pg_ctl -w` may wait for the server to start or stop, in seconds.
START_TIMEOUT = 60
#: How long `initdb` may take (it is a couple of seconds on a loaded machine).
INITDB_TIMEOUT = 120
#: Tries for a free port: another process may take the one found before the server binds it.
PORT_TRIES = 5
#: Who the server runs as when the tests run as root, in order of preference.
UNPRIVILEGED_USERS = ("postgres", "nobody")
#: The superuser's name (its password is random, made per cluster).
SUPERUSER = "pager"
#: How long `openssl` may take to make a key or sign a certificate.
OPENSSL_TIMEOUT = 60
#: Days the throwaway certificates are valid (a cluster lives as long as a test session).
CERT_DAYS = 30
#: Role names `create_tls_only_role` takes: written unquoted into pg_hba.conf and SQL.
_ROLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
#: What `openssl` reads: the CAs' and the server certificate's extensions. verify-full checks
#: the host libpq was given against subjectAltName (an IP address against an IP entry).
_OPENSSL_CONF = """\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[ca]
basicConstraints = critical, CA:true
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = critical, CA:false
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
"""
#: How long a reload of the server's configuration may take to be seen by new connections.
RELOAD_TIMEOUT = 30

StopMode = Literal["smart", "fast", "immediate"]


class PgClusterError(RuntimeError):
    """The cluster could not be made, started or stopped (the message says why)."""


def find_bindir() -> Path:
    """The directory holding initdb, pg_ctl and postgres; PgClusterError saying what is missing."""
    names = ("initdb", "pg_ctl", "postgres")

    def complete(directory: Path) -> bool:
        return all(os.access(directory / name, os.X_OK) for name in names)

    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        # Debian's pg_config (libpq-dev) names the server's bindir even when no server is installed.
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            found = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, check=True, timeout=30
            ).stdout.strip()
            if found and complete(Path(found)):
                return Path(found)
    on_path = [shutil.which(name) for name in names]
    if on_path[0] is not None:
        # /usr/local/bin/initdb may be a symlink into the real bindir: prefer that directory.
        for candidate in (Path(on_path[0]).resolve().parent, Path(on_path[0]).parent):
            if complete(candidate):
                return candidate

    def version(directory: Path) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", directory.parent.name)) or (0,)

    installed = sorted(
        (d for d in Path("/usr/lib/postgresql").glob("*/bin") if complete(d)), key=version
    )
    if installed:
        return installed[-1]
    missing = [name for name, path in zip(names, on_path, strict=True) if path is None]
    raise PgClusterError(
        "PostgreSQL's server binaries (initdb, pg_ctl and postgres, in one directory) were not "
        f"found: {', '.join(missing) or 'none'} missing from PATH, none in pg_config --bindir "
        "or /usr/lib/postgresql/*/bin. ./scripts/test installs Debian's `postgresql` package "
        "when run as root with apt-get; otherwise install it (or put its bin directory on PATH)"
    )


def _wait_gone(pid: int, timeout: float = 10.0) -> None:
    """Until process `pid` is gone (a zombie counts as gone: its files are closed), at most
    `timeout` seconds; the postmaster is not our child, so it cannot be waited for."""
    deadline = time.monotonic() + timeout
    status = Path(f"/proc/{pid}/status")
    while time.monotonic() < deadline:
        try:
            state = next(line for line in status.read_text().splitlines() if line[:6] == "State:")
        except (OSError, StopIteration):
            return
        if "Z" in state.split()[1]:
            return
        time.sleep(0.02)  # paces the check


def free_port() -> int:
    """A TCP port of 127.0.0.1 free right now (the kernel's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _unprivileged_user() -> pwd.struct_passwd:
    for name in UNPRIVILEGED_USERS:
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise PgClusterError(
        "the tests run as root and PostgreSQL refuses to: no unprivileged user to run it as "
        f"(looked for {', '.join(UNPRIVILEGED_USERS)})"
    )


def _reachable_by_others(directory: Path) -> bool:
    """Whether every directory from / down to this one lets other users through (o+x)."""
    return all(part.stat().st_mode & stat.S_IXOTH for part in [directory, *directory.parents])


class PgCluster:
    """One throwaway PostgreSQL cluster; a context manager (starts on enter, stops and removes
    everything on exit)."""

    def __init__(self, *, bindir: Path | None = None) -> None:
        self.bindir = bindir if bindir is not None else find_bindir()
        self.host = "127.0.0.1"
        self.port = 0
        self.user = SUPERUSER
        self.password = secrets.token_urlsafe(24)
        self.root: Path | None = None
        # As root: the unprivileged account the server runs as, and the command prefix that
        # switches to it. Not root: None and no prefix.
        self.run_as: pwd.struct_passwd | None = None
        self._prefix: list[str] = []
        if os.geteuid() == 0:
            self.run_as = _unprivileged_user()
            runuser, setpriv = shutil.which("runuser"), shutil.which("setpriv")
            if runuser is not None:
                self._prefix = [runuser, "-u", self.run_as.pw_name, "--"]
            elif setpriv is not None:
                self._prefix = [
                    setpriv,
                    f"--reuid={self.run_as.pw_uid}",
                    f"--regid={self.run_as.pw_gid}",
                    "--init-groups",
                    "--",
                ]
            else:
                raise PgClusterError(
                    "the tests run as root and neither runuser nor setpriv (util-linux) is there "
                    "to run PostgreSQL as an unprivileged user"
                )

    # -- where things are --------------------------------------------------------------------

    def _dir(self, name: str) -> Path:
        if self.root is None:
            raise PgClusterError("the cluster has not been made (use it as a context manager)")
        return self.root / name

    @property
    def data_dir(self) -> Path:
        return self._dir("data")

    @property
    def socket_dir(self) -> Path:
        """The directory of the server's unix socket (`host=` for libpq)."""
        return self._dir("socket")

    @property
    def log_file(self) -> Path:
        return self._dir("server.log")

    @property
    def ca_file(self) -> Path:
        """The CA certificate that signed the server's (`sslrootcert` for verify-full)."""
        return self._dir("ca.pem")

    @property
    def other_ca_file(self) -> Path:
        """A CA certificate unrelated to the server's: verifying with it must fail."""
        return self._dir("other-ca.pem")

    @property
    def server_cert_file(self) -> Path:
        return self._dir("server.pem")

    @property
    def server_key_file(self) -> Path:
        return self._dir("server.key")

    def dsn_for(self, dbname: str) -> str:
        """A `postgresql://` URL to one database of this cluster, as the superuser, over TCP."""
        return (
            f"postgresql://{quote(self.user, safe='')}:{quote(self.password, safe='')}"
            f"@{self.host}:{self.port}/{quote(dbname, safe='')}"
        )

    @property
    def dsn(self) -> str:
        """The URL of the `postgres` database (for administration; tests want create_database)."""
        return self.dsn_for("postgres")

    @property
    def pid(self) -> int:
        """The postmaster's process id (first line of postmaster.pid)."""
        try:
            return int(self.data_dir.joinpath("postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError) as error:
            raise PgClusterError(f"the server is not running ({error})") from error

    # -- running commands as the server's user -----------------------------------------------

    def _env(self) -> dict[str, str]:
        # PG* variables of whoever runs the tests (PGDATA, PGPORT, PGHOST ...) must not steer
        # initdb or pg_ctl; the C locale needs no generated locales.
        env = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
        env["LC_ALL"] = "C"
        env["LANG"] = "C"
        return env

    def _run(self, *args: str | Path, timeout: float) -> subprocess.CompletedProcess[str]:
        """Run a server binary as the server's user; PgClusterError with its output on failure."""
        command = [*self._prefix, *(str(arg) for arg in args)]
        try:
            done = subprocess.run(
                command,
                cwd=self.root,  # the unprivileged user may not be able to enter ours
                env=self._env(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as error:
            raise PgClusterError(f"{command} took longer than {timeout} s") from error
        if done.returncode != 0:
            raise PgClusterError(
                f"{command} exited {done.returncode}:\n{done.stdout}{done.stderr}".rstrip()
            )
        return done

    def _give(self, path: Path) -> None:
        """Hand a path we made to the server's user (as root; a no-op otherwise)."""
        if self.run_as is not None:
            os.chown(path, self.run_as.pw_uid, self.run_as.pw_gid)

    # -- life cycle --------------------------------------------------------------------------

    def __enter__(self) -> PgCluster:
        self.create()
        try:
            self.start()
        except BaseException:
            self.destroy()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.destroy()

    def create(self) -> None:
        """initdb into a fresh temporary directory (owned by the server's user)."""
        base = Path(tempfile.gettempdir())
        if (self.run_as is not None and not _reachable_by_others(base)) or len(str(base)) > 60:
            # A TMPDIR private to root would keep the server's user out, and a long one would
            # make the unix socket's path longer than the kernel takes (107 bytes).
            base = Path("/tmp")
        self.root = Path(tempfile.mkdtemp(prefix="pager-pg-", dir=base))
        try:
            self._give(self.root)
            self.socket_dir.mkdir(mode=0o700)
            self._give(self.socket_dir)
            pwfile = self._dir("pwfile")
            fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(self.password + "\n")
            self._give(pwfile)
            self._run(
                self.bindir / "initdb",
                f"--pgdata={self.data_dir}",
                f"--username={self.user}",
                f"--pwfile={pwfile}",
                "--auth=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",  # a test cluster: nothing to keep after a crash of the machine
                "--no-instructions",
                timeout=INITDB_TIMEOUT,
            )
            pwfile.unlink()
            self._make_certificates()
            with self.data_dir.joinpath("postgresql.conf").open("a") as conf:
                conf.write(
                    "\n# tests/pg_cluster.py\n"
                    "listen_addresses = '127.0.0.1'\n"
                    f"unix_socket_directories = '{self.socket_dir}'\n"
                    # Speed over durability: a throwaway test cluster, never used after a crash
                    # of the machine (a crash of the server alone still recovers from its WAL).
                    "fsync = off\n"
                    "full_page_writes = off\n"
                    "shared_buffers = 16MB\n"
                    "max_connections = 100\n"
                    "log_min_messages = warning\n"
                    # TLS besides plain TCP: pg_hba.conf's `host` lines take both.
                    "ssl = on\n"
                    f"ssl_cert_file = '{self.server_cert_file}'\n"
                    f"ssl_key_file = '{self.server_key_file}'\n"
                    "include_if_exists = 'port.conf'\n"
                )
        except BaseException:
            self.destroy()
            raise

    def _openssl(self, *args: str | Path) -> None:
        command = [shutil.which("openssl") or "openssl", *(str(arg) for arg in args)]
        try:
            done = subprocess.run(
                command,
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=OPENSSL_TIMEOUT,
            )
        except FileNotFoundError as error:
            raise PgClusterError(
                "the `openssl` command, which makes the test cluster's certificates, is not"
                " installed (Debian: apt-get install openssl)"
            ) from error
        except subprocess.TimeoutExpired as error:
            raise PgClusterError(f"{command} took longer than {OPENSSL_TIMEOUT} s") from error
        if done.returncode != 0:
            raise PgClusterError(
                f"{command} exited {done.returncode}:\n{done.stdout}{done.stderr}".rstrip()
            )

    def _make_certificates(self) -> None:
        """Two throwaway CAs and a server key and certificate signed by the first, with EC
        P-256 keys (quick to make). The server's key is its user's alone (mode 600): the server
        refuses a key others can read."""
        conf = self._dir("openssl.cnf")
        conf.write_text(_OPENSSL_CONF)
        new_key: list[str | Path] = [
            *("-config", conf, "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
            "-nodes",  # the key unencrypted: the server reads it unattended
        ]
        days = ["-days", str(CERT_DAYS)]
        for name, cert in (("ca", self.ca_file), ("other-ca", self.other_ca_file)):
            # A random name each: the other CA, or another cluster's, is unrelated to this one.
            subject = f"/CN=Pager test {name} {secrets.token_hex(4)}"
            self_signed = ["req", "-x509", *new_key, "-extensions", "ca", *days, "-subj", subject]
            self._openssl(*self_signed, "-keyout", self._dir(f"{name}.key"), "-out", cert)
        request = self._dir("server.csr")
        csr: list[str | Path] = ["req", "-new", *new_key, "-subj", "/CN=localhost", "-out", request]
        self._openssl(*csr, "-keyout", self.server_key_file)
        sign: list[str | Path] = ["x509", "-req", "-in", request, "-out", self.server_cert_file]
        signer: list[str | Path] = ["-CA", self.ca_file, "-CAkey", self._dir("ca.key")]
        serial = ["-set_serial", f"0x{secrets.token_hex(8)}"]
        self._openssl(*sign, *signer, *serial, *days, "-extfile", conf, "-extensions", "server")
        request.unlink()
        self.server_key_file.chmod(0o600)
        self._give(self.server_key_file)
        self._give(self.server_cert_file)

    def start(self) -> None:
        """Start the server on a free port (a new one on a clash; the same one on a restart)."""
        if self.port:
            self._start_on(self.port)
            return
        for attempt in range(PORT_TRIES):
            port = free_port()
            try:
                self._start_on(port)
            except PgClusterError:
                log = self._log_tail()
                if attempt + 1 < PORT_TRIES and "could not bind" in log:
                    continue  # someone took the port between our probe and the server's bind
                raise
            self.port = port
            return

    def _start_on(self, port: int) -> None:
        port_conf = self.data_dir / "port.conf"
        port_conf.write_text(f"port = {port}\n")
        self._give(port_conf)
        # Truncate the log so that a clash is read from this start's lines only.
        self.log_file.write_text("")
        self._give(self.log_file)
        try:
            self._run(
                self.bindir / "pg_ctl",
                "start",
                "--wait",
                f"--timeout={START_TIMEOUT}",
                f"--pgdata={self.data_dir}",
                f"--log={self.log_file}",
                timeout=START_TIMEOUT + 10,
            )
        except PgClusterError as error:
            raise PgClusterError(f"{error}\nserver log:\n{self._log_tail()}") from error

    def _log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, mode: StopMode = "fast") -> None:
        """Stop the server (`pg_ctl -m MODE stop`, waiting); `immediate` is a crash, recovered
        from on the next start."""
        self._run(
            self.bindir / "pg_ctl",
            "stop",
            "--wait",
            f"--timeout={START_TIMEOUT}",
            f"--mode={mode}",
            f"--pgdata={self.data_dir}",
            timeout=START_TIMEOUT + 10,
        )

    def restart(self, mode: StopMode = "fast") -> None:
        """Stop and start again on the same port: every connection is dropped, the data kept."""
        self.stop(mode)
        self.start()

    def destroy(self) -> None:
        """Stop the server if it runs (immediately; SIGKILL if pg_ctl fails) and remove it all."""
        if self.root is None:
            return
        try:
            if self.data_dir.joinpath("postmaster.pid").exists():
                try:
                    self.stop("immediate")
                except PgClusterError:
                    with contextlib.suppress(PgClusterError, ProcessLookupError):
                        pid = self.pid
                        os.kill(pid, signal.SIGKILL)
                        _wait_gone(pid)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    # -- databases ---------------------------------------------------------------------------

    def create_database(self, name: str) -> str:
        """Make a new empty database; its DSN."""
        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as connection:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.dsn_for(name)

    def create_tls_only_role(self, name: str, password: str) -> None:
        """A LOGIN role (SCRAM password) the server accepts over TLS only: pg_hba.conf gets a
        `hostssl` line for it and `hostnossl` and `local` lines rejecting it, above initdb's
        lines (the first line that matches decides), and the server reloads it."""
        if not _ROLE_NAME.fullmatch(name):
            raise ValueError(f"role name {name!r}: lower-case letters, digits and _ only")
        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as connection:
            connection.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(name), sql.Literal(password)
                )
            )
        hba = self.data_dir / "pg_hba.conf"
        lines = (
            f"# tests/pg_cluster.py: {name} over TLS only\n"
            f"hostssl    all  {name}  all  scram-sha-256\n"
            f"hostnossl  all  {name}  all  reject\n"
            f"local      all  {name}       reject\n"
        )
        hba.write_text(lines + hba.read_text())  # rewritten in place: its owner is kept
        self.reload()

    def reload(self) -> None:
        """Have the server read its configuration files again, and return once connections
        made from now on see them. pg_reload_conf() only signals the postmaster; a backend
        forked after the postmaster has reloaded (pg_hba.conf included) inherits its newer
        pg_conf_load_time()."""
        query = "SELECT pg_conf_load_time()"
        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as connection:
            before = connection.execute(query).fetchone()
            connection.execute("SELECT pg_reload_conf()")
        deadline = time.monotonic() + RELOAD_TIMEOUT
        while time.monotonic() < deadline:
            with psycopg.connect(self.dsn, connect_timeout=10) as connection:
                if connection.execute(query).fetchone() != before:  # it only moves forward
                    return
            time.sleep(0.02)  # paces the check
        raise PgClusterError(f"the server did not reload its configuration:\n{self._log_tail()}")

    def drop_database(self, name: str) -> None:
        """Drop a database, ending any connection still open to it."""
        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as connection:
            connection.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
