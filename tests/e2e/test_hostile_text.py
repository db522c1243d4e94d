"""Hostile text reaches a person's terminal only escaped: a page from a mailbox-token holder and
a message from another agent's session carry terminal escapes, CR and bidirectional overrides,
and a job id forging the envelope's header. Real broker, real `pager` processes; `--json`
stays the exact text."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

from tests.e2e.conftest import Broker
from tests.e2e.test_everyday_cli import answer, pager
from tests.e2e.test_paging import raw, token_for

#: Sets the window title, rings the bell, clears the screen, hides what follows, rewrites the
#: line (CR), reverses text (RLO), 8-bit CSI, DEL, an invisible tag character.
HOSTILE = "ok\x1b]0;owned\x07\x1b[2J\x1b[8mhidden\rfake \u202eevil\x9b31m\x7f\U000e0041 end"
FORGED_JOB_ID = 'x" · from boss@corp (human) · sent 2020 · "'
LABEL = "nightly \u202etpircs\u202c · from boss@corp (human)"  # the label rule allows these
SHOWN = "ok\\x1b]0;owned\\x07\\x1b[2J\\x1b[8mhidden\\rfake ⟨U+202E⟩evil\\x9b31m\\x7f⟨U+E0041⟩ end"


def _raw_controls(text: str) -> set[str]:
    """What must never reach a terminal: controls but LF, and format characters that hide or
    reorder text (the joiners and zero-width space aside)."""
    return {
        char
        for char in text
        if char != "\n"
        and char not in "\u200b\u200c\u200d"
        and unicodedata.category(char) in {"Cc", "Cf", "Zl", "Zp", "Cs"}
    }


async def _hostile_mail(broker: Broker, desk: Path) -> None:
    """A page from a token and a message from another agent, to the person at `desk`."""
    me = answer(pager(broker, desk, "whoami", "--json"))
    token = token_for(broker, desk, me["alias"], "--label", LABEL)
    mallory = await broker.register("mallory")
    page = {"message": HOSTILE, "job_id": FORGED_JOB_ID, "status": "ok\x1b[2J", "note": HOSTILE}
    status, answered = await raw(broker, "POST", "/v1/notify", token, json.dumps(page).encode())
    assert status == 202, answered
    sent = {"to": me["address"], "body": HOSTILE, "thread": f"t\u202e{FORGED_JOB_ID}"}
    status, answered = await broker.post("/v1/me/send", sent, token=mallory["token"])
    assert status == 200, answered


def _assert_escaped(text: str) -> None:
    assert not _raw_controls(text), sorted(_raw_controls(text))
    assert "\\x1b]0;owned\\x07" in text
    assert "⟨U+202E⟩" in text


async def test_hostile_bodies_and_pages_show_escaped_on_every_command(
    broker: Broker, places: dict[str, Path]
) -> None:
    """`inbox`, `history`, `history --full`, `token list` and `read` print no raw ESC, BEL, CR,
    C1 or bidi character, and show their escaped forms; the envelope's header keeps the
    forged job id inside its quotes."""
    desk = places["desk"]
    await _hostile_mail(broker, desk)
    for args in (("inbox",), ("history",), ("history", "--full"), ("read", "--no-ack")):
        done = pager(broker, desk, *args)
        assert done.returncode == 0, done.stderr
        _assert_escaped(done.stdout)
    tokens = pager(broker, desk, "token", "list")
    assert not _raw_controls(tokens.stdout)
    assert "nightly ⟨U+202E⟩tpircs⟨U+202C⟩" in tokens.stdout
    [listed] = answer(pager(broker, desk, "token", "list", "--json"))
    assert listed["label"] == LABEL
    revoked = pager(broker, desk, "token", "revoke", listed["id"])
    assert not _raw_controls(revoked.stdout)
    assert "(nightly ⟨U+202E⟩tpircs⟨U+202C⟩" in revoked.stdout
    read = pager(broker, desk, "history", "--full")
    assert SHOWN in read.stdout
    headers = [line for line in read.stdout.splitlines() if line.startswith("From ")]
    assert len(headers) == 2
    for header in headers:  # three fields each: the forged separators are escaped text
        assert header.count(" · ") == 2, header
    forged = '"x\\" ⟨U+00B7⟩ from boss@corp (human) ⟨U+00B7⟩ sent 2020 ⟨U+00B7⟩ \\""'
    assert any(header.endswith(f" · thread {forged}") for header in headers), headers
    assert any(header.startswith('From "nightly ⟨U+202E⟩tpircs') for header in headers)


async def test_json_output_is_the_exact_text_and_safe(
    broker: Broker, places: dict[str, Path]
) -> None:
    """`--json` of `inbox`, `history` and `read`, and `export`, load back to exactly what was
    sent, and show no raw control or bidi character either (they are `\\uXXXX` escapes)."""
    desk = places["desk"]
    await _hostile_mail(broker, desk)
    for args in (("inbox", "--json"), ("history", "--json")):
        done = pager(broker, desk, *args)
        assert done.returncode == 0, done.stderr
        assert not _raw_controls(done.stdout)
        messages = json.loads(done.stdout)["messages"]
        assert len(messages) == 2
        assert {m["thread"] for m in messages} == {FORGED_JOB_ID, f"t\u202e{FORGED_JOB_ID}"}
        mallory = next(m for m in messages if m["thread"] != FORGED_JOB_ID)
        assert mallory["body"] == HOSTILE
    read = pager(broker, desk, "read", "--json")
    assert read.returncode == 0, read.stderr
    assert not _raw_controls(read.stdout)
    got = [json.loads(line)["message"] for line in read.stdout.splitlines()]
    page, message = sorted(got, key=lambda m: m["thread"] != FORGED_JOB_ID)
    assert message["body"] == HOSTILE
    assert page["body"].startswith(HOSTILE + "\n\n")
    assert page["fields"]["note"] == HOSTILE
    assert page["fields"]["status"] == "ok\x1b[2J"
    export = pager(broker, desk, "export")
    assert export.returncode == 0, export.stderr
    assert not _raw_controls(export.stdout)
    records = [json.loads(line) for line in export.stdout.splitlines()]
    assert HOSTILE in {record.get("body") for record in records}
