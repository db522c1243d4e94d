"""The command line's layers (pager/commands/__init__.py): `pager.cli` on top, one module per
command family under it, importing only the shared modules (`common`, `acting`, `show`) and the
rest of Pager, never a sibling family nor the entry point; the shared modules import no command
module; nothing else in Pager imports the command line. And what a fast command loads: each
command line runs in a fresh interpreter under `python -X importtime` and the set of Pager's
modules it loaded is checked (a set, never a time)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pager.cli import COMMANDS, OWN_PARSER, _module, overview, overview_text

ROOT = Path(__file__).resolve().parents[1]
COMMANDS_DIR = ROOT / "pager" / "commands"
SHARED = {"common", "acting", "show"}
#: Every command family; a command line names one of them.
FAMILIES = {
    "broker",
    "everyday",
    "harnesses",
    "install",
    "operator",
    "paging",
    "reservations",
    "run",
    "store",
    "wake",
}


def imported(path: Path) -> set[str]:
    """Every module `path` imports, at the top or inside a function (`from a import b` counts
    as `a` and `a.b`: `b` may be a module)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def family(module: str) -> str | None:
    """`run` for pager.commands.run.page, `everyday` for pager.commands.everyday."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["pager", "commands"] and len(parts) > 2 else None


def families_of(path: Path) -> set[str]:
    return {f for name in imported(path) if (f := family(name)) is not None}


def own_family(path: Path) -> str:
    relative = path.relative_to(COMMANDS_DIR)
    return relative.parts[0] if len(relative.parts) > 1 else path.stem


def test_every_command_family_has_its_module() -> None:
    modules = {own_family(path) for path in COMMANDS_DIR.rglob("*.py")} - {"__init__"}
    assert modules == FAMILIES | SHARED


def test_a_command_module_imports_no_other_family_and_not_the_entry_point() -> None:
    wrong = {
        str(path.relative_to(ROOT)): sorted(
            (families_of(path) - SHARED - {own_family(path)})
            | {name for name in imported(path) if name == "pager.cli"}
        )
        for path in COMMANDS_DIR.rglob("*.py")
        if own_family(path) in FAMILIES
    }
    assert {path: names for path, names in wrong.items() if names} == {}


def test_the_shared_modules_import_no_command_module() -> None:
    wrong = {
        name: sorted(families_of(COMMANDS_DIR / f"{name}.py") - SHARED)
        for name in [*sorted(SHARED), "__init__"]
    }
    assert {name: found for name, found in wrong.items() if found} == {}


def test_nothing_below_imports_the_command_line() -> None:
    """The rest of Pager (the hook included) is under the command line, never calls up."""
    entry = {ROOT / "pager" / "cli.py", ROOT / "pager" / "__main__.py"}
    wrong = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "pager").rglob("*.py"))
        if path not in entry and not path.is_relative_to(COMMANDS_DIR)
        if any(name == "pager.cli" or family(name) for name in imported(path))
    ]
    assert wrong == []


class Recorder:
    """A subcommands action that records the names registered (and accepts anything)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def add_parser(self, name: str, **kwargs: object) -> Recorder:
        self.names.append(name)
        return Recorder()  # its own actions (`token create`) are not commands

    def __getattr__(self, name: str) -> object:
        return lambda *args, **kwargs: self


def test_each_command_is_registered_and_handled_by_the_module_the_table_names() -> None:
    """`pager.cli.COMMANDS` (the dispatch table) and the modules agree, command by command."""
    for module_name in {module for module, _ in COMMANDS.values() if module != "install"} - {""}:
        named = sorted(c for c, (m, _) in COMMANDS.items() if m == module_name)
        module = _module(named[0])
        recorder = Recorder()
        module.add_commands(recorder)
        assert sorted(recorder.names) == named
        assert sorted(module.HANDLERS) == named
    assert {c for c, (m, _) in COMMANDS.items() if m == "install"} == set(OWN_PARSER) - {"hook"}


