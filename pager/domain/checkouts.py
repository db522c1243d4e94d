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


def locate(path: str, scope: str) -> Located | None:
    """`path` (absolute; it need not exist: its nearest existing directory decides) in the
    workspace `scope` (a key without its host), relative to the top of its checkout; None
    when it is in no directory of that workspace. A directory outside any repository is a
    workspace of its own, and its subdirectories are in it."""
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
    if workspace.key == scope:
        top = _checkout_top(real) or workspace.path
    elif workspace.key == workspace.path and _under(real, scope):
        top = scope  # a subdirectory of a workspace outside any repository
    else:
        return None
    full = os.path.join(real, *rest) if rest else real
    relative = os.path.relpath(full, top) if _under(full, top) else None
    if relative is None:
        return None
    return Located(scope, top, relative)


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
