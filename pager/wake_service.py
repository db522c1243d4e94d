"""The person's switch for launch on mail (docs/wake.md): `pager wake on|off|list`, over
`PUT/DELETE /v1/agents/{id}/wake` and `GET /v1/wake` with the local secret only. No session
token reaches these (no MCP tool, no session route): an agent cannot turn it on for itself or
for another.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import attrs
import trio

from actors.identities import Identities
from actors.identity_protocol import Poke
from pager.domain.addressing import PERSON
from pager.domain.clock import WallClock, iso
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.wake import (
    DEFAULT_RUNS_PER_HOUR,
    DEFAULT_TIMEOUT,
    WakeEntry,
    WakeRun,
    WakeSettings,
    check_settings,
)
from pager.implementations.manifest import Manifest
from pager.implementations.templates import TemplateError, placeholders
from pager.launch.wake_command import wake_args, why_not
from pager.store._errors import StoreFault
from pager.store.ports import WakeBook, Wakeups

JSON = dict[str, Any]


def _not_found(agent_id: str) -> PagerError:
    return PagerError(
        ErrorCode.NOT_FOUND,
        f"no agent {agent_id!r}; `pager who --all` lists them",
        agent_id=agent_id,
    )


def _run_json(run: WakeRun) -> JSON:
    return {
        "run_id": run.id,
        "session_id": run.session_id,
        "host": run.host,
        "started_at": iso(run.started_at),
        "ended_at": iso(run.ended_at),
        "outcome": None if run.outcome is None else run.outcome.value,
        "exit_code": run.exit_code,
        "acknowledged": run.acknowledged,
        "log": run.log,
    }


def _entry(entry: WakeEntry, manifest: Manifest | None) -> JSON:
    """One agent's settings as the routes answer them, with whether it can be launched now."""
    settings, candidate = entry.settings, entry.candidate
    args = None if manifest is None else wake_args(manifest, settings.command)
    reason = (
        "no manifest for its implementation"
        if manifest is None
        else why_not(manifest, settings.command, candidate.conversation_key)
    )
    return {
        "agent_id": settings.agent_id,
        "address": candidate.address,
        "implementation": candidate.identity.implementation,
        "command": None if settings.command is None else list(settings.command),
        "launch_args": None if args is None else list(args),
        "max_runs_per_hour": settings.max_runs_per_hour,
        "timeout_s": settings.timeout,
        "updated_at": iso(settings.updated_at),
        "launchable": reason is None,
        "why_not": reason,
        "runs": [_run_json(run) for run in entry.runs],
    }


class WakeService:
    def __init__(
        self,
        book: WakeBook,
        identities: Identities,
        clock: WallClock,
        *,
        manifests: Callable[[str], Manifest | None],
        wakeups: Wakeups,
    ) -> None:
        self.book = book
        self.identities = identities
        self.clock = clock
        self.manifests = manifests  # reads manifest files: called in a worker thread
        self.wakeups = wakeups

    async def turn_on(
        self,
        agent_id: str,
        *,
        command: list[str] | None = None,
        max_runs_per_hour: int | None = None,
        timeout_s: float | None = None,
    ) -> JSON:
        """Turn launch on mail on for the agent (or change its settings); `conflict` naming
        why when it cannot be woken this way, and nothing changes then."""
        candidate = await self.book.candidate(agent_id)
        if candidate is None:
            raise _not_found(agent_id)
        implementation = candidate.identity.implementation
        if implementation == PERSON:
            raise PagerError(
                ErrorCode.CONFLICT, f"{candidate.address} is the person: there is nothing to launch"
            )
        manifest = await trio.to_thread.run_sync(self.manifests, implementation)
        if manifest is None:
            raise PagerError(
                ErrorCode.CONFLICT,
                f"{candidate.address} runs {implementation!r}, which has no manifest here;"
                " `pager implementations` lists those there are",
            )
        settings = check_settings(
            WakeSettings(
                agent_id,
                command=None if command is None else tuple(command),
                max_runs_per_hour=(
                    DEFAULT_RUNS_PER_HOUR if max_runs_per_hour is None else max_runs_per_hour
                ),
                timeout=DEFAULT_TIMEOUT if timeout_s is None else timeout_s,
            )
        )
        for part in settings.command or ():
            try:
                placeholders(part)
            except TemplateError as exc:
                raise PagerError(ErrorCode.VALIDATION_FAILED, f"command: {exc}") from None
        reason = why_not(manifest, settings.command, candidate.conversation_key)
        if reason is not None:
            raise PagerError(
                ErrorCode.CONFLICT, f"{candidate.address} cannot be woken by a launch: {reason}"
            )
        now = self.clock.now()
        await self.book.put(settings, now=now)
        await self._tell(agent_id)
        settings = attrs.evolve(settings, updated_at=now)
        return _entry(WakeEntry(settings, candidate, ()), manifest)

    async def turn_off(self, agent_id: str) -> JSON:
        if await self.book.candidate(agent_id) is None:
            raise _not_found(agent_id)
        was_on = await self.book.delete(agent_id, now=self.clock.now())
        await self._tell(agent_id)
        return {"agent_id": agent_id, "was_on": was_on}

    async def listing(self) -> JSON:
        manifests: dict[str, Manifest | None] = {}  # each read once
        entries = []
        for entry in await self.book.listing():
            implementation = entry.candidate.identity.implementation
            if implementation not in manifests:
                manifests[implementation] = await trio.to_thread.run_sync(
                    self.manifests, implementation
                )
            entries.append(_entry(entry, manifests[implementation]))
        return {"agents": entries}

    async def _tell(self, agent_id: str) -> None:
        """The identity's actor reads its settings again (on every broker of the store)."""
        self.identities.tell(agent_id, Poke())
        if self.wakeups.shared:
            # Lost, the other broker reads the settings when the identity next starts there.
            with contextlib.suppress(StoreFault):
                await self.wakeups.notify(agent_id)
