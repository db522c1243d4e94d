"""`pager run` (SPEC §4.1, §8.2) through real processes against a real broker: the command's
output passes through while its tail is kept, its status (or the signal that ended it) becomes
`pager run`'s, and the page reaches the caller (or TO) as a script-origin message threaded by
the job id; signals are passed on; `--pid` watches a process it did not start; a page the
broker cannot take yet is retried, and one never delivered is printed on stderr."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from tests.e2e.conftest import Broker, mcp_session, structured
from tests.launch.conftest import PROCESS_BOUND, wait_for

PAGER = [sys.executable, "-m", "pager"]
#: The job id in `pager run`'s first line on stderr.
STARTED = re.compile(r"^pager run: job (\S+): ")
#: CMD for the signal tests: counts the SIGINTs it gets into a file (atomically: "0" once its
#: handlers are in place) and exits with that count on SIGUSR1.
COUNTER = """
import os, signal, sys
path, count = sys.argv[1], 0
def save():
    with open(path + ".tmp", "w") as file:
        file.write(str(count))
    os.replace(path + ".tmp", path)
def interrupted(*_):
    global count
    count += 1
    save()
signal.signal(signal.SIGINT, interrupted)
signal.signal(signal.SIGUSR1, lambda *_: sys.exit(count))
save()
while True:
    signal.pause()
"""
#: A configuration value the broker refuses to start with (SPEC §3).
BAD_CONFIG = '[windows]\nunused = "soon"\n'


def pager(
    broker: Broker, *args: str, cwd: Path | None = None, stdin: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PAGER, *args],
        env={**broker.home.env, **env},
        cwd=cwd or broker.workspace,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=PROCESS_BOUND,
        check=False,
    )


def start_run(broker: Broker, *args: str, **options: Any) -> subprocess.Popen[str]:
    """`pager run ARGS…` in the background, in the broker's workspace, its streams piped."""
    env = {**broker.home.env, **options.pop("env", {})}
    streams: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    return subprocess.Popen(
        [*PAGER, "run", *args], env=env, cwd=broker.workspace, text=True,
        **{**streams, **options},
    )  # fmt: skip


def _default_signals() -> None:
    """In the child, before exec: the dispositions a terminal would give it (a suite started
    in the background ignores SIGINT, and a child inherits that)."""
    for number in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(number, signal.SIG_DFL)


class Lines:
    """The lines of a stream, read by a thread as they come, for waiting on one of them."""

    def __init__(self, stream: IO[str]) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def until(self, predicate: Callable[[str], bool], what: str) -> str:
        """The first line (from here on) for which `predicate` holds."""
        while True:
            try:
                line = self._queue.get(timeout=PROCESS_BOUND)  # a hang guard
            except queue.Empty:
                pytest.fail(f"timed out waiting for {what}; seen: {self.seen}")
            if line is None:
                pytest.fail(f"the stream ended before {what}; seen: {self.seen}")
            self.seen.append(line)
            if predicate(line):
                return line

    def rest(self) -> str:
        """Everything up to the end of the stream (its process has ended)."""
        self._thread.join(PROCESS_BOUND)
        while (line := self._queue.get_nowait()) is not None:
            self.seen.append(line)
        return "".join(self.seen)


def job_of(stderr: str) -> str:
    match = STARTED.match(stderr.splitlines()[0])
    assert match is not None, stderr
    return match[1]


