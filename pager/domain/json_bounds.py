"""Bounded JSON in, strict JSON out: the one reader of every JSON request, and the rules of the
JSON Pager writes.

Every JSON request (`/v1` bodies and `/mcp` JSON-RPC) goes through `read_json` before anything
is parsed deeply or stored. Past a bound the request is refused with `validation_failed` naming
the bound, so that no request can make a later step (building an answer, rendering a message)
recurse without end or grow without bound:

- nesting: at most `DEPTH_MAX` arrays and objects inside one another. It is measured on the raw
  bytes before they are parsed (the stdlib parser itself recurses, and 10,000 levels would
  exhaust Python's stack);
- at most `KEYS_MAX` keys in one object and `ITEMS_MAX` items in one array;
- keys of at most `KEY_CHARS_MAX` characters, text values of at most `STRING_CHARS_MAX`;
- only finite numbers: `NaN`, `Infinity` and `-Infinity` (which Python's parser accepts) and
  numbers too large for a double (`1e999`) are no JSON numbers a strict reader accepts;
- text is Unicode: no lone UTF-16 surrogate (`"\\ud800"`), which no store can encode.

`check_value` applies the same rules (but the raw scan) to a value already parsed, with bounds
of its own: a page's fields use it (pager/domain/pages.py).

Out, `dumps` refuses to write a non-finite number (`allow_nan=False`): whatever Pager writes
for others parses with a strict parser. `loads_stored` reads JSON Pager stored before these
rules held: a stored `NaN`, `Infinity` or `-Infinity` comes back as that text.
"""

from __future__ import annotations

import json
import math
import operator
import re
from itertools import accumulate, chain
from typing import Any

import attrs

from pager.domain.errors import ErrorCode, PagerError

#: Arrays and objects inside one another, the outermost counting 1.
DEPTH_MAX = 32
#: Keys in one object.
KEYS_MAX = 256
#: Items in one array.
ITEMS_MAX = 1024
#: Characters of one key.
KEY_CHARS_MAX = 256
#: Characters of one text value (a message body's own cap, `body_cap`, is lower).
STRING_CHARS_MAX = 256 * 1024

_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_PARENS = bytes.maketrans(b"[{]}", b"(())")
_RUNS = re.compile(rb"\(+|\)+")
_RUNS_COUNTED = 50_000  # runs the scan measures one by one (some 15 ms); more are peeled first
_SURROGATE = re.compile("[\ud800-\udfff]")
# Where a value is: None for the whole value, else (the parent's path, key or index).
_Path = tuple["_Path", str | int] | None


class BoundExceeded(ValueError):
    """A value breaks one of the rules; the message names the rule and where."""


@attrs.frozen
class JsonBounds:
    depth: int = DEPTH_MAX
    keys: int = KEYS_MAX
    items: int = ITEMS_MAX
    key_chars: int = KEY_CHARS_MAX
    string_chars: int = STRING_CHARS_MAX


REQUEST_BOUNDS = JsonBounds()


def read_json(raw: bytes | str, bounds: JsonBounds = REQUEST_BOUNDS) -> object:
    """The JSON value of a request body (an empty body is null), or PagerError
    `validation_failed` naming what is wrong."""
    if not raw.strip():
        return None
    try:
        text = _utf8(raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw)
        depth = raw_depth(text)
        if depth > bounds.depth:
            raise BoundExceeded(
                f"the JSON is nested {depth} levels deep; the limit is {bounds.depth}"
            )
        try:
            value = json.loads(text)
        except RecursionError:  # not reached once the scan passed; never a 500 if it is
            raise BoundExceeded(
                f"the JSON is nested too deep; the limit is {bounds.depth}"
            ) from None
        check_value(value, bounds)
    except BoundExceeded as exc:
        raise PagerError(
            ErrorCode.VALIDATION_FAILED,
            f"the body is refused: {exc} (see request limits in docs/http-api.md)",
        ) from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, an int too long
        raise PagerError(
            ErrorCode.VALIDATION_FAILED, f"the body is not valid JSON text: {exc}"
        ) from None
    return value


