"""The record behind `--uninstall`: exact paths and hashes, created directories, stale files."""

from __future__ import annotations

from pathlib import Path

from pager.install.files import Planned, Status, apply, load_record, remove


def test_files_dropped_from_an_install_are_removed_when_unchanged(tmp_path: Path) -> None:
    state, home = tmp_path / "state", tmp_path / "home"
    home.mkdir()
    a, b = home / "x" / "a.json", home / "y" / "b.json"
    first = apply(state, "t", [Planned(a, b"1"), Planned(b, b"2")])
    assert [item.status for item in first] == [Status.WRITTEN, Status.WRITTEN]
    second = apply(state, "t", [Planned(a, b"1")])
    assert [(item.path, item.status) for item in second] == [
        (a, Status.UNCHANGED),
        (b, Status.REMOVED),
        (b.parent, Status.REMOVED),
    ]
    record = load_record(state, "t")
    assert record is not None
    assert list(record.files) == [str(a)]
    assert record.dirs == [str(a.parent)]


def test_a_path_planned_twice_is_written_once(tmp_path: Path) -> None:
    target = tmp_path / "f"
    outcomes = apply(tmp_path / "state", "t", [Planned(target, b"x"), Planned(target, b"x")])
    assert [item.status for item in outcomes] == [Status.WRITTEN]


def test_remove_without_a_record_does_nothing(tmp_path: Path) -> None:
    assert remove(tmp_path / "state", "t") == (None, [])


def test_a_file_deleted_by_hand_is_reported_missing(tmp_path: Path) -> None:
    target = tmp_path / "d" / "f"
    apply(tmp_path / "state", "t", [Planned(target, b"x")])
    target.unlink()
    _, outcomes = remove(tmp_path / "state", "t")
    assert [(item.path, item.status) for item in outcomes] == [
        (target, Status.MISSING),
        (target.parent, Status.REMOVED),
    ]
    assert not (tmp_path / "state" / "installed").exists()
