"""`pager send`'s arguments read by hand (`quick_send_args`) are what argparse reads from the
same command line, or left to argparse (None), which then reads them or says what is wrong."""

from __future__ import annotations

import contextlib
import io

import pytest

from pager.cli import _module, _parser_of
from pager.commands.everyday import quick_send_args

LINES = [
    ["api", "hello"],
    ["api"],
    ["api", "-"],
    ["api", "hello", "--json"],
    ["--json", "api", "hello"],
    ["api", "hello", "--thread", "t1", "--reply-to", "msg_1", "--key", "k"],
    ["--thread=t1", "api", "hello", "--key=k", "--thread", "t2"],
    ["api", "--thread", "t1"],
    ["api", "--thread", ""],
    ["api", "--thread="],
    ["api", "hello", "--json", "--json"],
    ["api", "a body with = and spaces"],
    ["api", "--key=x"],  # a body that looks like an option is one, to both
    ["api", "--json=1"],
    # argparse takes TO and BODY only as one run: these are errors
    ["api", "--json", "hello"],
    ["api", "--thread", "t1", "hello"],
    # left to argparse: help, unknown or abbreviated options, `--`, values like options
    ["api", "-h"],
    ["api", "hello", "--thr", "t1"],
    ["api", "hello", "--bogus"],
    ["--", "api", "-hello"],
    ["api", "-5"],
    ["api", "hello", "--thread"],
    ["api", "hello", "--thread", "-x"],
    ["api", "hello", "extra"],
    [],
]


def _argparse(argv: list[str]) -> dict[str, object] | None:
    """What argparse reads from `pager send ARGV`, or None when it refuses it."""
    parser = _parser_of("send", _module("send"))[0]
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        try:
            return vars(parser.parse_args(["send", *argv]))
        except SystemExit:
            return None


@pytest.mark.parametrize("argv", LINES, ids=[" ".join(line) or "(none)" for line in LINES])
def test_a_send_line_read_by_hand_is_what_argparse_reads(argv: list[str]) -> None:
    quick = quick_send_args(argv)
    expected = _argparse(argv)
    if quick is None:
        return  # argparse reads it (or refuses it) itself
    assert expected is not None, f"read by hand, refused by argparse: {argv}"
    assert vars(quick) == expected


def test_the_plainest_lines_are_read_by_hand() -> None:
    """Else the quick path would never be taken, and a send would build argparse again."""
    assert quick_send_args(["api", "hello"]) is not None
    assert quick_send_args(["api", "hello", "--json", "--thread", "t"]) is not None
    assert quick_send_args(["api", "-"]) is not None


def test_the_hand_reader_knows_every_option_of_send() -> None:
    """A new option added to the parser alone would send its lines to argparse (slower, never
    read differently); this says to add it to `SEND_VALUES` too."""
    from pager.commands.everyday import SEND_VALUES

    parser = _parser_of("send", _module("send"))[1]
    options = {
        action.option_strings[-1]: action.dest
        for action in parser._actions
        if action.option_strings and action.dest != "help"
    }
    assert options == {**SEND_VALUES, "--json": "json"}
