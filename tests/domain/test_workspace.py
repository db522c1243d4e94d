"""Workspace resolution checked against real git (`git rev-parse --git-common-dir`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pager.domain.errors import ErrorCode, PagerError
from pager.domain.workspace import SLUG_RE, Workspace, is_slug, make_slug, resolve_workspace


def _git_env(home: Path) -> dict[str, str]:
    # No GIT_DIR & co. from the outside, no user or system config: git must discover by itself.
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(
        HOME=str(home),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.com",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.com",
    )
    return env


class Git:
    """Runs real git in a sandboxed environment."""

    def __init__(self, home: Path) -> None:
        home.mkdir()
        self.env = _git_env(home)

    def run(self, cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=self.env,
            capture_output=True,
            text=True,
            check=check,
            timeout=60,
        )

    def init(self, path: Path, *args: str) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        self.run(path, "init", "-q", "-b", "main", *args)
        if "--bare" not in args:
            self.run(path, "commit", "-q", "--allow-empty", "-m", "init")
        return path

    def common_dir(self, directory: Path) -> str:
        """What git names as the common dir of `directory`, canonical and absolute."""
        out = self.run(directory, "rev-parse", "--git-common-dir").stdout.strip()
        return os.path.realpath(os.path.join(directory, out))


@pytest.fixture
def git(tmp_path: Path) -> Git:
    return Git(tmp_path / "home")


@pytest.fixture
def repo(git: Git, tmp_path: Path) -> Path:
    path = git.init(tmp_path / "Repo One")
    (path / "src" / "pkg").mkdir(parents=True)
    return path


def _assert_matches_git(git: Git, directory: Path) -> Workspace:
    workspace = resolve_workspace(directory)
    assert workspace.key == git.common_dir(directory)
    return workspace


def test_resolve_workspace_main_worktree_and_subdirectories_match_git(git: Git, repo: Path) -> None:
    """The top-level and nested subdirectories share git's common dir as key."""
    top = _assert_matches_git(git, repo)
    assert top.key == os.path.realpath(repo / ".git")
    assert top.path == os.path.realpath(repo)
    assert top.slug.startswith("repo-one-")
    assert is_slug(top.slug)
    assert _assert_matches_git(git, repo / "src") == top
    assert _assert_matches_git(git, repo / "src" / "pkg") == top


def test_resolve_workspace_linked_worktree_shares_the_workspace(
    git: Git, repo: Path, tmp_path: Path
) -> None:
    """A linked worktree (`.git` file + commondir) and its subdirectories are the same workspace."""
    git.run(repo, "worktree", "add", "-q", str(tmp_path / "feature"), "-b", "feature")
    linked = tmp_path / "feature"
    assert (linked / ".git").is_file()
    (linked / "docs").mkdir()
    main = resolve_workspace(repo)
    assert _assert_matches_git(git, linked) == main
    assert _assert_matches_git(git, linked / "docs") == main
    assert main.path == os.path.realpath(repo)  # the main worktree, not the linked one


def test_resolve_workspace_inside_the_git_dir_is_the_same_workspace(
    git: Git, repo: Path, tmp_path: Path
) -> None:
    """Inside `.git` (and a linked worktree's admin dir) git reports the same common dir."""
    git.run(repo, "worktree", "add", "-q", str(tmp_path / "wt"))
    main = resolve_workspace(repo)
    assert _assert_matches_git(git, repo / ".git") == main
    assert _assert_matches_git(git, repo / ".git" / "refs") == main
    assert _assert_matches_git(git, repo / ".git" / "worktrees" / "wt") == main


def test_resolve_workspace_submodule_is_its_own_workspace(
    git: Git, repo: Path, tmp_path: Path
) -> None:
    """A real submodule (`.git` file into `.git/modules/`) resolves like git says."""
    library = git.init(tmp_path / "library")
    git.run(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "lib")
    (repo / "lib" / "inner").mkdir()
    assert (repo / "lib" / ".git").is_file()
    sub = _assert_matches_git(git, repo / "lib")
    assert sub.key == os.path.realpath(repo / ".git" / "modules" / "lib")
    assert sub.path == sub.key  # no better name than the module's git dir
    assert sub.slug.startswith("lib-")
    assert _assert_matches_git(git, repo / "lib" / "inner") == sub
    assert sub != resolve_workspace(repo)
    assert sub != resolve_workspace(library)


def test_resolve_workspace_relative_gitdir_file(git: Git, tmp_path: Path) -> None:
    """A `.git` file with a path relative to its own directory is followed."""
    project = tmp_path / "project"
    (tmp_path / "store").mkdir()
    git.init(project, f"--separate-git-dir={tmp_path / 'store' / 'project.git'}")
    (project / ".git").write_text("gitdir: ../store/project.git\n")
    (project / "deep").mkdir()
    workspace = _assert_matches_git(git, project / "deep")
    assert workspace.key == os.path.realpath(tmp_path / "store" / "project.git")
    assert workspace.slug.startswith("project.git-")


def test_resolve_workspace_bare_repository(git: Git, tmp_path: Path) -> None:
    """A bare repository, and directories inside it, are its workspace."""
    bare = git.init(tmp_path / "central.git", "--bare")
    workspace = _assert_matches_git(git, bare)
    assert workspace.path == workspace.key == os.path.realpath(bare)
    assert _assert_matches_git(git, bare / "refs" / "heads") == workspace


