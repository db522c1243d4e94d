"""`?`: every key of the agents screen, what it does, and how to get agents to show."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from pager.tui.keyhelp import KEY_NAMES

HINTS = (
    "Agents appear here when a session joins: start a harness as one with `pager claude`"
    " (`pager implementations` lists the harnesses), run any program as one with"
    " `pager shell -- CMD`, or send mail from a terminal with `pager send TO TEXT`."
    " Everyday commands: `pager --help`; docs/tui.md explains this screen."
)


#: The table's own keys (Textual's DataTable), which are no bindings of Pager's.
NAVIGATION = (
    ("↑ ↓", "move between agents"),
    ("PgUp PgDn", "a page up or down"),
    ("ctrl+Home ctrl+End", "the first or the last agent"),
)


def key_lines(bindings: Iterable[BindingType]) -> str:
    lines = [f"  {key:<19} {what}" for key, what in NAVIGATION]
    for binding in bindings:
        if isinstance(binding, Binding) and binding.description:
            key = binding.key_display or KEY_NAMES.get(binding.key, binding.key)
            lines.append(f"  {key:<19} {binding.description}")
    return "\n".join(lines)


class HelpScreen(ModalScreen[None]):
    """Any key of `?`, escape or q closes it."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical {
        width: 80%; max-width: 100; height: auto; max-height: 90%;
        border: thick $accent; background: $surface; padding: 1 2;
    }
    HelpScreen #hints { margin-top: 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "close"),
        Binding("question_mark", "close", "close", show=False),
        Binding("q", "close", "close", show=False),
    ]

    def __init__(self, bindings: Iterable[BindingType]) -> None:
        super().__init__()
        self.keys = key_lines(bindings)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Keys", markup=False)
            yield Static(self.keys, id="keys", markup=False)
            yield Static(HINTS, id="hints", markup=False)

    def action_close(self) -> None:
        self.dismiss(None)
