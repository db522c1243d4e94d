"""What tests ask of real processes: whether one, or any of a process group, still lives.
Zombies (dead, waiting for their parent to reap them) count as gone."""

from __future__ import annotations

from pathlib import Path


def _stat(path: Path) -> list[str] | None:
    """The fields of a /proc/<pid>/stat after the command's name: state first."""
    try:
        return path.read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None  # gone meanwhile


def alive(pid: int) -> bool:
    fields = _stat(Path(f"/proc/{pid}/stat"))
    return fields is not None and fields[0] != "Z"


def group_alive(pgid: int) -> bool:
    """Whether a live process of the group remains."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        fields = _stat(stat)
        if fields is not None and int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False
