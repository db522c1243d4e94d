"""Text from others, made safe to show: on a person's terminal, and on lines Pager writes itself.

Anyone who can send mail (an agent, a script holding a mailbox token) chooses the characters of
its body, thread and fields. Printed raw, a control character drives the terminal (ESC sequences
set the window title, clear the screen, hide text; CR overwrites a line) and a bidirectional
override reorders what follows it. So every character that is not shown as itself is shown as
an escape instead (not reversibly: a body holding the text `\\x1b` shows the same):

- C0 and C1 control characters and DEL: `\\x1b`, `\\x07`, `\\x9b`; CR, LF and TAB as `\\r`,
  `\\n`, `\\t`. A multi-line text (a body) keeps its line feeds and tabs: they only move the
  cursor forward. CR never stays: it can overwrite the line before it.
- Format characters (Unicode category Cf: the bidirectional marks, embeddings, overrides and
  isolates U+200E, U+200F, U+061C, U+202A-U+202E, U+2066-U+2069; invisible operators, word
  joiner, BOM, tag characters, ...), line and paragraph separators and lone surrogates:
  `⟨U+202E⟩`. Zero-width space, non-joiner and joiner (U+200B-U+200D) stay: they hide and
  reorder nothing, emoji sequences and several scripts need the joiners, and Pager's envelope
  uses U+200B itself to break marker look-alikes.

Everything else (letters of every script, emoji, combining marks, spaces) is shown as itself.
Standard library only, and `re` only for text that needs an escape: the CLI imports this on its
fast path, where what it prints is almost always plain.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs milliseconds
if TYPE_CHECKING:
    import re

#: Format characters shown as themselves (module docstring).
KEPT_FORMAT = frozenset("\u200b\u200c\u200d")
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
_SHOWN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
#: Every character that may need an escape: a quick filter, `is_shown_escaped` decides. The
#: patterns are compiled by `re` when first used (and kept in its cache).
_NOT_PLAIN = "[^\n\t\x20-\x7e]"
_NOT_PLAIN_ONE_LINE = "[^\x20-\x7e]"

#: The separators of a line Pager composes (` · ` between fields, `"` around one) and the
#: characters that look like them, escaped inside a quoted field so it cannot seem to end.
_QUOTE_LOOKALIKES = '"\u02ba\u02dd\u02ee\u201c\u201d\u201e\u201f\u2033\u2036\u3003\uff02'
_DOT_LOOKALIKES = "\u00b7\u0387\u16eb\u2022\u2027\u2219\u22c5\u2e31\u30fb\uff65"
_FIELD_SPECIALS = f"[\\\\{_QUOTE_LOOKALIKES}{_DOT_LOOKALIKES}]"


def is_shown_escaped(char: str) -> bool:
    """Whether `char` is shown as an escape (LF and TAB are, unless a multi-line text keeps
    them: `for_terminal` decides)."""
    import unicodedata  # here: only text that is not plain ASCII gets this far (CLI start-up)

    return unicodedata.category(char) in _SHOWN_CATEGORIES and char not in KEPT_FORMAT


def escape_char(char: str) -> str:
    """How `char` is shown: `\\r` and the like, `\\x1b` up to U+00FF, else `⟨U+202E⟩`."""
    short = _SHORT.get(char)
    if short is not None:
        return short
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"⟨U+{code:04X}⟩"


def for_terminal(text: str, *, one_line: bool = False) -> str:
    """`text` with every character that does not show as itself escaped (module docstring).

    A multi-line text keeps LF and TAB; with `one_line`, they are escaped as well, so the
    result is one line (a table cell, a field on a line of its own)."""
    if text.isprintable():  # the common case: no control, format or separator character
        return text
    import re

    return re.sub(_NOT_PLAIN_ONE_LINE if one_line else _NOT_PLAIN, _shown, text)


def _shown(match: re.Match[str]) -> str:
    char = match.group()
    return escape_char(char) if is_shown_escaped(char) else char


def quoted_field(text: str, *, limit: int | None = None) -> str:
    """`text` as one quoted field of a line Pager writes (a header): `"…"`, on one line, with
    `\\`, the quote, the ` · ` separator and their look-alikes escaped, so the field cannot
    seem to end early, add a field or start a line. `limit` cuts it (with `…`) first."""
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    import re

    return '"' + for_terminal(re.sub(_FIELD_SPECIALS, _escape_special, text), one_line=True) + '"'


def _escape_special(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\\":
        return "\\\\"
    if char == '"':
        return '\\"'
    return f"⟨U+{ord(char):04X}⟩"


def json_for_terminal(document: str) -> str:
    """A JSON text (from `json.dumps(..., ensure_ascii=False)`) with every character that
    would not show as itself written as a `\\uXXXX` escape: the same JSON value, safe on a
    terminal. (`json.dumps` escapes C0 controls itself, not DEL, C1 or format characters.)"""
    if document.isprintable():
        return document
    import re

    return re.sub(_NOT_PLAIN, _json_escape, document)


def _json_escape(match: re.Match[str]) -> str:
    char = match.group()
    if not is_shown_escaped(char):
        return char
    # Outside its strings, a JSON text holds only ASCII punctuation and white space: an escaped
    # character is always inside a string, where `\\uXXXX` (a surrogate pair above U+FFFF) is
    # the same character.
    from pager.small_json import dumps

    return dumps(char)[1:-1]
