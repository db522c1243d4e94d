"""The first `./scripts/pager serve` or `./scripts/test` installs Pager into `.venv`, which
takes a minute or more: it shows what it fetches and installs as it goes, says nothing once set
up, and shows pip's whole account when the install fails. Run against a copy of the script
with a stand-in `.venv/bin/python` that answers as pip does (no network, no real install)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PIP_SAYS = """\
Obtaining file:///src/pager
Collecting attrs>=23.1 (from pager==0.1.0)
  Using cached attrs-25.1.0-py3-none-any.whl.metadata (10 kB)
Collecting trio>=0.27 (from pager==0.1.0)
  Using cached trio-0.30.0-py3-none-any.whl.metadata (8.5 kB)
Requirement already satisfied: idna in ./.venv/lib/python3.11/site-packages (3.10)
Installing collected packages: attrs, trio, pager
Successfully installed attrs-25.1.0 pager-0.1.0 trio-0.30.0
"""


def _checkout(tmp_path: Path, *, pip_fails: bool = False) -> Path:
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "_venv.sh", root / "scripts" / "_venv.sh")
    (root / "pyproject.toml").write_text('[project]\nname = "pager"\n')
    python = root / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    says = PIP_SAYS + ("ERROR: no space left\n" if pip_fails else "")
    (tmp_path / "pip-says.txt").write_text(says)
    python.write_text(f"#!/bin/sh\ncat {tmp_path / 'pip-says.txt'}\nexit {1 if pip_fails else 0}\n")
    python.chmod(0o755)
    return root


def _ensure(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f". {root / 'scripts' / '_venv.sh'} && ensure_venv test"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_first_install_shows_each_package_then_a_second_run_says_nothing(
    tmp_path: Path,
) -> None:
    root = _checkout(tmp_path)
    first = _ensure(root)
    assert first.returncode == 0, first.stderr
    assert first.stderr.splitlines() == [
        "Installing Pager with [test] into .venv (first run or pyproject.toml changed) ...",
        "  fetching attrs>=23.1",
        "  fetching trio>=0.27",
        "  installing 3 packages ...",
        "  installed",
    ]
    again = _ensure(root)
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")


def test_a_failed_install_shows_pips_whole_account(tmp_path: Path) -> None:
    failed = _ensure(_checkout(tmp_path, pip_fails=True))
    assert failed.returncode != 0
    assert "ERROR: no space left" in failed.stderr
    assert "Requirement already satisfied: idna" in failed.stderr  # the whole account
    assert "installing into .venv failed" in failed.stderr
