"""The `m` menu: pick the skill or a harness's plugin, watch it install, read what it wrote."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList, Static
from textual.widgets.option_list import Option

from pager.tui.installs import InstallChoice, InstallResult, install_choices, run_install

Runner = Callable[[InstallChoice], InstallResult]


class InstallMenu(ModalScreen[None]):
    DEFAULT_CSS = """
    InstallMenu { align: center middle; }
    InstallMenu > Vertical {
        width: 90%; max-width: 120; height: 80%;
        border: thick $primary; background: $surface; padding: 1 2;
    }
    InstallMenu #menu-title { text-style: bold; margin-bottom: 1; }
    InstallMenu OptionList { height: auto; max-height: 12; }
    InstallMenu #result-box { height: 1fr; margin-top: 1; border-top: solid $primary; }
    InstallMenu #menu-help { color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "close"),
        Binding("q", "close", "close", show=False),
    ]

    def __init__(self, runner: Runner | None = None) -> None:
        super().__init__()
        self.runner: Runner = runner or run_install
        self.choices: list[InstallChoice] = []
        self.running: InstallChoice | None = None
        self.results: list[InstallResult] = []

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Install the Pager skill or a harness's plugin", id="menu-title")
            yield OptionList(id="choices")
            with VerticalScroll(id="result-box"):
                yield Static("", id="result", markup=False)
            yield Label("enter install · escape close", id="menu-help")

    def on_mount(self) -> None:
        self.query_one("#result", Static).update("Reading the implementation registry…")
        self.run_worker(self._load_choices(), group="install-menu")

    async def _load_choices(self) -> None:
        self.choices = await asyncio.to_thread(install_choices)
        menu = self.query_one("#choices", OptionList)
        for choice in self.choices:
            label = Text(choice.label)
            label.append(f"   {choice.command}", "dim")
            if choice.note:
                label.append(f"   ({choice.note})", "italic")
            menu.add_option(Option(label, id=choice.key, disabled=not choice.available))
        menu.focus()
        harnesses = [c for c in self.choices if c.key.startswith("plugin-")]
        offered = ", ".join(c.label.removesuffix(" plugin") for c in harnesses) or "none"
        self.query_one("#result", Static).update(
            f"Harnesses that offer a plugin: {offered}.\n"
            "The skill teaches a session to use Pager; a plugin lets sessions started "
            "without `pager` join."
        )

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        choice = next((c for c in self.choices if c.key == event.option.id), None)
        if choice is None or not choice.available:
            return
        if self.running is not None:
            self.notify(f"Still running {self.running.command}.")
            return
        self.running = choice
        self.query_one("#result", Static).update(f"Running {choice.command} …")
        self.run_worker(self._install(choice), group="install-run")

    async def _install(self, choice: InstallChoice) -> None:
        try:
            result = await asyncio.to_thread(self.runner, choice)
        finally:
            self.running = None
        self.results.append(result)
        self.query_one("#result", Static).update("\n".join(result.lines))
        if result.ok:
            self.notify(result.lines[0], markup=False)
        else:
            self.notify(result.lines[0], severity="error", markup=False)

    def action_close(self) -> None:
        self.dismiss(None)
