"""A submitted version from its unpacked folder to a verdict: built, then validated by one unrated
match (docs/ladder.md, "How submitted bots are built and run").

The store keeps the versions and their states (`cellarena.arena.ladder.submissions.versions.MOVES`):
the builder takes a ``received`` version, which moves it to ``building`` (`VersionTable.next_to_build`),
unpacks its archive, and hands the folder here. Each stage that ends is told to ``on_state`` with the
state that follows, the reason of a failure and the stage's log, as `VersionTable.mark` takes them
(``validating`` with the build's log; ``validated`` or ``failed`` with the match's, or ``failed``
with the build's), so that the owner's page shows where the version is and why it failed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cellarena.arena.ladder.submissions.build import BuildLimits, BuildResult, build
from cellarena.arena.ladder.submissions.validate import ValidationResult, validate
from cellarena.server.bots.confinement import Limits
from cellarena.server.bots.launcher import BotSpec

#: The states a version moves to here, in order; it ends in one of the last two.
VALIDATING, VALIDATED, FAILED = "validating", "validated", "failed"


@dataclass(frozen=True)
class Verdict:
    """Whether a version may play rated matches, why not for its owner, and each stage's result."""

    state: str
    reason: str | None
    built: BuildResult
    validation: ValidationResult | None = None

    @property
    def log(self) -> str:
        """The log its owner is shown: the validation match's output, else the build's."""
        return self.validation.log if self.validation is not None else self.built.log


@dataclass(frozen=True)
class VersionCheck:
    """How the ladder checks a version: the game, the house bot it meets, where logs go, the limits
    of its build and of its match, and the folders it must not see (the ladder's own)."""

    game: str
    house_bot: BotSpec
    log_root: Path
    build_limits: BuildLimits = field(default_factory=BuildLimits)
    match_limits: Limits | None = None
    game_values: dict[str, Any] | None = None
    hidden: tuple[Path, ...] = ()
    isolate: bool = True
    #: Seconds the version has, from its start, to connect and say hello.
    connect_timeout: float = 15.0


async def check_version(
    folder: Path,
    version: str,
    check: VersionCheck,
    on_state: Callable[[str, str | None, str], Awaitable[None]] | None = None,
    *,
    name: str | None = None,
    log_name: str | None = None,
) -> Verdict:
    """Build the version unpacked in ``folder`` in place, then validate it: its `Verdict`. Each stage
    that ends calls ``on_state(state, reason, log)`` (`VersionTable.mark`'s, for a version building).
    ``name``: the bot's on the ladder, which names its private log (not its bot.toml's, which its
    owner chose: another bot's name would put the log in that bot's folder); ``log_name``, its
    validation match's private log (``validation-VERSION`` by default)."""

    async def tell(state: str, reason: str | None, log: str) -> None:
        if on_state is not None:
            await on_state(state, reason, log)

    built = await build(folder, check.build_limits, version=version, hidden=check.hidden, name=name)
    if not built.ok or built.program is None:
        await tell(FAILED, built.reason, built.log)
        return Verdict(FAILED, built.reason, built)
    await tell(VALIDATING, None, built.log)
    result = await validate(
        built.program,
        check.house_bot,
        check.game,
        log_root=check.log_root,
        match=log_name or f"validation-{version}",
        game_values=check.game_values,
        limits=check.match_limits,
        isolate=check.isolate,
        python_packages=check.build_limits.python_packages,
        hidden=check.hidden,
        connect_timeout=check.connect_timeout,
    )
    state = VALIDATED if result.ok else FAILED
    reason = None if result.ok else result.reason
    await tell(state, reason, result.log)
    return Verdict(state, reason, built, result)
