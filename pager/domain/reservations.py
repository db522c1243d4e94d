"""Edit reservations (docs/reservations.md): the rule, pure.

A reservation holds a path pattern relative to the top of a checkout of its workspace, for one
identity, exclusive (the default) or shared, until it is released, its TTL passes, or its
identity goes. This module says what a pattern may be and how it is written (`normalise`),
which paths it holds (`holds`), whether two patterns hold a path in common (`overlap`, exact:
`witness` names such a path), which reservations conflict (`conflicts_with`) and what state one
is in (`state_of`). The store and the service call these; nothing here does I/O.

Patterns, segment by segment between `/`:

- a literal segment names itself; `?` is one character and `*` any run of characters, neither
  crossing `/`; a segment that is exactly `**` is any number of whole segments (none too);
- a pattern also holds everything beneath what it names: `src/api` holds `src/api/x.py`;
- character classes (`[…]`), brace lists (`{a,b}`) and backslash escapes are refused rather
  than guessed at, so what a pattern holds is never in doubt.
"""

from __future__ import annotations

import enum
import functools
import os
import posixpath
import re
from typing import Any

import attrs

from pager.domain.errors import ErrorCode, PagerError

#: Characters in one pattern or path.
MAX_PATTERN_CHARS = 1024
#: Segments (directories and the name) in one pattern or path.
MAX_SEGMENTS = 64
#: Patterns (or paths) in one call.
MAX_PATTERNS = 100
#: Reservations one identity may hold at once (each call may add MAX_PATTERNS).
MAX_HELD = 1000
#: The longest reason.
MAX_REASON_CHARS = 500
#: TTL default and bounds, in seconds.
DEFAULT_TTL = 3600.0
MIN_TTL = 60.0
MAX_TTL = 86400.0

GLOBSTAR = "**"
_REFUSED = {
    "[": "character classes ([...]) are not supported; name the files, or use ? and *",
    "]": "character classes ([...]) are not supported; name the files, or use ? and *",
    "{": "brace lists ({a,b}) are not supported; give each pattern on its own",
    "}": "brace lists ({a,b}) are not supported; give each pattern on its own",
    "\\": "backslashes are not supported; separate directories with /",
}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class State(enum.StrEnum):
    """What a reservation is now: only an active one can block (and only an exclusive one,
    or any one against an exclusive request)."""

    ACTIVE = "active"
    STALE = "stale"  # its identity has had no live session for longer than the grace
    EXPIRED = "expired"  # its TTL passed
    RELEASED = "released"  # released, broken, or ended with its identity


@attrs.frozen
class Pattern:
    """A normalised pattern: its text (what is stored and shown) and its segments."""

    text: str
    segments: tuple[str, ...]

    @property
    def prefix(self) -> str:
        """Its leading literal segments (`src/api` of `src/api/*.py`; '' for `*.py`): every path
        it holds starts with them, so two patterns can overlap only when one's prefix leads to
        the other's (the store narrows its reads by it)."""
        literal = []
        for segment in self.segments:
            if segment == GLOBSTAR or "*" in segment or "?" in segment:
                break
            literal.append(segment)
        return "/".join(literal)

    @property
    def covers(self) -> tuple[str, ...]:
        """The segments with the subtree beneath made explicit (`src` covers `src/**`)."""
        if self.segments and self.segments[-1] == GLOBSTAR:
            return self.segments
        return (*self.segments, GLOBSTAR)


def _refuse(message: str, **details: Any) -> PagerError:
    return PagerError(ErrorCode.VALIDATION_FAILED, message, **details)


def _shown(text: str) -> str:
    return repr(text[:80] + ("…" if len(text) > 80 else ""))


