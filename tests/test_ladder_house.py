"""House bots' launches that never join the queue (`cellarena.arena.ladder.services.house.HouseBots`), in
virtual time: the ladder's seating and a real SQLite store, with a stand-in launcher whose processes
do what each test says at once (never connect, connect and say nothing, say hello for another game,
exit), so that 10 s hello timeouts, 30 s idle limits and a minute's back-off pass instantly. The
same over real processes and TCP is tests/test_ladder_server.py's.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import trio
import trio.testing

from cellarena.arena.ladder.ops.wiring import LadderConfig, build
from cellarena.arena.ladder.policy import CommunityPolicy
from cellarena.arena.ladder.services import house as house_module
from cellarena.arena.ladder.services.house import HouseBots
from cellarena.arena.ladder.services.queue import Queued
from cellarena.arena.ladder.services.seating import LadderSeating
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.sdk import protocol


class FakeProc:
    """A launched house bot's process, as `HouseBots` sees one: it exits when told, or when stopped."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.returncode: int | None = None
        self.stopped_for: str | None = None
        self.signalled = False
        self.stdout = object()
        self.log = ""
        self._exited = trio.Event()

    def exit(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
            self._exited.set()

    async def wait(self) -> int:
        await self._exited.wait()
        assert self.returncode is not None
        return self.returncode


def fake_conn(proc: FakeProc) -> Any:
    """A loopback connection that ``proc``'s processes hold (`holds_connection` below)."""
    return SimpleNamespace(host="127.0.0.1", holder=proc, closed=False, close_reason="")


@dataclass
class Launcher:
    """Stands in for `start_bot` and friends in `cellarena.arena.ladder.services.house`; ``behave`` is what
    each launched process does, given the ladder's seating and the task group for later acts."""

    seating: LadderSeating
    nursery: trio.Nursery
    behave: Callable[[FakeProc, LadderSeating, trio.Nursery], None]
    launches: list[tuple[float, FakeProc]] = field(default_factory=list)

    async def start_bot(self, spec: Any, host: str, port: int, token: str, **kwargs: Any) -> FakeProc:
        proc = FakeProc(token)
        kwargs["on_started"](proc)
        self.launches.append((trio.current_time(), proc))
        self.behave(proc, self.seating, self.nursery)
        return proc

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        async def stop_bot(proc: FakeProc, patience: float) -> None:
            if proc.returncode is None:
                proc.signalled = True
                proc.exit(-9)

        async def copy_log(stdout: object, path: Path, limit: int) -> None:
            for _, proc in self.launches:
                if proc.stdout is stdout:
                    path.write_text(proc.log)

        async def watch_limits(bots: list[FakeProc], limits: object) -> None:
            return None

        monkeypatch.setattr(house_module, "start_bot", self.start_bot)
        monkeypatch.setattr(house_module, "stop_bot", stop_bot)
        monkeypatch.setattr(house_module, "copy_log", copy_log)
        monkeypatch.setattr(house_module, "watch_limits", watch_limits)
        monkeypatch.setattr(house_module, "holds_connection", lambda proc, conn: conn.holder is proc)

        # The store in this thread: the virtual clock jumps whenever every task waits, a worker
        # thread's too, so a launch would wait out the test's whole time for its token.
        async def inline(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
            return fn(*args)

        monkeypatch.setattr(trio.to_thread, "run_sync", inline)

    def gaps(self) -> list[float]:
        """Seconds between one launch and the next."""
        times = [t for t, _ in self.launches]
        return [round(b - a, 1) for a, b in itertools.pairwise(times)]


async def seated_ladder(tmp_path: Path, pause_after: int) -> tuple[LadderStore, LadderSeating]:
    """The ladder's seating over a SQLite store with house bot ``house`` and outside bot alice, who
    waits in the queue (so a house bot is wanted), under ``--pause-after pause_after``."""
    store = LadderStore(tmp_path / "ladder.sqlite")
    alice = store.add_bot("alice", "rezzo")[0]
    store.add_bot("house", "rezzo", house_command="./house-bot")
    store.set_policy(CommunityPolicy(pause_after=pause_after))
    config = LadderConfig("rezzo", {"map": "duel"}, map_key="map", maps=("duel",), port=0)
    _, seating = build(store, config)
    await seating.results.load_ratings()
    seating.queue.waiting["alice"] = Queued(SimpleNamespace(), alice, trio.current_time())  # type: ignore[arg-type]
    return store, seating


async def run_house(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    behave: Callable[[FakeProc, LadderSeating, trio.Nursery], None],
    *,
    pause_after: int,
    seconds: float,
) -> tuple[LadderStore, HouseBots, Launcher]:
    """Run the house bots (wired as `run_ladder` wires them) for ``seconds`` of virtual time."""
    store, seating = await seated_ladder(tmp_path, pause_after)
    house = HouseBots(store, seating, tmp_path, after=0.0, every=0.5, idle_limit=30.0, hello_timeout=10.0)
    seating.on_connected = house.connected
    seating.on_hello = house.hello
    async with trio.open_nursery() as nursery:
        launcher = Launcher(seating, nursery, behave)
        launcher.install(monkeypatch)
        nursery.start_soon(house.run, 7777)
        await trio.sleep(seconds)
        nursery.cancel_scope.cancel()
    return store, house, launcher


def launch_failures(store: LadderStore) -> list[dict[str, Any]]:
    """The causes of the failed launches the audit log keeps, oldest first."""
    return [
        json.loads(e.detail or "{}")
        for e in reversed(store.audit_log())
        if e.action == "house launch failed" and e.bot == "house"
    ]


# ------------------------------------------------------------------------------------------ causes
async def test_a_house_bot_that_never_connects_fails_at_the_idle_limit_and_is_paused(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: stopped after 30 s idle and started again at once, forever, nothing recorded."""
    store, house, launcher = await run_house(
        tmp_path, monkeypatch, lambda proc, seating, nursery: None, pause_after=3, seconds=600
    )
    assert len(launcher.launches) == 3  # then paused: never started again
    assert launcher.gaps() == [31.0, 32.0]  # 30 s idle, then 1 s, then 2 s of back-off (to the 0.5 s tick)
    cause = {"cause": "never_connected", "detail": "it did not connect within 30 s"}
    assert launch_failures(store) == [cause] * 3
    bot = store.bot("house")
    assert bot is not None and bot.stopped is not None
    assert "3 failures in a row" in bot.stopped and "never_connected" in bot.stopped, bot.stopped
    assert "house" not in [b.name for b in house.seating.results.house_bots()]
    assert not house.running


async def test_a_house_bot_that_connects_and_never_says_hello_fails_at_the_hello_timeout(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its connection is the launch's from accept; the lobby closes it at its hello timeout
    (`Handshakes`): the launch ends then, as ``never_connected`` saying it did connect."""

    def behave(proc: FakeProc, seating: LadderSeating, nursery: trio.Nursery) -> None:
        conn = fake_conn(proc)
        seating.connected(conn)

        async def hello_timeout() -> None:
            await trio.sleep(10.0)
            conn.closed, conn.close_reason = True, f"{protocol.TIMEOUT}: no hello within 10 s of connecting"

        nursery.start_soon(hello_timeout)

    store, house, launcher = await run_house(tmp_path, monkeypatch, behave, pause_after=2, seconds=300)
    assert len(launcher.launches) == 2
    # 10 s, seen at that 0.5 s tick or the next (tasks due at one instant run in any order), then
    # 1 s of back-off: where the idle limit would have waited 30 s.
    assert 11.0 <= launcher.gaps()[0] <= 11.5, launcher.gaps()
    detail = "it connected but sent no hello within 10 s"
    assert launch_failures(store) == [{"cause": "never_connected", "detail": detail}] * 2
    assert house.last_failure["house"]["detail"] == detail


async def test_a_house_bot_that_says_hello_for_another_game_fails_at_once_and_backs_off_to_a_minute(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: started again every 0.5 s, its token rotated each time (67 launches in 40 s). Under
    ``--pause-after 0`` (never) it is never paused: it backs off, doubling from 1 s to 60 s."""

    def behave(proc: FakeProc, seating: LadderSeating, nursery: trio.Nursery) -> None:
        conn = fake_conn(proc)
        seating.connected(conn)
        hello = {"type": "hello", "name": "house", "game": "cata", "token": proc.secret}
        seating.refused(conn, hello, protocol.BAD_HELLO, "this server plays rezzo, not cata")

    store, _house, launcher = await run_house(tmp_path, monkeypatch, behave, pause_after=0, seconds=600)
    gaps = launcher.gaps()
    assert gaps[:7] == [1.5, 2.5, 4.5, 8.5, 16.5, 32.5, 60.5], gaps  # each refused at once, seen at a tick
    assert set(gaps[7:]) == {60.5}, gaps
    assert len(launcher.launches) <= 15  # in 10 minutes, where it was 67 in 40 s
    cause = {"cause": "wrong_game", "asked": "cata", "game": "rezzo"}
    failures = launch_failures(store)
    assert all(c == cause for c in failures), failures
    assert len(failures) >= len(launcher.launches) - 1  # the last may wait for its tick as the test stops
    bot = store.bot("house")
    assert bot is not None and bot.stopped is None and bot.failures >= 10


async def test_a_house_bot_that_exits_before_joining_fails_with_its_status_and_last_line(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def behave(proc: FakeProc, seating: LadderSeating, nursery: trio.Nursery) -> None:
        proc.log = f"starting\nno such map, token {proc.secret}\n"
        proc.exit(3)

    store, _house, launcher = await run_house(tmp_path, monkeypatch, behave, pause_after=1, seconds=60)
    assert len(launcher.launches) == 1
    [cause] = launch_failures(store)
    assert cause == {"cause": "exited", "status": 3, "last_log_line": "no such map, token [redacted]"}
    bot = store.bot("house")
    assert bot is not None and bot.stopped is not None and "exited" in bot.stopped


async def test_a_launch_that_joins_the_queue_is_no_failure_and_ends_the_back_off(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first launch that never connects, then one that queues and exits (its match played): the
    second counts nothing, and the house bot may start again at once."""

    def behave(proc: FakeProc, seating: LadderSeating, nursery: trio.Nursery) -> None:
        if len(launcher_box) > 1:  # the second launch on
            bot = seating.results.house_bots()[0]

            async def queue_then_exit() -> None:
                seating.queue.waiting["house"] = Queued(SimpleNamespace(), bot, trio.current_time())  # type: ignore[arg-type]
                await trio.sleep(2.0)
                del seating.queue.waiting["house"]
                proc.exit(0)

            nursery.start_soon(queue_then_exit)

    launcher_box: list[None] = []

    def counted(proc: FakeProc, seating: LadderSeating, nursery: trio.Nursery) -> None:
        launcher_box.append(None)
        behave(proc, seating, nursery)

    store, house, launcher = await run_house(tmp_path, monkeypatch, counted, pause_after=5, seconds=40)
    assert len(launch_failures(store)) == 1
    first, second = launcher.gaps()[:2]
    assert first == 31.0 and second <= 2.5  # after the join: no back-off, that 0.5 s tick or the next
    assert "house" not in house.failed and "house" not in house.not_before
    bot = store.bot("house")
    assert bot is not None and bot.failures == 1 and bot.stopped is None  # matches reset the store's count


async def test_a_house_bot_left_alone_in_the_queue_is_stopped_at_the_idle_limit_and_no_failure(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started for alice, who leaves before its match (or got another): it waits in the queue with
    nobody to play. Before: it stayed there, its process running, until the ladder stopped (a fresh
    clone's run under load caught a submitted bot so, test_ladder_submitted_e2e). Now it is stopped
    after the idle limit, counted as no failure, and not started again while nobody waits."""

    def behave(proc: FakeProc, seating: LadderSeating, nursery: trio.Nursery) -> None:
        bot = seating.results.house_bots()[0]
        seating.queue.waiting.pop("alice", None)
        seating.queue.waiting["house"] = Queued(SimpleNamespace(), bot, trio.current_time())  # type: ignore[arg-type]

        async def leave_when_stopped() -> None:
            await proc.wait()
            stopped.append(trio.current_time())
            seating.queue.waiting.pop("house", None)  # its connection closes with its process

        nursery.start_soon(leave_when_stopped)

    stopped: list[float] = []
    store, house, launcher = await run_house(tmp_path, monkeypatch, behave, pause_after=2, seconds=300)
    ((started, proc),) = launcher.launches  # one launch: nobody waits for it after
    assert proc.signalled and len(stopped) == 1
    assert 30.0 <= stopped[0] - started <= 31.0  # the idle limit, seen at that 0.5 s tick or the next
    assert launch_failures(store) == [] and "house" not in house.failed
    assert not house.running
    bot = store.bot("house")
    assert bot is not None and bot.failures == 0 and bot.stopped is None


async def test_a_refusal_that_says_the_ladder_is_full_is_not_the_house_bots_failure(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def behave(proc: FakeProc, seating: LadderSeating, nursery: trio.Nursery) -> None:
        conn = fake_conn(proc)
        hello = {"type": "hello", "name": "house", "game": "rezzo", "token": proc.secret}
        seating.refused(conn, hello, protocol.QUEUE_FULL, "the queue holds 2 bots")
        proc.exit(0)

    store, _house, launcher = await run_house(tmp_path, monkeypatch, behave, pause_after=1, seconds=5)
    assert len(launcher.launches) >= 5 and launch_failures(store) == []
    bot = store.bot("house")
    assert bot is not None and bot.stopped is None and bot.failures == 0


async def test_a_refused_hello_with_its_token_from_another_process_is_not_blamed_on_it(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that read the token from the pipe and says hello for another game: the house bot
    itself (which never connects here) ends at the idle limit, as ``never_connected``."""

    def behave(proc: FakeProc, seating: LadderSeating, nursery: trio.Nursery) -> None:
        thief = fake_conn(FakeProc("other"))
        hello = {"type": "hello", "name": "thief", "game": "cata", "token": proc.secret}
        seating.refused(thief, hello, protocol.BAD_HELLO, "this server plays rezzo, not cata")

    store, _house, _launcher = await run_house(tmp_path, monkeypatch, behave, pause_after=1, seconds=60)
    assert [c["cause"] for c in launch_failures(store)] == ["never_connected"]


# ------------------------------------------------------------------------------- refused again and again
async def test_a_house_bot_refused_again_and_again_keeps_its_token_and_says_why_once(
    autojump_clock: trio.testing.MockClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 42: a house bot speaking plain TCP to a TLS bot port was started 212 times in 120 s, its
    token rotated (a database write) each time. Now it backs off, every launch after a failed one
    reuses that one's token (one rotation in all), and the log says why once, then one short line."""
    told = "error: the server at 127.0.0.1:7777 speaks TLS; connect with --tls"

    def behave(proc: FakeProc, seating: LadderSeating, nursery: trio.Nursery) -> None:
        proc.log = told + "\n"
        proc.exit(1)

    caplog.set_level("WARNING", logger="cellarena.ladder")
    store, _house, launcher = await run_house(tmp_path, monkeypatch, behave, pause_after=0, seconds=120)
    assert 5 <= len(launcher.launches) <= 8, launcher.gaps()  # 1, 2, 4, 8, 16, 32 s apart
    (secret,) = {proc.secret for _, proc in launcher.launches}
    found = store.authenticate(secret)
    assert found is not None and found.name == "house"  # the store's token still: rotated once
    lines = [r for r in caplog.records if "house bot house failed" in r.getMessage()]
    errors = [r.getMessage() for r in lines if r.levelname == "ERROR"]
    assert len(errors) == 1 and "speaks TLS; connect with --tls" in errors[0], errors
    assert all("again, for the same reason" in r.getMessage() for r in lines if r.levelname == "WARNING")
    assert len(lines) >= len(launcher.launches) - 1


async def test_a_token_rotated_by_the_host_meanwhile_is_not_reused(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed launch's token is kept only while it still works: after `ladder bot rotate` the next
    launch gets a new one from the store."""

    def behave(proc: FakeProc, seating: LadderSeating, nursery: trio.Nursery) -> None:
        proc.exit(1)

    store, house, launcher = await run_house(tmp_path, monkeypatch, behave, pause_after=0, seconds=2)
    failed = launcher.launches[0][1].secret
    assert house.unused_token["house"] == failed
    house.unused_token.clear()
    store.rotate("house")
    await house._keep_token("house", failed)
    assert "house" not in house.unused_token


def test_a_tls_ladders_house_bots_are_told_its_certificate_and_name(tmp_path: Path) -> None:
    """Nothing secret: the flag, the ladder's own certificate (pinned) and the name it is for."""
    from certificates import pem_files

    from cellarena.arena.ladder.services.house import HouseTls

    _, chain, _ = pem_files(tmp_path, "ladder.example.org", "127.0.0.1")
    tls = HouseTls.of_certificate(chain)
    assert tls.env() == {
        "CELLARENA_TLS": "1",
        "CELLARENA_TLS_CA": str(chain),
        "CELLARENA_TLS_NAME": "127.0.0.1",
    }
    _, chain, _ = pem_files(tmp_path, "ladder.example.org")
    assert HouseTls.of_certificate(chain).name == "ladder.example.org"
