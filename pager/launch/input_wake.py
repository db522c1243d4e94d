"""Idle wake through an input file (a manifest's `[wake.input]`): an interactive harness that
reads prompts from a file while it runs (Qwen Code's `--input-file`) is given a private file
of the launch, and the launch appends the manifest's line to it, a `[pager]` prompt, whenever
the broker says on the session's event stream that mail waits (`event: mail`,
docs/protocol.md).

Nothing here claims mail: the line only starts a turn, and the harness's own hooks claim,
show and acknowledge the mail at that turn as at any other. The prompt starts with `[pager]`,
so those hooks do not count it as typed by a person (the loop guard's chain goes on).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import attrs

from pager.launch.wake_prompt import wake_prompt

#: The input file's name in the launch's private directory.
INPUT_FILE = "input.jsonl"


@attrs.frozen
class InputWake:
    """What the wrapper needs of `[wake.input]`: the harness's option(s) naming the file
    (templates, `{input_file}` among them) and the line's fields (templates)."""

    args: tuple[str, ...]
    line: Mapping[str, str]


@attrs.frozen
class InputKnock:
    """One launch's input file and the line appended to it when mail waits."""

    path: Path
    line: bytes

    @classmethod
    def create(cls, directory: str, wake: InputWake, values: Mapping[str, str]) -> InputKnock:
        """The empty file (0600) in the launch's private `directory`, and the line rendered
        with `values` (`{prompt}`: the wake prompt for the session's address)."""
        path = Path(directory) / INPUT_FILE
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        filled = {**values, "input_file": str(path), "prompt": wake_prompt(values["address"])}
        fields = {key: template.format_map(filled) for key, template in wake.line.items()}
        return cls(path, (json.dumps(fields, ensure_ascii=False) + "\n").encode())

    async def run(self) -> None:
        """Nothing to serve: `knock` appends at once (the launch starts every knock's `run`)."""

    def knock(self) -> None:
        """Append the line (one write, so a reader never sees half of it). A failure is not
        the launch's: the mail waits for the next turn."""
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        except OSError:
            return
        try:
            os.write(fd, self.line)
        except OSError:
            pass
        finally:
            os.close(fd)
