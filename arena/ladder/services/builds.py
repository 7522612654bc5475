"""The ladder's builder as a task of `ladder serve` (docs/ladder.md, "How submitted bots are built and
run"): versions left half-built by a server that stopped go back to the queue at start, then each
``received`` version of the game is built and validated in turn (`builder.Builder.build_next`), the
store polled every ``every`` seconds while none waits.

A build that fails, hangs or raises never stops the ladder: each turn runs under ``turn_limit``
seconds (a version that overruns it is failed with that reason, since its build and match have limits
of their own and only a fault of the ladder's gets here), and an exception is logged, its version
failed, and the loop goes on. Each version's validation opponent is the game's first house bot (by
name) at that moment, else the game's example opponent (`cellarena.sdk.opponents`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from pathlib import Path
from typing import Any

import trio

from cellarena.arena.ladder.services.builder import Builder
from cellarena.arena.ladder.services.submitted import VersionCheck
from cellarena.arena.ladder.store.ladder_store import LadderStore, LadderStoreError
from cellarena.arena.ladder.submissions.archives import ArchiveStore
from cellarena.arena.ladder.submissions.build import BuildLimits
from cellarena.arena.ladder.submissions.versions import Version
from cellarena.sdk.opponents import games as example_games
from cellarena.server.bots.confinement import Limits
from cellarena.server.bots.launcher import BotSpec

log = logging.getLogger("cellarena.ladder")


@dataclasses.dataclass(frozen=True)
class BuildSettings:
    """Where `ladder serve` builds submitted versions: the ladder's folder (its ``archives/``, which
    `ladder web` writes, its ``versions/`` and private logs; hidden from every build and bot), and
    what a build and a validation match may use."""

    folder: Path
    limits: BuildLimits = dataclasses.field(default_factory=BuildLimits)
    #: The game's options for a validation match (``--max-ticks``, ...), as the command was told them.
    game_values: dict[str, Any] | None = None
    every: float = 2.0
    turn_limit: float = 1200.0

    def loop(self, store: LadderStore, game: str, *, match_limits: Limits, isolate: bool) -> BuildLoop:
        """The builder of ``game``'s versions over ``store``, its bots confined by ``match_limits``."""
        check = VersionCheck(
            game,
            BotSpec("example", f"python -m cellarena.sdk.opponents {game}"),  # `turn` picks the real one
            self.folder,
            build_limits=self.limits,
            match_limits=match_limits,
            game_values=self.game_values,
            hidden=(self.folder,),
            isolate=isolate,
        )
        builder = Builder(store, ArchiveStore(self.folder / "archives"), self.folder / "versions", check)
        return BuildLoop(builder, every=self.every, turn_limit=self.turn_limit)


def validation_opponent(store: LadderStore, game: str) -> BotSpec | None:
    """The bot a new version of ``game`` meets in its validation match: the game's house bot first by
    name, else its example opponent; None if the game has neither (its versions then fail)."""
    house = sorted(
        (
            b
            for b in store.list_bots(game)
            if b.kind == "house" and b.house_command and b.active and b.stopped is None
        ),
        key=lambda b: b.name,
    )
    if house:
        assert house[0].house_command is not None
        return BotSpec(house[0].name, house[0].house_command)
    if game in example_games():
        return BotSpec("example", f"python -m cellarena.sdk.opponents {game}")
    return None


