"""`pager hook --pre-tool` without a broker (pager/pretool.py): which paths each built-in
harness's file-writing tool call writes, read from its manifest's `[hooks.pre_tool]`; the shell
commands and patches it sees into; how each harness is told no; `[reservations] enforce`
(pager/enforce.py) and its validation."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pager import enforce, pretool
from pager.config import ConfigError, load_config
from pager.implementations import discover
from pager.implementations._validate import validate
from pager.implementations.manifest import ManifestInvalid, Source, SourceKind

NO_USER_DIR = Path(__file__).parent / "implementations" / "no-user-manifests"


def spec(ident: str) -> dict[str, Any]:
    manifest = discover(entry_points=False, user_dir=NO_USER_DIR).get(ident).manifest
    assert manifest.hooks.pre_tool is not None
    loaded: dict[str, Any] = json.loads(manifest.hooks.pre_tool.spec())
    return loaded


@pytest.mark.parametrize(
    ("ident", "payload", "written"),
    [
        ("claude", {"tool_name": "Edit", "tool_input": {"file_path": "src/x.py"}}, ["src/x.py"]),
        ("claude", {"tool_name": "MultiEdit", "tool_input": {"file_path": "a.py"}}, ["a.py"]),
        (
            "claude",
            {"tool_name": "NotebookEdit", "tool_input": {"notebook_path": "n.ipynb"}},
            ["n.ipynb"],
        ),
        ("claude", {"tool_name": "Read", "tool_input": {"file_path": "src/x.py"}}, []),
        (
            "claude",
            {"tool_name": "Bash", "tool_input": {"command": "rm -f src/x.py b.py"}},
            ["src/x.py", "b.py"],
        ),
        (
            "claude",
            {"tool_name": "Bash", "tool_input": {"command": "ls && echo hi > out.txt"}},
            ["out.txt"],
        ),
        ("claude", {"tool_name": "Bash", "tool_input": {"command": "git status"}}, []),
        ("gemini", {"tool_name": "replace", "tool_input": {"file_path": "src/x.py"}}, ["src/x.py"]),
        (
            "gemini",
            {"tool_name": "run_shell_command", "tool_input": {"command": "mv a b"}},
            ["a", "b"],
        ),
        (
            "qwen",
            {"tool_name": "write_file", "tool_input": {"file_path": "src/x.py"}},
            ["src/x.py"],
        ),
        (
            "copilot",
            {"toolName": "edit", "toolArgs": json.dumps({"path": "src/x.py"})},
            ["src/x.py"],
        ),
        ("copilot", {"toolName": "edit", "toolArgs": "{not json"}, []),
        (
            "copilot",  # a freeform tool: its whole input is the patch
            {"toolName": "apply_patch", "toolArgs": "*** Begin Patch\n*** Add File: n.py\n+x\n"},
            ["n.py"],
        ),
        (
            "cline",
            {"preToolUse": {"toolName": "editor", "parameters": {"path": "x.py"}}},
            ["x.py"],
        ),
        (
            "cline",
            {
                "preToolUse": {
                    "toolName": "run_commands",
                    "parameters": {"commands": '["rm a", "touch b"]'},
                }
            },
            ["a", "b"],
        ),
        (
            "codex",
            {
                "tool_name": "apply_patch",
                "tool_input": {
                    "command": "*** Begin Patch\n*** Update File: src/x.py\n"
                    "*** Move to: src/y.py\n*** End Patch"
                },
            },
            ["src/x.py", "src/y.py"],
        ),
        ("opencode", {"tool_name": "edit", "tool_input": {"filePath": "src/x.py"}}, ["src/x.py"]),
        ("pi", {"tool_name": "write", "tool_input": {"path": "src/x.py"}}, ["src/x.py"]),
    ],
)
def test_each_harness_file_writing_call_names_its_paths(
    ident: str, payload: dict[str, Any], written: list[str], tmp_path: Path
) -> None:
    found = pretool.written_paths(spec(ident), payload, str(tmp_path))
    assert found == [os.path.realpath(tmp_path / p) for p in written]


def test_an_edit_through_a_symbolic_link_is_an_edit_of_its_target(tmp_path: Path) -> None:
    """The attacker's detour: editing `alias.py -> src/x.py` asks about src/x.py."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "x.py").write_text("x")
    (tmp_path / "alias.py").symlink_to(tmp_path / "src" / "x.py")
    payload = {"tool_name": "Write", "tool_input": {"file_path": "alias.py"}}
    found = pretool.written_paths(spec("claude"), payload, str(tmp_path))
    assert found == [str((tmp_path / "src" / "x.py").resolve())]


