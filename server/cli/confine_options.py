"""The options that confine launched bots, shared by `cellarena match` and `cellarena tournament`:
per-bot limits and `--isolate` (docs/security.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from cellarena.server.cli.params import FiniteFloatRange, ranged_option

if TYPE_CHECKING:
    from cellarena.server.bots.confinement import Limits


def confine_options() -> list[Any]:
    """The click options; 0 turns a limit off."""
    from cellarena.server.bots.confinement import Limits

    d = Limits()
    return [
        ranged_option(
            "--memory-mb",
            d.memory_mb,
            click.IntRange(0, 2**30),
            "Resident memory a bot may use, all its processes together (0: no limit).",
        ),
        ranged_option(
            "--cpu-seconds",
            d.cpu_seconds,
            FiniteFloatRange(0, 10**7),
            "CPU time a bot may use in one match, all its processes together (0: no limit).",
        ),
        ranged_option(
            "--max-processes",
            d.processes,
            click.IntRange(0, 100_000),
            "Processes a bot may have at once (0: no limit).",
        ),
        ranged_option(
            "--max-open-files",
            d.open_files,
            click.IntRange(0, 1_000_000),
            "Open files per bot process (0: no limit).",
        ),
        click.option(
            "--isolate",
            is_flag=True,
            help="Run each bot as a user of its own (as root) or under bubblewrap, with a private writable "
            "folder and no network but its match's connection, held to its limits by the kernel where "
            "cgroups allow, so it cannot reach other bots or write the results (docs/security.md).",
        ),
    ]


def confine(values: dict[str, Any]) -> tuple[Limits, bool]:
    """Pop the options' values from ``values``: (the limits, whether to isolate). Checks --isolate and
    CELLARENA_CGROUPS now, so that a host that cannot honour them is told before anything starts."""
    from cellarena.server.bots.confinement import IsolationError, Limits, check_isolation

    memory, cpu = values.pop("memory_mb"), values.pop("cpu_seconds")
    processes, files = values.pop("max_processes"), values.pop("max_open_files")
    isolate = bool(values.pop("isolate"))
    from cellarena.server.bots.cgroups import detect

    try:
        detect()
    except ValueError as exc:
        raise click.UsageError(f"{exc} (the environment variable; docs/security.md)") from None
    if isolate:
        try:
            check_isolation()
        except IsolationError as exc:
            raise click.BadParameter(str(exc), param_hint="--isolate") from None
    limits = Limits(
        memory_mb=memory or None,
        cpu_seconds=cpu or None,
        processes=processes or None,
        open_files=files or None,
    )
    return limits, isolate