def relative_text(text: object, root: str | None, *, what: str = "path") -> str:
    """`text` as a path relative to `root` (the checkout's top), `/`-separated, without `.`
    segments or repeated slashes. Refuses (validation_failed, naming what to do): a
    non-string, an empty one, control characters (NUL among them), one over
    MAX_PATTERN_CHARS or MAX_SEGMENTS, `..` anywhere, an absolute path outside `root` (or any
    absolute path when `root` is None), and the whole workspace (write `**`)."""
    if not isinstance(text, str):
        raise _refuse(f"each {what} must be a string, not {type(text).__name__}")
    if not text.strip():
        raise _refuse(f"a {what} is empty; give a path relative to the workspace, e.g. src/app.py")
    if len(text) > MAX_PATTERN_CHARS:
        raise _refuse(
            f"a {what} is {len(text)} characters long, over {MAX_PATTERN_CHARS}; reserve a"
            " directory above it instead",
            limit=MAX_PATTERN_CHARS,
        )
    if _CONTROL.search(text):
        raise _refuse(f"{what} {_shown(text)} holds a control character (NUL, newline...);"
                      " give the path as it is spelled on disk")  # fmt: skip
    if text.startswith("/"):
        inside = None if root is None else _inside(text, root)
        if inside is None:
            where = "" if root is None else f" {root}"
            raise _refuse(
                f"{what} {_shown(text)} is outside the workspace{where}; give a path inside it,"
                " relative to its top (src/app.py) or absolute under it",
            )
        text = inside
    segments = [part for part in text.split("/") if part not in ("", ".")]
    if ".." in segments:
        raise _refuse(
            f"{what} {_shown(text)} uses `..`; give the path from the workspace's top without it"
        )
    if not segments:
        raise _refuse(f"{what} {_shown(text)} names the whole workspace; write ** to mean that")
    if len(segments) > MAX_SEGMENTS:
        raise _refuse(
            f"{what} {_shown(text)} has {len(segments)} segments, over {MAX_SEGMENTS}; reserve a"
            " directory above it instead",
            limit=MAX_SEGMENTS,
        )
    return "/".join(segments)


def _inside(path: str, root: str) -> str | None:
    """`path` (absolute) relative to `root`, or None when it is not under it."""
    path, root = posixpath.normpath(path), posixpath.normpath(root)
    if path == root:
        return "."
    prefix = root if root.endswith("/") else root + "/"
    return path[len(prefix) :] if path.startswith(prefix) else None


def ancestors(path: str) -> list[str]:
    """'' and each leading part of `path` (`a/b` gives '', `a`, `a/b`): the prefixes of the
    patterns that may hold it."""
    parts = path.split("/") if path else []
    return ["", *("/".join(parts[: n + 1]) for n in range(len(parts)))]


@functools.lru_cache(maxsize=8192)
def parsed(text: str) -> Pattern:
    """A stored pattern (normalised when it was taken), parsed once per process."""
    return normalise(text)


def normalise(text: object, root: str | None = None) -> Pattern:
    """A pattern as it is stored: see `relative_text` for what is refused, and also
    character classes, brace lists, backslashes, and `**` inside a segment."""
    if isinstance(text, str):
        for char, why in _REFUSED.items():
            if char in text:
                raise _refuse(f"pattern {_shown(text)}: {why}")
    relative = relative_text(text, root, what="pattern")
    segments: list[str] = []
    for segment in relative.split("/"):
        if GLOBSTAR in segment and segment != GLOBSTAR:
            raise _refuse(
                f"pattern {_shown(relative)}: ** stands alone between slashes (src/**/x.py);"
                " use * within a name"
            )
        if segment == GLOBSTAR and segments and segments[-1] == GLOBSTAR:
            continue  # **/** is **
        segments.append(segment)
    return Pattern("/".join(segments), tuple(segments))


def normalise_all(texts: object, root: str | None = None) -> tuple[Pattern, ...]:
    """Each pattern of one call, normalised, duplicates dropped (first kept); refuses a
    non-list, an empty list and more than MAX_PATTERNS."""
    items = items_of(texts, "patterns")
    unique: dict[str, Pattern] = {}
    for text in items:
        pattern = normalise(text, root)
        unique.setdefault(pattern.text, pattern)
    return tuple(unique.values())


def paths_all(texts: object, root: str | None = None) -> tuple[str, ...]:
    """Each path of one check, relative to `root` (glob characters in them are literal)."""
    return tuple(dict.fromkeys(relative_text(t, root) for t in items_of(texts, "paths")))