@pytest.mark.parametrize(
    ("command", "targets"),
    [
        ("sed -i 's/a/b/' src/x.py", ["src/x.py"]),
        ("cp a.py src/x.py", ["src/x.py"]),
        ("sudo rm -rf build", ["build"]),
        ("LC_ALL=C tee -a log.txt < in", ["log.txt"]),
        ("cat a >> b; touch c", ["b", "c"]),
        ("echo 'unbalanced", []),
        ("python script.py", []),
        ("git mv src/x.py src/y.py && git status", ["src/x.py", "src/y.py"]),
    ],
)
def test_shell_commands_best_effort(command: str, targets: list[str]) -> None:
    assert pretool.shell_targets(command) == targets


@pytest.mark.parametrize(
    ("refusal", "denied", "allowed"),
    [
        (
            "claude",
            ("hookSpecificOutput", "permissionDecision"),
            ("hookSpecificOutput", "additionalContext"),
        ),
        ("decision", ("decision",), ("systemMessage",)),
        ("copilot", ("permissionDecision",), ("additionalContext",)),
        ("cline", ("cancel",), ("contextModification",)),
    ],
)
def test_each_refusal_shape(
    refusal: str, denied: tuple[str, ...], allowed: tuple[str, ...]
) -> None:
    def dig(text: str, keys: tuple[str, ...]) -> Any:
        value: Any = json.loads(text)
        for key in keys:
            value = value[key]
        return value

    assert dig(pretool.render(refusal, "E", "why", refused=True), denied) in ("deny", True)
    assert dig(pretool.render(refusal, "E", "why", refused=False), allowed) == "why"


def test_the_explanation_names_holder_reason_until_and_how_to_ask() -> None:
    text = pretool.explain(
        [
            {
                "path": "src/x.py",
                "pattern": "src/*.py",
                "holder": "alice@repo",
                "reason": "refactor",
                "until": "2026-12-06T21:00:00Z",
            }
        ],
        refused=True,
    )
    said = ("src/x.py", "alice@repo", "refactor", "2026-12-06T21:00:00Z", "pager send alice@")
    for part in said:
        assert part in text


def test_enforce_mode_globally_and_per_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAGER_HOME", str(tmp_path))
    assert enforce.mode_for(str(tmp_path)) == "deny"  # no config: the default
    scratch = tmp_path / "scratch"
    (scratch / "sub").mkdir(parents=True)
    (tmp_path / "config.toml").write_text(
        f'[reservations]\nenforce = "warn"\n[reservations.workspaces]\n"{scratch}" = "off"\n'
    )
    assert enforce.mode_for(str(tmp_path)) == "warn"
    assert enforce.mode_for(str(scratch / "sub")) == "off"
    assert load_config(tmp_path / "config.toml").host  # the broker accepts the table


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ('enforce = "refuse"', "'refuse' is not one of deny, warn, off"),
        ('enforce = "deny"\nmode = "x"', "unknown key reservations.mode"),
        ('[reservations.workspaces]\n"relative/dir" = "off"', "absolute path"),
    ],
)
def test_a_wrong_reservations_table_is_refused_in_words(
    tmp_path: Path, table: str, words: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"[reservations]\n{table}\n")
    with pytest.raises(ConfigError, match=words):
        load_config(path)


@pytest.mark.parametrize(
    ("pre_tool", "key"),
    [
        ({"refusal": "claude"}, "hooks.pre_tool.event"),
        ({"event": "PreToolUse", "refusal": "loud"}, "hooks.pre_tool.refusal"),
        ({"event": "PreToolUse", "path": {"Edit": "file_path"}}, "hooks.pre_tool.path"),
        ({"event": "PreToolUse", "paths": {"Edit": 3}}, "hooks.pre_tool.paths.Edit"),
    ],
)
def test_a_wrong_pre_tool_table_is_refused(pre_tool: dict[str, Any], key: str) -> None:
    """A typo would silently switch enforcement off: every key is checked."""
    data = {"id": "p", "name": "P", "executable": "p", "hooks": {"pre_tool": pre_tool}}
    with pytest.raises(ManifestInvalid) as caught:
        validate(data, Source(SourceKind.USER, "/cfg/implementations/p.toml", "p.toml"))
    assert key in [error.key for error in caught.value.errors]
