"""The cache of built submitted bots where matches run (arena/ladder/hosting/bot_cache.py): two matches
that want the same archive at once cause one build, the later one reuses it, a failed build leaves
nothing and is tried again, and an archive whose bytes are not its hash is refused; a bot that cannot
be built where its match runs costs its seat alone (seat_launch.py). No processes: the build is a
function of the test (the cache's logic, not the sandbox, is under test), in virtual time."""

from __future__ import annotations

import io
import secrets
import tarfile
from pathlib import Path

import pytest
import trio
import trio.testing
from wire_client import Client

from cellarena.arena.ladder.hosting.bot_cache import BotCache, PrepareError
from cellarena.arena.ladder.hosting.seat_launch import LaunchingMatch, SeatBots, SeatLaunch
from cellarena.arena.ladder.hosting.worker_process import LOST_HERE, HostedMatches
from cellarena.arena.ladder.submissions.archives import digest_of
from cellarena.arena.ladder.submissions.build import BuildLimits, BuildResult
from cellarena.server.play.hosted import DEFAULT_CONNECT_TIMEOUT, HostedResult, token_digest
from cellarena.server.play.lobby import Lobby, LobbyConfig
from cellarena.server.play.match import TickSettings


def _archive(text: str) -> bytes:
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w:gz") as tar:
        for name, body in (("bot.toml", 'command = "python annbot.py"\n'), ("annbot.py", text)):
            info = tarfile.TarInfo(f"annbot/{name}")
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body.encode()))
    return packed.getvalue()


class Builds:
    """A build that takes 5 s of virtual time, writes what it made, and fails when told."""

    def __init__(self) -> None:
        self.folders: list[Path] = []
        self.fail = False

    async def __call__(self, folder: Path, limits: BuildLimits, version: str, name: str) -> BuildResult:
        self.folders.append(folder)
        await trio.sleep(5)
        (folder / "built").write_text(f"{name} {version}")
        if self.fail:
            return BuildResult(False, "make: *** no rule", 5.0, "the build failed: exit status 2")
        return BuildResult(True, "", 5.0, None)


