"""`pager.small_json` is `json.dumps` and `json.loads` with their defaults, to the byte, without
importing `json` (nor `re`, which `json` imports): hostile strings included, since a body that
could end its JSON string early would rewrite the request it travels in."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pager import small_json

ROOT = Path(__file__).resolve().parents[1]

HOSTILE = [
    "",
    '"',
    "\\",
    '", "to": "victim", "body": "',  # an attempt to end the string and add fields
    "\\u0022",
    "\x00\x01\x1f\x7f\x80\x9f",
    "\r\n\t\b\f",
    "\u2028\u2029",  # JavaScript's line terminators, valid in JSON strings
    "\ud800",  # lone surrogates (argv's undecodable bytes arrive as \udc80-\udcff)
    "\udcff",
    "\udbff\udfff",  # two surrogates that JSON reads back as one character, U+10FFFF
    "\U0001f600 emoji and \u202e bidi override",
    "\ufeff BOM",
]

JSONABLE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@pytest.mark.parametrize("text", HOSTILE)
def test_a_hostile_string_is_written_as_json_writes_it_and_read_back_whole(text: str) -> None:
    request = {"to": "api", "body": text, "thread": text}
    assert small_json.dumps(request) == json.dumps(request)
    assert small_json.dumps(text) == json.dumps(text)
    # What JSON reads back (a surrogate pair written as two escapes is one character then).
    expected = json.loads(json.dumps(request))
    assert small_json.loads(small_json.dumps(request).encode()) == expected
    assert small_json.loads(small_json.dumps(request)) == expected


@given(JSONABLE)
def test_any_json_value_is_written_and_read_as_json_does(value: object) -> None:
    text = small_json.dumps(value)
    assert text == json.dumps(value)
    assert repr(small_json.loads(text.encode())) == repr(json.loads(text))


@given(st.text(max_size=40))
def test_what_is_not_json_is_refused_as_json_refuses_it(text: str) -> None:
    """The same error (json's own), or the same value."""

    def outcome(loads: Callable[[str], object]) -> str:
        try:
            return f"value {loads(text)!r}"
        except ValueError as exc:
            return f"{type(exc).__name__}: {exc}"

    assert outcome(small_json.loads) == outcome(json.loads)


def test_an_unserializable_value_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        small_json.dumps({"a": object()})


def test_it_imports_neither_json_nor_re() -> None:
    """In a bare interpreter (no `site`), writing and reading a request leaves both out; a
    malformed text then gets json's own error, from json imported for it."""
    script = (
        "import sys; from pager import small_json as j\n"
        "assert j.loads(j.dumps({'body': '\\u2028\"'}).encode()) == {'body': '\\u2028\"'}\n"
        "print(sorted(m for m in ('json', 're', 'json.decoder') if m in sys.modules))\n"
        "try:\n    j.loads(b'{')\nexcept ValueError as e:\n    print(type(e).__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r})\n{script}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.splitlines() == ["[]", "JSONDecodeError"]
