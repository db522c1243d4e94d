"""The bounded JSON reader (pager/domain/json_bounds.py): within bounds it reads exactly what
`json.loads` reads; past one it refuses, naming the bound, without recursing on the input."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pager.domain.errors import ErrorCode, PagerError
from pager.domain.json_bounds import (
    DEPTH_MAX,
    ITEMS_MAX,
    KEY_CHARS_MAX,
    KEYS_MAX,
    STRING_CHARS_MAX,
    BoundExceeded,
    JsonBounds,
    check_value,
    dumps,
    loads_stored,
    raw_depth,
    read_json,
)

# Text a request may carry: any Unicode but lone surrogates; quotes, backslashes and brackets
# often, since they are what the raw scan must see through.
_TEXT = st.text(
    st.one_of(st.sampled_from('"\\[]{}/'), st.characters(codec="utf-8")),
    max_size=12,
)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    _TEXT,
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_TEXT, inner, max_size=4)),
    max_leaves=40,
)


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


def _nested(levels: int, inner: str = "") -> str:
    return "[" * levels + inner + "]" * levels


@given(
    _VALUES,
    st.booleans(),
    st.sampled_from([None, 0, 2]),
    st.sampled_from(["utf-8", "utf-16", "utf-32-be"]),
)
def test_within_bounds_it_reads_exactly_what_json_loads_reads(
    value: Any, ascii_only: bool, indent: int | None, encoding: str
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    raw = text.encode(encoding)
    assert raw_depth(text.encode()) == _depth(value)
    read = read_json(raw)
    assert read == json.loads(raw)
    assert json.dumps(read, sort_keys=True) == json.dumps(json.loads(raw), sort_keys=True)


@given(st.integers(min_value=DEPTH_MAX + 1, max_value=3 * DEPTH_MAX), _SCALARS)
def test_past_the_depth_it_refuses_naming_the_depth_and_the_limit(levels: int, inner: Any) -> None:
    with pytest.raises(PagerError) as caught:
        read_json(_nested(levels, json.dumps(inner)).encode())
    assert caught.value.code is ErrorCode.VALIDATION_FAILED
    assert f"nested {levels} levels deep; the limit is {DEPTH_MAX}" in caught.value.message


@pytest.mark.parametrize("levels", [1_000, 10_000, 400_000])
def test_deeper_than_pythons_stack_is_refused_without_recursing(levels: int) -> None:
    """What the stdlib parser would meet with RecursionError (a 500) is refused first; a
    parsed value that deep is measured without recursing too."""
    for raw in (_nested(levels), '{"a": ' + _nested(levels) + "}"):
        with pytest.raises(PagerError, match="levels deep; the limit is 32"):
            read_json(raw.encode())
    with pytest.raises(BoundExceeded, match=f"nested {levels} levels deep; the limit is 16"):
        check_value(_deep(levels), JsonBounds(depth=16))


def _deep(levels: int) -> list[Any]:
    """A list nested `levels` deep, built without JSON."""
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_brackets_in_strings_and_escapes_do_not_count() -> None:
    assert raw_depth(b'{"a": "[[[[{{", "b\\"[": ["\\\\", "\\\\\\"]"]}') == 2
    assert read_json(json.dumps({"k": "[" * 10_000}).encode()) == {"k": "[" * 10_000}
    many = "[" + ",".join(["[[1], {}]"] * 1000) + "]"
    assert raw_depth(many.encode()) == 3
    assert raw_depth(b"[]" * 60_000) == 1  # very many runs: peeled, still exact


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"ratio": NaN}', ["NaN", "$.ratio"]),
        ('{"a": [Infinity]}', ["Infinity", "$.a[0]"]),
        ('{"a b": -Infinity}', ["-Infinity", '$["a b"]']),
        ('{"big": 1e999}', ["Infinity", "$.big"]),
        ("-1e400", ["-Infinity", "at $ "]),
        (json.dumps({f"k{i}": 1 for i in range(KEYS_MAX + 1)}), [f"{KEYS_MAX + 1} keys"]),
        (json.dumps({"a": [0] * (ITEMS_MAX + 1)}), [f"{ITEMS_MAX + 1} items", "$.a"]),
        (json.dumps({"k" * (KEY_CHARS_MAX + 1): 1}), [f"{KEY_CHARS_MAX + 1} characters"]),
        (json.dumps(["x" * (STRING_CHARS_MAX + 1)]), [f"limit is {STRING_CHARS_MAX}", "$[0]"]),
        ('{"x": "\\ud800"}', ["lone UTF-16 surrogate", "$.x"]),
        ('{"\\udfff": 1}', ["lone UTF-16 surrogate"]),
    ],
)
def test_each_bound_is_refused_naming_it(text: str, words: list[str]) -> None:
    with pytest.raises(PagerError) as caught:
        read_json(text.encode())
    assert caught.value.code is ErrorCode.VALIDATION_FAILED
    for word in words:
        assert word in caught.value.message, caught.value.message


def test_values_at_each_bound_are_read() -> None:
    at_bounds = {
        "deep": json.loads(_nested(DEPTH_MAX - 1)),
        "keys": {f"k{i}": i for i in range(KEYS_MAX)},
        "items": list(range(ITEMS_MAX)),
        "k" * KEY_CHARS_MAX: "x" * STRING_CHARS_MAX,
    }
    raw = json.dumps(at_bounds).encode()
    assert raw_depth(raw) == DEPTH_MAX
    assert read_json(raw) == at_bounds


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"{not json", "not valid JSON text"),
        (b"[1,", "not valid JSON text"),
        (b"]]]]", "not valid JSON text"),
        (b"\xff\xfe\xfd", "not valid JSON text"),
        (b"1" * 5000, "not valid JSON text"),  # Python's own cap on digits, still a 400
    ],
)
def test_text_that_is_not_json_is_refused(raw: bytes, message: str) -> None:
    with pytest.raises(PagerError, match=message):
        read_json(raw)


def test_an_empty_body_is_null() -> None:
    assert read_json(b"") is None
    assert read_json(b" \n") is None


def test_out_pager_writes_no_non_finite_number() -> None:
    """`dumps` refuses NaN rather than write JSON strict readers refuse; JSON Pager stored
    before the rule reads back with each non-finite number as its text."""
    with pytest.raises(ValueError, match="not JSON compliant"):
        dumps({"ratio": math.nan})
    stored = '{"ratio": NaN, "top": [Infinity, -Infinity, 1.5], "big": 1e999}'
    value = loads_stored(stored)
    assert value == {"ratio": "NaN", "top": ["Infinity", "-Infinity", 1.5], "big": "1e999"}
    assert json.loads(dumps(value)) == value
