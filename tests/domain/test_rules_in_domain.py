"""The product's rules live in the domain, once (docs/architecture.md, "Where the rules live"):
the address and identity rules (`pager/domain/addressing.py`, `identity_rules.py`) and the
delivery state machine (`delivery.py`) are pure functions; the store reads the rows they ask
for, calls them, and writes what they decide. These tests fail when a rule comes back into the
store or an edge: read from the source with `ast`, as tests/test_store_layering.py does.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from tests.test_cli_layering import imported

ROOT = Path(__file__).resolve().parents[2]
PAGER = ROOT / "pager"
STORE = PAGER / "store"
DOMAIN = PAGER / "domain"

#: The rule modules: pure functions of values.
RULES = ("addressing.py", "identity_rules.py", "delivery.py", "names.py", "registration.py")
#: What a rule module may import besides `pager.domain` and the standard library.
RULE_LIBRARIES = {"attrs"}
#: What no rule module may import, the standard library's own included.
IMPURE = {"sqlite3", "trio", "psycopg", "socket", "threading", "asyncio"}


def _names(path: Path) -> set[str]:
    """Every attribute and name the module's code mentions (a call of `rules.decide_x` or of
    `decide_x` both count)."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.Name):
            found.add(node.id)
    return found


def _strings(path: Path) -> list[str]:
    """The module's string constants, f-strings' literal parts included."""
    tree = ast.parse(path.read_text())
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


@pytest.mark.parametrize("module", RULES)
def test_a_rule_module_is_pure(module: str) -> None:
    """No store, no database driver, no event loop: a rule is a function of values."""
    names = imported(DOMAIN / module)
    top = {name.split(".", 1)[0] for name in names}
    assert not top & IMPURE
    outside = {
        name
        for name in names
        if not name.startswith("pager.domain")
        and name.split(".", 1)[0] not in sys.stdlib_module_names
        and name.split(".", 1)[0] not in RULE_LIBRARIES
    }
    assert outside == set()


@pytest.mark.parametrize(
    ("module", "calls"),
    [
        (
            "_registration.py",
            {"decide_registration", "decide_alias_claim", "decide_person", "decide_wake_run"},
        ),
        ("sql_directory.py", {"decide_rename"}),
        ("sql_service.py", {"lookup_of", "named", "not_named_now", "unnamed"}),
        ("_messages.py", {"guard", "lapsed", "refused", "retry_at", "released", "ack", "claim"}),
    ],
)
def test_the_store_calls_the_domain_for_its_rules(module: str, calls: set[str]) -> None:
    assert calls <= _names(STORE / module)


#: Refusals only a rule makes: the store raises them as the domain decided, never on its own.
RULE_REFUSALS = {"ALIAS_CONFLICT", "RECIPIENT_ALIAS_CHANGED"}


def test_no_store_module_refuses_by_an_identity_rule_of_its_own() -> None:
    found = {
        str(path.relative_to(ROOT)): sorted(RULE_REFUSALS & _names(path))
        for path in sorted(STORE.rglob("*.py"))
    }
    assert {path: codes for path, codes in found.items() if codes} == {}


#: A message's or a claim's state written as a literal in the store: the state machine's
#: values are the domain's (`delivery.TRANSITIONS`, `pager/store/_delivery_sql.py` `guard`).
_STATE_WRITE = re.compile(r"(messages|claims) SET state = '|state IN \('claimed', 'delivered'\)")


def test_no_store_module_writes_a_message_state_of_its_own() -> None:
    found = {
        str(path.relative_to(ROOT)): [text for text in _strings(path) if _STATE_WRITE.search(text)]
        for path in sorted(STORE.rglob("*.py"))
    }
    assert {path: texts for path, texts in found.items() if texts} == {}


#: The edges: what an address names is the domain's, never compared by hand here.
EDGES = [PAGER / "service.py", *sorted((PAGER / "web").rglob("*.py"))]
EDGES += sorted((PAGER / "broker").rglob("*.py")) + sorted((PAGER / "commands").rglob("*.py"))


def test_no_edge_matches_an_alias_or_an_agent_id_by_hand() -> None:
    """No edge lowers an alias to compare it (`alias_key` is the domain's), nor tells an
    agent id by its prefix: `addressing` and `names` decide."""
    found = {
        str(path.relative_to(ROOT)): sorted(
            {"alias_key"} & _names(path) | {text for text in _strings(path) if text == "agt_"}
        )
        for path in EDGES
    }
    assert {path: names for path, names in found.items() if names} == {}


def test_origins_and_the_persons_implementation_are_spelled_once() -> None:
    """`human` (an origin, and the person's implementation) is written in the domain only, in
    `results.Origin` and `addressing.PERSON`: the loop guard, the store's SQL and the OpenAPI
    document take it from there."""
    spelled = sorted(
        str(path.relative_to(ROOT))
        for path in PAGER.rglob("*.py")
        if any(re.search(r"\bhuman\b", text) and len(text) < 12 for text in _strings(path))
    )
    assert spelled == ["pager/domain/addressing.py", "pager/domain/results.py"]