def raw_depth(raw: bytes) -> int:
    """How deep the arrays and objects of UTF-8 JSON text nest, without parsing it: the
    brackets outside strings, counted in C loops (`bytes` methods, regex, itertools). On
    text that is not JSON the figure may be off; the parser refuses such text anyway."""
    # Escaped backslashes, then escaped quotes: left to right, as JSON pairs them. What is
    # left between two quotes is a string's text, every other piece is outside strings.
    unescaped = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    outside = b"".join(unescaped.split(b'"')[::2])
    brackets = outside.translate(_PARENS, _NOT_BRACKETS).lstrip(b")")  # `)` first: no JSON
    # Very many runs (`[][][]…`): passes that each drop the innermost pairs, one level, first.
    peeled = 0
    while brackets.count(b")(") > _RUNS_COUNTED and peeled < DEPTH_MAX:
        shorter = brackets.replace(b"()", b"")
        if len(shorter) == len(brackets):
            break  # unbalanced: no innermost pair
        brackets, peeled = shorter, peeled + 1
    # Runs of opening and closing brackets alternate: the depth after the k-th opening run is
    # the opening brackets so far less the closing ones before it.
    runs = list(map(len, _RUNS.findall(brackets)))
    if not runs:
        return peeled
    opened, closed = accumulate(runs[0::2]), accumulate(chain((0,), runs[1::2]))
    return peeled + int(max(map(operator.sub, opened, closed)))


def check_value(value: object, bounds: JsonBounds = REQUEST_BOUNDS) -> None:
    """Raise BoundExceeded unless `value` (parsed JSON) keeps to `bounds`. Iterative, so a
    value nested deeper than Python's stack is refused, not a crash."""
    stack: list[tuple[object, int, _Path]] = [(value, 0, None)]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, str):
            _check_text(item, bounds.string_chars, "text", path)
        elif isinstance(item, float):
            if not math.isfinite(item):
                shown = "NaN" if math.isnan(item) else ("Infinity" if item > 0 else "-Infinity")
                raise BoundExceeded(
                    f"the number at {_where(path)} is {shown} (or too large for a double), which"
                    " is no JSON number; send a finite number, null or text"
                )
        elif isinstance(item, dict | list):
            if depth + 1 > bounds.depth:
                deepest = depth + nesting_depth(item)
                raise BoundExceeded(
                    f"the value is nested {deepest} levels deep; the limit is {bounds.depth}"
                )
            if isinstance(item, dict):
                if len(item) > bounds.keys:
                    raise BoundExceeded(
                        f"the object at {_where(path)} has {len(item)} keys;"
                        f" the limit is {bounds.keys}"
                    )
                for key, member in item.items():
                    if not isinstance(key, str):
                        raise BoundExceeded(f"a key at {_where(path)} is not text")
                    _check_text(key, bounds.key_chars, "key", path)
                    stack.append((member, depth + 1, (path, key)))
            else:
                if len(item) > bounds.items:
                    raise BoundExceeded(
                        f"the array at {_where(path)} has {len(item)} items;"
                        f" the limit is {bounds.items}"
                    )
                stack.extend((member, depth + 1, (path, i)) for i, member in enumerate(item))
        elif item is not None and not isinstance(item, bool | int):
            raise BoundExceeded(f"the value at {_where(path)} is no JSON value")


def dumps(value: object, **options: Any) -> str:
    """JSON text for others: `json.dumps` that refuses a non-finite number (ValueError) rather
    than write `NaN`, which strict readers refuse."""
    return json.dumps(value, allow_nan=False, **options)


def loads_stored(text: str) -> Any:
    """JSON Pager stored itself, as a value `dumps` can write again: a non-finite number
    stored before the edge refused them comes back as its text (`"NaN"`, `"Infinity"`,
    `"-Infinity"`)."""
    return json.loads(text, parse_constant=str, parse_float=_finite_or_text)


# -- helpers


def _where(path: _Path) -> str:
    """`$`, `$.a[0]`, `$["odd key"]`: where in the value a rule was broken."""
    steps: list[str] = []
    while path is not None:
        path, step = path
        if isinstance(step, int):
            steps.append(f"[{step}]")
        elif step.isidentifier():
            steps.append(f".{step[:64]}")
        else:
            steps.append(f"[{json.dumps(step[:64])}]")
    return "$" + "".join(reversed(steps))


def nesting_depth(value: object) -> int:
    """How deep the arrays and objects of a parsed value nest (iterative: any depth)."""
    deepest = 0
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth + 1)
            members = item.values() if isinstance(item, dict) else item
            stack.extend((member, depth + 1) for member in members)
    return deepest


def _check_text(text: str, limit: int, what: str, path: _Path) -> None:
    if len(text) > limit:
        raise BoundExceeded(
            f"a {what} at {_where(path)} is {len(text)} characters long; the limit is {limit}"
        )
    if _SURROGATE.search(text) is not None:
        raise BoundExceeded(
            f"a {what} at {_where(path)} holds a lone UTF-16 surrogate (e.g. \\ud800), which is"
            " no Unicode text"
        )


def _utf8(raw: bytes) -> bytes:
    """The body as UTF-8 (JSON may come as UTF-16 or UTF-32, which the scan cannot read)."""
    encoding = json.detect_encoding(raw)
    return raw if encoding == "utf-8" else raw.decode(encoding).encode()


def _finite_or_text(text: str) -> float | str:
    number = float(text)
    return number if math.isfinite(number) else text
