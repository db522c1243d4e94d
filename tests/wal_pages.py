"""Counts the pages a piece of code makes SQLite write: each commit's frames in the WAL, named
by the table or index each page belongs to. A commit waits for the fsync of every page it
wrote, so this is what a write costs the disk (tests/statement_counter.py counts statements).

The WAL is read as the file format describes it (https://sqlite.org/fileformat2.html#walformat):
a 32-byte header with two salts, then frames of a 24-byte header (page number, database size
after a commit — 0 on the other frames of one —, the header's salts) and one page."""

from __future__ import annotations

import contextlib
import sqlite3
import struct
from collections.abc import Iterator
from pathlib import Path

import attrs

_WAL_HEADER = 32
_FRAME_HEADER = 24


@attrs.frozen
class Commit:
    """One commit in the WAL: its pages, and the table or index each one belongs to."""

    pages: tuple[int, ...]
    owners: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.pages)


@attrs.define
class Commits:
    """The commits written while in `commits_on`'s block (filled in when it ends)."""

    commits: list[Commit] = attrs.Factory(list)

    def pages(self) -> int:
        return sum(len(commit) for commit in self.commits)


def _frames(wal: bytes) -> list[list[int]]:
    """The page numbers of each commit in the WAL's current generation, in order."""
    if len(wal) < _WAL_HEADER:
        return []
    page_size = struct.unpack(">I", wal[8:12])[0]
    salts = wal[16:24]
    commits: list[list[int]] = []
    pending: list[int] = []
    offset = _WAL_HEADER
    while offset + _FRAME_HEADER + page_size <= len(wal):
        page, size_after = struct.unpack(">II", wal[offset : offset + 8])
        if wal[offset + 8 : offset + 16] != salts:
            break  # a frame of an earlier generation: the log ends here
        pending.append(page)
        if size_after:  # the commit's last frame
            commits.append(pending)
            pending = []
        offset += _FRAME_HEADER + page_size
    return commits


def _owners(conn: sqlite3.Connection, pages: list[int]) -> tuple[str, ...]:
    names = dict(conn.execute("SELECT pageno, name FROM dbstat"))
    return tuple(str(names.get(page, f"page {page}")) for page in pages)


@contextlib.contextmanager
def commits_on(database: Path) -> Iterator[Commits]:
    """The commits to `database` made while in the block. Its WAL is checkpointed and emptied
    first (no other connection may be reading then), so the block's commits start it again."""
    seen = Commits()
    conn = sqlite3.connect(database, isolation_level=None)
    try:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0, f"{database}: a reader held the WAL; cannot count pages"
        yield seen
        wal = Path(f"{database}-wal").read_bytes()
        seen.commits = [Commit(tuple(pages), _owners(conn, pages)) for pages in _frames(wal)]
    finally:
        conn.close()
