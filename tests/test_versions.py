"""The version rules in one module agree with the store and decide adoption."""

from __future__ import annotations

from pager import store
from pager.versions import SCHEMA_VERSION, identity_mismatch, schema_verdict


def test_versions_schema_matches_store_migrations() -> None:
    """The schema version the CLI announces is the one the migrations end at."""
    assert SCHEMA_VERSION == store.CURRENT_SCHEMA_VERSION


def test_identity_mismatch_agreeing_identities() -> None:
    """Lock and /health agreeing on instance id, pid and schema: no mismatch."""
    lock = {"instance_id": "a", "pid": 7, "schema_version": 2}
    assert identity_mismatch(lock, {**lock, "ok": True, "version": "x"}) is None


def test_identity_mismatch_names_the_differing_key() -> None:
    """Any of the three keys differing is reported by name."""
    lock = {"instance_id": "a", "pid": 7, "schema_version": 2}
    for key, value in (("instance_id", "b"), ("pid", 8), ("schema_version", 1)):
        reason = identity_mismatch(lock, {**lock, key: value})
        assert reason is not None
        assert key in reason
    assert identity_mismatch(lock, {}) is not None


def test_schema_verdict_adopt_replace_refuse() -> None:
    """Same schema adopts, older is replaced, newer is refused."""
    assert schema_verdict(SCHEMA_VERSION) == "adopt"
    assert schema_verdict(SCHEMA_VERSION - 1) == "replace"
    assert schema_verdict(SCHEMA_VERSION + 1) == "refuse"
