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

This module holds the command's parser, its usage checks and the run of CMD end to end; the
parts are in `process` (spawning and waiting for CMD, its signals), `output` (copying CMD's
output and keeping its tail), `watch` (`--pid`) and `page` (the page: its text, its delivery).
They are imported only when the command runs, not to build its parser.
"""

from __future__ import annotations

import os
import sys
import time

from pager.commands.common import EXIT_OK, EXIT_USAGE
from pager.domain.job_ids import JOB_ID_RULE, is_job_id

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs milliseconds
if TYPE_CHECKING:
    import argparse
    from typing import Any

DEFAULT_TAIL = 20
DEFAULT_RETRY_S = 600.0
#: How long to wait for CMD's pipes to close once it ended (its background children may hold
#: them open).
DRAIN_S = 1.0


class RunUsageError(Exception):
    """Wrong arguments: exit 2 with the message."""


def add_commands(commands: Any) -> None:
    """The parser of `pager run`, for `pager`'s argument parser."""
    import argparse

    run = commands.add_parser(
        "run",
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
        if args.job_id is not None and not is_job_id(args.job_id):
            raise RunUsageError(f"--job-id must be {JOB_ID_RULE}")
        if args.pid is not None:
            if command:
                raise RunUsageError(
                    "give either --pid PID or a command, not both (`pager run --pid PID`, or"
                    " `pager run -- CMD [ARGS…]`)"
                )
            from pager.commands.run.watch import exists, watch_process

            pid = args.pid
            if pid <= 0 or not exists(pid):
                raise RunUsageError(
                    f"no process has the pid {pid}; give the pid of a running process"
                )
            return watch_process(pid, args.to, _job_id(args), _whom(args), retry_s)
        if not command:
            raise RunUsageError("give the command to run: pager run [OPTIONS] -- CMD [ARGS…]")
    except RunUsageError as exc:
        from pager.commands.run.page import PREFIX

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


def _run(args: argparse.Namespace, command: list[str], retry_s: float) -> int:
    import shlex

    from pager.commands.run.output import Tail, logs_text, start_copier
    from pager.commands.run.page import COMMAND_CAP, PREFIX, cut, deliver, one_line, outcome
    from pager.commands.run.process import Signals, spawn, start_failure, wait

    job = _job_id(args)
    shown = shlex.join(command)
    when = "if it fails" if args.quiet_success else "when it ends"
    print(f"{PREFIX} job {job}: {one_line(shown)}; the page goes to {_whom(args)} {when}",
          file=sys.stderr)  # fmt: skip
    place = {"command": cut(shown, COMMAND_CAP), "cwd": os.getcwd()}
    signals = Signals()
    signals.install()
    keep = args.tail > 0
    tail = Tail(args.tail)
    started = time.monotonic()
    try:
        pid, pipes = spawn(command, keep)
    except OSError as exc:
        signals.job_ended()
        status, why = start_failure(exc)
        print(f"{PREFIX} {command[0]}: {why}", file=sys.stderr)
        failed: dict[str, Any] = {
            "message": f"job {job}: `{one_line(shown)}` could not start: {why}",
            "job_id": job,
            "status": "failure",
            "exit_code": status,
            "error": why,
            **place,
        }
        deliver(args.to, failed, signals, retry_s)
        return status
    signals.job_started(pid)
    copier = start_copier(pipes, tail) if pipes else None
    returncode = wait(pid, signals)
    duration = time.monotonic() - started
    if copier is not None:
        copier.join(DRAIN_S)
    if returncode == 0 and args.quiet_success:
        return EXIT_OK
    page = {**outcome(job, shown, returncode, duration), **place}
    if keep:
        lines, seen = tail.snapshot()
        page["output_lines"] = seen
        logs = logs_text(lines)
        if logs:
            page["logs"] = logs
    deliver(args.to, page, signals, retry_s)
    return returncode if returncode >= 0 else 128 - returncode


HANDLERS: dict[str, Any] = {"run": cmd_run}