def read_pages(broker: Broker, cwd: Path | None = None) -> list[dict[str, Any]]:
    """The person's waiting mail (claimed and acknowledged), as `pager read --json` prints it."""
    done = pager(broker, "read", "100", "--json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return [json.loads(line)["message"] for line in done.stdout.splitlines()]


def whoami(broker: Broker) -> dict[str, Any]:
    done = pager(broker, "whoami", "--json")
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def body_lines(page: dict[str, Any]) -> list[str]:
    return str(page["body"]).splitlines()


def message_count(broker: Broker) -> int:
    return sum(record["kind"] == "message" for record in broker.export_sync())


@pytest.fixture
def finish() -> Iterator[list[subprocess.Popen[Any]]]:
    """Processes a test started, killed if still running when it ends."""
    started: list[subprocess.Popen[Any]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_run_passes_output_through_and_pages_the_caller_with_status_and_tail(
    broker: Broker,
) -> None:
    """CMD's output reaches the same streams; `pager run` exits with CMD's status; the person
    reads a page from their own identity, threaded by the job id, script origin and hop 0,
    naming the status, the command, the directory and both output lines."""
    done = pager(broker, "run", "--", "sh", "-c", "echo a; echo b >&2; exit 7")
    assert done.returncode == 7, done.stderr
    assert done.stdout == "a\n"
    assert "b\n" in done.stderr.splitlines(keepends=True)
    job = job_of(done.stderr)
    assert job.startswith("run-")
    assert "the page goes to you when it ends" in done.stderr.splitlines()[0]
    me = whoami(broker)
    [page] = read_pages(broker)
    assert (page["from"], page["to"]) == (me["address"], me["address"])
    assert (page["thread"], page["origin"], page["hop"]) == (job, "script", 0)
    lines = body_lines(page)
    assert lines[0].startswith(
        f"job {job}: `sh -c 'echo a; echo b >&2; exit 7'` exited with status 7 after "
    )
    assert {"status: failure", "exit_code: 7", f"cwd: {broker.workspace}",
            "command: sh -c 'echo a; echo b >&2; exit 7'"} <= set(lines)  # fmt: skip
    logs = lines[lines.index("logs:") + 1 :]
    assert sorted(logs) == ["    a", "    b"]
    assert any(line.startswith("duration_s: ") for line in lines)


def test_tail_keeps_the_last_n_lines_and_a_given_job_id(broker: Broker) -> None:
    """`--tail 2` sends the last two lines (and says how many there were); `--job-id` is the
    thread; `--tail 0` sends no logs while the output still passes through."""
    script = "for n in 1 2 3 4 5; do echo line-$n; done"
    done = pager(broker, "run", "--tail", "2", "--job-id", "build-42", "--", "sh", "-c", script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [f"line-{n}" for n in range(1, 6)]
    assert job_of(done.stderr) == "build-42"
    [page] = read_pages(broker)
    assert page["thread"] == "build-42"
    lines = body_lines(page)
    assert "succeeded (exit status 0)" in lines[0]
    assert {"status: success", "exit_code: 0", "output_lines: 5"} <= set(lines)
    assert lines[lines.index("logs:") + 1 :] == ["    line-4", "    line-5"]
    done = pager(broker, "run", "--tail", "0", "--", "sh", "-c", script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [f"line-{n}" for n in range(1, 6)]
    [page] = read_pages(broker)
    assert "logs:" not in body_lines(page)


def test_much_output_passes_through_whole_and_the_logs_fit_a_page(broker: Broker) -> None:
    """Far more output than a pipe holds, on both streams, all copied through; the tail sent
    is cut from its start to fit the page, saying so, and the page is delivered."""
    script = (
        "i=0; while [ $i -lt 3000 ]; do"
        " echo out-$i-................................................................;"
        " echo err-$i >&2; i=$((i+1)); done"
    )
    done = pager(broker, "run", "--tail", "5000", "--", "sh", "-c", script)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert len(out) == 3000
    assert out[-1].startswith("out-2999-")
    assert sum(line.startswith("err-") for line in done.stderr.splitlines()) == 3000
    [page] = read_pages(broker)
    lines = body_lines(page)
    assert "output_lines: 6000" in lines
    logs = lines[lines.index("logs:") + 1 :]
    assert re.fullmatch(r" {4}\[… \d+ earlier lines cut to fit the page\]", logs[0])
    assert {"    err-2999", f"    {out[-1]}"} <= set(logs)
    assert len(str(page["body"]).encode()) <= 32 * 1024


def test_a_page_over_the_brokers_cap_is_sent_without_its_logs(broker: Broker) -> None:
    """A broker whose body cap is smaller than the tail sent refuses the page as oversized:
    `pager run` sends it again without the logs rather than lose it."""
    assert broker.home.run("exit").returncode == 0
    script = (
        "i=0; while [ $i -lt 100 ]; do echo line-$i-.........................; i=$((i+1)); done"
    )
    done = pager(
        broker, "run", "--tail", "100", "--", "sh", "-c", script,
        PAGER_LIMIT_BODY_CAP="2KiB", PAGER_LIMIT_DISPLAY_CAP="1KiB",  # the broker it starts
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "pager run: paged " in done.stderr
    [page] = read_pages(broker)
    lines = body_lines(page)
    assert lines[lines.index("logs:") + 1 :] == ["    (the output's tail did not fit in a page)"]
    assert "output_lines: 100" in lines


def test_cmd_killed_by_a_signal_is_exit_128_plus_n_and_the_page_names_it(
    broker: Broker, tmp_path: Path, finish: list[subprocess.Popen[Any]]
) -> None:
    """CMD ended by SIGTERM (sent to CMD itself): `pager run` exits 143 and pages the signal,
    with no exit code."""
    pid_file = tmp_path / "cmd.pid"
    script = f"echo $$ > {pid_file}.tmp && mv {pid_file}.tmp {pid_file} && exec sleep 600"
    run = start_run(broker, "--", "sh", "-c", script)
    finish.append(run)
    wait_for(pid_file.exists, "CMD to start")
    os.kill(int(pid_file.read_text()), signal.SIGTERM)
    _, err = run.communicate(timeout=PROCESS_BOUND)
    assert run.returncode == 143, err
    [page] = read_pages(broker)
    lines = body_lines(page)
    assert "was killed by SIGTERM after" in lines[0]
    assert {"status: signal", "signal: SIGTERM"} <= set(lines)
    assert not any(line.startswith("exit_code:") for line in lines)


@pytest.mark.parametrize(("sent", "status"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_signals_sent_to_pager_run_are_passed_on_to_cmd(
    broker: Broker, tmp_path: Path, finish: list[subprocess.Popen[Any]],
    sent: signal.Signals, status: int,
) -> None:  # fmt: skip
    """SIGTERM or SIGHUP sent to `pager run` itself reaches CMD; `pager run` outlives it,
    pages, and exits with CMD's status (it was not killed itself)."""
    pid_file = tmp_path / "cmd.pid"
    script = f"echo $$ > {pid_file}.tmp && mv {pid_file}.tmp {pid_file} && exec sleep 600"
    run = start_run(broker, "--", "sh", "-c", script, preexec_fn=_default_signals)
    finish.append(run)
    wait_for(pid_file.exists, "CMD to start")  # so pager run's handlers are in place
    run.send_signal(sent)
    _, err = run.communicate(timeout=PROCESS_BOUND)
    assert run.returncode == status, err  # not -N: pager run was not killed by it
    assert "pager run: paged " in err
    [page] = read_pages(broker)
    assert f"signal: {sent.name}" in body_lines(page)


def test_sigint_sent_to_pager_run_outside_a_terminal_is_passed_on(
    broker: Broker, tmp_path: Path, finish: list[subprocess.Popen[Any]]
) -> None:
    """Without a controlling terminal, a SIGINT sent to `pager run` (`kill -INT`) is passed on
    to CMD, once, as is SIGUSR1; CMD's exit status is `pager run`'s."""
    counter = tmp_path / "count"
    run = start_run(
        broker, "--", sys.executable, "-c", COUNTER, str(counter),
        start_new_session=True, preexec_fn=_default_signals,
    )  # fmt: skip
    finish.append(run)
    wait_for(lambda: counter.exists(), "CMD to set its handlers")
    run.send_signal(signal.SIGINT)
    wait_for(lambda: counter.read_text() != "0", "CMD to get the SIGINT")
    run.send_signal(signal.SIGUSR1)
    _, err = run.communicate(timeout=PROCESS_BOUND)
    assert run.returncode == 1, err  # the number of SIGINTs CMD got
    [page] = read_pages(broker)
    assert "exit_code: 1" in body_lines(page)


def test_ctrl_c_at_a_terminal_reaches_cmd_once(
    broker: Broker, tmp_path: Path, finish: list[subprocess.Popen[Any]]
) -> None:
    """At a terminal, Ctrl-C reaches CMD from the terminal itself (same foreground process
    group): `pager run` does not send a second SIGINT, keeps waiting for CMD, and pages."""
    import fcntl
    import termios

    counter = tmp_path / "count"
    leader, follower = os.openpty()

    def in_terminal() -> None:  # after setsid: the terminal becomes the controlling one
        _default_signals()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    try:
        run = subprocess.Popen(
            [*PAGER, "run", "--", sys.executable, "-c", COUNTER, str(counter)],
            env=broker.home.env, cwd=broker.workspace, stdin=follower, stdout=follower,
            stderr=follower, start_new_session=True, preexec_fn=in_terminal,
        )  # fmt: skip
        finish.append(run)
        os.close(follower)
        wait_for(lambda: counter.exists(), "CMD to set its handlers")
        # Stopped, pager run holds its own SIGINT pending until CMD has handled the terminal's
        # (two pending SIGINTs would merge into one, and hide a second one sent).
        run.send_signal(signal.SIGSTOP)
        wait_for(lambda: _state(run.pid) == "T", "pager run to stop")
        os.write(leader, b"\x03")  # Ctrl-C, typed at the terminal
        wait_for(lambda: counter.read_text() != "0", "CMD to get the SIGINT")
        run.send_signal(signal.SIGCONT)
        # Passed on after any SIGINT pager run would pass on (lower signals are handled first).
        run.send_signal(signal.SIGUSR1)
        assert run.wait(timeout=PROCESS_BOUND) == 1, _drain(leader)  # CMD got one SIGINT
    finally:
        os.close(leader)
    [page] = read_pages(broker)
    assert {"status: failure", "exit_code: 1"} <= set(body_lines(page))


def _state(pid: int) -> str:
    """The state letter of a process (proc(5)): R, S, T (stopped), Z…"""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _drain(fd: int) -> str:
    """What the terminal shows (for a failure's message)."""
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 65536).decode(errors="replace")
    except OSError:
        return ""


def test_pid_watches_a_running_process_and_pages_when_it_ends(
    broker: Broker, finish: list[subprocess.Popen[Any]]
) -> None:
    """`--pid PID` waits for a process `pager run` did not start and pages that it ended
    (its exit status unknown), with its command line; exit 0."""
    watched = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()", "watched-marker"],
        stdin=subprocess.PIPE,
    )
    finish.append(watched)
    run = start_run(broker, "--pid", str(watched.pid), "--job-id", "watch-1")
    finish.append(run)
    assert run.stderr is not None
    stderr = Lines(run.stderr)
    stderr.until(lambda line: "watching process" in line, "the watch to begin")
    assert run.poll() is None, "it waits while the process runs"
    assert message_count(broker) == 0
    assert watched.stdin is not None
    watched.stdin.close()  # the watched process ends
    watched.wait(timeout=PROCESS_BOUND)
    assert run.wait(timeout=PROCESS_BOUND) == 0, stderr.rest()
    [page] = read_pages(broker)
    assert page["thread"] == "watch-1"
    lines = body_lines(page)
    assert lines[0].startswith(f"job watch-1: process {watched.pid} (`")
    assert "watched-marker" in lines[0]
    assert " ended after " in lines[0]
    assert {"status: ended", f"pid: {watched.pid}",
            "duration_from: the process's start"} <= set(lines)  # fmt: skip
    assert any(line.startswith("exit_status: unknown") for line in lines)
    assert not any(line.startswith("exit_code:") for line in lines)


async def test_to_pages_another_identity_and_quiet_success_pages_only_failures(
    broker: Broker,
) -> None:
    """`--to x` pages x (from the person); `--quiet-success` sends nothing on exit 0 and
    still pages a failure."""
    x = await broker.register("x")
    me = whoami(broker)
    done = pager(broker, "run", "--to", "x", "--job-id", "for-x", "--", "true")
    assert done.returncode == 0, done.stderr
    assert "the page goes to x when it ends" in done.stderr
    async with mcp_session(broker.url, x["token"]) as session:
        [claim] = structured(await session.call_tool("fetch", {}))["claims"]
    got = claim["message"]
    assert (got["from"], got["thread"]) == (me["address"], "for-x")
    assert "succeeded (exit status 0)" in got["body"]
    before = message_count(broker)
    done = pager(broker, "run", "--quiet-success", "--", "true")
    assert done.returncode == 0, done.stderr
    assert "pager run: paged" not in done.stderr
    assert message_count(broker) == before
    done = pager(broker, "run", "--quiet-success", "--", "false")
    assert done.returncode == 1, done.stderr
    [page] = read_pages(broker)
    assert "exit_code: 1" in body_lines(page)


def test_a_broker_stopped_while_cmd_runs_is_started_again_for_the_page(
    broker: Broker, finish: list[subprocess.Popen[Any]]
) -> None:
    """The broker stops (`pager exit`) while CMD runs; when CMD ends, `pager run` starts one,
    as every messaging command does, and the page is delivered."""
    run = start_run(broker, "--", "sh", "-c", 'read line; echo "got $line"; exit 4',
                    stdin=subprocess.PIPE)  # fmt: skip
    finish.append(run)
    stopped = broker.home.run("exit")
    assert stopped.returncode == 0, stopped.stderr
    assert not broker.home.broker_pids()
    out, err = run.communicate("go\n", timeout=PROCESS_BOUND)  # CMD reads it and ends
    assert run.returncode == 4, err
    assert out == "got go\n"
    assert "pager run: paged " in err
    assert broker.home.broker_pids()
    [page] = read_pages(broker)
    assert {"exit_code: 4", "    got go"} <= set(body_lines(page))


def test_a_broker_that_cannot_start_is_retried_until_the_page_lands(
    broker: Broker, finish: list[subprocess.Popen[Any]]
) -> None:
    """No broker runs and none can start (a bad config.toml): `pager run` says so on stderr
    and retries; once the file is fixed, the page lands."""
    assert broker.home.run("exit").returncode == 0
    config = broker.home.root / "config.toml"
    config.write_text(BAD_CONFIG)
    run = start_run(broker, "--", "sh", "-c", "echo done; exit 5", env={"PAGER_RUN_RETRY_S": "300"})
    finish.append(run)
    assert run.stderr is not None
    stderr = Lines(run.stderr)
    retry = stderr.until(lambda line: "could not send the page" in line, "a retry line")
    assert "config.toml" in retry
    assert "will retry in " in retry
    config.unlink()
    assert run.wait(timeout=PROCESS_BOUND) == 5
    assert "pager run: paged " in stderr.rest()
    [page] = read_pages(broker)
    assert {"exit_code: 5", "    done"} <= set(body_lines(page))


def test_an_undelivered_page_is_printed_on_stderr(broker: Broker) -> None:
    """With no retries left (PAGER_RUN_RETRY_S=0) and no broker able to start, `pager run`
    still exits with CMD's status, and prints the page it could not deliver."""
    assert broker.home.run("exit").returncode == 0
    (broker.home.root / "config.toml").write_text(BAD_CONFIG)
    done = pager(broker, "run", "--", "sh", "-c", "echo partial; exit 6", PAGER_RUN_RETRY_S="0")
    assert done.returncode == 6, done.stderr
    job = job_of(done.stderr)
    assert "the page was NOT delivered" in done.stderr
    assert f"job {job}: `sh -c 'echo partial; exit 6'` exited with status 6" in done.stderr
    assert "    partial" in done.stderr.splitlines()
    assert "could not send the page" not in done.stderr  # no retry was announced
    assert not broker.home.broker_pids()


def test_a_command_that_cannot_start_exits_like_a_shell_and_is_paged(
    broker: Broker, tmp_path: Path
) -> None:
    """Not found: 127; found but not executable: 126; each said on stderr and paged as a
    failure (whoever waits for the page hears that the job never ran)."""
    done = pager(broker, "run", "--", "no-such-command-pager-test")
    assert done.returncode == 127, done.stderr
    assert "pager run: no-such-command-pager-test: command not found" in done.stderr
    plain = tmp_path / "not-executable"
    plain.write_text("echo hi\n")
    done = pager(broker, "run", "--", str(plain))
    assert done.returncode == 126, done.stderr
    assert "permission denied" in done.stderr
    pages = read_pages(broker)
    assert [("exit_code: 127" in body_lines(p), "exit_code: 126" in body_lines(p))
            for p in pages] == [(True, False), (False, True)]  # fmt: skip
    assert all("could not start" in body_lines(p)[0] for p in pages)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("run",), "give the command to run"),
        (("run", "--"), "give the command to run"),
        (("run", "--tail", "-1", "--", "true"), "'-1' is not a number of lines"),
        (("run", "--tail", "x", "--", "true"), "'x' is not a number of lines"),
        (("run", "--pid", "1", "--", "true"), "give either --pid PID or a command"),
        (("run", "--pid", "PID_MAX"), "no process has the pid"),
        (("run", "--pid", "0"), "no process has the pid"),
        (("run", "--job-id", "j" * 201, "--", "true"), "--job-id must be 1-200 characters"),
        (("run", "--job-id", "a\nb", "--", "true"), "without control characters"),
        (("run", "--to", "", "--", "true"), "--to needs an address"),
    ],
)
def test_bad_input_is_a_usage_error_and_sends_nothing(
    broker: Broker, args: tuple[str, ...], needle: str
) -> None:
    pid_max = Path("/proc/sys/kernel/pid_max").read_text().strip()  # no pid reaches it
    done = pager(broker, *(pid_max if arg == "PID_MAX" else arg for arg in args))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert needle in done.stderr
    assert "usage: pager run" in done.stderr
    assert message_count(broker) == 0


def test_help_describes_the_command_with_examples(broker: Broker) -> None:
    done = pager(broker, "run", "--help")
    assert done.returncode == 0, done.stderr
    for needle in ("--quiet-success", "--pid PID", "--tail N", "pager run -- make test &"):
        assert needle in done.stdout
    assert "run a command and page when it ends" in pager(broker, "--help").stdout
