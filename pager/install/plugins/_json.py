"""Deterministic JSON for files written for hosts (same input, same bytes)."""

from __future__ import annotations

import json
from typing import Any


def dump(data: Any) -> bytes:
    return (json.dumps(data, indent=2) + "\n").encode()


def command_hooks(events: dict[str, str]) -> dict[str, Any]:
    """`{"hooks": {EVENT: [{"hooks": [{"type": "command", "command": …}]}]}}`: the hooks file
    layout Claude Code, Codex and Gemini CLI share."""
    return {
        "hooks": {
            event: [{"hooks": [{"type": "command", "command": line}]}]
            for event, line in events.items()
        }
    }
