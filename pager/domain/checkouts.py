"""Which checkout of which workspace an absolute path is in, for reservations
(docs/reservations.md): a reservation's path is relative to the top of the checkout it was
written in (a linked worktree's own top, not the main one's), and the workspace is the
repository, as `pager.domain.workspace` finds it. Reads the file system: call off the loop."""

from __future__ import annotations

import os

import attrs

from pager.domain.workspace import resolve_workspace


@attrs.frozen
class Located:
    """`path` relative to `top`, the checkout holding it, of the workspace `key`."""

    key: str
    top: str
    path: str


def locate(path: str) -> Located | None:
    """The workspace and checkout of an absolute `path` (it need not exist: its nearest
    existing directory decides), or None when no directory of it exists."""
    canonical = os.path.normpath(path)
    rest: list[str] = []
    existing = canonical
    while not os.path.isdir(existing):
        parent, name = os.path.split(existing)
        if parent == existing:
            return None
        rest.insert(0, name)
        existing = parent
    real = os.path.realpath(existing)
    workspace = resolve_workspace(real)
    top = _checkout_top(real) or workspace.path
    full = os.path.join(real, *rest) if rest else real
    relative = os.path.relpath(full, top) if _under(full, top) else None
    if relative is None:
        return None
    return Located(workspace.key, top, "." if relative == "." else relative)


def _checkout_top(directory: str) -> str | None:
    """The nearest directory at or above `directory` holding a `.git` entry (file or
    directory), on the same file system."""
    current = directory
    device = os.stat(current).st_dev
    while True:
        if os.path.lexists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        try:
            if os.stat(parent).st_dev != device:
                return None
        except OSError:
            return None
        current = parent


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")
