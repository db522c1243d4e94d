"""Which session token Pager's own clients use inside a wrapped launch (`session_token`)."""

from __future__ import annotations

from pathlib import Path

from pager.launch.files import session_token


def test_the_token_file_wins_over_the_relay_credential(tmp_path: Path) -> None:
    """Inside `pager <implementation>`: PAGER_TOKEN is the relay's credential; the session's
    current token (rewritten by the wrapper when it rejoins) is in PAGER_TOKEN_FILE."""
    token_file = tmp_path / "session-token"
    token_file.write_text("tok_now\n")
    environ = {"PAGER_TOKEN": "prl_relay", "PAGER_TOKEN_FILE": str(token_file)}
    assert session_token(environ) == "tok_now"
    token_file.write_text("tok_rejoined\n")
    assert session_token(environ) == "tok_rejoined"


def test_a_launch_that_is_over_has_no_session(tmp_path: Path) -> None:
    """The file went with its launch: no token at all, never the relay's credential."""
    environ = {"PAGER_TOKEN": "prl_relay", "PAGER_TOKEN_FILE": str(tmp_path / "gone")}
    assert session_token(environ) is None
    assert session_token({"PAGER_TOKEN": "prl_relay"}) is None


def test_outside_a_launch_pager_token_is_the_token() -> None:
    assert session_token({"PAGER_TOKEN": "tok_set_by_hand"}) == "tok_set_by_hand"
    assert session_token({}) is None
