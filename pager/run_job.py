"""`pager run [--to TO] [--tail N] [--job-id J] [--quiet-success] -- CMD [ARGS…]` and
`pager run --pid PID` (SPEC §4.1, §8.2): run a command, or watch a process, and page when it ends.

Stdlib-only and light, like the other commands a script runs: `pager run -- true` must cost
little more than `true`, so the messaging client is imported only when the page is sent, and
CMD is started with `os.posix_spawnp` rather than `subprocess` (whose import costs milliseconds).

How CMD runs:

- Standard input is inherited, and so is every descriptor `pager run` inherited (a make
  jobserver's, say). Standard output and error go through two pipes that `pager run` copies to
  its own standard output and error as the bytes arrive (each stream keeps its destination),
  keeping the last N lines of the two together in arrival order for the page. So CMD sees pipes,
  not a terminal: some programs then turn colour off or buffer their output in blocks (their
  `--color=always`, or `PYTHONUNBUFFERED=1` for Python, bring it back). With `--tail 0` no
  output is kept and CMD inherits all three streams unchanged.
- Signals: SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 sent to `pager run` are passed on to CMD, and
  `pager run` keeps waiting for CMD to end. SIGINT and SIGQUIT are passed on only when `pager
  run` is not in its terminal's foreground process group: from a terminal, Ctrl-C and Ctrl-\\
  have already reached CMD (it runs in the same process group), and a second SIGINT makes many
  tools force-quit. A signal that was ignored when `pager run` started (`nohup`, or `&` in a
  non-interactive shell) stays ignored, for CMD as well.
- When CMD ends, `pager run` pages TO (default: whoever the command acts as, SPEC §4.2, so an
  agent's `pager run -- make test &` lands in its own inbox) with the exit status or the
  signal, the duration, the command line, the working directory and the tail (terminal escape
  sequences removed; cut to 16 KiB on a line boundary, saying so), then exits with CMD's status
  (128+N when CMD died of signal N). `--quiet-success`: no page when CMD exits with status 0.
- CMD that cannot be started (not found: 127; found but not executable: 126, like a shell) is
  reported on stderr and paged as a failure too: whoever waits for the page must hear that the
  job never ran, not wait for ever.
- Output that background processes of CMD write after CMD ended is copied only while `pager
  run` still runs (it waits DRAIN_S for the pipes to close, not for those processes).

A page the broker does not take because no broker answers, none can start, or it answers
`unavailable`, is retried after 1 s, then after doubling waits up to 30 s, for up to 600 s
(`PAGER_RUN_RETRY_S`), with one line on stderr per failed attempt; SIGINT, SIGTERM or SIGQUIT
stop the retries (SIGHUP does not: a closed terminal must not cost the page). A page that is not
delivered (refused by the broker, retries exhausted or stopped) is printed whole on stderr,
never lost silently, and `pager run` still exits with CMD's status. TO is checked by the broker
when the page is sent, at the end.

`--pid PID` watches a process that `pager run` did not start: it pages when the process ends
(status `ended`: the exit status of a process that is not its child cannot be known), with the
time since the process started (or since the watch began, when that cannot be read), and exits
0. Interrupted (Ctrl-C) it stops watching, pages nothing and exits 130.
"""

from __future__ import annotations

import os
import sys
import time

from pager.cli import EXIT_OK, EXIT_USAGE

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs milliseconds
if TYPE_CHECKING:
    import argparse
    from collections import deque
    from threading import Thread
    from typing import Any

