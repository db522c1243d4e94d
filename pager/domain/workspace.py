"""Workspaces (SPEC §2): the Git repository a directory belongs to, found without running git.

The key is the canonical path of what `git rev-parse --git-common-dir` names, so a repository's
main worktree, its linked worktrees and all their subdirectories share one workspace; a directory
outside any repository is a workspace of its own (key = its canonical path).

Discovery follows git's own walk (setup.c), reading a few small files instead of spending a
subprocess on every registration and hook:

- from the canonical directory upwards, at each level: a `.git` directory that is a git dir; else a
  `.git` file `gitdir: <path>` (linked worktree, submodule, `--separate-git-dir`; the path may be
  relative to the file's directory); else the level itself if it is a git dir — a bare repository,
  or the inside of a `.git` directory, which therefore maps to the same key as its worktree;
- the common dir is `<gitdir>/commondir` (relative to the git dir, or absolute) if present, else
  the git dir itself;
- the walk stops at a filesystem boundary, as git does by default.

Deliberately not mirrored: `GIT_DIR`, `GIT_CEILING_DIRECTORIES` and other environment variables
(they belong to the broker's process, not to the caller's directory). Where git would fail — a
`.git` file that cannot be read or points at no git dir (a worktree whose repository was moved) —
the directory holding that `.git` file becomes a workspace of its own rather than an error, so a
session there still works, and its subdirectories still agree.

Paths are `str` as the OS returns them (`os.fsdecode`); hashing uses `os.fsencode`, so keys that
are not valid UTF-8 still hash stably.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import attrs

from pager.domain.errors import ErrorCode, PagerError

#: A workspace slug: a name part (1-40 of `a-z 0-9 . _ -`), `-`, six hex digits of the key's hash.
SLUG_RE = re.compile(r"[a-z0-9._-]{1,40}-[0-9a-f]{6}")

_SLUG_NAME_MAX = 40
_SLUG_HASH_HEX = 6
_SLUG_BAD_RUN = re.compile(r"[^a-z0-9._-]+")
_DOTGIT_FILE_MAX = 4096  # a `.git` file is one short line; never read an arbitrary large file
_GITDIR_PREFIX = "gitdir: "  # exactly what git accepts, one space included


@attrs.frozen
class Workspace:
    """A workspace: `key` identifies it, `path` is the directory people know, `slug` names it."""

    key: str
    slug: str
    path: str
    #: The machine's broker, with a store that several share (SPEC §13); '' with one broker.
    host: str = ""

    def on_host(self, host: str) -> Workspace:
        """This directory as a workspace of `host` in a shared store: the same path on two
        machines is two workspaces, with distinct keys and slugs."""
        key = f"{host}:{self.key}"
        return Workspace(key=key, slug=make_slug(self.path, key), path=self.path, host=host)


def make_slug(path: str, key: str) -> str:
    """The slug of a workspace: a readable form of `path`'s basename plus a stable hash of `key`.

    Lower-cased; each run of characters outside `a-z 0-9 . _ -` becomes one `-`; dashes at the ends
    are dropped; at most 40 characters; `workspace` if nothing is left (e.g. a non-Latin name).
    """
    name = _SLUG_BAD_RUN.sub("-", os.path.basename(path).lower()).strip("-")
    name = name[:_SLUG_NAME_MAX].rstrip("-") or "workspace"
    digest = hashlib.sha256(os.fsencode(key)).hexdigest()[:_SLUG_HASH_HEX]
    return f"{name}-{digest}"


def is_slug(text: str) -> bool:
    """Whether `text` has the shape of a workspace slug."""
    return SLUG_RE.fullmatch(text) is not None


def resolve_workspace(directory: str | Path) -> Workspace:
    """The workspace of an existing absolute directory (see the module docstring for the rules)."""
    canonical = _canonical_directory(directory)
    found = _find_common_dir(canonical)
    if found is None:
        key = path = canonical
    else:
        key = found
        # A normal repository's common dir is `<top>/.git`; anything else (bare repository,
        # submodule under `.git/modules/`, separate git dir) has no better name than itself.
        path = os.path.dirname(key) if os.path.basename(key) == ".git" else key
    return Workspace(key=key, slug=make_slug(path, key), path=path)


def _canonical_directory(directory: str | Path) -> str:
    text = os.fspath(directory)
    # The broker's working directory means nothing to its callers, so relative paths are refused.
    if not text or not os.path.isabs(text):
        raise PagerError(
            ErrorCode.VALIDATION_FAILED,
            f"{text!r} is a relative path; give an absolute path",
        )
    if "\0" in text:
        raise PagerError(ErrorCode.VALIDATION_FAILED, f"{text!r} contains a NUL character")
    canonical = os.path.realpath(text)
    if not os.path.isdir(canonical):
        raise PagerError(
            ErrorCode.VALIDATION_FAILED,
            f"{text} is not a directory; give an existing directory",
        )
    return canonical


def _find_common_dir(start: str) -> str | None:
    """The canonical common dir of the repository holding `start`, or None outside Git."""
    device = _device(start)
    current = start
    while True:
        dotgit = os.path.join(current, ".git")
        if os.path.isfile(dotgit):
            common = _common_dir(_read_gitdir_file(dotgit))
            # Git gives up here; we make the worktree top its own workspace (module docstring).
            return common if common is not None else current
        if os.path.isdir(dotgit):
            common = _common_dir(dotgit)
            if common is not None:
                return common
        common = _common_dir(current)  # a bare repository, or inside a `.git` directory
        if common is not None:
            return common
        parent = os.path.dirname(current)
        if parent == current or _device(parent) != device:
            return None
        current = parent


def _common_dir(gitdir: str | None) -> str | None:
    """The canonical common dir if `gitdir` is a git dir, else None (git's is_git_directory)."""
    if gitdir is None or not os.path.exists(os.path.join(gitdir, "HEAD")):
        return None
    common = gitdir
    commondir_file = os.path.join(gitdir, "commondir")
    if os.path.isfile(commondir_file):
        target = _read_small(commondir_file)
        if target is None or not target.rstrip():
            return None
        common = os.path.join(gitdir, target.rstrip())  # join keeps an absolute target as is
    common = os.path.realpath(common)
    if os.path.isdir(os.path.join(common, "objects")) and os.path.isdir(
        os.path.join(common, "refs")
    ):
        return common
    return None


def _read_gitdir_file(dotgit: str) -> str | None:
    """The git dir a `.git` file points at, or None if it is unreadable or malformed."""
    content = _read_small(dotgit)
    if content is None or not content.startswith(_GITDIR_PREFIX):
        return None
    target = content[len(_GITDIR_PREFIX) :].rstrip("\r\n")  # git trims only line ends here
    if not target:
        return None
    return os.path.join(os.path.dirname(dotgit), target)


def _read_small(path: str) -> str | None:
    try:
        with open(path, "rb") as file:
            data = file.read(_DOTGIT_FILE_MAX)
    except OSError:
        return None
    return os.fsdecode(data)


def _device(path: str) -> int | None:
    try:
        return os.stat(path).st_dev
    except OSError:
        return None
