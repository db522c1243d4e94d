"""Every command the user docs show is run here, or the page says why it cannot be.

The pages (README.md and docs/**) are read as a reader types from them: each fenced block in a
shell language is run against a real broker with a fresh state directory, in a throwaway home,
from a Git checkout, with this checkout's `pager` first on PATH. A `$ ` block is a session at a
prompt (the `$ ` lines are the commands; the lines after each are what it printed); any other
block is one script. Each command must exit 0.

A block that cannot run here says so in the Markdown, right before its fence:

    <!-- not run: needs the claude binary and a terminal -->
    <!-- not run `pager read --follow`: waits for mail until Ctrl-C -->   (one command of it)
    <!-- tested: tests/e2e/test_paging.py runs this very command -->      (run by another test)

A block neither run nor excused fails the test, as does a fence without a language.

The docs' example values are made real: a workspace slug such as `shop-3f9a1c` becomes the slug
of the test's directory `shop`, and an id a command printed (a message, a token...) replaces
the example id the page shows in the same place of its output, for the commands after it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import attrs
import httpx2
import pytest

from tests.e2e.conftest import Broker
from tests.launch.conftest import PROCESS_BOUND

ROOT = Path(__file__).parents[2]
#: The pages a user reads (the developer records benchmarks.md and decisions.md show no
#: commands, and are checked too).
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
#: The languages of blocks a reader types at a prompt; `sql` is typed into `psql`.
COMMAND_LANGUAGES = {"sh", "bash", "shell", "console", "sql"}
#: The languages of blocks shown, not typed (configuration, answers, listings).
SHOWN_LANGUAGES = {"text", "json", "toml", "python"}
FENCE = re.compile(r"^```(?P<lang>\S*)\n(?P<body>.*?)^```$", re.S | re.M)
NOT_RUN = re.compile(r"<!-- not run(?: `(?P<command>[^`]+)`)?: (?P<reason>.+?) -->")
TESTED = re.compile(r"<!-- tested: (?P<path>\S+) (?P<how>.+?) -->")
#: The directories of the test's machine the docs' example slugs stand for (`shop-3f9a1c`).
PLACES = ("shop", "api", "web")
SLUG = re.compile(r"\b(?P<name>" + "|".join(PLACES) + r")-[0-9a-f]{6}\b")
#: Ids a command prints; an example id in a page's output stands for the real one.
PRINTED_ID = re.compile(
    r"\b(?:(?:msg|agt|mbx|ses)_[0-9a-z]{8,}|pmt_[0-9A-Za-z]{20,}|run-[0-9a-z]{4})\b"
)
#: Example agent ids the pages use without showing where they came from: the test's `web`.
EXAMPLE_AGENTS = ("agt_7wpcnzfzt6hzahj7", "agt_1bks00j6yqcc29ne")
#: The agents of the test's `shop` workspace that the pages write to.
CAST = ("api", "web", "reviewer")


@attrs.frozen
class Command:
    text: str
    #: What the page shows it printed.
    shown: str


@attrs.frozen
class Block:
    page: Path
    line: int
    language: str
    body: str
    #: Why the whole block is not run here, if it is not.
    excuse: str | None
    #: Commands of the block not run here (a part of the command's text), with the reason.
    skipped: dict[str, str]
    #: The other test that runs it, if one does.
    tested: str | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    def commands(self) -> list[Command]:
        lines = self.body.splitlines()
        if not any(line.startswith("$ ") for line in lines):
            return [Command(self.body, "")]
        found: list[Command] = []
        text: list[str] = []
        shown: list[str] = []
        for line in lines:
            if line.startswith("$ ") and not (text and text[-1].endswith("\\")):
                if text:
                    found.append(Command("\n".join(text), "\n".join(shown)))
                text, shown = [line[2:]], []
            elif text and text[-1].endswith("\\"):
                text.append(line)
            else:
                shown.append(line)
        found.append(Command("\n".join(text), "\n".join(shown)))
        return found


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    found = []
    for fence in FENCE.finditer(text):
        before = text[: fence.start()].rstrip("\n").splitlines()
        notes = []
        while before and before[-1].strip().startswith("<!--"):
            notes.append(before.pop().strip())
        excuse, skipped, tested = None, {}, None
        for note in notes:
            if (not_run := NOT_RUN.fullmatch(note)) is not None:
                if not_run["command"]:
                    skipped[not_run["command"]] = not_run["reason"]
                else:
                    excuse = not_run["reason"]
            elif (by := TESTED.fullmatch(note)) is not None:
                tested = by["path"]
        line = text.count("\n", 0, fence.start()) + 1
        found.append(
            Block(page, line, fence["lang"], fence["body"], excuse, skipped, tested)
        )  # fmt: skip
    return found


def to_run(page: Path) -> list[Block]:
    return [
        block
        for block in blocks(page)
        if block.language in COMMAND_LANGUAGES and block.excuse is None and block.tested is None
    ]


def test_every_block_is_labelled_and_every_command_is_run_or_excused() -> None:
    """A fence says what it holds; a command block is run here, by a test it names, or
    excused with a reason; a `sql` block (typed into psql, not a shell) is excused; a command
    excused by name is one the block has."""
    problems = []
    for page in PAGES:
        for block in blocks(page):
            if block.language not in COMMAND_LANGUAGES | SHOWN_LANGUAGES:
                problems.append(
                    f"{block.where}: a fence without a known language: {block.language!r}"
                )
                continue
            if block.tested is not None:
                named = ROOT / block.tested
                if not named.is_file() or page.name not in named.read_text():
                    problems.append(f"{block.where}: {block.tested} does not run it")
            if block.language == "sql" and block.excuse is None:
                problems.append(f"{block.where}: an `sql` block (for psql) needs an excuse")
            texts = [command.text for command in block.commands()]
            for part in block.skipped:
                if not any(part in text for text in texts):
                    problems.append(f"{block.where}: excuses `{part}`, not one of its commands")
    assert not problems, "\n".join(problems)


def test_the_readme_lists_every_doc() -> None:
    """A reader finds every page from the README's list."""
    readme = (ROOT / "README.md").read_text()
    pages = [
        page for page in PAGES if page.parent != ROOT and page.parent.name != "implementations"
    ]
    missing = [page.name for page in pages if f"(docs/{page.name})" not in readme]
    assert "(docs/implementations/README.md)" in readme
    assert not missing, f"README.md does not list {missing}"