#: Signals passed on to CMD; SIGINT and SIGQUIT only when not from the terminal (see above).
FORWARDED = ("SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2")
FROM_TERMINAL = ("SIGINT", "SIGQUIT")
#: Signals that stop the retries of the page once CMD has ended.
STOP_RETRYING = ("SIGINT", "SIGTERM", "SIGQUIT")
DEFAULT_TAIL = 20
DEFAULT_RETRY_S = 600.0
FIRST_RETRY_S, LONGEST_RETRY_S = 1.0, 30.0
#: The page's body (text and fields) is capped at 32 KiB by the broker: the logs get 16.
LOGS_CAP = 16 * 1024
LOGS_DROPPED = "(the output's tail did not fit in a page)"
LOG_INDENT = "    "  # the broker indents each line of the logs in the body by this much
#: One kept line at most (longer ones are cut), and the longest command line sent.
LINE_CAP = 4 * 1024
COMMAND_CAP = 2 * 1024
#: How long to wait for CMD's pipes to close once it ended (its background children may hold
#: them open).
DRAIN_S = 1.0
PREFIX = "pager run:"
JOB_ID_MAX = 200  # the broker's bound on a thread name (pager/domain/pages.py)


class RunUsageError(Exception):
    """Wrong arguments: exit 2 with the message."""


def add_command(commands: Any) -> None:
    """The parser of `pager run`, for `pager`'s argument parser."""
    import argparse

    run = commands.add_parser(
        "run",
        help="run a command and page when it ends: pager run [--to TO] -- CMD [ARGS…]",
        description="Run CMD with this terminal's standard streams (its output is copied"
        " through as it comes, signals are passed on) and, when it ends, page TO with its exit"
        " status or signal, how long it ran, the command line, the directory and the last N"
        " lines of its output. Exits with CMD's status (128+N when signal N ended it). With"
        " --pid, watch a running process instead and page when it ends. A page the broker"
        " cannot take yet is retried (for 600 s, env PAGER_RUN_RETRY_S), else printed on"
        " stderr.",
        epilog="examples:\n"
        "  pager run -- make test            # you are paged when the tests end\n"
        "  pager run -- make test &          # the same, in the background\n"
        "  pager run --to api --job-id build-42 --tail 50 -- ./build.sh\n"
        "  pager run --pid 4242              # page when process 4242 ends\n\n"
        "CMD sees pipes, not a terminal, so some programs turn colour off (--color=always\n"
        "brings it back; --tail 0 keeps the terminal). Options go before `--`.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("--to", metavar="TO", help="who to page: alias, alias@slug or agent id"
                     " (default: you, or the session this runs in)")  # fmt: skip
    run.add_argument("--tail", metavar="N", type=_tail_lines, default=DEFAULT_TAIL,
                     help="send the last N lines of output (default 20; 0: none)")  # fmt: skip
    run.add_argument("--job-id", metavar="J",
                     help="the job's id, the page's thread (default: run-<random>)")  # fmt: skip
    run.add_argument("--quiet-success", action="store_true",
                     help="no page when CMD exits with status 0")  # fmt: skip
    run.add_argument("--pid", metavar="PID", type=int,
                     help="instead of CMD: wait for the running process PID to end")  # fmt: skip
    run.add_argument("command_line", metavar="CMD [ARGS…]", nargs=argparse.REMAINDER)
    run.set_defaults(run_parser=run)


