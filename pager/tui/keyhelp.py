"""The help line at the bottom of each screen: its keys and what they do.

A plain `Static` built once from the screen's bindings, instead of Textual's `Footer`: the
Footer rebuilds its key widgets whenever the active bindings change (every return to a
screen), which cost up to 300 ms per key press at 1,000 agents (scripts/bench_tui.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import Static

KEY_NAMES = {"enter": "⏎", "escape": "esc", "space": "space"}


def help_text(bindings: Iterable[BindingType]) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    for binding in bindings:
        if not isinstance(binding, Binding) or not binding.show or not binding.description:
            continue
        if text:
            text.append("  ")
        key = binding.key_display or KEY_NAMES.get(binding.key, binding.key)
        text.append(f" {key} ", "reverse bold")
        text.append(f" {binding.description}")
    return text


class KeyHelp(Static):
    DEFAULT_CSS = """
    KeyHelp { height: 1; dock: bottom; background: $panel; color: $text; }
    """

    def __init__(self, bindings: Iterable[BindingType], *, id: str | None = None) -> None:
        super().__init__(help_text(bindings), id=id)
