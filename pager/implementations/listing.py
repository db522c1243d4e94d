"""`pager implementations`: the registry as a table for people, or as JSON."""

from __future__ import annotations

from typing import Any

from pager.implementations.manifest import tilde
from pager.implementations.registry import ImplementationRegistry

HEADERS = ("ID", "NAME", "SOURCE", "CAPABILITIES")


def listing_json(registry: ImplementationRegistry) -> dict[str, Any]:
    return {
        "implementations": [impl.to_json() for impl in registry.all()],
        "errors": [error.to_json() for error in registry.errors()],
        "user_dir": str(registry.user_dir) if registry.user_dir else None,
    }


def listing_rows(registry: ImplementationRegistry) -> list[tuple[str, str, str, str]]:
    rows = []
    for impl in registry.all():
        source = impl.source.label
        if impl.overrides:
            source += f" (over {', '.join(over.label for over in impl.overrides)})"
        rows.append((impl.id, impl.name, source, ", ".join(impl.capabilities) or "-"))
    return rows


def listing_text(registry: ImplementationRegistry) -> str:
    """The table: one implementation per line, columns aligned, then where to add one."""
    rows = [HEADERS, *listing_rows(registry)]
    widths = [max(len(row[column]) for row in rows) for column in range(len(HEADERS) - 1)]
    lines = [
        "  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[-1]])
        for row in rows
    ]
    if registry.user_dir is not None:
        lines += [
            "",
            f"Add one: a TOML manifest in {tilde(str(registry.user_dir))}/ (format: "
            "docs/implementations/README.md).",
        ]
    return "\n".join(lines) + "\n"


def problems_text(registry: ImplementationRegistry) -> str:
    """Broken manifests and likely typos, for stderr; empty when there are none."""
    lines: list[str] = []
    errors = registry.errors()
    if errors:
        broken = len({error.source for error in errors})
        noun = "manifest was" if broken == 1 else "manifests were"
        lines.append(f"{broken} {noun} skipped (the others are unaffected):")
        lines += [f"  {error}" for error in errors]
    warnings = [(impl, text) for impl in registry.all() for text in impl.manifest.warnings]
    if warnings:
        lines.append("Warnings:")
        lines += [f"  {impl.source.where}: {text}" for impl, text in warnings]
    return "\n".join(lines) + "\n" if lines else ""
