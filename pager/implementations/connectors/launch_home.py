"""A per-launch copy of a harness's configuration directory, made of links to the user's own
entries plus a per-launch extension (Gemini CLI's `GEMINI_CLI_HOME`, Qwen Code's `QWEN_HOME`).

The harness reads its settings, credentials and sessions through the links, so what it writes
in place reaches the user's own directory; only this launch sees the extension (Pager's MCP
server and hooks). The user's own directory is never edited, except that missing directories
the harness fills during a session are created there, so that they outlive the launch.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any


def build_config_dir(
    own: Path,
    target: Path,
    *,
    extension: str,
    files: Mapping[str, bytes],
    linked_files: Collection[str] = (),
    kept_dirs: Collection[str] = (),
    left_out: Collection[str] = (),
) -> None:
    """`target`: a link to each entry of `own` (and to each name of `linked_files`, even when
    missing, for files the harness writes in place), an `extensions/` directory with a link to
    each of the user's extensions except `left_out`, and `extensions/<extension>/` holding
    `files` (0600, by path relative to it). `kept_dirs` are created in `own` when missing."""
    own.mkdir(mode=0o700, parents=True, exist_ok=True)  # the harness would create it too
    for name in kept_dirs:
        (own / name).mkdir(mode=0o700, exist_ok=True)
    target.mkdir(mode=0o700, parents=True)
    for name in sorted({*entries(own), *linked_files} - {"extensions"}):
        (target / name).symlink_to(own / name)
    extensions = target / "extensions"
    extensions.mkdir(mode=0o700)
    for name in entries(own / "extensions") - {extension, *left_out}:
        (extensions / name).symlink_to(own / "extensions" / name)
    for relative, content in files.items():
        path = extensions / extension / relative
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_private(path, content)


def entries(directory: Path) -> set[str]:
    try:
        return set(os.listdir(directory))
    except OSError:
        return set()


def json_bytes(data: Any) -> bytes:
    return (json.dumps(data, indent=2) + "\n").encode()


def write_private(path: Path, content: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(content)
