"""Where an absolute path is, for reservations (pager/domain/checkouts.py): relative to the top
of its own checkout (a linked worktree's too), in the workspace of its repository."""

from __future__ import annotations

import subprocess
from pathlib import Path

from pager.domain.checkouts import locate
from pager.domain.workspace import resolve_workspace


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_locate_in_a_checkout_and_its_linked_worktree(tmp_path: Path) -> None:
    """A file (existing or not) in the main checkout or a linked worktree is relative to that
    checkout's own top, in the repository's workspace; one in another repository is not."""
    main = tmp_path / "main"
    main.mkdir()
    _git("init", "-q", cwd=main)
    _git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "x",
         cwd=main)  # fmt: skip
    _git("worktree", "add", "-q", str(tmp_path / "wt"), cwd=main)
    (main / "src").mkdir()
    scope = resolve_workspace(main).key
    found = locate(str(main / "src" / "new.py"), scope)
    assert found is not None
    assert (found.top, found.path) == (str(main.resolve()), "src/new.py")
    found = locate(str(tmp_path / "wt" / "docs" / "y.md"), scope)
    assert found is not None
    assert (found.top, found.path) == (str((tmp_path / "wt").resolve()), "docs/y.md")
    other = tmp_path / "other"
    other.mkdir()
    _git("init", "-q", cwd=other)
    assert locate(str(other / "x.py"), scope) is None
    assert locate("/etc/passwd", scope) is None


def test_locate_outside_any_repository(tmp_path: Path) -> None:
    """A workspace outside any repository holds its subdirectories."""
    scope = resolve_workspace(tmp_path).key
    (tmp_path / "src").mkdir()
    found = locate(str(tmp_path / "src" / "x.py"), scope)
    assert found is not None
    assert found.path == "src/x.py"
