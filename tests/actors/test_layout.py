"""The layering (ARCHITECTURE.md, Top-level layout): `supervisors` is a generic library that
imports neither `pager` nor `actors`; the actors import no application module that imports
them back (`pager.service`, `pager.operator`), nor the composition root (`pager.broker`).
Each check imports in a fresh interpreter with the forbidden modules blocked."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

CHECK = """
import importlib, pkgutil, sys
for name in {blocked!r}:
    sys.modules[name] = None  # importing it now raises ImportError
package = importlib.import_module({package!r})
for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
    importlib.import_module(info.name)
"""


@pytest.mark.parametrize(
    ("package", "blocked"),
    [
        ("supervisors", ["pager", "actors"]),
        ("actors", ["pager.service", "pager.operator", "pager.broker", "pager.web"]),
    ],
)
def test_package_imports_without(package: str, blocked: list[str]) -> None:
    code = CHECK.format(package=package, blocked=blocked)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr


def test_only_the_store_imports_sqlite3() -> None:
    """The store behind ports (ARCHITECTURE.md): no module outside pager/store names sqlite3,
    so a second backend is an addition, not a rewrite."""
    root = Path(__file__).resolve().parents[2]
    offenders = [
        str(path.relative_to(root))
        for package in ("pager", "actors", "supervisors")
        for path in sorted((root / package).rglob("*.py"))
        if not path.is_relative_to(root / "pager" / "store")
        if re.search(r"^\s*(import sqlite3|from sqlite3 import)", path.read_text(), re.M)
    ]
    assert (root / "pager" / "store").is_dir()
    assert offenders == []
