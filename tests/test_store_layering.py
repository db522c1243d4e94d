"""The store's layers (docs/architecture.md, "Layers"): the port definitions depend only on
the domain, so a backend is an implementation of them and never the other way round; the store
imports no actor nor supervisor (it is a plain writer, whoever runs it); the web edge imports
neither the actors nor the store: it talks to the services the composition root hands it.

Read from the source with `ast` (as tests/test_cli_layering.py does for the command line): an
import inside a function counts as much as one at the top."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.test_cli_layering import imported

ROOT = Path(__file__).resolve().parents[1]
STORE = ROOT / "pager" / "store"
WEB = ROOT / "pager" / "web"
#: The contract: what the service, the actors and each backend share.
PORTS = ("ports.py", "service_ports.py", "operator_ports.py")
#: Outside the standard library, what a port module may import besides `pager.domain`.
PORT_LIBRARIES = {"attrs"}


def top(name: str) -> str:
    return name.split(".", 1)[0]


def under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def offenders(paths: list[Path], allowed: object) -> dict[str, list[str]]:
    """Each file's imports that `allowed(name)` refuses."""
    found = {
        str(path.relative_to(ROOT)): sorted(
            name
            for name in imported(path)
            if not allowed(name)  # type: ignore[operator]
        )
        for path in paths
    }
    return {path: names for path, names in found.items() if names}


def port_may_import(name: str) -> bool:
    if top(name) in sys.stdlib_module_names or top(name) in PORT_LIBRARIES:
        return True
    return under(name, "pager.domain")


def test_the_ports_import_the_domain_alone() -> None:
    """No port names a backend's module (`pager.store._messages`, …), the configuration, an
    actor: their values are the domain's."""
    assert all((STORE / name).is_file() for name in PORTS)
    assert offenders([STORE / name for name in PORTS], port_may_import) == {}


def test_the_store_imports_no_actor_nor_supervisor() -> None:
    assert (
        offenders(
            sorted(STORE.rglob("*.py")),
            lambda name: not (under(name, "actors") or under(name, "supervisors")),
        )
        == {}
    )


def test_the_web_edge_imports_neither_actors_nor_the_store() -> None:
    assert (
        offenders(
            sorted(WEB.rglob("*.py")),
            lambda name: (
                not (
                    under(name, "actors")
                    or under(name, "supervisors")
                    or under(name, "pager.store")
                )
            ),
        )
        == {}
    )
