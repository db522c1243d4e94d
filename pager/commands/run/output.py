"""CMD's output: copied to this process's standard output and error as it arrives, its last
lines kept (the tail), and the tail as the text of the page's logs."""

from __future__ import annotations

import os

from pager.commands.run.process import FORWARDED, FROM_TERMINAL

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs milliseconds
if TYPE_CHECKING:
    from collections import deque
    from threading import Thread

#: The page's body (text and fields) is capped at 32 KiB by the broker: the logs get 16.
LOGS_CAP = 16 * 1024
LOG_INDENT = "    "  # the broker indents each line of the logs in the body by this much
#: One kept line at most (longer ones are cut).
LINE_CAP = 4 * 1024


class Tail:
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


def start_copier(pipes: list[int], tail: Tail) -> Thread:
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


def logs_text(lines: list[bytes]) -> str:
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
