"""`pager implementations [--json]`: the registry listed with sources, capabilities and errors."""

from __future__ import annotations

import itertools
import json
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from pager.cli import main
from pager.implementations import ENTRY_POINT_GROUP, default_user_dir


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME and XDG_CONFIG_HOME in tmp; one good user manifest, one broken; one entry point."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    directory = default_user_dir()
    directory.mkdir(parents=True)
    (directory / "mine.toml").write_text(
        'id = "mine"\nname = "My harness"\nexecutable = "mine"\ncapabilities = ["mcp-stdio"]\n'
    )
    (directory / "claude.toml").write_text(
        'id = "claude"\nname = "Claude (mine)"\nexecutable = "claude"\n'
    )
    (directory / "broken.toml").write_text(
        'id = "broken"\nname = "B"\nexecutable = "b"\n[launch]\nargs = ["a", "b", "{tokn}"]\n'
    )
    point = EntryPoint(
        "from-text", "tests.implementations.entry_targets:AS_TEXT", ENTRY_POINT_GROUP
    )
    monkeypatch.setattr("importlib.metadata.entry_points", lambda *, group: [point])
    return directory


def test_cli_implementations_json_lists_sources_and_errors(
    user_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The JSON listing has every implementation with its source, and the broken manifests."""
    assert main(["implementations", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    by_id = {impl["id"]: impl for impl in report["implementations"]}
    assert sorted(by_id) == [
        "claude",
        "cline",
        "codex",
        "copilot",
        "from-text",
        "gemini",
        "kilo",
        "mine",
        "opencode",
        "pi",
        "qwen",
        "shell",
    ]
    assert by_id["codex"]["source"]["kind"] == "builtin"
    assert by_id["mine"]["source"] == {
        "kind": "user",
        "location": str(user_dir / "mine.toml"),
        "name": "mine.toml",
        "distribution": None,
        "label": "~/config/pager/implementations/mine.toml",
    }
    assert by_id["mine"]["capabilities"] == ["mcp-stdio"]
    assert by_id["claude"]["source"]["kind"] == "user"
    assert [over["kind"] for over in by_id["claude"]["overrides"]] == ["builtin"]
    assert by_id["from-text"]["source"]["kind"] == "entry-point"
    (error,) = report["errors"]
    assert error["key"] == "launch.args[2]"
    assert error["source"]["location"] == str(user_dir / "broken.toml")
    assert error["text"].endswith(
        "broken.toml: launch.args[2]: unknown placeholder {tokn} (did you mean {token}?); "
        "known: {address}, {agent_id}, {alias}, {config_content}, {config_dir}, "
        "{conversation_key}, {extension_path}, {free_port}, {hook_command}, {input_file}, "
        "{mcp_config_file}, "
        "{mcp_url}, "
        "{prompt}, {python}, "
        "{session_id}, {settings_file}, {state_dir}, {token}, {token_file}, {url}"
    )
    assert report["user_dir"] == str(user_dir)


def test_cli_implementations_table_is_aligned(
    user_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The human listing is a table whose columns line up; errors go to stderr."""
    assert main(["implementations"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    header = lines[0]
    assert header.split() == ["ID", "NAME", "SOURCE", "CAPABILITIES"]
    starts = [header.index(title) for title in ("NAME", "SOURCE", "CAPABILITIES")]
    rows = lines[1 : lines.index("")]
    assert len(rows) == 12  # ten built-ins (claude overridden) and two of the user
    cells: dict[str, list[str]] = {}
    for row in rows:
        for start in starts:
            assert row[start - 1] == " ", (row, start)
            assert row[start] != " ", (row, start)
        bounds = [0, *starts, len(row)]
        values = [row[a:b].strip() for a, b in itertools.pairwise(bounds)]
        cells[values[0]] = values
    assert cells["codex"] == [
        "codex",
        "Codex CLI",
        "builtin",
        "mcp-http, hooks, knock, plugin, skill",
    ]
    assert cells["mine"] == [
        "mine",
        "My harness",
        "~/config/pager/implementations/mine.toml",
        "mcp-stdio",
    ]
    assert cells["claude"][1:3] == [
        "Claude (mine)",
        "~/config/pager/implementations/claude.toml (over builtin)",
    ]
    assert cells["from-text"][2] == "entry point from-text"
    assert "Add one: a TOML manifest in ~/config/pager/implementations/" in captured.out
    assert captured.err.splitlines()[0] == "1 manifest was skipped (the others are unaffected):"
    assert "broken.toml: launch.args[2]: unknown placeholder {tokn}" in captured.err
