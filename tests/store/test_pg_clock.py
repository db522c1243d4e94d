"""The database's clock (SPEC §13: deadlines on the database's clock, never a broker's): a
broker measures how far its clock is from the server's and adds that to every time it reads."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from pager.store.pg import backend


class _Answers:
    """A connection whose server says it is `server` seconds past the epoch."""

    def __init__(self, server: float) -> None:
        self.server = server

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        assert "clock_timestamp()" in sql
        return self

    def fetchone(self) -> tuple[float]:
        return (self.server,)


def test_the_offset_is_the_servers_time_less_the_middle_of_the_round_trip(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before and after the round trip, then every later read (time.time is patched for all).
    local: Iterator[float] = itertools.chain([1000.0, 1000.2], itertools.repeat(1050.0))
    monkeypatch.setattr("pager.store.pg.backend.time.time", lambda: next(local))
    clock = backend.DatabaseClock()
    clock.measure(_Answers(1100.1))  # type: ignore[arg-type]
    assert clock.offset == pytest.approx(100.0)  # the server is 100 s ahead of this machine
    assert clock.now() == pytest.approx(1150.0)
