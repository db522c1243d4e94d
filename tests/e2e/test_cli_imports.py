"""What `pager send` loads, against a live broker: the everyday family and the shared modules
of the command line, and none of the others, the TUI, the installers or the server; and for
a plain send not even the argument parser (a set from `python -X importtime`, never a time).
tests/test_cli_layering.py covers the commands that need no broker."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import Broker
from tests.e2e.test_everyday_cli import pager
from tests.launch.conftest import PROCESS_BOUND
from tests.test_cli_layering import ROOT, family, heavy, loaded, script_run

#: What a plain send must not load: the argument parser (and the gettext, locale, shutil,
#: bz2 and lzma it pulls in), typing, the idna codec a str host costs getaddrinfo, pathlib (and
#: the fnmatch and urllib.parse it pulls in), socket's module (its enums and selectors: the
#: client uses `_socket`), and http.client.
NOT_FOR_A_SEND = {
    "argparse",
    "gettext",
    "locale",
    "shutil",
    "typing",
    "encodings.idna",
    "pathlib",
    "fnmatch",
    "urllib.parse",
    "socket",
    "selectors",
    "ipaddress",
    "http.client",
    "attrs",
}
#: Loaded only to print `--json`: json imports re (and enum); the request itself is written
#: and read by pager.small_json, json's C accelerator alone.
JSON_ONLY = {"json", "json.decoder", "json.encoder", "re", "enum"}
#: What `python -m` itself loads (runpy) and scripts/pager, which starts Python without
#: `site` and without `-m`, does not: the quick start loads none of these.
NOT_FOR_THE_QUICK_SCRIPT = {"site", "runpy", "collections", "functools", "contextlib", "types"}


def test_send_loads_the_everyday_family_alone(broker: Broker) -> None:
    me = pager(broker, broker.workspace, "whoami", "--json")
    assert me.returncode == 0, me.stderr
    alias = json.loads(me.stdout)["alias"]
    names = loaded(["send", alias, "hi"], broker.home.env, broker.workspace)
    assert heavy(names) == set()
    assert names & (NOT_FOR_A_SEND | JSON_ONLY) == set()  # the person's query, quoted by hand
    assert "pager.commands.everyday" in names  # it ran
    assert {family(name) for name in names} - {None} == {"common", "acting", "show", "everyday"}
    assert "pager.implementations" not in names  # a recipient with no session: no manifests
    history = pager(broker, broker.workspace, "history", "--json")
    assert [m["body"] for m in json.loads(history.stdout)["messages"]] == ["hi"]  # sent, to oneself


@pytest.mark.parametrize("options", [[], ["--json"], ["--thread", "t1", "--key", "k1"]])
async def test_a_plain_send_to_an_attached_agent_loads_no_parser_nor_manifests(
    broker: Broker, options: list[str]
) -> None:
    """The recipient is attached and not reading: its mail is queued, and the broker, not the
    command, says what its harness does with queued mail."""
    sender = await broker.register("me")
    await broker.register("api", implementation="shell")
    env = {**broker.home.env, "PAGER_TOKEN": sender["token"]}
    names = loaded(["send", "api", "hello", *options], env, broker.workspace)
    assert "pager.commands.everyday" in names  # it ran
    assert names & NOT_FOR_A_SEND == set()
    if "--json" not in options:
        assert names & JSON_ONLY == set()
    assert "pager.implementations" not in names


async def test_the_quick_script_sends_with_the_interpreters_core_alone(broker: Broker) -> None:
    """scripts/pager (Python without `site`, as a script or an agent's shell runs it): a send
    as a session loads the standard library's core and Pager's own modules, nothing more."""
    sender = await broker.register("me")
    await broker.register("api")
    env = {**broker.home.env, "PAGER_TOKEN": sender["token"]}
    status, out, names = script_run(["send", "api", "hello"], env, broker.workspace)
    assert status == 0, names
    assert out.startswith("sent msg_")
    assert names & (NOT_FOR_A_SEND | JSON_ONLY | NOT_FOR_THE_QUICK_SCRIPT) == set()


def _script(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """scripts/pager ARGS: the checkout's quick start (Python without `site`)."""
    return subprocess.run(
        [str(ROOT / "scripts" / "pager"), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=PROCESS_BOUND,
        check=False,
    )


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "python").exists(), reason="no .venv")
async def test_the_quick_script_sends_to_a_shell_agent_whose_mail_is_queued(
    broker: Broker,
) -> None:
    """The reply names what a shell does with queued mail: `python -S` leaves site-packages
    out, so nothing on this path may need an installed package."""
    sender = await broker.register("me")
    await broker.register("sh", implementation="shell")
    env = {**broker.home.env, "PAGER_TOKEN": sender["token"]}
    done = _script(["send", "sh", "hello"], env, broker.workspace)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.rstrip().endswith("; it waits in its inbox: pager read")


async def test_the_quick_script_refuses_an_oversized_body_in_its_own_words(
    broker: Broker, tmp_path: Path
) -> None:
    """A body over the limit is refused before it is sent, with the limit named: the check
    reads the configuration, which needs installed packages that `python -S` leaves out."""
    sender = await broker.register("me")
    await broker.register("api")
    env = {**broker.home.env, "PAGER_TOKEN": sender["token"]}
    done = _script(["send", "api", "x" * 40_000], env, broker.workspace)
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr.strip() == (
        "pager: the body is 40000 bytes; the limit is 32768. Send less, or split it"
    )
