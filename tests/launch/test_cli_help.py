"""`--help` everywhere (issue 11, item 5): every command, `pager <implementation>`, `pager hook`,
`pager help COMMAND`, and an unknown word."""

from __future__ import annotations

import pytest

from tests.launch.conftest import PagerHome


def test_pager_help_lists_every_command_and_the_launch(home: PagerHome) -> None:
    done = home.run("--help")
    assert done.returncode == 0
    for command in ("serve", "start", "status", "send", "inbox", "read", "ack", "who",
                    "whoami", "history", "sent", "help", "implementations"):  # fmt: skip
        assert f"    {command} " in done.stdout or f"    {command}\n" in done.stdout, command
    assert "pager IMPLEMENTATION [--session-name NAME]" in done.stdout
    assert "open the operator TUI" in done.stdout


@pytest.mark.parametrize("asked", [("shell", "--help"), ("shell", "-h"), ("help", "shell"),
                                   ("shell", "--session-name", "x", "--help")])  # fmt: skip
def test_an_implementation_shows_the_wrappers_options(home: PagerHome, asked: tuple[str]) -> None:
    """…without starting a broker or looking for the program."""
    done = home.run(*asked)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: pager shell [--session-name NAME] [--force] [--]")
    assert "`pager shell -- --help` shows the harness's own help" in done.stdout
    assert not (home.root / "broker.json").exists()


@pytest.mark.parametrize("asked", [("hook", "--help"), ("help", "hook")])
def test_hook_prints_its_usage(home: PagerHome, asked: tuple[str]) -> None:
    done = home.run(*asked)
    assert done.returncode == 0
    assert done.stdout.startswith("usage: pager hook [--implementation ID]")


def test_help_of_a_command(home: PagerHome) -> None:
    done = home.run("help", "send")
    assert done.returncode == 0
    assert done.stdout.startswith("usage: pager send")
    assert "example: pager send api" in done.stdout


def test_an_unknown_word_is_neither_a_command_nor_an_implementation(home: PagerHome) -> None:
    done = home.run("frobnicate")
    assert done.returncode == 2  # a usage error
    assert "'frobnicate' is neither a command nor an implementation" in done.stderr
    assert "shell" in done.stderr  # the implementations are listed
    assert not (home.root / "broker.json").exists()
