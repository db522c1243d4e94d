"""The help line at the bottom of each screen: its keys and what they do.

A plain widget built once from the screen's bindings, instead of Textual's `Footer`: the
Footer rebuilds its key widgets whenever the active bindings change (every return to a
screen), which cost up to 300 ms per key press at 1,000 agents (scripts/bench_tui.py).
Keys that do not fit one line go on the next (never in the middle of a key and what it does),
so a narrow terminal shows them all.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.widget import Widget

KEY_NAMES = {"enter": "⏎", "escape": "esc", "space": "space"}
GAP = "  "


def key_items(bindings: Iterable[BindingType]) -> list[Text]:
    """One ` key  what it does` piece for each binding shown in the help line."""
    items = []
    for binding in bindings:
        if not isinstance(binding, Binding) or not binding.show or not binding.description:
            continue
        key = binding.key_display or KEY_NAMES.get(binding.key, binding.key)
        item = Text(no_wrap=True)
        item.append(f" {key} ", "reverse bold")
        item.append(f" {binding.description}")
        items.append(item)
    return items


def help_text(bindings: Iterable[BindingType], width: int | None = None) -> Text:
    """The help line's text, its pieces wrapped onto lines of `width` (one line: None)."""
    text = Text(no_wrap=True, overflow="ellipsis")
    used = 0
    for item in key_items(bindings):
        if used:
            if width is not None and used + len(GAP) + item.cell_len > width:
                text.append("\n")
                used = 0
            else:
                text.append(GAP)
                used += len(GAP)
        text.append_text(item)
        used += item.cell_len
    return text


class KeyHelp(Widget):
    DEFAULT_CSS = """
    KeyHelp { height: auto; dock: bottom; background: $panel; color: $text; }
    """

    def __init__(self, bindings: Iterable[BindingType], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._key_bindings = list(bindings)

    def render(self) -> Text:
        return help_text(self._key_bindings, self.size.width or None)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(help_text(self._key_bindings, width or None).plain.split("\n"))
