"""The confirmation dialog of the operator actions: it names every agent it will act on."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

#: The dialog lists this many agents, then says how many more.
SHOWN = 15


class ConfirmScreen(ModalScreen[bool]):
    """`y` (or the confirm button) answers True; `n`, escape or Cancel answer False."""

    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical {
        width: 80%; max-width: 100; height: auto; max-height: 80%;
        border: thick $warning; background: $surface; padding: 1 2;
    }
    ConfirmScreen #question { text-style: bold; margin-bottom: 1; }
    ConfirmScreen #names { height: auto; max-height: 18; }
    ConfirmScreen #warning { margin-top: 1; color: $warning; }
    ConfirmScreen Horizontal { height: auto; margin-top: 1; align-horizontal: right; }
    ConfirmScreen Button { margin-left: 2; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "yes"),
        Binding("n", "answer(False)", "no"),
        Binding("escape", "answer(False)", "cancel"),
    ]

    def __init__(self, question: str, names: list[str], *, verb: str, warning: str = "") -> None:
        super().__init__()
        self.question = question
        self.names = names
        self.verb = verb
        self.warning = warning

    def compose(self) -> ComposeResult:
        shown = [f"  • {name}" for name in self.names[:SHOWN]]
        if len(self.names) > SHOWN:
            shown.append(f"  … and {len(self.names) - SHOWN} more")
        with Vertical():
            yield Static(self.question, id="question", markup=False)  # wraps: never cut
            with VerticalScroll(id="names"):
                yield Static("\n".join(shown), markup=False)
            if self.warning:
                yield Static(self.warning, id="warning", markup=False)
            with Horizontal():
                yield Button(f"{self.verb} (y)", variant="error", id="confirm")
                yield Button("Cancel (n)", variant="primary", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()  # a stray Enter does nothing harmful

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