def items_of(texts: object, what: str) -> list[object]:
    """The items of one call's list: a list, 1..MAX_PATTERNS of them."""
    if not isinstance(texts, list | tuple):
        raise _refuse(f"{what} must be a list of strings")
    if not texts:
        raise _refuse(f"give at least one of the {what}")
    if len(texts) > MAX_PATTERNS:
        raise _refuse(
            f"{len(texts)} {what} in one call, over {MAX_PATTERNS}; reserve a directory"
            " (src/api) or a glob (src/**/*.py) instead of each file",
            limit=MAX_PATTERNS,
        )
    return list(texts)


# -- which paths a pattern holds -------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _regex(segments: tuple[str, ...]) -> re.Pattern[str]:
    """The segments as a regex over a path with a `/` before each segment (`/src/x.py`)."""
    parts = []
    for segment in segments:
        if segment == GLOBSTAR:
            parts.append("(?:/[^/]+)*")  # any whole segments, none too
            continue
        body = "".join(
            "[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char)
            for char in segment
        )
        parts.append("/" + body)
    return re.compile("".join(parts))


def holds(pattern: Pattern, path: str) -> bool:
    """Whether `pattern` holds `path` (normalised, relative): it or something beneath."""
    return _regex(pattern.covers).fullmatch("/" + path) is not None


# -- whether two patterns overlap, exactly -----------------------------------------------------


def overlap(a: Pattern, b: Pattern) -> bool:
    """Whether some path is held by both `a` and `b`."""
    return witness(a, b) is not None


def witness(a: Pattern, b: Pattern) -> str | None:
    """A path both `a` and `b` hold, or None when there is none."""
    found = _segments_witness(a.covers, b.covers)
    if found is None:
        return None
    # No segment at all: both are `**` alone, and hold every path.
    return "/".join(found) or "x"


def _segments_witness(p: tuple[str, ...], q: tuple[str, ...]) -> tuple[str, ...] | None:
    @functools.cache
    def go(i: int, j: int) -> tuple[str, ...] | None:
        if i == len(p) and j == len(q):
            return ()
        if i < len(p) and p[i] == GLOBSTAR:
            found = go(i + 1, j)  # it holds no more segments
            if found is None and j < len(q):
                found = _prefixed(q[j], go(i, j + 1), q[j] == GLOBSTAR)  # it holds q's next
            return found
        if j < len(q) and q[j] == GLOBSTAR:
            found = go(i, j + 1)
            if found is None and i < len(p):
                found = _prefixed(p[i], go(i + 1, j), False)
            return found
        if i == len(p) or j == len(q):
            return None
        name = _name_witness(p[i], q[j])
        rest = None if name is None else go(i + 1, j + 1)
        return None if rest is None or name is None else (name, *rest)

    return go(0, 0)


def _prefixed(segment: str, rest: tuple[str, ...] | None, globstar: bool) -> tuple[str, ...] | None:
    """One segment `segment` matches, before `rest` (a globstar on both sides: none needed)."""
    if rest is None:
        return None
    if globstar:
        return rest
    return (_sample(segment), *rest)


def _sample(segment: str) -> str:
    """A name `segment` alone matches (never empty, `.` or `..`)."""
    name = segment.replace("*", "").replace("?", "x")
    if name in ("", ".", ".."):  # only stars and dots: a star takes the letter instead
        name = segment.replace("*", "x", 1).replace("*", "").replace("?", "x")
    return name


def _name_witness(p: str, q: str) -> str | None:
    """A name (one segment, not empty, not `.` or `..`) both `p` and `q` match, or None.
    A run of `*` or `?` matches only characters other than `/`; literal text itself."""

    @functools.cache
    def go(a: int, b: int) -> str | None:
        if a == len(p) and b == len(q):
            return ""
        pa = p[a] if a < len(p) else None
        qb = q[b] if b < len(q) else None
        if pa == "*" and qb == "*":  # both stars take one character, then end (a name's)
            both = go(a + 1, b + 1)
            if both is not None:
                return "x" + both
        if pa == "*":
            found = go(a + 1, b)
            if found is None and qb is not None:
                found = _then(qb, go(a, b + 1), star=qb == "*")
            return found
        if qb == "*":
            found = go(a, b + 1)
            if found is None and pa is not None:
                found = _then(pa, go(a + 1, b), star=False)
            return found
        if pa is None or qb is None:
            return None
        if pa == "?" or qb == "?" or pa == qb:
            char = qb if pa == "?" else pa
            rest = go(a + 1, b + 1)
            return None if rest is None else ("x" if char == "?" else char) + rest
        return None

    found = go(0, 0)
    if found is None:
        return None
    if found in ("", ".", ".."):
        # Only stars (and dots) on both sides can give these, and stars take any name.
        padded = found + "x"
        both = _match_name(p, padded) and _match_name(q, padded)
        return padded if both else None
    return found


