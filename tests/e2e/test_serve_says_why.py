"""A broker in the foreground says why it stops and why it cannot start, in a person's words:
a `pager` command that stops it is named, and a store it cannot reach is one sentence (which
store, what failed, what to check), not the supervisors' account of which child raised what."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tests.e2e.conftest import postgres_env
from tests.launch.conftest import PROCESS_BOUND, PagerHome
from tests.pg_cluster import PgCluster


def test_a_foreground_broker_stopped_by_pager_reset_says_so(tmp_path: Path) -> None:
    home = PagerHome(tmp_path / "home")
    serving = home.popen("serve")
    try:
        deadline = time.monotonic() + PROCESS_BOUND  # a hang guard
        while not home.broker_pids() or home.run("status", "--json").returncode != 0:
            assert serving.poll() is None, serving.communicate()
            assert time.monotonic() < deadline, "the broker never served"
        reset = home.run("reset", "--yes")
        assert reset.returncode == 0, reset.stderr
        _, stderr = serving.communicate(timeout=PROCESS_BOUND)
    finally:
        home.kill_all()
        if serving.poll() is None:
            serving.kill()
    assert serving.returncode == 0, stderr
    [said] = [line for line in stderr.splitlines() if "shutting down" in line]
    assert "SIGTERM from `pager reset` (pid " in said


def test_a_broker_whose_postgresql_password_is_wrong_says_only_that(
    tmp_path: Path, pg_dsn: str, pg_cluster: PgCluster
) -> None:
    home = PagerHome(tmp_path / "home")
    home.env.update(postgres_env(pg_dsn.replace(pg_cluster.password, "wrong"), tmp_path))
    try:
        served = home.run("serve")
    except subprocess.TimeoutExpired:
        raise AssertionError("the broker started on a wrong password") from None
    finally:
        home.kill_all()
    assert served.returncode != 0
    [said] = [line for line in served.stderr.splitlines() if "could not start" in line]
    assert "Pager cannot reach its PostgreSQL store" in said
    assert "password authentication failed" in said
    assert "supervisor" not in said
    assert "PgUnreachable(" not in said
