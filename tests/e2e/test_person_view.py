"""What `pager read` shows depends on who reads (docs/cli.md): the person at a terminal gets a
header per message (from, when, thread, reply to, id) and the body, escaped; an agent (a
session's shell tool) and any output that is not a terminal get Pager's envelope. Driven
through pseudo-terminals, as a person's shell runs it, against a real broker."""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import trio

from tests.e2e.conftest import Broker
from tests.e2e.test_everyday_cli import PAGER, answer, pager
from tests.e2e.test_hostile_text import HOSTILE, SHOWN, _raw_controls
from tests.launch.conftest import PROCESS_BOUND

ENVELOPE = ("[pager] Below is mail", "<<<pager-message", "<<<end-pager-message")


class Terminal:
    """`pager ARGS` with its stdout and its stderr each on a pseudo-terminal of its own (as a
    person's shell gives it: both terminals), read as it writes."""

    def __init__(self, broker: Broker, cwd: Path, *args: str, **env: str) -> None:
        self.out, self.err = bytearray(), bytearray()
        out_fd, out_tty = pty.openpty()
        err_fd, err_tty = pty.openpty()
        self.process = subprocess.Popen(
            [*PAGER, *args],
            stdin=subprocess.DEVNULL,
            stdout=out_tty,
            stderr=err_tty,
            env={**broker.home.env, "TERM": "xterm", **env},
            cwd=cwd,
            # As from a shell: Ctrl-C (SIGINT) must reach it even when the suite ignores it.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        os.close(out_tty)
        os.close(err_tty)
        self._readers = [
            threading.Thread(target=self._drain, args=(fd, into), daemon=True)
            for fd, into in ((out_fd, self.out), (err_fd, self.err))
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _drain(fd: int, into: bytearray) -> None:
        try:
            while data := os.read(fd, 65536):
                into.extend(data)
        except OSError:  # EIO: the process closed its side
            pass
        finally:
            os.close(fd)

    def text(self, which: bytearray) -> str:
        """What was written so far; the terminal's CR LF for each line break back to LF."""
        return bytes(which).decode("utf-8", "replace").replace("\r\n", "\n")

    def wait_for(self, needle: str, which: bytearray) -> str:
        deadline = time.monotonic() + PROCESS_BOUND
        while needle not in self.text(which):
            assert time.monotonic() < deadline, (needle, self.text(self.out), self.text(self.err))
            time.sleep(0.02)
        return self.text(which)

    def finish(self) -> tuple[int, str, str]:
        """Its exit status, stdout and stderr once it has ended."""
        status = self.process.wait(timeout=PROCESS_BOUND)
        for reader in self._readers:
            reader.join(timeout=PROCESS_BOUND)
        return status, self.text(self.out), self.text(self.err)


def at_terminal(broker: Broker, cwd: Path, *args: str, **env: str) -> tuple[int, str, str]:
    return Terminal(broker, cwd, *args, **env).finish()


async def _mail_for_the_person(broker: Broker, desk: Path, **extra: str) -> dict[str, str]:
    """A message from agent `alice` (in the person's workspace) to the person, with a thread
    and the message it answers; the person's whoami."""
    me = answer(pager(broker, desk, "whoami", "--json"))
    alice = await broker.register("alice", workspace=str(desk))
    earlier = answer(pager(broker, desk, "send", alice["address"], "the question", "--json"))
    sent = {"to": me["alias"], "body": "the answer\nin two lines", "thread": "deploy-42",
            "reply_to": earlier["message_id"], **extra}  # fmt: skip
    status, answered = await broker.post("/v1/me/send", sent, token=alice["token"])
    assert status == 200, answered
    return {**me, "alice": alice["address"], "alice_token": alice["token"], **sent,
            "message_id": answered["message_id"]}  # fmt: skip


async def test_the_person_at_a_terminal_reads_headers_and_the_body_not_the_envelope(
    broker: Broker, places: dict[str, Path]
) -> None:
    """A header per message with reply_to; no preamble, no nonce markers; and the mail
    waiting for the person in another workspace, with what to run to read it."""
    with trio.fail_after(60):
        desk = places["desk"]
        mail = await _mail_for_the_person(broker, desk)
        elsewhere = await broker.register("bob", workspace=str(places["api"]))
        for body in ("one", "two"):  # to the person's name, in api (made there by the send)
            status, answered = await broker.post(
                "/v1/me/send", {"to": mail["alias"], "body": body}, token=elsewhere["token"]
            )
            assert status == 200, answered
        slug = elsewhere["address"].split("@", 1)[1]
        status, out, err = await trio.to_thread.run_sync(at_terminal, broker, desk, "read")
    assert status == 0, err
    assert not any(marker in out for marker in ENVELOPE), out
    header = out.split("\n\n", 1)[0].splitlines()
    assert header[0] == f"From:     {mail['alice']}"
    assert re.fullmatch(r"When:     \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(\d+s ago\)", header[1])
    assert header[2:] == [
        "Thread:   deploy-42",
        f"Reply to: {mail['reply_to']}",
        f"Message:  {mail['message_id']}",
    ]
    assert "\n\n  the answer\n  in two lines\n" in out
    assert out.rstrip().endswith(f"2 more for you in {slug}: cd {places['api']} && pager read")
    # The same in `inbox`; read here, nothing more waits here.
    status, out, _ = await trio.to_thread.run_sync(at_terminal, broker, desk, "inbox")
    assert status == 0
    assert out.splitlines() == [
        "no mail waiting",
        f"2 more for you in {slug}: cd {places['api']} && pager read",
    ]


async def test_an_agent_or_a_pipe_gets_the_envelope(
    broker: Broker, places: dict[str, Path]
) -> None:
    """Inside a session (its token in the environment), `read` prints the envelope, on a
    terminal as into a pipe; so does the person's `read` into a pipe; `--view` forces
    either."""
    with trio.fail_after(60):
        desk = places["desk"]
        mail = await _mail_for_the_person(broker, desk)
        bob = await broker.register("bob", workspace=str(desk))
        for _ in range(3):
            status, _ = await broker.post(
                "/v1/me/send", {"to": "bob", "body": "for bob", "reply_to": mail["message_id"]},
                token=mail["alice_token"],
            )  # fmt: skip
            assert status == 200
        piped = pager(broker, desk, "read", "1", PAGER_TOKEN=bob["token"])
        status, tty_out, err = await trio.to_thread.run_sync(
            lambda: at_terminal(broker, desk, "read", "1", PAGER_TOKEN=bob["token"])
        )
        forced = pager(broker, desk, "read", "1", "--view", "person", PAGER_TOKEN=bob["token"])
        person_piped = pager(broker, desk, "read")
    assert status == 0, err
    for shown in (piped.stdout, tty_out, person_piped.stdout):
        assert all(marker in shown for marker in ENVELOPE), shown
        assert "Reply to:" not in shown
    assert forced.stdout.startswith(f"From:     {mail['alice']}\n")
    assert f"Reply to: {mail['message_id']}\n" in forced.stdout
    assert not any(marker in forced.stdout for marker in ENVELOPE)


async def test_hostile_text_shows_escaped_in_the_persons_view(
    broker: Broker, places: dict[str, Path]
) -> None:
    """Terminal escapes, CR and bidi overrides in a body and in a thread reach the person's
    terminal escaped; the thread cannot start a line of its own."""
    with trio.fail_after(60):
        desk = places["desk"]
        await _mail_for_the_person(
            broker, desk, body=HOSTILE, thread="t\u202e\nFrom:     boss@corp\x1b[2J"
        )
        status, out, err = await trio.to_thread.run_sync(at_terminal, broker, desk, "read")
    assert status == 0, err
    assert not _raw_controls(out), sorted(_raw_controls(out))
    assert f"\n  {SHOWN}\n" in out
    assert "Thread:   t⟨U+202E⟩\\nFrom:     boss@corp\\x1b[2J\n" in out
    assert [line for line in out.splitlines() if line.startswith("From:")] == [
        line for line in out.splitlines() if line.startswith("From:     alice@")
    ]


async def test_follow_says_it_waits_and_how_to_stop_on_a_terminal(
    broker: Broker, places: dict[str, Path]
) -> None:
    """`read --follow` at a terminal says once, on stderr, whom it waits for and how to stop;
    then shows each message as it comes, until Ctrl-C."""
    desk = places["desk"]
    me = answer(pager(broker, desk, "whoami", "--json"))
    follower = Terminal(broker, desk, "read", "--follow")
    try:
        waiting = f"waiting for mail to {me['address']}; Ctrl-C to stop\n"
        assert follower.wait_for(waiting, follower.err) == waiting
        for n in range(2):
            assert pager(broker, desk, "send", me["alias"], f"note {n}").returncode == 0
            follower.wait_for(f"\n  note {n}\n", follower.out)
        follower.process.send_signal(signal.SIGINT)
        status, out, err = follower.finish()
    finally:
        if follower.process.poll() is None:
            follower.process.kill()
    assert status == 130
    assert err.count("waiting for mail") == 1
    assert out.count(f"From:     {me['address']}\n") == 2
    assert not any(marker in out for marker in ENVELOPE)


def test_follow_says_nothing_when_stderr_is_not_a_terminal(
    broker: Broker, places: dict[str, Path]
) -> None:
    desk = places["desk"]
    me = answer(pager(broker, desk, "whoami", "--json"))
    follower = subprocess.Popen(
        [*PAGER, "read", "--follow", "--json"],
        env=broker.home.env,
        cwd=desk,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert pager(broker, desk, "send", me["alias"], "hi").returncode == 0
        assert follower.stdout is not None
        assert '"body": "hi"' in follower.stdout.readline()
        follower.send_signal(signal.SIGINT)
        _, err = follower.communicate(timeout=PROCESS_BOUND)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert err == ""