@dataclasses.dataclass
class BuildLoop:
    """Builds the game's submitted versions one at a time, as long as the ladder serves (`run`)."""

    builder: Builder
    #: Seconds between looks at the store while no version waits.
    every: float = 2.0
    #: Seconds one version's build and validation may take in all (a fault of the ladder's past it).
    turn_limit: float = 1200.0

    async def run(self) -> None:
        """Put unfinished versions back in the queue, then build until cancelled."""
        store = self.builder.store
        try:
            game = [self.builder.check.game]  # another game's server may be building one of its own
            requeued = await trio.to_thread.run_sync(store.versions.requeue_unfinished, game)
        except LadderStoreError as exc:
            log.error("builder: cannot put unfinished builds back in the queue: %s", exc)
            requeued = 0
        if requeued:
            log.info("builder: %d version(s) a stopped server left unfinished will be built again", requeued)
        while True:
            built = await self.turn()
            if not built:
                await trio.sleep(self.every)

    async def turn(self) -> bool:
        """Build the oldest received version, if any: whether one was taken. Never raises but for
        cancellation: a failure is logged and its version failed."""
        builder = self.builder
        game = builder.check.game
        builder.current = None
        try:
            opponent = await trio.to_thread.run_sync(validation_opponent, builder.store, game)
            if opponent is not None:
                builder.check = dataclasses.replace(builder.check, house_bot=opponent)
            with trio.move_on_after(self.turn_limit) as scope:
                taken = await builder.build_next()
            if scope.cancelled_caught:
                why = f"its build and validation took over {self.turn_limit:g} s"
                await self._fail(builder.current, why)
                return builder.current is not None
        except Exception as exc:  # one version's fault, or the store's, never stops the ladder
            log.exception("builder: building %s failed", _label(builder.current))
            why = f"the ladder could not build it ({type(exc).__name__}); tell the host"
            await self._fail(builder.current, why)
            return builder.current is not None
        if taken is None:
            return False
        version, verdict = taken
        if verdict is None:
            log.warning("builder: %s failed: its archive cannot be unpacked", version.label)
            return True
        seconds = verdict.built.seconds + (verdict.validation.seconds if verdict.validation else 0.0)
        if verdict.state == "validated":
            log.info("builder: %s passed its validation match in %.1f s", version.label, seconds)
        else:  # the host sees it at the default level: their owner will ask
            log.warning("builder: %s failed in %.1f s: %s", version.label, seconds, verdict.reason)
        return True

    async def _fail(self, version: Version | None, reason: str) -> None:
        """Fail the version a turn left building or validating, with ``reason`` for its owner."""
        if version is None:
            return
        store = self.builder.store

        def fail() -> None:
            now = store.versions.version_by_id(version.id)
            if now.state in ("building", "validating"):
                store.versions.mark(version.id, "failed", reason=reason, log_text="")

        try:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(fail)
        except LadderStoreError as exc:
            log.error("builder: cannot mark %s failed: %s", version.label, exc)
        log.error("builder: %s failed: %s", version.label, reason)


def _label(version: Version | None) -> str:
    return "a version" if version is None else version.label


@dataclasses.dataclass(frozen=True)
class Rebuilt:
    """One live version's rebuild: whether it passed, why not, and how long it took."""

    version: Version
    ok: bool
    reason: str | None
    seconds: float

    def to_json(self) -> dict[str, Any]:
        about = {"bot": self.version.bot, "version": self.version.number, "ok": self.ok}
        return {**about, "reason": self.reason, "seconds": round(self.seconds, 1)}


def live_versions(store: LadderStore, bots: list[str] | None) -> list[Version]:
    """The live versions of ``bots`` (None: of every bot that has one); `LadderStoreError` naming a
    bot that has none (it is unknown, or never had a version validated)."""
    names = [b.name for b in store.list_bots(None) if b.revoked is None] if bots is None else bots
    found = []
    for name in names:
        live = store.versions.live_version(name)
        if live is not None:
            found.append(live)
        elif bots is not None:
            raise LadderStoreError(
                f"{name} has no live version to rebuild (`ladder bot list` names the bots)"
            )
    return found


async def rebuild_live(
    store: LadderStore,
    settings: BuildSettings,
    versions: list[Version],
    *,
    match_limits: Limits,
    isolate: bool,
    actor: str,
) -> list[Rebuilt]:
    """Rebuild and validate each live version again, one at a time (`Builder.rebuild`), e.g. after the
    host upgraded the SDK or a toolchain: one that passes plays on from its new build; one that fails
    stays as it was and its bot is paused with the reason, which its owner's page shows."""
    done = []
    for version in versions:
        record = await trio.to_thread.run_sync(store.bot, version.bot)
        if record is None:  # deleted since it was listed
            continue
        game = record.game
        loop = settings.loop(store, game, match_limits=match_limits, isolate=isolate)
        opponent = await trio.to_thread.run_sync(validation_opponent, store, game)
        if opponent is not None:
            loop.builder.check = dataclasses.replace(loop.builder.check, house_bot=opponent)
        started = trio.current_time()
        verdict = await loop.builder.rebuild(version)
        seconds = trio.current_time() - started
        ok = verdict.state == "validated"
        if ok:
            log.info("rebuild: %s passed its validation match in %.1f s", version.label, seconds)
        else:
            why = (  # what to do first: a pause's reason is cut at 200 characters
                f"version {version.number} failed its rebuild after the host's upgrade (upload a fixed "
                f"version, then resume it): {verdict.reason}"
            )
            await trio.to_thread.run_sync(functools.partial(store.pause, version.bot, why, actor=actor))
            log.warning("rebuild: %s failed, so the bot is paused: %s", version.label, verdict.reason)
        done.append(Rebuilt(version, ok, verdict.reason, seconds))
    return done
