"""The start function of an implementation's provider, as the broker's `providers` supervisor
runs it (`actors/providers.py` hands them out): the delivery provider actor, and the wake runs
it starts as temporary children of a supervisor of its own."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from functools import partial

import trio

from actors._runtime import ActorError, ActorRef, start_actor
from actors.identity_delivery import ProviderMessage
from actors.identity_launch import LaunchRun
from actors.provider import DeliveryProvider
from actors.wake_run import RunEnded, WakeRuns, run_wake
from pager.implementations.manifest import Manifest
from supervisors import ChildSpec, DynamicSupervisor, Restart

log = logging.getLogger("pager.messaging")


def manifest_of(implementation: str) -> Manifest | None:
    """Its manifest, if one is found (read when its provider first starts)."""
    from pager.implementations import UnknownImplementation, discover

    try:
        return discover().get(implementation).manifest
    except UnknownImplementation:
        return None


def never_shown_mail_at_turns() -> frozenset[str]:
    """The implementations whose sessions are never shown waiting mail at their turns (their
    manifests have none of the capabilities that show it): read once, when the broker starts,
    as each provider reads its manifest when it starts."""
    from pager.implementations import discover

    registry = discover()
    return frozenset(i.id for i in registry.all() if not i.manifest.sees_mail_at_turns)


#: Wake runs of one provider that crash (they never restart) before its supervisor gives up.
RUN_MAX_RESTARTS = 100


def delivery_provider(
    implementation: str, wake_runs: WakeRuns | None = None
) -> Callable[..., Awaitable[None]]:
    """The start function of an implementation's provider: writes claims to `http`/`unix`
    delivery addresses, runs its manifest's wake helper, and starts wake runs (docs/wake.md)
    as temporary children of a one_for_one supervisor of its own."""

    async def run(
        *, task_status: trio.TaskStatus[ActorRef[ProviderMessage]] = trio.TASK_STATUS_IGNORED
    ) -> None:
        manifest = await trio.to_thread.run_sync(manifest_of, implementation)  # reads files
        async with trio.open_nursery() as nursery:
            runs: DynamicSupervisor = await nursery.start(
                DynamicSupervisor(f"wake-runs:{implementation}", max_restarts=RUN_MAX_RESTARTS).run
            )
            launch = None
            if manifest is not None and wake_runs is not None:
                launch = partial(_start_run, runs, wake_runs, manifest)
            actor = DeliveryProvider(
                nursery, wake=None if manifest is None else manifest.wake, launch=launch
            )
            ref = await start_actor(nursery, actor, name=f"provider:{implementation}")
            task_status.started(ref)

    return run


async def _start_run(
    runs: DynamicSupervisor, wake_runs: WakeRuns, manifest: Manifest, request: LaunchRun
) -> None:
    """One wake run as a temporary child; a second for the same identity is never started."""
    from pager.implementations.launching import launch_spec

    child_id = f"run:{request.agent_id}"
    if runs.running(child_id):
        with contextlib.suppress(ActorError):
            request.identity.try_cast(RunEnded(None, detail="a wake run is going"))
        return
    start = partial(run_wake, wake_runs, manifest, launch_spec(manifest), request.identity,
                    request.agent_id)  # fmt: skip
    spec = ChildSpec(
        child_id, start, restart=Restart.TEMPORARY, shutdown_timeout=wake_runs.kill_after + 5.0
    )
    try:
        await runs.start_child(spec)
    except (ValueError, RuntimeError) as exc:  # one started meanwhile, or the provider stops
        log.info("wake run for %s not started: %s", request.agent_id, exc)
        with contextlib.suppress(ActorError):
            request.identity.try_cast(RunEnded(None, detail=str(exc)))
