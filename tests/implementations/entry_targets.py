"""Objects that test entry points of the group `pager.implementations` load."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

AS_DICT: dict[str, Any] = {
    "id": "from-dict",
    "name": "From a dict",
    "executable": "dictharness",
    "capabilities": ("mcp-http", "push"),
    "launch": {"env": {"PAGER_TOKEN": "{token}"}},
    "vendor": {"team": "tools"},
}

AS_TEXT = """
id = "from-text"
name = "From TOML text"
executable = "textharness"
capabilities = ["mcp-stdio"]
"""

#: Set by the tests to a file they wrote.
AS_PATH = Path("/nonexistent/manifest.toml")

AS_TRAVERSABLE = resources.files("pager.implementations") / "builtin" / "shell.toml"


def as_callable() -> dict[str, Any]:
    return {"id": "from-callable", "name": "From a callable", "executable": "callharness"}


def raises() -> dict[str, Any]:
    raise RuntimeError("the package is broken")


NOT_A_MANIFEST = 42

WITH_INT_KEYS: dict[Any, Any] = {"id": "int-keys", "name": "X", "executable": "x", 1: "one"}
