"""The delivery state machine's guards as the store writes them in SQL."""

from __future__ import annotations

from pager.domain.delivery import Step as S
from pager.store._delivery_sql import guard


def test_the_sql_guard_lists_the_source_states_as_literals() -> None:
    """The store's guarded updates take their states from the machine, as literals (SQLite's
    partial indexes need them)."""
    assert guard(S.CLAIM) == "state = 'queued'"
    assert guard(S.ACK) == "state IN ('claimed', 'delivered')"
    assert guard(S.EXPIRE) == "state IN ('queued', 'claimed', 'delivered')"
