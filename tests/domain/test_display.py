"""Text from others shown to a person: control, format and bidirectional characters escaped."""

from __future__ import annotations

import json
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pager.domain.display import for_terminal, json_for_terminal, quoted_field

#: What a hostile sender puts in a body: set the window title, clear the screen, hide text,
#: overwrite the line (CR), reverse what follows (RLO), 8-bit CSI, DEL, a tag character.
HOSTILE = "ok\x1b]0;owned\x07\x1b[2J\x1b[8mhidden\rfake\u202eevil\x9b31m\x7f\U000e0041 end"
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
#: What must never reach a terminal raw: every C0 but LF/TAB, DEL, C1, and the format
#: characters that can hide or reorder text.
FORBIDDEN = {chr(c) for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)]} - {"\n", "\t"} | set(BIDI)


def _raw_unsafe(text: str, *, one_line: bool = False) -> set[str]:
    allowed = set() if one_line else {"\n", "\t"}
    return {
        char
        for char in text
        if char not in allowed
        and char not in "\u200b\u200c\u200d"
        and unicodedata.category(char) in {"Cc", "Cf", "Zl", "Zp", "Cs"}
    }


def test_for_terminal_escapes_a_hostile_body() -> None:
    """ESC, BEL, CR, C1, DEL, the bidi override and a tag character show as escapes."""
    shown = for_terminal(HOSTILE)
    assert shown == (
        "ok\\x1b]0;owned\\x07\\x1b[2J\\x1b[8mhidden\\rfake⟨U+202E⟩evil\\x9b31m\\x7f⟨U+E0041⟩ end"
    )
    assert not FORBIDDEN & set(shown)


def test_for_terminal_escapes_every_bidi_control() -> None:
    """Embeddings, overrides, isolates and marks: each one visible, none raw."""
    shown = for_terminal(BIDI)
    assert shown == "".join(f"⟨U+{ord(c):04X}⟩" for c in BIDI)


def test_for_terminal_keeps_lines_and_tabs_of_a_body_but_not_of_one_line() -> None:
    """A body keeps LF and TAB; a one-line value (a table cell) shows them escaped, CR always."""
    assert for_terminal("a\n\tb\r\nc") == "a\n\tb\\r\nc"
    assert for_terminal("a\n\tb\r\nc", one_line=True) == "a\\n\\tb\\r\\nc"
    assert for_terminal("x\u2028y\u2029z") == "x⟨U+2028⟩y⟨U+2029⟩z"


def test_for_terminal_leaves_readable_text_alone() -> None:
    """Letters of any script, emoji sequences (with their joiners), accents: unchanged."""
    text = "héllo мир 世界 שלום مرحبا 👩‍👩‍👧 ✓ e\u0301 a\u00a0b"
    assert for_terminal(text) == text
    assert for_terminal(text, one_line=True) == text


@given(st.text())
def test_for_terminal_output_has_no_control_or_format_character(text: str) -> None:
    """For any text: nothing left that moves the cursor, drives the terminal or hides text."""
    assert not _raw_unsafe(for_terminal(text))
    assert not _raw_unsafe(for_terminal(text, one_line=True), one_line=True)
    assert "\n" not in for_terminal(text, one_line=True)


@given(st.text(st.characters(blacklist_categories=("Cc", "Cf", "Zl", "Zp", "Cs"))))
def test_for_terminal_printable_text_is_unchanged(text: str) -> None:
    """Text without control or format characters is shown exactly as it is."""
    assert for_terminal(text) == text
    assert for_terminal(text, one_line=True) == text


@given(st.text())
def test_for_terminal_is_idempotent(text: str) -> None:
    """Escaping what is already escaped changes nothing (the CLI escapes the envelope again)."""
    once = for_terminal(text)
    assert for_terminal(once) == once


@given(
    st.recursive(
        st.none() | st.text(), lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner)
    )
)
def test_json_for_terminal_is_the_same_json_and_safe(value: object) -> None:
    """The JSON loads back to exactly the value, and has no raw control or format character."""
    for indent in (None, 2):
        document = json_for_terminal(json.dumps(value, indent=indent, ensure_ascii=False))
        assert json.loads(document) == value
        assert not _raw_unsafe(document)


def test_json_for_terminal_escapes_what_json_dumps_leaves_raw() -> None:
    """`json.dumps` escapes C0 but leaves DEL, C1, bidi and tags raw: now `\\uXXXX`."""
    document = json_for_terminal(json.dumps({"body": HOSTILE}, ensure_ascii=False))
    for escape in ("\\u202e", "\\u009b", "\\u007f", "\\udb40\\udc41"):
        assert escape in document
    assert json.loads(document) == {"body": HOSTILE}


@pytest.mark.parametrize(
    "field",
    [
        'x" · from boss@corp (human) · sent 2020 · "',
        "x\nFrom boss@corp · sent 2020",
        "x\rFrom boss@corp",
        "x\u2028From boss@corp",
        "x\u201d \u2022 from boss@corp \uff02",  # look-alike quote, bullet, fullwidth quote
        'x\\" · from boss',
        "\u202eproc\u202c",
    ],
)
def test_quoted_field_cannot_end_early_or_add_a_field(field: str) -> None:
    """Inside the quotes, no unescaped quote, no separator, no line break, no raw control."""
    shown = quoted_field(field)
    assert shown[0] == shown[-1] == '"'
    inner = shown[1:-1]
    assert "·" not in inner
    assert shown.splitlines() == [shown]
    assert not _raw_unsafe(shown, one_line=True)
    unescaped = inner.replace("\\\\", "").replace('\\"', "")
    assert '"' not in unescaped
    assert not set(unescaped) & set("\u201c\u201d\uff02\u2022")


def test_quoted_field_shows_the_forged_job_id_as_text() -> None:
    """The forged header stays one visible value: quotes and dots escaped, nothing lost."""
    assert quoted_field('x" · from boss@corp (human) · sent 2020 · "') == (
        '"x\\" ⟨U+00B7⟩ from boss@corp (human) ⟨U+00B7⟩ sent 2020 ⟨U+00B7⟩ \\""'
    )


def test_quoted_field_is_cut_at_its_limit() -> None:
    """A long field is cut to `limit` characters of the original, then `…`."""
    assert quoted_field("t" * 500, limit=10) == '"' + "t" * 9 + '…"'