def _then(token: str, rest: str | None, *, star: bool) -> str | None:
    if rest is None:
        return None
    if star:
        return rest  # a star against a star adds nothing of its own
    return ("x" if token == "?" else token) + rest


def _match_name(segment: str, name: str) -> bool:
    return _regex((segment,)).fullmatch("/" + name) is not None


# -- reservations, conflicts and states ------------------------------------------------------


@attrs.frozen
class Holding:
    """A reservation as the conflict rule sees it."""

    identity_id: str
    pattern: Pattern
    exclusive: bool


def conflicts_with(wanted: Holding, held: Holding) -> bool:
    """Whether `held` (another's, active and not stale) stops `wanted`: two exclusive ones, or
    an exclusive and a shared one, on overlapping patterns. Shared ones never conflict with
    each other, nor does an identity with itself."""
    if wanted.identity_id == held.identity_id:
        return False
    if not (wanted.exclusive or held.exclusive):
        return False
    return overlap(wanted.pattern, held.pattern)


def blocks_edit(path: str, held: Holding, editor_id: str) -> bool:
    """Whether `held` stops `editor_id` from writing `path`: another's exclusive hold on it.
    A shared hold does not: it says "I am reading or co-editing this", not "keep out"."""
    return held.exclusive and held.identity_id != editor_id and holds(held.pattern, path)


@attrs.frozen
class Times:
    """A reservation's times (unix seconds): its identity's last live moment (None: never
    goes stale, e.g. the person's) and when it ended, if it did."""

    expires_at: float
    ended_at: float | None = None
    live_until: float | None = None


def state_of(times: Times, now: float, grace: float) -> State:
    """Released (or broken, or ended with its identity) once it ended; expired once its TTL
    passed; stale once its identity has had no live session for longer than `grace`; else
    active."""
    if times.ended_at is not None:
        return State.RELEASED
    if times.expires_at <= now:
        return State.EXPIRED
    if times.live_until is not None and times.live_until + grace < now:
        return State.STALE
    return State.ACTIVE


def check_ttl(ttl: object) -> float:
    """A TTL in seconds within [MIN_TTL, MAX_TTL] (None: DEFAULT_TTL)."""
    if ttl is None:
        return DEFAULT_TTL
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or ttl != ttl:
        raise _refuse("ttl_s must be a number of seconds")
    if not MIN_TTL <= float(ttl) <= MAX_TTL:
        raise _refuse(
            f"ttl_s {ttl:g} is out of bounds: a reservation lasts from 1 minute to 24 hours"
            " (60-86400 s); reserve again before it ends to renew it",
            minimum=MIN_TTL,
            maximum=MAX_TTL,
        )
    return float(ttl)


def check_reason(reason: object) -> str:
    if reason is None:
        return ""
    if not isinstance(reason, str):
        raise _refuse("reason must be a string")
    if len(reason) > MAX_REASON_CHARS:
        raise _refuse(f"reason is {len(reason)} characters, over {MAX_REASON_CHARS}; say it"
                      " shorter", limit=MAX_REASON_CHARS)  # fmt: skip
    if "\0" in reason:
        raise _refuse("reason holds a NUL character")
    return reason


def scope_of(workspace_key: str, host: str) -> str:
    """The key reservations are shared by: the workspace's key without its host, so that on a
    store several brokers share, the checkouts of one repository at one path on every host
    (a shared volume, containers of one machine) hold one set of reservations."""
    prefix = f"{host}:"
    return (
        workspace_key[len(prefix) :] if host and workspace_key.startswith(prefix) else workspace_key
    )


def is_absolute(text: str) -> bool:
    return os.path.isabs(text)
