"""The page `pager run` sends: its text (how CMD ended, how long it ran), its delivery with
retries, and its print on stderr when it is not delivered."""

from __future__ import annotations

import sys
import time

from pager.commands.run.process import Signals, StopRetrying

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs milliseconds
if TYPE_CHECKING:
    from typing import Any

PREFIX = "pager run:"
FIRST_RETRY_S, LONGEST_RETRY_S = 1.0, 30.0
LOGS_DROPPED = "(the output's tail did not fit in a page)"
#: The longest command line sent.
COMMAND_CAP = 2 * 1024


def outcome(job: str, shown: str, returncode: int, duration: float) -> dict[str, Any]:
    """The page's text, job id, status, exit code or signal, and duration."""
    import signal

    took = duration_text(duration)
    command = one_line(shown)
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


def deliver(to: str | None, page: dict[str, Any], signals: Signals, bound: float) -> None:
    """Send the page, retrying while no broker answers (or it answers `unavailable`) for up
    to `bound` seconds; a page that is not delivered is printed on stderr."""
    from pager.commands.acting import CommandRefused, send_page
    from pager.commands.common import CommandError

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
            gave_up = f"gave up retrying after {duration_text(bound)}" if bound else "no retries"
            _undelivered(whole, f"{problem}; {gave_up} (PAGER_RUN_RETRY_S={bound:g})")
            return
        wait = min(delay, left)
        print(f"{PREFIX} could not send the page ({problem}); will retry in {wait:.0f} s, for"
              f" up to {duration_text(left)} more", file=sys.stderr)  # fmt: skip
        try:
            _pause(wait, signals)
        except StopRetrying:
            _undelivered(whole, f"{problem}; stopped retrying on a signal")
            return
        delay = min(delay * 2, LONGEST_RETRY_S)


def _pause(seconds: float, signals: Signals) -> None:
    signals.sleeping = True
    try:
        if signals.stop is not None:
            raise StopRetrying
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


def one_line(text: str, width: int = 120) -> str:
    line = " ⏎ ".join(text.splitlines()) if "\n" in text or "\r" in text else text
    return line if len(line) <= width else line[: width - 1] + "…"


def cut(text: str, cap: int) -> str:
    data = text.encode()
    if len(data) <= cap:
        return text
    return data[:cap].decode(errors="ignore") + "… [cut]"


def duration_text(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