def _tail_lines(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of lines (0 or more)")
    return value


def cmd_run(args: argparse.Namespace) -> int:
    command = list(args.command_line)
    if command[:1] == ["--"]:
        command = command[1:]
    try:
        retry_s = _retry_bound(os.environ.get("PAGER_RUN_RETRY_S"))
        if args.to is not None and not args.to.strip():
            raise RunUsageError("--to needs an address: an alias, alias@slug or an agent id")
        if args.job_id is not None and not (
            0 < len(args.job_id) <= JOB_ID_MAX and args.job_id.isprintable()
        ):
            raise RunUsageError(f"--job-id must be 1-{JOB_ID_MAX} printable characters")
        if args.pid is not None:
            if command:
                raise RunUsageError(
                    "give either --pid PID or a command, not both (`pager run --pid PID`, or"
                    " `pager run -- CMD [ARGS…]`)"
                )
            return _watch(args, retry_s)
        if not command:
            raise RunUsageError("give the command to run: pager run [OPTIONS] -- CMD [ARGS…]")
    except RunUsageError as exc:
        args.run_parser.print_usage(sys.stderr)
        print(f"{PREFIX} {exc}", file=sys.stderr)
        return EXIT_USAGE
    return _run(args, command, retry_s)


def _retry_bound(raw: str | None) -> float:
    if raw is None or not raw.strip():
        return DEFAULT_RETRY_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise RunUsageError(f"PAGER_RUN_RETRY_S: {raw!r} is not a number of seconds (0 or more)")
    return value


def _job_id(args: argparse.Namespace) -> str:
    return str(args.job_id) if args.job_id else f"run-{os.urandom(3).hex()}"


def _whom(args: argparse.Namespace) -> str:
    return str(args.to) if args.to else "you"


# --- running CMD -------------------------------------------------------------------------


def _run(args: argparse.Namespace, command: list[str], retry_s: float) -> int:
    import shlex

    job = _job_id(args)
    shown = shlex.join(command)
    when = "if it fails" if args.quiet_success else "when it ends"
    print(f"{PREFIX} job {job}: {_one_line(shown)}; the page goes to {_whom(args)} {when}",
          file=sys.stderr)  # fmt: skip
    place = {"command": _cut(shown, COMMAND_CAP), "cwd": os.getcwd()}
    signals = _Signals()
    signals.install()
    keep = args.tail > 0
    tail = _Tail(args.tail)
    started = time.monotonic()
    try:
        pid, pipes = _spawn(command, keep)
    except OSError as exc:
        signals.job_ended()
        status, why = _start_failure(exc)
        print(f"{PREFIX} {command[0]}: {why}", file=sys.stderr)
        failed: dict[str, Any] = {
            "message": f"job {job}: `{_one_line(shown)}` could not start: {why}",
            "job_id": job,
            "status": "failure",
            "exit_code": status,
            "error": why,
            **place,
        }
        _deliver(args.to, failed, signals, retry_s)
        return status
    signals.job_started(pid)
    copier = _start_copier(pipes, tail) if pipes else None
    returncode = _wait(pid, signals)
    duration = time.monotonic() - started
    if copier is not None:
        copier.join(DRAIN_S)
    if returncode == 0 and args.quiet_success:
        return EXIT_OK
    page = {**_outcome(job, shown, returncode, duration), **place}
    if keep:
        lines, seen = tail.snapshot()
        page["output_lines"] = seen
        logs = _logs(lines)
        if logs:
            page["logs"] = logs
    _deliver(args.to, page, signals, retry_s)
    return returncode if returncode >= 0 else 128 - returncode


def _spawn(command: list[str], keep: bool) -> tuple[int, list[int]]:
    """Start CMD (found on PATH as a shell finds it) with this process's streams, or with its
    standard output and error into two new pipes when `keep`: its pid and the pipes' read ends.
    The signals Python ignores for itself (SIGPIPE, SIGXFSZ) get their default back, as
    `subprocess` does."""
    import signal

    _standard_fds_open()
    if signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # else CMD is reaped unseen: no status
    readers: list[int] = []
    writers: list[int] = []
    actions: list[tuple[int, int, int]] = []
    if keep:
        for target in (1, 2):
            reader, writer = os.pipe()  # not inheritable: only the dup2'd copies reach CMD
            readers.append(reader)
            writers.append(writer)
            actions.append((os.POSIX_SPAWN_DUP2, writer, target))
    defaults = [getattr(signal, name) for name in ("SIGPIPE", "SIGXFSZ") if hasattr(signal, name)]
    try:
        pid = os.posix_spawnp(
            command[0], command, os.environ, file_actions=actions, setsigdef=defaults
        )
    except BaseException:
        for fd in readers:
            os.close(fd)
        raise
    finally:
        for fd in writers:
            os.close(fd)
    return pid, readers


def _standard_fds_open() -> None:
    """Descriptors 0-2 open (on /dev/null where they were closed), so no pipe lands on one."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)  # the lowest free descriptor: this one


def _wait(pid: int, signals: _Signals) -> int:
    """CMD's return code once it ended (-N for signal N). It is waited for without being
    reaped first: until then its pid cannot be reused, so a signal passed on reaches CMD and
    nothing else; once it is reaped, no signal is passed on."""
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # retried after signals (PEP 475)
    finally:
        signals.job_ended()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _start_failure(exc: OSError) -> tuple[int, str]:
    """The shell's status and words for a command that could not start."""
    if isinstance(exc, FileNotFoundError):
        return 127, "command not found"
    if isinstance(exc, PermissionError):
        return 126, "permission denied (not an executable file)"
    return 126, f"cannot run it ({exc.strerror or exc})"


def _outcome(job: str, shown: str, returncode: int, duration: float) -> dict[str, Any]:
    """The page's text, job id, status, exit code or signal, and duration."""
    import signal

    took = _duration(duration)
    command = _one_line(shown)
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return {
            "message": f"job {job}: `{command}` was killed by {name} after {took}",
            "job_id": job,
            "status": "signal",
            "signal": name,
            "duration_s": round(duration, 3),
        }
    if returncode == 0:
        said, status = f"succeeded (exit status 0) after {took}", "success"
    else:
        said, status = f"exited with status {returncode} after {took}", "failure"
    return {
        "message": f"job {job}: `{command}` {said}",
        "job_id": job,
        "status": status,
        "exit_code": returncode,
        "duration_s": round(duration, 3),
    }


class _Signals:
    """The handlers that pass signals on to CMD while it runs, and stop the retries of the
    page after it ended. Python runs them in the main thread, between bytecodes."""

    def __init__(self) -> None:
        self.child: int | None = None
        self.pending: list[int] = []  # received before CMD started: passed on once it has
        self.running = True
        self.sleeping = False  # between two attempts at the page: a stop ends the wait now
        self.stop: int | None = None  # the signal that stopped the retries

    def install(self) -> None:
        import signal

        for name in (*FORWARDED, *FROM_TERMINAL):
            number = getattr(signal, name, None)
            if number is None or signal.getsignal(number) == signal.SIG_IGN:
                continue  # ignored by whoever started us (nohup): CMD inherits that
            signal.signal(number, self._handle)

    def job_started(self, pid: int) -> None:
        self.child = pid
        pending, self.pending = self.pending, []
        for number in pending:
            self._pass_on(number)

    def job_ended(self) -> None:
        self.running, self.child = False, None

    def _handle(self, number: int, frame: object) -> None:
        import signal

        name = signal.Signals(number).name
        if self.running:
            if name in FROM_TERMINAL and _terminal_foreground():
                return  # the terminal sent it to CMD's process group already
            if self.child is None:
                self.pending.append(number)
            else:
                self._pass_on(number)
            return
        if name in STOP_RETRYING:
            self.stop = number
            if self.sleeping:
                raise _StopRetrying

    def _pass_on(self, number: int) -> None:
        import contextlib

        if self.child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.child, number)


