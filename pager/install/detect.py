"""Which harnesses are installed here: each manifest's `[detect]` table, nothing per id.

A harness counts as installed when one of its `executables` is on PATH or one of its `paths`
exists. The answer lists what was found, for people to read (`claude on PATH`, `~/.gemini`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from pager.implementations.manifest import Manifest, tilde
from pager.implementations.registry import Implementation, ImplementationRegistry


def evidence(manifest: Manifest, environ: Mapping[str, str] | None = None) -> list[str]:
    """What marks `manifest`'s harness as installed; empty when nothing does."""
    env = os.environ if environ is None else environ
    found: list[str] = []
    for name in manifest.detect.executables:
        where = shutil.which(name, path=env.get("PATH", os.defpath))
        if where is not None:
            found.append(f"{name} on PATH ({tilde(where)})")
    for entry in manifest.detect.paths:
        path = expand(entry, env)
        if path.exists():
            found.append(tilde(str(path)))
    return found


#: `[detect] paths` prefixes naming an XDG base directory, with its default under home.
_XDG = {
    "$XDG_CONFIG_HOME/": ("XDG_CONFIG_HOME", ".config"),
    "$XDG_DATA_HOME/": ("XDG_DATA_HOME", ".local/share"),
}


def expand(entry: str, environ: Mapping[str, str]) -> Path:
    """A `[detect] paths` entry as a path: `~` is home; an XDG variable its value when
    absolute, else its default under home."""
    for prefix, (variable, default) in _XDG.items():
        if entry.startswith(prefix):
            value = environ.get(variable, "")
            base = Path(value) if os.path.isabs(value) else Path.home() / default
            return base / entry[len(prefix) :]
    return Path(os.path.expanduser(entry))


def installed(
    registry: ImplementationRegistry, environ: Mapping[str, str] | None = None
) -> list[tuple[Implementation, list[str]]]:
    """Every implementation whose harness is found, with what was found."""
    found = [(impl, evidence(impl.manifest, environ)) for impl in registry.all()]
    return [(impl, why) for impl, why in found if why]
