"""What the store's statements need of a connection, whichever engine runs them.

The store's functions (pager/store/_identities.py, _messages.py, …) are written in the SQL that
SQLite 3.35+ and PostgreSQL both speak, as `Sql` statements whose parameters each engine spells
its own way (pager/store/_sql.py), against this protocol: an `sqlite3.Connection` is one as it
is (an `Sql` is SQLite's text), and the PostgreSQL backend hands them adapters that run each
statement in psycopg's spelling (pager/store/pg/_conn.py, _batch.py). Engine-specific
statements stay in each backend's modules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

from pager.store._sql import Sql


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


#: Positional (`{}`) or named (`{name}`) parameters.
Parameters = Sequence[Any] | Mapping[str, Any]


class Conn(Protocol):
    def execute(self, statement: Sql, parameters: Parameters = ..., /) -> Cursor: ...

    def executemany(self, statement: Sql, parameters: Iterable[Sequence[Any]], /) -> Cursor: ...

    def close(self) -> None: ...


T = TypeVar("T")


class AfterCommit(Generic[T]):
    """A write's answer built from results read as late as possible: a backend that sends a
    transaction's statements together (PostgreSQL, pg/_batch.py) builds it once the COMMIT's
    answer is in, so reading it costs no round trip of its own; SQLite builds it at once."""

    def __init__(self, finish: Callable[[], T]) -> None:
        self.finish = finish


def finished(value: T | AfterCommit[T]) -> T:
    """The value itself, an `AfterCommit` built."""
    return value.finish() if isinstance(value, AfterCommit) else value
