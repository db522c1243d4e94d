"""A manifest as the wrapper's `LaunchSpec`: what `pager <implementation>` launches.

`pager.commands.harnesses` runs it for a real launch; `scripts/verify_harnesses.py` uses it to
build a harness's per-launch command (`pager.launch.wrapper.harness_command`) without running it.
"""

from __future__ import annotations

import importlib

from pager.implementations.manifest import Manifest
from pager.launch.hub_wake import HubWake
from pager.launch.input_wake import InputWake
from pager.launch.wrapper import LaunchSpec


def launch_spec(manifest: Manifest) -> LaunchSpec:
    """The wrapper's spec of `manifest`; imports its connector (ImportError if missing)."""
    connector = importlib.import_module(manifest.connector)
    return LaunchSpec(
        implementation=manifest.id,
        executable=None if manifest.executable_from_args else manifest.executable,
        args=manifest.launch.args,
        env=manifest.launch.env,
        default_program=manifest.launch.default_program,
        greeting=manifest.launch.greeting,
        resume_flags=manifest.resume.flags,
        continue_flags=manifest.resume.continue_flags + manifest.resume.picker_flags,
        choose_flag=manifest.resume.choose_flag,
        resume_subcommand=manifest.resume.subcommand,
        other_subcommands=manifest.resume.other_subcommands,
        prepare=lambda context: connector.prepare(manifest, context),
        input_wake=None
        if manifest.wake.input is None
        else InputWake(manifest.wake.input.args, manifest.wake.input.line),
        stop_leftovers=manifest.launch.stop_leftovers,
        before=manifest.launch.before,
        hub_wake=None if manifest.wake.hub is None else HubWake(manifest.wake.hub.discovery),
    )