#: Name parts no quick command may load: the other families, the TUI, the installers, the
#: manifests' registry, the server and the store.
HEAVY = {
    "operator",
    "operator_cli",
    "paging",
    "reservations",
    "paging_cli",
    "wake",
    "wake_cli",
    "install",
    "run",
    "harnesses",
    "tui",
    "implementations",
    "broker",
    "web",
    "store",
}


def reported(stderr: str) -> set[str]:
    """The modules named in Python's import report (`-X importtime`) on stderr."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def loaded(args: list[str], env: dict[str, str], cwd: Path) -> set[str]:
    """The modules `python -m pager ARGS` imports, from `-X importtime`'s report."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pager", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    names = reported(done.stderr)
    assert done.returncode in (0, 1), done.stderr[-2000:]  # ran (a refused send is fine)
    return names


def pager_modules(names: set[str]) -> set[str]:
    return {name for name in names if name == "pager" or name.startswith("pager.")}


def heavy(names: set[str]) -> set[str]:
    return {name for name in pager_modules(names) if set(name.split(".")[1:]) & HEAVY}


@pytest.fixture
def bare_env(tmp_path: Path) -> dict[str, str]:
    import os

    return {**os.environ, "PAGER_HOME": str(tmp_path / "home")}


def test_version_imports_the_entry_point_and_the_version_alone(
    bare_env: dict[str, str], tmp_path: Path
) -> None:
    names = loaded(["--version"], bare_env, tmp_path)
    assert pager_modules(names) == {"pager", "pager.cli", "pager.versions"}
    assert "argparse" not in names


@pytest.mark.parametrize("args", [["help"], ["--help"]])
def test_the_overview_imports_no_command_module(
    args: list[str], bare_env: dict[str, str], tmp_path: Path
) -> None:
    names = loaded(args, bare_env, tmp_path)
    assert pager_modules(names) == {"pager", "pager.cli"}
    assert "argparse" not in names


@pytest.mark.parametrize("columns", ["200", "100", "60"])
def test_the_overview_is_what_argparse_prints(
    columns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pager --help` is written without argparse, as argparse writes `pager`'s parser."""
    import contextlib
    import io

    monkeypatch.setenv("COLUMNS", columns)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        overview().print_help()

    def words(text: str) -> str:  # argparse may also break a line after a hyphen
        return " ".join(text.split()).replace("- ", "-")

    assert words(overview_text()) == words(printed.getvalue())
    if columns == "200":  # nothing wrapped: the same to the character
        assert overview_text() == printed.getvalue()


def test_hook_imports_no_command_module(bare_env: dict[str, str], tmp_path: Path) -> None:
    """Outside any session the hook has nothing to say; it still must not load the rest."""
    names = loaded(["hook"], bare_env, tmp_path)
    assert "pager.hook" in names
    assert heavy(names) == set()
    assert {name for name in names if family(name) or name == "pager.commands"} == set()
    assert "argparse" not in names


def script_run(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, set[str]]:
    """`scripts/pager ARGS` with Python's import report on: status, stdout, modules loaded."""
    done = subprocess.run(
        [str(ROOT / "scripts" / "pager"), *args],
        env={**env, "PYTHONPROFILEIMPORTTIME": "1"},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    names = reported(done.stderr)
    return done.returncode, done.stdout, names


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "python").exists(), reason="no .venv")
def test_the_checkouts_script_starts_without_site_and_adds_it_when_a_command_needs_it(
    bare_env: dict[str, str], tmp_path: Path
) -> None:
    """scripts/pager: `--version` loads neither `site` nor the editable install's finder;
    `implementations` (which reads installed packages' entry points) gets site-packages; the
    current directory is not on the path (a `pager/` there is not imported)."""
    (tmp_path / "pager").mkdir()
    (tmp_path / "pager" / "__init__.py").write_text("raise SystemExit('the cwd was imported')\n")
    status, out, names = script_run(["--version"], bare_env, tmp_path)
    assert (status, out.split()[0]) == (0, "pager")
    assert "site" not in names
    assert not {name for name in names if "editable" in name}
    status, out, names = script_run(["implementations", "--json"], bare_env, tmp_path)
    assert status == 0
    assert "site" in names
    assert "shell" in {i["id"] for i in json.loads(out)["implementations"]}
