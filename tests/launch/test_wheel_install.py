"""Install like a Python tool (issue 11, item 6): the wheel built from this checkout, installed
into a fresh virtual environment, gives a working `pager` with the built-in manifests, the
connectors' plugin assets and the skill (what `pipx install .` and `uv tool install .` do).

Offline: the wheel is built without build isolation (the test environment's setuptools) from a
copy of the tracked files, and the fresh environment gets no dependencies of its own: they come
from this environment through PYTHONPATH, where `.pth` files (this checkout's editable install)
are not read, so `pager` can only be the wheel's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.launch.test_own_pager import wrong_pager

ROOT = Path(__file__).parents[2]
BOUND = 300.0

#: Under pytest-xdist (`--dist loadgroup`) the module's tests run on one worker, so the wheel
#: (`installed`, a module fixture) is built once.
pytestmark = pytest.mark.xdist_group("wheel_install")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fresh environment's `bin` directory, with the wheel installed."""
    work = tmp_path_factory.mktemp("wheel")
    tracked = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    source = work / "source"
    for name in filter(None, tracked):
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, target)
    wheels = work / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels),
                    str(source)], check=True, timeout=BOUND, capture_output=True)  # fmt: skip
    [wheel] = wheels.glob("pager-*.whl")
    fresh = work / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(fresh)], check=True)
    subprocess.run([*pip, "--python", str(fresh / "bin" / "python"), "install", "--no-deps",
                    str(wheel)], check=True, timeout=BOUND, capture_output=True)  # fmt: skip
    return fresh / "bin"


def run(
    bin_dir: Path, tmp_path: Path, *args: str, path: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAGER_")}
    if path is not None:
        env["PATH"] = path
    env["PYTHONPATH"] = sysconfig.get_paths()["purelib"]  # the dependencies, not `pager`
    env["PAGER_HOME"] = str(tmp_path / "home")
    return subprocess.run(
        [str(bin_dir / "pager"), *args],
        env=env,
        cwd=tmp_path,  # any directory: nothing depends on the checkout
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=False,
    )


def test_the_installed_pager_is_the_wheels(installed: Path, tmp_path: Path) -> None:
    where = subprocess.run(
        [str(installed / "python"), "-c", "import pager; print(pager.__file__)"],
        env={**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"]},
        cwd=tmp_path,  # not the checkout, which `python -c` would put first on sys.path
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(installed.parent)), where
    done = run(installed, tmp_path, "--help")
    assert done.returncode == 0, done.stderr
    assert "send" in done.stdout


def test_the_wheel_carries_manifests_assets_and_the_skill(installed: Path, tmp_path: Path) -> None:
    listed = run(installed, tmp_path, "implementations", "--json")
    assert listed.returncode == 0, listed.stderr
    builtins = {i["id"] for i in json.loads(listed.stdout)["implementations"]}
    assert {"claude", "codex", "gemini", "opencode", "pi", "shell"} <= builtins
    site = next(installed.parent.glob("lib/python*/site-packages"))
    for asset in ("implementations/connectors/assets/opencode/pager.js",
                  "implementations/connectors/assets/pi/pager.ts", "install/SKILL.md"):  # fmt: skip
        assert (site / "pager" / asset).is_file(), asset


def test_the_installed_pager_runs_a_broker_and_sends(installed: Path, tmp_path: Path) -> None:
    try:
        sent = run(installed, tmp_path, "send", "nobody-yet", "hello")
        assert sent.returncode == 1  # a real broker answered: there is no such agent
        assert "no agent 'nobody-yet'" in sent.stderr
        me = run(installed, tmp_path, "whoami", "--json")
        assert me.returncode == 0, me.stderr
        assert json.loads(me.stdout)["implementation"] == "human"
    finally:
        run(installed, tmp_path, "exit")


def test_the_installed_pagers_launches_run_it_as_pager(installed: Path, tmp_path: Path) -> None:
    """Run by its path with another `pager` first on PATH (Debian's is `less`), the wheel's
    `pager shell` gives its program the wheel's own `pager`."""
    wrong = wrong_pager(tmp_path)
    try:
        done = run(installed, tmp_path, "shell", "--session-name", "w", "--", "sh", "-c",
                   "pager whoami --json", path=f"{wrong}:/usr/bin:/bin")  # fmt: skip
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert json.loads(done.stdout)["alias"] == "w"
    finally:
        run(installed, tmp_path, "exit")


def _imports(argv: list[str], tmp_path: Path) -> set[str]:
    """The modules `argv` loads, from Python's import report (a set, never a time)."""
    done = subprocess.run(
        argv,
        env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1", "PAGER_HOME": str(tmp_path / "h")},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=True,
    )
    return {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def test_the_installed_pager_version_loads_pager_alone(installed: Path, tmp_path: Path) -> None:
    """Beyond what the bare interpreter of its venv loads, `pager --version` loads the entry
    point and the version: not `re`, which pip's console-script template imports."""
    bare = _imports([str(installed / "python"), "-c", "pass"], tmp_path)
    version = _imports([str(installed / "pager"), "--version"], tmp_path)
    # `from __future__ import annotations` loads that tiny module too
    assert version - bare - {"__future__"} == {"pager", "pager.cli", "pager.versions"}
