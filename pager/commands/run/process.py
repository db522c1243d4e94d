"""CMD as a process: spawning it, waiting for it to end, the signals passed on to it while it
runs (and that stop the retries of the page after it ended), and why it could not start."""

from __future__ import annotations

import os

#: Signals passed on to CMD; SIGINT and SIGQUIT only when not from the terminal (see
#: `pager.commands.run`).
FORWARDED = ("SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2")
FROM_TERMINAL = ("SIGINT", "SIGQUIT")
#: Signals that stop the retries of the page once CMD has ended.
STOP_RETRYING = ("SIGINT", "SIGTERM", "SIGQUIT")


def spawn(command: list[str], keep: bool) -> tuple[int, list[int]]:
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


def wait(pid: int, signals: Signals) -> int:
    """CMD's return code once it ended (-N for signal N). It is waited for without being
    reaped first: until then its pid cannot be reused, so a signal passed on reaches CMD and
    nothing else; once it is reaped, no signal is passed on."""
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # retried after signals (PEP 475)
    finally:
        signals.job_ended()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def start_failure(exc: OSError) -> tuple[int, str]:
    """The shell's status and words for a command that could not start."""
    if isinstance(exc, FileNotFoundError):
        return 127, "command not found"
    if isinstance(exc, PermissionError):
        return 126, "permission denied (not an executable file)"
    return 126, f"cannot run it ({exc.strerror or exc})"


class Signals:
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
                raise StopRetrying

    def _pass_on(self, number: int) -> None:
        import contextlib

        if self.child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.child, number)


class StopRetrying(Exception):
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