def test_resolve_workspace_skips_an_invalid_git_dir_like_git(git: Git, repo: Path) -> None:
    """An empty `.git` directory is not a repository; git keeps walking up, and so do we."""
    (repo / "src" / ".git").mkdir()
    assert _assert_matches_git(git, repo / "src" / "pkg") == resolve_workspace(repo)


def test_resolve_workspace_different_repositories_differ(git: Git, tmp_path: Path) -> None:
    """Two repositories, even with the same directory name, get different keys and slugs."""
    first = resolve_workspace(git.init(tmp_path / "a" / "api"))
    second = resolve_workspace(git.init(tmp_path / "b" / "api"))
    assert first.key != second.key
    assert first.slug != second.slug
    assert first.slug.startswith("api-")
    assert second.slug.startswith("api-")


def test_resolve_workspace_outside_git_is_its_own_workspace(git: Git, tmp_path: Path) -> None:
    """Outside any repository each directory is a workspace keyed by its canonical path."""
    plain = tmp_path / "notes"
    (plain / "sub").mkdir(parents=True)
    assert git.run(plain, "rev-parse", "--git-common-dir", check=False).returncode != 0
    workspace = resolve_workspace(plain)
    assert workspace.key == workspace.path == os.path.realpath(plain)
    assert workspace.slug.startswith("notes-")
    assert resolve_workspace(plain / "sub").key == os.path.realpath(plain / "sub")


def test_resolve_workspace_follows_symlinks(git: Git, repo: Path, tmp_path: Path) -> None:
    """A symlink to the repository, or into it, resolves to the same workspace."""
    (tmp_path / "link").symlink_to(repo)
    (tmp_path / "pkg-link").symlink_to(repo / "src" / "pkg")
    main = resolve_workspace(repo)
    assert _assert_matches_git(git, tmp_path / "link") == main
    assert _assert_matches_git(git, tmp_path / "pkg-link") == main
    assert resolve_workspace(str(tmp_path / "link" / "src" / ".." / "src")) == main


def test_resolve_workspace_broken_gitdir_file_keeps_its_directory(git: Git, tmp_path: Path) -> None:
    """A `.git` file pointing at nothing (git fails there) makes its directory the workspace."""
    orphan = tmp_path / "orphan"
    (orphan / "sub").mkdir(parents=True)
    (orphan / ".git").write_text("gitdir: /nonexistent/repo/.git/worktrees/orphan\n")
    assert git.run(orphan, "rev-parse", "--git-common-dir", check=False).returncode != 0
    workspace = resolve_workspace(orphan / "sub")
    assert workspace.key == workspace.path == os.path.realpath(orphan)
    assert resolve_workspace(orphan) == workspace


def test_resolve_workspace_accepts_str_and_path(repo: Path) -> None:
    """`str` and `Path` inputs resolve identically, and results are stable across calls."""
    assert resolve_workspace(str(repo)) == resolve_workspace(repo) == resolve_workspace(repo)


@pytest.mark.parametrize("relative", ["", ".", "repo", "./src", "~/repo"])
def test_resolve_workspace_refuses_relative_paths(relative: str) -> None:
    """The broker's working directory means nothing to callers: relative paths are refused."""
    with pytest.raises(PagerError) as caught:
        resolve_workspace(relative)
    assert caught.value.code is ErrorCode.VALIDATION_FAILED
    assert "give an absolute path" in caught.value.message


def test_resolve_workspace_refuses_missing_directories_and_files(tmp_path: Path) -> None:
    """A path that does not exist, or is a file, is not a directory."""
    (tmp_path / "file.txt").write_text("x")
    for bad in [tmp_path / "missing", tmp_path / "file.txt", tmp_path / "missing" / "deeper"]:
        with pytest.raises(PagerError) as caught:
            resolve_workspace(bad)
        assert caught.value.code is ErrorCode.VALIDATION_FAILED
        assert caught.value.message == f"{bad} is not a directory; give an existing directory"


def test_resolve_workspace_refuses_nul_characters() -> None:
    """A NUL byte cannot name a path; it is refused rather than crashing the OS call."""
    with pytest.raises(PagerError) as caught:
        resolve_workspace("/tmp/a\0b")
    assert caught.value.code is ErrorCode.VALIDATION_FAILED


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/home/me/My Project!", "my-project"),
        ("/home/me/api", "api"),
        ("/home/me/web.v2_x", "web.v2_x"),
        ("/home/me/日本語", "workspace"),
        ("/", "workspace"),
        ("/home/me/--x--", "x"),
        ("/home/me/" + "a" * 39 + " b", "a" * 39),
    ],
)
def test_make_slug_readable_name_and_hash(path: str, name: str) -> None:
    """The slug is the cleaned basename, `-`, and six hex digits of the key's sha256."""
    import hashlib

    slug = make_slug(path, "/some/key")
    assert slug == f"{name}-{hashlib.sha256(b'/some/key').hexdigest()[:6]}"


@given(st.text(max_size=120), st.text(min_size=1, max_size=50))
def test_make_slug_always_has_the_slug_shape(basename: str, key: str) -> None:
    """Any basename and key give a well-formed, stable slug."""
    path = "/x/" + basename.replace("/", "")
    slug = make_slug(path, key)
    assert SLUG_RE.fullmatch(slug)
    assert make_slug(path, key) == slug
