"""Pages (SPEC §8.2): the JSON object a script posts, checked and turned into a message.

A page is free-form except for a few known fields: `message` (or `body`, the text; required),
`job_id` (becomes the thread), `status`, `exit_code`, `logs`, `project`. Every other field is kept
too. The message's body is what a reader sees: the text, then each field as a `key: value` line
and the logs as an indented block:

    job build-42: `make test` exited with status 7 after 12.3 s

    status: failure
    exit_code: 7
    command: make test
    logs:
        FAILED tests/test_api.py::test_login
        1 failed, 41 passed

Readers see that body inside the §8 envelope, so a field can never read as an instruction or
end the envelope. A value is flattened to one line (a newline in it would otherwise start what
looks like another field); only `logs` keeps its lines, each indented. The fields are also kept
as JSON beside the body, for scripts (`--json`, export).
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from pager.domain.errors import ErrorCode, PagerError
from pager.domain.job_ids import JOB_ID_RULE, is_job_id
from pager.domain.json_bounds import BoundExceeded, JsonBounds, check_value, dumps

#: Fields with a meaning of their own; every other field is shown as given.
TEXT_FIELDS = ("message", "body")
KNOWN_FIELDS = ("job_id", "status", "exit_code", "logs", "project")
#: Bounds on what a script may add (the body cap bounds the whole page too).
FIELDS_MAX = 32
KEY_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
STATUS_MAX = 64
EXIT_CODE_RANGE = (-(2**31), 2**31 - 1)
#: How deep a field's value may nest (arrays and objects inside one another): every reader of
#: the page (a fetch, `pager read`, the export) walks it.
FIELD_DEPTH_MAX = 16
_FIELD_BOUNDS = JsonBounds(depth=FIELD_DEPTH_MAX)
_LOG_INDENT = "    "


@attrs.frozen
class Page:
    """A checked page: its text, thread and fields (in the order given, `logs` last)."""

    text: str
    job_id: str | None
    fields: tuple[tuple[str, Any], ...]

    @property
    def body(self) -> str:
        """The message body a reader sees (module docstring)."""
        lines = [f"{key}: {_one_line(value)}" for key, value in self.fields if key != "logs"]
        logs = dict(self.fields).get("logs")
        if logs is not None:
            shown = str(logs).rstrip("\n").splitlines() or [""]
            lines += ["logs:", *(_LOG_INDENT + line for line in shown)]
        return self.text if not lines else self.text.rstrip("\n") + "\n\n" + "\n".join(lines)

    @property
    def fields_json(self) -> str | None:
        """Every field but the text, as a JSON object (None when there are none)."""
        everything = ([("job_id", self.job_id)] if self.job_id is not None else []) + list(
            self.fields
        )
        return dumps(dict(everything), ensure_ascii=False) if everything else None


def parse_page(data: object) -> Page:
    """The page in a posted JSON value, or PagerError `validation_failed` naming what is wrong."""
    if not isinstance(data, dict):
        raise _invalid(
            'a page is a JSON object, e.g. {"message": "build done", "status": "success"}'
        )
    given = [key for key in TEXT_FIELDS if key in data]
    if len(given) != 1:
        raise _invalid(
            "give the page's text once, as `message` (or `body`)"
            if given
            else 'the page has no text: add `message` (or `body`), e.g. {"message": "build done"}'
        )
    text = data[given[0]]
    if not isinstance(text, str) or not text.strip():
        raise _invalid(f"`{given[0]}` must be non-empty text")
    job_id = data.get("job_id")
    if job_id is not None and not is_job_id(job_id):
        raise _invalid(f"`job_id` must be {JOB_ID_RULE}")
    fields: list[tuple[str, Any]] = []
    for key, value in data.items():
        if key in TEXT_FIELDS or key == "job_id" or value is None:
            continue
        fields.append((key, _checked(key, value)))
    if len(fields) > FIELDS_MAX:
        raise _invalid(f"a page has at most {FIELDS_MAX} fields besides its text and job_id")
    fields.sort(key=lambda item: item[0] == "logs")  # the block last; the rest as given
    return Page(text=text, job_id=job_id, fields=tuple(fields))


def _checked(key: str, value: Any) -> Any:
    if KEY_PATTERN.fullmatch(key) is None:
        raise _invalid(
            f"field name {key[:64]!r} is not allowed: use 1-64 letters, digits, `_`, `.` or `-`"
            " (starting with a letter or digit)"
        )
    if key == "exit_code":
        low, high = EXIT_CODE_RANGE
        if type(value) is float and value.is_integer():
            value = int(value)  # JSON has one number type: 7.0 is the integer 7
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise _invalid(f"`exit_code` must be an integer from {low} to {high}, e.g. 0 or 7")
    elif key == "status":
        if not isinstance(value, str) or not 0 < len(value) <= STATUS_MAX:
            raise _invalid(f"`status` must be text of 1-{STATUS_MAX} characters, e.g. success")
    elif key in ("logs", "project") and not isinstance(value, str):
        raise _invalid(f"`{key}` must be text")
    try:
        check_value(value, _FIELD_BOUNDS)
    except BoundExceeded as exc:
        where = str(exc).replace(" at $", f" at `{key}`", 1)  # the path from the page
        raise _invalid(f"field `{key}` is refused: {where}") from None
    return value


def _one_line(value: Any) -> str:
    """A field's value on one line: text as it is, anything else as compact JSON; line breaks
    shown as `⏎` so no value can start another line."""
    shown = value if isinstance(value, str) else dumps(value, ensure_ascii=False)
    lines = shown.splitlines()  # every line break Python knows, U+2028 and the like too
    return shown if lines == [shown] else " ⏎ ".join(lines)


def _invalid(message: str) -> PagerError:
    return PagerError(ErrorCode.VALIDATION_FAILED, message)
