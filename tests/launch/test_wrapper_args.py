"""Wrapper option parsing (SPEC §4) and conversation keys from resume selectors."""

from __future__ import annotations

import pytest

from pager.launch.wrapper_args import (
    Conversation,
    WrapperUsageError,
    find_conversation,
    parse_wrapper_args,
)


def claude(args: list[str]) -> Conversation:
    """Claude Code's selectors."""
    return find_conversation(
        args,
        resume_flags=("--resume", "-r"),
        continue_flags=("--continue", "-c"),
        choose_flag="--session-id",
    )


@pytest.mark.parametrize(
    ("argv", "name", "rest"),
    [
        ([], None, ()),
        (["--session-name", "api"], "api", ()),
        (["--session-name=api", "--", "--resume", "X"], "api", ("--resume", "X")),
        (["--session-name", "api", "--model", "opus"], "api", ("--model", "opus")),
        (
            ["--model", "opus", "--session-name", "api"],
            None,
            ("--model", "opus", "--session-name", "api"),
        ),
        (["--", "--session-name", "x"], None, ("--session-name", "x")),
        (["task.txt"], None, ("task.txt",)),
    ],
)
def test_parse_wrapper_args_options_first(
    argv: list[str], name: str | None, rest: tuple[str, ...]
) -> None:
    """Wrapper options come first; the first other argument or `--` ends them."""
    parsed = parse_wrapper_args(argv)
    assert (parsed.session_name, parsed.harness_args) == (name, rest)


@pytest.mark.parametrize("argv", [["--session-name"], ["--session-name="]])
def test_parse_wrapper_args_missing_value(argv: list[str]) -> None:
    """--session-name without a value is a usage error saying how to write it."""
    with pytest.raises(WrapperUsageError, match="NAME"):
        parse_wrapper_args(argv)


def test_find_conversation_resume_forms() -> None:
    """`--resume X`, `--resume=X` and `-r X` name the conversation; args are unchanged."""
    for args in (["--resume", "X"], ["--resume=X"], ["-r", "X", "--verbose"]):
        conversation = claude(args)
        assert conversation.key == "X"
        assert conversation.args == tuple(args)
        assert not conversation.chosen


def test_find_conversation_chooses_an_id_when_new() -> None:
    """Without a resume, the wrapper chooses the id and passes it with the choose flag."""
    conversation = claude(["--model", "opus"])
    assert conversation.chosen
    assert conversation.args[:2] == ("--session-id", conversation.key)
    assert conversation.args[2:] == ("--model", "opus")


def test_find_conversation_other_subcommand_starts_no_conversation() -> None:
    """`gemini mcp list` is a management command: no id is chosen or put before it; a
    prompt or option first still starts a chosen conversation."""

    def gemini(args: list[str]) -> Conversation:
        return find_conversation(
            args, resume_flags=("--resume",), continue_flags=(), choose_flag="--session-id",
            other_subcommands=("mcp", "extensions"),
        )  # fmt: skip

    listed = gemini(["mcp", "list"])
    assert (listed.key, listed.args, listed.chosen) == (None, ("mcp", "list"), False)
    prompt = gemini(["fix the mcp server"])
    assert prompt.chosen
    assert prompt.args[:2] == ("--session-id", prompt.key)
    assert gemini(["--model", "x", "mcp"]).chosen  # a later "mcp" is an argument, not a command


def test_find_conversation_continue_and_picker_have_no_key() -> None:
    """`--continue` and a bare `--resume` (a picker) name no conversation the wrapper knows."""
    assert claude(["--continue"]).key is None
    assert claude(["--resume"]).key is None
    assert claude(["-r", "--verbose"]).key is None


def test_find_conversation_harness_without_selectors() -> None:
    """A harness with no resume selectors runs without a conversation key."""
    conversation = find_conversation(["x"], resume_flags=(), continue_flags=(), choose_flag=None)
    assert (conversation.key, conversation.args) == (None, ("x",))


def test_find_conversation_resume_subcommand() -> None:
    """`codex resume X` names X; `codex resume --last` names none; other commands are new."""

    def codex(args: list[str]) -> Conversation:
        return find_conversation(
            args, resume_flags=(), continue_flags=("--last",), choose_flag=None,
            subcommand="resume",
        )  # fmt: skip

    assert codex(["resume", "thread-1", "--model", "o"]).key == "thread-1"
    assert codex(["resume", "--last"]).key is None
    assert codex(["resume"]).key is None
    assert codex(["exec", "resume"]).key is None