@attrs.define
class Machine:
    """The reader's machine: a broker, a home, the checkouts the examples name, the cast of
    agents, and the example values seen so far with what they stand for here."""

    broker: Broker
    env: dict[str, str]
    places: dict[str, Path]
    #: The slug of each of `places`, for the examples' slugs.
    slugs: dict[str, str] = attrs.Factory(dict)
    examples: dict[str, str] = attrs.Factory(dict)

    def shell(self, command: str, *, script: bool) -> subprocess.CompletedProcess[str]:
        prelude = "set -e -o pipefail\n" if script else "set -o pipefail\n"
        return subprocess.run(
            ["bash", "-c", prelude + self.real(command)], cwd=self.places["shop"], env=self.env,
            capture_output=True, text=True, timeout=PROCESS_BOUND, check=False,
        )  # fmt: skip

    def real(self, text: str) -> str:
        for example, value in self.examples.items():
            text = text.replace(example, value)
        return SLUG.sub(lambda slug: self.slugs[slug["name"]], text)

    def learn(self, shown: str, printed: str) -> None:
        """The ids the page shows a command printed stand for those it printed here, in the
        order each kind first appears."""

        def by_kind(text: str) -> dict[str, list[str]]:
            kinds: dict[str, list[str]] = {}
            for found in dict.fromkeys(PRINTED_ID.findall(text)):
                kinds.setdefault(found[:4], []).append(found)
            return kinds

        real = by_kind(printed)
        for kind, examples in by_kind(shown).items():
            for example, value in zip(examples, real.get(kind, []), strict=False):
                self.examples.setdefault(example, value)


def cli(env: dict[str, str], cwd: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pager", *args], env=env, cwd=cwd, capture_output=True,
        text=True, timeout=PROCESS_BOUND, check=False,
    )  # fmt: skip
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


@pytest.fixture
def machine(broker: Broker, tmp_path: Path) -> Machine:
    home = tmp_path / "me"
    state = home / ".local" / "state"
    state.mkdir(parents=True)
    (state / "pager").symlink_to(broker.home.root)  # the docs' ~/.local/state/pager
    env = {
        **broker.home.env,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "URL": broker.url,
        "PAGER_URL": broker.url,
        "SECRET": broker.secret,
        "BUILD_ID": "42",
    }
    places = {}
    for name in PLACES:
        places[name] = tmp_path / name
        subprocess.run(["git", "init", "-q", str(places[name])], check=True)
    (places["shop"] / "Makefile").write_text("test:\n\t@echo the tests pass\n")
    git = ["git", "-C", str(places["shop"]), "-c", "user.name=me", "-c", "user.email=me@localhost"]
    subprocess.run([*git, "add", "Makefile"], check=True)
    subprocess.run([*git, "commit", "-qm", "a first commit"], check=True)
    found = Machine(broker, env, places)
    person = {}
    for name, place in places.items():
        me = json.loads(cli(env, place, "whoami", "--json"))
        found.slugs[name] = me["address"].split("@")[1]
        person[name] = me["address"]
    with httpx2.Client(timeout=10) as http:
        for alias in CAST:
            body = {"workspace": str(places["shop"]), "implementation": "shell"}
            body["session_name"] = alias
            answer = http.post(
                broker.url + "/v1/register", json=body,
                headers={"Authorization": f"Bearer {broker.secret}"},
            ).json()  # fmt: skip
            if alias == "web":
                found.examples.update(dict.fromkeys(EXAMPLE_AGENTS, answer["agent_id"]))
                # The mail the docs' `pager inbox` shows waiting, so that `pager read` reads it.
                http.post(
                    broker.url + "/v1/me/send",
                    json={"to": person["shop"], "body": "can you look at the login bug?"},
                    headers={"Authorization": f"Bearer {answer['token']}"},
                ).raise_for_status()
    token = cli(env, places["shop"], "token", "create", "api").split()[0]
    env["PAGER_NOTIFY_TOKEN"] = token
    return found


@pytest.mark.parametrize(
    "page", [page for page in PAGES if to_run(page)], ids=lambda page: str(page.relative_to(ROOT))
)
def test_the_commands_of_each_page_run(page: Path, machine: Machine) -> None:
    """Each block not excused, in page order, on one machine: every command exits 0."""
    for block in to_run(page):
        script = not any(line.startswith("$ ") for line in block.body.splitlines())
        for command in block.commands():
            if any(part in command.text for part in block.skipped):
                continue
            done = machine.shell(command.text, script=script)
            assert done.returncode == 0, (
                f"{block.where}: `{machine.real(command.text)}` exited {done.returncode}\n"
                f"stdout: {done.stdout}\nstderr: {done.stderr}"
            )
            machine.learn(command.shown, done.stdout + done.stderr)
