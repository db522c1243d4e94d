"""The reservation rule (pager/domain/reservations.py): patterns, overlap (exact), conflicts and
states, with property tests."""

from __future__ import annotations

import hypothesis
import pytest
from hypothesis import strategies as st

from pager.domain.errors import ErrorCode, PagerError
from pager.domain.reservations import (
    DEFAULT_TTL,
    MAX_PATTERNS,
    Holding,
    Pattern,
    State,
    Times,
    ancestors,
    blocks_edit,
    check_ttl,
    conflicts_with,
    holds,
    normalise,
    normalise_all,
    overlap,
    paths_all,
    scope_of,
    state_of,
    witness,
)

# Small alphabets, so that random patterns and paths meet often.
NAME_CHARS = st.sampled_from("ab.")
PATTERN_CHARS = st.sampled_from(["a", "b", ".", "*", "?"])
names = st.text(NAME_CHARS, min_size=1, max_size=4).filter(lambda n: n not in (".", ".."))
segments = st.one_of(
    st.just("**"),
    st.text(PATTERN_CHARS, min_size=1, max_size=4).filter(
        lambda s: "**" not in s and s not in (".", "..")
    ),
)
patterns = st.lists(segments, min_size=1, max_size=4).map(lambda parts: normalise("/".join(parts)))
paths = st.lists(names, min_size=1, max_size=5).map("/".join)
SETTINGS = hypothesis.settings(max_examples=400, deadline=None, database=None)


@SETTINGS
@hypothesis.given(patterns, patterns)
def test_overlap_is_symmetric(a: Pattern, b: Pattern) -> None:
    """Whether two patterns overlap does not depend on their order."""
    assert overlap(a, b) == overlap(b, a)


@SETTINGS
@hypothesis.given(patterns, patterns, paths)
def test_overlap_a_path_both_hold_means_overlap(a: Pattern, b: Pattern, path: str) -> None:
    """No overlap is missed: a path both hold makes them overlap."""
    if holds(a, path) and holds(b, path):
        assert overlap(a, b)


@SETTINGS
@hypothesis.given(patterns, patterns)
def test_overlap_claimed_has_a_witness_both_hold(a: Pattern, b: Pattern) -> None:
    """No overlap is invented: when claimed, a real path (no empty, `.` or `..` segment) is
    held by both."""
    found = witness(a, b)
    assert (found is not None) == overlap(a, b)
    if found is not None:
        assert all(part not in ("", ".", "..") for part in found.split("/"))
        assert holds(a, found), (a.text, b.text, found)
        assert holds(b, found), (a.text, b.text, found)


@SETTINGS
@hypothesis.given(patterns)
def test_overlap_a_pattern_overlaps_itself(a: Pattern) -> None:
    """Every pattern holds some path, so it overlaps itself."""
    assert overlap(a, a)


@pytest.mark.parametrize(
    ("pattern", "path", "held"),
    [
        ("src/*.py", "src/x.py", True),
        ("src/*.py", "src/a/x.py", False),  # * does not cross /
        ("src/**", "src/a/b/x.py", True),  # ** does
        ("src/**", "src", True),
        ("src/**/x.py", "src/x.py", True),  # ** holds no segment too
        ("src/api", "src/api/x.py", True),  # a pattern holds what is beneath it
        ("src/api", "src/apix", False),
        ("*.py", "src/x.py", False),  # top level only
        ("README.md", "README.md", True),
        ("x?.py", "xy.py", True),
        ("x?.py", "x.py", False),
    ],
)
def test_holds_segments(pattern: str, path: str, held: bool) -> None:
    """`*` and `?` stay within a segment, `**` spans whole ones, a pattern holds its subtree."""
    assert holds(normalise(pattern), path) is held


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("../../etc/passwd", "`..`"),
        ("src/../../x", "`..`"),
        ("/etc/passwd", "outside the workspace"),
        ("a\x00b", "control character"),
        ("a\nb", "control character"),
        ("x" * 2000, "over 1024"),
        ("/".join(["a"] * 70), "over 64"),
        ("src/[ab].py", "character classes"),
        ("src/{a,b}.py", "brace lists"),
        ("src\\x.py", "backslashes"),
        ("src/a**b", "** stands alone"),
        (".", "whole workspace"),
        ("/repo", "whole workspace"),
    ],
)
def test_normalise_refuses_with_words(text: str, words: str) -> None:
    """Each bad pattern is refused with words naming what is wrong and what to do."""
    with pytest.raises(PagerError) as refused:
        normalise(text, "/repo")
    assert refused.value.code is ErrorCode.VALIDATION_FAILED
    assert words in refused.value.message


