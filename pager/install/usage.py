"""The argument parser of the install family's commands (`skill`, `plugin`, `setup`, `doctor`):
a usage error is raised as `UsageRefused` (printed with its usage line, exit 2 by the caller)
instead of argparse's `sys.exit`, so that `main` returns its status."""

from __future__ import annotations

import argparse
import sys
from typing import Any


class UsageRefused(Exception):
    """The command line is wrong; the message says how (`pager setup: unrecognized …`)."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse declares NoReturn
        self.print_usage(sys.stderr)
        raise UsageRefused(f"{self.prog}: {message}")