class _StopRetrying(Exception):
    """A signal asked to stop waiting for the next attempt at the page."""


def _terminal_foreground() -> bool:
    """Whether this process is in the foreground process group of its controlling terminal
    (then the terminal's SIGINT and SIGQUIT reached CMD too)."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return False  # no controlling terminal: the signal came from a kill
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(fd)


# --- output ------------------------------------------------------------------------------


class _Tail:
    """The last `size` lines of CMD's standard output and error together, in arrival order;
    bytes until the page is written. A line longer than LINE_CAP is cut; of a line rewritten
    with carriage returns (a progress bar), what follows the last one (what a terminal shows)."""

    def __init__(self, size: int) -> None:
        import collections
        import threading

        self.size = size
        self.lines: deque[bytes] = collections.deque(maxlen=max(size, 1))
        self.partial = [bytearray(), bytearray()]  # per stream: its line not yet ended
        self.cut = [False, False]
        self.seen = 0
        self.lock = threading.Lock()

    def add(self, stream: int, data: bytes) -> None:
        if self.size == 0:
            return
        with self.lock:
            *ended, rest = data.split(b"\n")
            for piece in ended:
                self._grow(stream, piece)
                self._keep(stream)
            self._grow(stream, rest)

    def snapshot(self) -> tuple[list[bytes], int]:
        """The kept lines, each stream's unfinished last line included, and how many lines
        were seen in all."""
        with self.lock:
            for stream in (0, 1):
                if self.partial[stream]:
                    self._keep(stream)
            return list(self.lines), self.seen

    def _grow(self, stream: int, piece: bytes) -> None:
        line = self.partial[stream]
        line += piece
        if len(line) > 2 * LINE_CAP:
            carriage = line.rfind(b"\r", 0, len(line) - 1)
            if carriage >= 0:
                del line[: carriage + 1]
            if len(line) > 2 * LINE_CAP:
                del line[LINE_CAP:]
                self.cut[stream] = True

    def _keep(self, stream: int) -> None:
        line = bytes(self.partial[stream]).removesuffix(b"\r")
        line = line[line.rfind(b"\r") + 1 :]
        if len(line) > LINE_CAP or self.cut[stream]:
            line = line[:LINE_CAP] + " […line cut]".encode()
        self.lines.append(line)
        self.seen += 1
        self.partial[stream].clear()
        self.cut[stream] = False


def _start_copier(pipes: list[int], tail: _Tail) -> Thread:
    """A thread copying CMD's output pipes (standard output, then error) to descriptors 1 and
    2 as bytes arrive, and into the tail: one thread polling both, so the tail keeps the order
    in which output arrived (standard output first when both have some). A target that cannot
    be written (closed, a broken pipe) is given up; reading goes on, so CMD never blocks."""
    import select
    import signal
    import threading

    def copy() -> None:
        targets = {fd: target for target, fd in enumerate(pipes, start=1)}
        writable = {1: True, 2: True}
        poller = select.poll()
        for fd in targets:
            poller.register(fd, select.POLLIN)
        try:
            while targets:
                for fd, _ in sorted(poller.poll(), key=lambda event: targets.get(event[0], 3)):
                    target = targets.get(fd)
                    if target is None:
                        continue
                    try:
                        data = os.read(fd, 65536)
                    except OSError:
                        data = b""
                    if not data:  # closed by CMD (and by whatever it started)
                        poller.unregister(fd)
                        del targets[fd]
                        os.close(fd)
                        continue
                    if writable[target]:
                        writable[target] = _write_all(target, data)
                    tail.add(target - 1, data)
        finally:
            for fd in targets:
                os.close(fd)

    thread = threading.Thread(target=copy, name="pager-run-copy", daemon=True)
    # The thread starts with the handled signals blocked, so the system delivers them to the
    # main thread: one delivered here would set Python's flag without interrupting the main
    # thread's wait, and would never be handled (or passed on to CMD).
    handled = {getattr(signal, name) for name in (*FORWARDED, *FROM_TERMINAL)}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, handled)
    try:
        thread.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    return thread


def _write_all(fd: int, data: bytes) -> bool:
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except BlockingIOError:  # a descriptor shared in non-blocking mode
            import select

            select.select([], [fd], [])
            continue
        except OSError:
            return False
        view = view[written:]
    return True


def _logs(lines: list[bytes]) -> str:
    """The tail as text for the page: decoded (bad bytes replaced), terminal escape sequences
    removed, and cut from the start, on a line boundary, to fit LOGS_CAP (saying so)."""
    import re

    escapes = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])")
    text = [escapes.sub("", line.decode("utf-8", errors="replace")) for line in lines]
    kept: list[str] = []
    size = 0
    for line in reversed(text):
        size += len(line.encode()) + 1 + len(LOG_INDENT)
        if size > LOGS_CAP and kept:
            break
        kept.append(line)
    kept.reverse()
    if len(kept) < len(text):
        kept.insert(0, f"[… {len(text) - len(kept)} earlier lines cut to fit the page]")
    return "\n".join(kept).rstrip("\n")


# --- watching a process ------------------------------------------------------------------


def _watch(args: argparse.Namespace, retry_s: float) -> int:
    pid = args.pid
    if pid <= 0 or not _exists(pid):
        raise RunUsageError(f"no process has the pid {pid}; give the pid of a running process")
    job = _job_id(args)
    began_wall, began = time.time(), time.monotonic()
    command, started_at, cwd = _process_facts(pid)
    shown = f"process {pid}" + (f" (`{_one_line(command)}`)" if command else "")
    print(f"{PREFIX} job {job}: watching {shown}; the page goes to {_whom(args)} when it ends",
          file=sys.stderr)  # fmt: skip
    try:
        _wait_gone(pid, started_at)
    except KeyboardInterrupt:
        print(f"{PREFIX} stopped watching process {pid}; nothing was paged", file=sys.stderr)
        return 130
    signals = _Signals()
    signals.job_ended()
    signals.install()  # from here a signal stops the retries, and the page is printed
    if started_at is not None:
        duration = max(0.0, time.time() - started_at)
        since = "the process's start"
    else:
        duration = time.monotonic() - began
        since = f"when pager run began watching it ({_clock(began_wall)})"
    page: dict[str, Any] = {
        "message": f"job {job}: {shown} ended after {_duration(duration)}",
        "job_id": job,
        "status": "ended",
        "pid": pid,
        "exit_status": "unknown: pager run did not start this process, so it cannot see how"
        " it ended",
        "duration_s": round(duration, 3),
        "duration_from": since,
    }
    if command:
        page["command"] = _cut(command, COMMAND_CAP)
    if cwd:
        page["cwd"] = cwd
    _deliver(args.to, page, signals, retry_s)
    return EXIT_OK


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's: it exists
    except OverflowError:
        return False
    return True


def _process_facts(pid: int) -> tuple[str, float | None, str | None]:
    """The process's command line, when it started (epoch seconds) and its directory, each
    as far as they can be read (/proc on Linux, `ps` elsewhere)."""
    import shlex

    proc = f"/proc/{pid}"
    if not os.path.isdir(proc):
        return _ps(pid, "args"), _ps_start(pid), None
    command = ""
    try:
        with open(f"{proc}/cmdline", "rb") as file:
            argv = [arg.decode(errors="replace") for arg in file.read().split(b"\0")[:-1]]
        command = shlex.join(argv)
        if not argv:  # a kernel thread, or a process that has just ended
            with open(f"{proc}/comm", "rb") as file:
                command = f"[{file.read().decode(errors='replace').strip()}]"
    except OSError:
        pass
    try:
        cwd: str | None = os.readlink(f"{proc}/cwd")
    except OSError:
        cwd = None
    return command, _proc_start(pid), cwd


def _proc_start(pid: int) -> float | None:
    """When `pid` started, from /proc/PID/stat (clock ticks after boot) and the boot time in
    /proc/stat; None when unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            fields = file.read().rsplit(b")", 1)[1].split()
        ticks = int(fields[19])  # field 22 of proc(5); these start at field 3
        with open("/proc/stat", "rb") as file:
            boot = next(int(line.split()[1]) for line in file if line.startswith(b"btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError, StopIteration):
        return None


def _ps(pid: int, field: str) -> str:
    import subprocess

    try:
        done = subprocess.run(["ps", "-o", f"{field}=", "-p", str(pid)], capture_output=True,
                              text=True, timeout=10, check=False)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _ps_start(pid: int) -> float | None:
    """When `pid` started, from `ps -o etime=` (`[[DD-]HH:]MM:SS` since it started)."""
    text = _ps(pid, "etime")
    if not text:
        return None
    days, _, clock = text.rpartition("-")
    try:
        seconds = 0
        for part in clock.split(":"):
            seconds = seconds * 60 + int(part)
        seconds += int(days or 0) * 86400
    except ValueError:
        return None
    return time.time() - seconds


def _wait_gone(pid: int, started_at: float | None) -> None:
    """Until `pid` has ended: a pidfd where the system has them, else a look every 0.5 s."""
    opener = getattr(os, "pidfd_open", None)
    if opener is not None:
        try:
            fd = opener(pid)
        except ProcessLookupError:
            return
        except OSError:
            pass  # an older kernel: look instead
        else:
            import select

            try:
                select.select([fd], [], [])  # readable once the process has ended
            finally:
                os.close(fd)
            return
    while _alive(pid, started_at):
        time.sleep(0.5)


def _alive(pid: int, started_at: float | None) -> bool:
    if not _exists(pid):
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            state = file.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc (macOS): it exists
    if state == b"Z":
        return False  # ended; its parent has not collected it yet
    now_started = _proc_start(pid)
    # The pid given to another process after this one ended is not the one watched.
    return started_at is None or now_started is None or abs(now_started - started_at) < 1.0


# --- the page ----------------------------------------------------------------------------


def _deliver(to: str | None, page: dict[str, Any], signals: _Signals, bound: float) -> None:
    """Send the page, retrying while no broker answers (or it answers `unavailable`) for up
    to `bound` seconds; a page that is not delivered is printed on stderr."""
    from pager.cli import CommandError
    from pager.everyday import CommandRefused, send_page

    deadline = time.monotonic() + bound
    delay = FIRST_RETRY_S
    whole = page  # what is printed if it is not delivered
    while True:
        try:
            sent = send_page(to, page, run=True)
        except CommandRefused as refused:
            if (
                refused.code == "oversized_content"
                and page.get("logs", LOGS_DROPPED) != LOGS_DROPPED
            ):
                page = {**page, "logs": LOGS_DROPPED}  # a smaller broker cap: the page still goes
                continue
            if refused.code != "unavailable":
                _undelivered(whole, f"the broker refused it: {refused}")
                return
            problem = str(refused)
        except (CommandError, OSError) as exc:
            problem = str(exc)
        else:
            address = sent.get("recipient", {}).get("address", to or "you")
            print(f"{PREFIX} paged {address} ({sent.get('message_id')})", file=sys.stderr)
            return
        problem = " ".join(problem.split())  # one line, whatever the cause said
        left = deadline - time.monotonic()
        if signals.stop is not None:
            _undelivered(whole, f"{problem}; stopped retrying on a signal")
            return
        if left <= 0:
            gave_up = f"gave up retrying after {_duration(bound)}" if bound else "no retries"
            _undelivered(whole, f"{problem}; {gave_up} (PAGER_RUN_RETRY_S={bound:g})")
            return
        wait = min(delay, left)
        print(f"{PREFIX} could not send the page ({problem}); will retry in {wait:.0f} s, for"
              f" up to {_duration(left)} more", file=sys.stderr)  # fmt: skip
        try:
            _pause(wait, signals)
        except _StopRetrying:
            _undelivered(whole, f"{problem}; stopped retrying on a signal")
            return
        delay = min(delay * 2, LONGEST_RETRY_S)


def _pause(seconds: float, signals: _Signals) -> None:
    signals.sleeping = True
    try:
        if signals.stop is not None:
            raise _StopRetrying
        time.sleep(seconds)
    finally:
        signals.sleeping = False


def _undelivered(page: dict[str, Any], why: str) -> None:
    """The page, whole, on stderr: it was not delivered, and must not be lost silently."""
    lines = [f"{PREFIX} the page was NOT delivered ({why}). It said:", f"  {page['message']}"]
    lines += [f"  {key}: {value}" for key, value in page.items() if key not in ("message", "logs")]
    if page.get("logs"):
        lines.append("  logs:")
        lines += [f"    {line}" for line in str(page["logs"]).split("\n")]
    print("\n".join(lines), file=sys.stderr)


# --- text --------------------------------------------------------------------------------


def _one_line(text: str, width: int = 120) -> str:
    line = " ⏎ ".join(text.splitlines()) if "\n" in text or "\r" in text else text
    return line if len(line) <= width else line[: width - 1] + "…"


def _cut(text: str, cap: int) -> str:
    data = text.encode()
    if len(data) <= cap:
        return text
    return data[:cap].decode(errors="ignore") + "… [cut]"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _clock(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %z", time.localtime(epoch))