def test_normalise_makes_paths_relative_and_tidy() -> None:
    """An absolute path inside the workspace becomes relative; `.` and `//` go."""
    assert normalise("/repo/src//./x.py", "/repo").text == "src/x.py"
    assert normalise("./src/api/", "/repo").text == "src/api"
    assert normalise("a/**/**/b").text == "a/**/b"


def test_normalise_all_bounds_and_types() -> None:
    """A call takes 1..MAX_PATTERNS strings; duplicates count once."""
    assert [p.text for p in normalise_all(["a", "./a", "b"])] == ["a", "b"]
    for bad, words in [
        ([], "at least one"),
        ("src", "list of strings"),
        ([1], "must be a string"),
        ([["a"]], "must be a string"),
        (["a"] * (MAX_PATTERNS + 1), "over 100"),
        (["a"] * 10_000, "over 100"),
    ]:
        with pytest.raises(PagerError, match=words):
            normalise_all(bad)


def test_paths_all_keeps_glob_characters_literal() -> None:
    """A checked path is a path: `*` in it is a character, never a pattern."""
    assert paths_all(["/repo/src/*.py"], "/repo") == ("src/*.py",)
    assert holds(normalise("src/*"), "src/*.py")


def test_conflicts_exclusive_shared_rule() -> None:
    """Exclusive+exclusive and exclusive+shared conflict; shared+shared and one's own never."""
    ex_a = Holding("a", normalise("src/*.py"), True)
    ex_b = Holding("b", normalise("src/x.py"), True)
    sh_a = Holding("a", normalise("src/*.py"), False)
    sh_b = Holding("b", normalise("src/x.py"), False)
    assert conflicts_with(ex_b, ex_a)
    assert conflicts_with(sh_b, ex_a)
    assert conflicts_with(ex_b, sh_a)
    assert not conflicts_with(sh_b, sh_a)
    assert not conflicts_with(Holding("a", normalise("src/x.py"), True), ex_a)
    assert not conflicts_with(Holding("b", normalise("docs/y.md"), True), ex_a)


def test_blocks_edit_only_others_exclusive() -> None:
    """An edit is stopped by another's exclusive hold only; a shared one lets it through."""
    assert blocks_edit("src/x.py", Holding("a", normalise("src/*.py"), True), "b")
    assert not blocks_edit("src/x.py", Holding("a", normalise("src/*.py"), False), "b")
    assert not blocks_edit("src/x.py", Holding("a", normalise("src/*.py"), True), "a")
    assert not blocks_edit("docs/y.md", Holding("a", normalise("src/*.py"), True), "b")


def test_state_of_each_state() -> None:
    """Ended beats expired beats stale beats active; no live moment (the person) is never
    stale."""
    grace = 90.0
    assert state_of(Times(200.0, ended_at=50.0), 100.0, grace) is State.RELEASED
    assert state_of(Times(100.0), 100.0, grace) is State.EXPIRED
    assert state_of(Times(1000.0, live_until=5.0), 100.0, grace) is State.STALE
    assert state_of(Times(1000.0, live_until=20.0), 100.0, grace) is State.ACTIVE
    assert state_of(Times(1000.0, live_until=None), 100.0, grace) is State.ACTIVE


def test_check_ttl_bounds() -> None:
    """TTL defaults to an hour; 1 minute to 24 hours, else refused saying the bounds."""
    assert check_ttl(None) == DEFAULT_TTL
    assert check_ttl(60) == 60.0
    for bad in (59, 86401, float("nan"), True, "60"):
        with pytest.raises(PagerError):
            check_ttl(bad)


def test_scope_of_drops_the_host() -> None:
    """On a shared store a workspace's host does not split its reservations."""
    assert scope_of("alpha:/repo/.git", "alpha") == "/repo/.git"
    assert scope_of("/repo/.git", "") == "/repo/.git"


@SETTINGS
@hypothesis.given(patterns, patterns, paths)
def test_prefix_narrowing_never_drops_a_match(a: Pattern, b: Pattern, path: str) -> None:
    """The store reads only patterns whose prefix is one of a path's ancestors, or leads to or
    follows from another pattern's prefix: that never leaves out one that holds or overlaps."""
    if holds(a, path):
        assert a.prefix in ancestors(path)
    if overlap(a, b):
        assert a.prefix in ancestors(b.prefix) or b.prefix in ancestors(a.prefix)