def test_two_matches_one_build_then_reuse_and_a_failure_leaves_nothing(tmp_path: Path) -> None:
    builds = Builds()
    cache = BotCache(tmp_path / "cache", builds=builds)
    data = _archive("print('v1')\n")
    sha = digest_of(data)

    async def main() -> None:
        found: list[Path] = []

        async def want() -> None:
            found.append(await cache.prepare(sha, "tar.gz", data, BuildLimits(), version="v1", name="annbot"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(want)
            nursery.start_soon(want)
        assert len(builds.folders) == 1  # the second waited for the first's build and took it
        assert found[0] == found[1] == tmp_path / "cache" / sha / "annbot"
        assert (found[0] / "built").read_text() == "annbot v1"
        assert builds.folders[0].name == "annbot" and builds.folders[0].parent.name.startswith(
            f".{sha}.build-"
        )
        before = trio.current_time()
        again = await cache.prepare(sha, "tar.gz", data, BuildLimits(), version="v1", name="annbot")
        assert again == found[0] and len(builds.folders) == 1 and trio.current_time() == before

        builds.fail = True
        broken = _archive("print('v2')\n")
        with pytest.raises(PrepareError, match="its build failed here: the build failed: exit status 2"):
            await cache.prepare(
                digest_of(broken), "tar.gz", broken, BuildLimits(), version="v2", name="annbot"
            )
        builds.fail = False
        left = sorted(p.name for p in (tmp_path / "cache").iterdir() if not p.name.endswith(".lock"))
        assert left == [sha]  # the failed build's folder is gone: the next match builds it afresh
        fixed = await cache.prepare(
            digest_of(broken), "tar.gz", broken, BuildLimits(), version="v2", name="annbot"
        )
        assert (fixed / "built").is_file() and len(builds.folders) == 3

        with pytest.raises(PrepareError, match=r"is not .* it changed"):
            await cache.prepare(sha, "tar.gz", broken, BuildLimits(), version="v1", name="annbot")
        garbled = b"not an archive"
        with pytest.raises(PrepareError, match="cannot be unpacked here"):
            await cache.prepare(
                digest_of(garbled), "tar.gz", garbled, BuildLimits(), version="v3", name="annbot"
            )
        assert len(builds.folders) == 3

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


MATCH_CONFIG = {"map": "duel", "max_ticks": 20}


class UnbuildableBot:
    """A worker's seating and lobby, and annbot's launch with an archive it cannot build (bytes that
    are not its hash); ``reports`` are what the worker tells the ladder, ``result`` set at a result."""

    def __init__(self, folder: Path) -> None:
        self.reports: list[tuple[object, ...]] = []
        self.result = trio.Event()
        self.seating = HostedMatches(folder, self.report)
        settings = TickSettings(fast=True)
        config = LobbyConfig("rezzo", MATCH_CONFIG, settings, port=0, on_result=self.seating.on_result)
        self.lobby = Lobby(config, self.seating)
        self.bots = SeatBots(self.lobby, self.seating.hand, self.seating.gave_up)
        self.log = folder / "annbot.log"
        self.launch = SeatLaunch(
            "annbot", "v1", "0" * 64, "tar.gz", b"not that archive", cache=str(folder / "cache"),
            log=str(self.log),
        )  # fmt: skip

    def report(self, message: tuple[object, ...]) -> None:
        self.reports.append(message)
        if message[0] == "result":
            self.result.set()

    def job(self, ladder_id: int, digests: tuple[str, str], connect_timeout: float) -> LaunchingMatch:
        """Match ``ladder_id``: bob (connected) in seat 0, annbot (started here) in seat 1."""
        return LaunchingMatch(
            ladder_id, "rezzo", MATCH_CONFIG, 1, ("bob", "annbot"), digests,
            connect_timeout=connect_timeout, launches=(None, self.launch),
        )  # fmt: skip


def test_a_bot_that_cannot_be_built_where_its_match_runs_costs_its_seat_alone(tmp_path: Path) -> None:
    """A worker given an archive it cannot build forfeits that seat, says why in the bot's private
    log, and waits for the match's other bots no longer than a redirected bot is waited for; nothing
    raises into the worker."""
    worker = UnbuildableBot(tmp_path)
    job = worker.job(3, ("a" * 64, "b" * 64), connect_timeout=120.0)

    async def main() -> None:
        worker.seating.reserve(job)
        await worker.bots.play(3, 1, worker.launch, worker.seating.ended[3])
        assert worker.seating.reservations[3].deadline == trio.current_time() + DEFAULT_CONNECT_TIMEOUT

    trio.run(main, clock=trio.testing.MockClock())
    assert worker.log.read_text() == (
        "[cellarena: annbot v1 forfeits this match: it cannot be built here: the archive that came with "
        "the match is not 000000000000...: it changed]\n"
    )
    assert not list((tmp_path / "cache").iterdir()) and worker.reports == []


def test_the_match_it_could_not_join_says_where_in_public_and_why_only_to_its_owner(tmp_path: Path) -> None:
    """The match a worker plays without the bot it could not build ends with that seat's cause: it
    could not be built or started where its match ran (the error itself stays in the owner's log).
    Real sockets: bob, with his seat's token, plays the match through."""
    worker = UnbuildableBot(tmp_path)
    token = secrets.token_urlsafe(32)
    job = worker.job(4, (token_digest(token), "b" * 64), connect_timeout=1.0)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            port = await nursery.start(worker.lobby.serve)
            nursery.start_soon(worker.seating.run)
            worker.seating.reserve(job)
            await worker.bots.play(4, 1, worker.launch, worker.seating.ended[4])
            bob = await Client.connect(port)
            await bob.hello("bob", token=token)
            with trio.fail_after(60):
                end = await bob.play()
                await worker.result.wait()
            assert end["winner"] == 0
            nursery.cancel_scope.cancel()

    trio.run(main)
    ((_, result),) = [report for report in worker.reports if report[0] == "result"]
    assert isinstance(result, HostedResult) and result.outcome is not None
    cause = result.outcome.result.causes[1]
    assert (cause["cause"], cause["detail"]) == ("never_connected", LOST_HERE), cause
    assert (
        "000000000000" not in str(cause) and "000000000000" in worker.log.read_text()
    )  # the why: its owner's
