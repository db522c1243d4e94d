"""Another Unix user of the machine, for tests that play one (tests/conftest.py's `other_user`).

Creating the user and running a program as it need root and `useradd`/`userdel`; where they
are missing the test is skipped, saying why. The other user runs the system's Python (it cannot
read a venv under /root), so what it runs uses the standard library alone.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator

import pytest

#: An interpreter the other user may run (a venv under /root is not readable by it).
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")


@contextlib.contextmanager
def throwaway_user() -> Iterator[str]:
    """A new Unix account (no home, no shell), removed afterwards; skips the test without
    root, `useradd`/`userdel` or a system `python3`."""
    if os.geteuid() != 0:
        pytest.skip("playing another local user needs root (to create one and run as it)")
    if not (shutil.which("useradd") and shutil.which("userdel")):
        pytest.skip("useradd/userdel are not installed")
    if SYSTEM_PYTHON is None:
        pytest.skip("no python3 in /usr/bin or /bin for the other user to run")
    name = f"pgsq{secrets.token_hex(3)}"
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        check=True,
        capture_output=True,
    )
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)
