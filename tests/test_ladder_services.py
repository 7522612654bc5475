"""Each of the ladder's services on its own (`cellarena.arena.ladder.services.{lifecycle,admission,queue,
starter,match_results}`), over a real SQLite store where one is needed and small stand-ins for the rest: no
lobby, no sockets. The ladder as a whole, over TCP, is tests/test_ladder_server.py's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import trio

from cellarena.arena.ladder.hosting.cluster_hand_off import Hosting
from cellarena.arena.ladder.matchmaking.matchmaker import Pairing, Policy
from cellarena.arena.ladder.records import BotRecord
from cellarena.arena.ladder.rules import LadderRules
from cellarena.arena.ladder.services import lifecycle
from cellarena.arena.ladder.services.admission import Admission
from cellarena.arena.ladder.services.changes import DatabaseWatch
from cellarena.arena.ladder.services.lifecycle import LadderService, Services
from cellarena.arena.ladder.services.live_matches import Live
from cellarena.arena.ladder.services.match_results import Ended, Results
from cellarena.arena.ladder.services.queue import MatchQueue, Queued
from cellarena.arena.ladder.services.spool import ResultSpool
from cellarena.arena.ladder.services.starter import MatchStarter
from cellarena.arena.ladder.store.ladder_store import LadderStore, LadderStoreError
from cellarena.arena.ladder.store.replay_files import replay_path
from cellarena.sdk import protocol
from cellarena.server.games.base import Result
from cellarena.server.play.hosted import HostedMatch, HostedResult
from cellarena.server.play.match import MatchOutcome, TickSettings

POLICY = Policy(seats=2, maps=("duel",))


async def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    with trio.fail_after(timeout):
        while not condition():
            await trio.sleep(0.01)


class FakeConn:
    """What the services use of a connection: its address, a name, attach, fail."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.peer = f"{host}:4000"
        self.via: str | None = None
        self.tls = False
        self.name: str | None = None
        self.closed = False
        self.failed: tuple[str, str] | None = None
        self.owner: Any = None
        self.sent: list[dict[str, Any]] = []

    def attach(self, owner: Any) -> bool:
        self.owner = owner
        return not self.closed

    def fail(self, code: str, message: str, level: int = logging.WARNING) -> None:
        self.failed = (code, message)
        self.closed = True

    def send_message(self, message: dict[str, Any]) -> bool:
        self.sent.append(message)
        return True

    async def flush(self, timeout: float) -> None:
        pass

    def close(self, why: str) -> None:
        self.closed = True


def new_store(tmp_path: Path, *bots: str) -> tuple[LadderStore, dict[str, str]]:
    store = LadderStore(tmp_path / "ladder.sqlite")
    return store, {name: store.add_bot(name, "rezzo")[1].secret for name in bots}


def bot_record(store: LadderStore, name: str) -> BotRecord:
    bot = store.bot(name)
    assert bot is not None
    return bot


def outcome(names: list[str], winner: int = 0) -> MatchOutcome:
    ranks = {i: 1 if i == winner else 2 for i in range(len(names))}
    zeros = [0] * len(names)
    return MatchOutcome(1, Result(ranks, winner, "test", 20), names, zeros, zeros, zeros, [], 20)


# ------------------------------------------------------------------------------------------ lifecycle
@dataclass
class Noted(LadderService):
    label: str
    log: list[str]
    fail_shutdown: bool = False
    hang_shutdown: bool = False
    ready: bool = False

    def __post_init__(self) -> None:
        self.name = self.label

    async def initialize(self) -> None:
        self.log.append(f"initialize {self.label}")

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.log.append(f"run {self.label}")
        await trio.sleep(1)  # gets ready in its own time; the next one waits for it
        self.ready = True
        task_status.started()
        await trio.sleep_forever()

    async def graceful_shutdown(self) -> None:
        self.log.append(f"graceful {self.label}")

    async def shutdown(self) -> None:
        self.log.append(f"shutdown {self.label}")
        if self.fail_shutdown:
            raise RuntimeError("a bug in one service's shutdown")
        if self.hang_shutdown:
            await trio.sleep_forever()


async def test_services_start_in_order_each_once_the_one_before_is_ready_and_stop_last_first(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    log: list[str] = []
    first = Noted("results", log, hang_shutdown=True)
    second = Noted("starter", log, fail_shutdown=True)
    third = Noted("admission", log)
    services = Services([first, second, third])
    await services.initialize()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(services.run)
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    assert first.ready and second.ready and third.ready
    await services.graceful_shutdown()
    with trio.CancelScope() as outer:
        outer.cancel()  # the ladder is being cancelled: shutdown still runs, shielded
        await services.shutdown()
    assert log == [
        "initialize results",
        "initialize starter",
        "initialize admission",
        "run results",
        "run starter",
        "run admission",
        "graceful admission",
        "graceful starter",
        "graceful results",
        "shutdown admission",
        "shutdown starter",  # fails: logged, and the next one still shuts down
        "shutdown results",  # hangs: given up after its deadline
    ]
    assert "starter failed to shut down" in caplog.text
    assert f"results did not shut down within {lifecycle.SHUTDOWN_DEADLINE:g} s" in caplog.text


# ------------------------------------------------------------------------------------------ admission
@dataclass
class Ladder:
    store: LadderStore
    tokens: dict[str, str]
    database: DatabaseWatch
    results: Results
    queue: MatchQueue
    starter: MatchStarter
    admission: Admission


def services(tmp_path: Path, *bots: str, rules: LadderRules | None = None, **starter: Any) -> Ladder:
    """The four services wired as `wiring.build` wires them, without a lobby."""
    store, tokens = new_store(tmp_path, *bots)
    rules = rules or LadderRules(match_every=0.02)
    database = DatabaseWatch(store, every=rules.poll_every)
    results = Results(store, "rezzo", database, spool=ResultSpool(tmp_path / "pending"))
    queue = MatchQueue(POLICY, results, database, every=rules.match_every, seed=1)
    started = MatchStarter(
        store, "rezzo", lambda m: {"map": m}, queue, results, every=rules.match_every, **starter
    )
    queue.bind(started)
    admission = Admission(store, "rezzo", queue, started, database, rules=rules)
    return Ladder(store, tokens, database, results, queue, started, admission)


async def test_admission_counts_wrong_tokens_and_locks_out_guesses_not_good_tokens(tmp_path: Path) -> None:
    ladder = services(tmp_path, "alice", rules=LadderRules(failed_tokens=3, match_every=0.02))
    admission = ladder.admission
    hello = protocol.hello("x", "rezzo")
    async with trio.open_nursery() as nursery:
        await nursery.start(admission.run)
        guesses = [FakeConn("203.0.113.7") for _ in range(4)]
        for conn in guesses:  # sent at once: counted as they arrive, before any check ends
            admission.admit(conn, {**hello, "token": "cla_wrong"})  # type: ignore[arg-type]
        await wait_for(lambda: all(c.failed is not None for c in guesses))
        codes = [c.failed[0] for c in guesses if c.failed is not None]
        assert codes == [protocol.BAD_HELLO] * 3 + [protocol.LOCKED_OUT]
        assert admission.failures["203.0.113.7"].lockouts == 1
        good = FakeConn("203.0.113.7")
        admission.admit(good, {**hello, "token": ladder.tokens["alice"]})  # type: ignore[arg-type]
        await wait_for(lambda: "alice" in ladder.queue.waiting)
        assert good.failed is None and good.name == "alice"
        other = FakeConn("198.51.100.1")  # another address is not locked out
        admission.admit(other, {**hello, "token": "cla_wrong"})  # type: ignore[arg-type]
        await wait_for(lambda: other.failed is not None)
        assert other.failed is not None and other.failed[0] == protocol.BAD_HELLO
        nursery.cancel_scope.cancel()


async def test_admission_refuses_hellos_once_the_ladder_stops_and_keeps_the_queue_cap(tmp_path: Path) -> None:
    ladder = services(tmp_path, "alice", rules=LadderRules(max_queue=1, match_every=0.02))
    hello = {**protocol.hello("alice", "rezzo"), "token": ladder.tokens["alice"]}
    assert ladder.admission.check(FakeConn(), hello) is None  # type: ignore[arg-type]
    ladder.queue.add(Queued(FakeConn(), bot_record(ladder.store, "alice"), 0.0))  # type: ignore[arg-type]
    refused = ladder.admission.check(FakeConn(), hello)  # type: ignore[arg-type]
    assert refused is not None and refused[0] == protocol.QUEUE_FULL
    await ladder.admission.graceful_shutdown()
    refused = ladder.admission.check(FakeConn(), hello)  # type: ignore[arg-type]
    assert refused is not None and refused[0] == protocol.SHUTDOWN and "stopping" in refused[1]


async def test_admission_ends_a_revoked_bots_queued_connection(tmp_path: Path) -> None:
    ladder = services(tmp_path, "alice")
    conn = FakeConn()
    ladder.queue.add(Queued(conn, bot_record(ladder.store, "alice"), 0.0))  # type: ignore[arg-type]
    ladder.store.revoke("alice")
    await ladder.admission.check_bots({"alice"})
    assert "alice" not in ladder.queue.waiting
    assert (
        conn.failed is not None and conn.failed[0] == protocol.REVOKED and "revoked alice" in conn.failed[1]
    )


# ------------------------------------------------------------------------------------------ the queue
@dataclass
class RecordingStarter:
    """A starter that notes the pairings it is handed, and plays none of them."""

    started: list[tuple[Pairing, list[str]]] = field(default_factory=list)

    async def start(self, pairing: Pairing, seated: list[Queued]) -> None:
        self.started.append((pairing, [q.bot.name for q in seated]))

    def busy(self, waiting: dict[str, Queued]) -> set[str]:
        return set()


def queued(name: str, since: float = 0.0) -> Queued:
    bot = BotRecord(1, name, "rezzo", "outside", None, 1, None, None)  # type: ignore[arg-type]
    return Queued(FakeConn(), bot, since)  # type: ignore[arg-type]


async def test_the_queue_pairs_on_its_timer_and_hands_pairings_to_the_starter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    database = SimpleNamespace(up=True)
    results = SimpleNamespace(ratings={})
    queue = MatchQueue(POLICY, results, database, every=0.5, seed=3)  # type: ignore[arg-type]
    starter = RecordingStarter()
    queue.bind(starter)
    async with trio.open_nursery() as nursery:
        await nursery.start(queue.run)
        queue.add(queued("alice"))
        queue.add(queued("bob"))
        await trio.sleep(0.4)
        assert starter.started == []  # not before its pass
        await trio.sleep(0.2)
        ((pairing, names),) = starter.started
        assert sorted(names) == ["alice", "bob"] and pairing.map == "duel" and not queue.waiting
        queue.requeue([queued("alice"), queued("bob")])
        database.up = False  # an outage: the queue waits
        await trio.sleep(2)
        assert len(starter.started) == 1 and len(queue.waiting) == 2
        database.up = True
        await queue.graceful_shutdown()  # stopping: no more pairings
        await trio.sleep(2)
        assert len(starter.started) == 1 and len(queue.waiting) == 2
        nursery.cancel_scope.cancel()
    assert queue.stats.matchmaking_passes == 1 and len(queue.stats.waits) == 2


async def test_the_queues_pairings_are_the_same_from_the_same_seed_and_queue() -> None:
    def pairings(seed: int) -> list[Pairing]:
        results = SimpleNamespace(ratings={})
        queue = MatchQueue(POLICY, results, SimpleNamespace(up=True), every=1, seed=seed)  # type: ignore[arg-type]
        queue.bind(RecordingStarter())
        for i, name in enumerate(["a", "b", "c", "d"]):
            queue.add(queued(name, since=-10.0 - i))
        return queue.pairings()

    assert pairings(7) == pairings(7)


# ------------------------------------------------------------------------------------------ the starter
class FakeMatch:
    def __init__(self, number: int) -> None:
        self.number = number
        self.seats: list[Any] = []
        self.over = False
        self.closing = False


@dataclass
class FakeHost:
    """A `MatchHost` that notes each start and runs nothing."""

    starts: list[dict[str, Any]] = field(default_factory=list)
    players: int = 2
    settings: TickSettings = field(default_factory=TickSettings)
    matches_started: int = 0
    running: list[Any] = field(default_factory=list)

    def start_match(self, conns: Sequence[Any], names: list[str] | None = None, **kwargs: Any) -> Any:
        self.matches_started += 1
        self.starts.append({"conns": list(conns), "names": names, **kwargs})
        match = FakeMatch(self.matches_started)
        self.running.append(match)
        return match


async def test_the_starter_writes_a_pairing_down_and_starts_it_with_its_own_recorder_and_id(
    tmp_path: Path,
) -> None:
    (tmp_path / "replays").mkdir()
    ladder = services(tmp_path, "alice", "bob", replay_dir=tmp_path / "replays")
    host = FakeHost()
    ladder.starter.bind(host)  # type: ignore[arg-type]
    seated = [Queued(FakeConn(), bot_record(ladder.store, n), 0.0) for n in ("alice", "bob")]  # type: ignore[arg-type]
    await ladder.starter.start(Pairing(("alice", "bob"), "duel", 5), seated)
    (start,) = host.starts
    (match,) = ladder.store.matches("rezzo")
    assert match.status == "running" and match.seed == 5
    assert start["names"] == ["alice", "bob"] and start["seed"] == 5
    assert start["engine_config"] == {"map": "duel"} and start["meta"] == {"ladder match": match.id}
    assert ladder.starter.playing() == {"alice", "bob"}
    # The recorder names the replay for the ladder's match, not the lobby's number.
    from cellarena.server.games import get_engine

    engine = get_engine("rezzo").new({"map": "duel"}, 5)
    writer = start["recorder"](1, engine, ["alice", "bob"], 5)
    assert writer is not None and ladder.starter.replays[match.id] == str(
        replay_path(tmp_path / "replays", match.id)
    )
    # Shutting down voids what is under way.
    await ladder.starter.shutdown()
    voided = ladder.store.match(match.id)
    assert voided is not None and voided.status == "void" and "stopped" in (voided.reason or "")
    assert not ladder.starter.live


async def test_the_starter_voids_a_pairing_whose_bot_left_and_puts_the_other_back(tmp_path: Path) -> None:
    ladder = services(tmp_path, "alice", "bob")
    host = FakeHost()
    ladder.starter.bind(host)  # type: ignore[arg-type]
    gone = FakeConn()
    gone.closed = True
    seated = [
        Queued(gone, bot_record(ladder.store, "alice"), 0.0),  # type: ignore[arg-type]
        Queued(FakeConn(), bot_record(ladder.store, "bob"), 0.0),  # type: ignore[arg-type]
    ]
    await ladder.starter.start(Pairing(("alice", "bob"), "duel", 5), seated)
    (match,) = ladder.store.matches("rezzo")
    assert match.status == "void" and match.reason == "alice left before the start"
    assert host.starts == [] and list(ladder.queue.waiting) == ["bob"]


# ------------------------------------------------------------------------------------------ results
async def test_results_are_written_in_order_and_the_ratings_follow(tmp_path: Path) -> None:
    ladder = services(tmp_path, "alice", "bob")
    bots = (bot_record(ladder.store, "alice"), bot_record(ladder.store, "bob"))
    ids = [ladder.store.begin_match("rezzo", "duel", s, [b.id for b in bots]) for s in (1, 2)]
    async with trio.open_nursery() as nursery:
        await nursery.start(ladder.results.run)
        for ladder_id in ids:
            ladder.results.ended(Ended(ladder_id, bots, outcome(["alice", "bob"]), None))
        await wait_for(lambda: all(m.status == "finished" for m in ladder.store.matches("rezzo")))
        nursery.cancel_scope.cancel()
    finished = sorted(ladder.store.matches("rezzo"), key=lambda m: m.id)
    assert [m.seq for m in finished] == sorted(m.seq for m in finished)  # counted in the order they ended
    assert ladder.results.ratings["alice"].mu > ladder.results.ratings["bob"].mu


async def test_results_handed_over_as_the_ladder_stops_are_written_by_shutdown(tmp_path: Path) -> None:
    ladder = services(tmp_path, "alice", "bob")
    bots = (bot_record(ladder.store, "alice"), bot_record(ladder.store, "bob"))
    ladder_id = ladder.store.begin_match("rezzo", "duel", 1, [b.id for b in bots])
    ladder.results.ended(Ended(ladder_id, bots, outcome(["alice", "bob"]), None))  # run never took it
    await ladder.results.shutdown()
    match = ladder.store.match(ladder_id)
    assert match is not None and match.status == "finished"


async def test_a_result_the_database_refuses_is_kept_on_disk_and_written_when_it_is_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ladder = services(tmp_path, "alice", "bob")
    bots = (bot_record(ladder.store, "alice"), bot_record(ladder.store, "bob"))
    ladder_id = ladder.store.begin_match("rezzo", "duel", 1, [b.id for b in bots])

    def down(*_args: Any, **_kwargs: Any) -> Any:
        raise LadderStoreError("the database cannot be reached")

    with monkeypatch.context() as patch:
        patch.setattr(ladder.store, "finish_match", down)
        ladder.results.ended(Ended(ladder_id, bots, outcome(["alice", "bob"]), None))
        await ladder.results.shutdown()
    assert ladder.results.spool is not None and len(ladder.results.spool) == 1
    assert ladder.store.match(ladder_id).status == "running"  # type: ignore[union-attr]
    await ladder.results.on_back()
    assert len(ladder.results.spool) == 0
    assert ladder.store.match(ladder_id).status == "finished"  # type: ignore[union-attr]


async def test_results_initialize_voids_what_a_previous_run_left_under_way(tmp_path: Path) -> None:
    ladder = services(tmp_path, "alice", "bob")
    bots = [bot_record(ladder.store, n).id for n in ("alice", "bob")]
    left = ladder.store.begin_match("rezzo", "duel", 1, bots)
    said: list[str] = []
    ladder.results.notify = said.append
    await ladder.results.initialize()
    assert ladder.store.match(left).status == "void"  # type: ignore[union-attr]
    assert said == ["voided 1 match(es) a previous run left under way"]


class LocalWorkers:
    """A stand-in for a pool of local worker processes (the every-core issue): it hosts each match
    it is handed at a made-up address and ends it with the first seat winning."""

    def __init__(self) -> None:
        self.jobs: list[HostedMatch] = []
        self.done: dict[int, trio.Event] = {}

    async def start(self, match: HostedMatch) -> Hosting:
        self.jobs.append(match)
        self.done[match.ladder_id] = trio.Event()
        return Hosting("127.0.0.1", 9100 + len(self.jobs), tls=False)

    async def result(self, ladder_id: int) -> HostedResult:
        await self.done[ladder_id].wait()
        (job,) = [j for j in self.jobs if j.ladder_id == ladder_id]
        played = outcome(list(job.names))
        return HostedResult(ladder_id, played, (True, True), b"replay bytes", "127.0.0.1", 9101)

    def cancel(self, ladder_id: int) -> None:
        pass


async def test_the_starter_hands_a_match_to_workers_elsewhere_and_its_result_comes_back(
    tmp_path: Path,
) -> None:
    (tmp_path / "replays").mkdir()
    workers = LocalWorkers()
    ladder = services(tmp_path, "alice", "bob", hand_off=workers, replay_dir=tmp_path / "replays")
    ladder.starter.bind(FakeHost())  # type: ignore[arg-type]
    conns = [FakeConn(), FakeConn()]
    seated = [
        Queued(c, bot_record(ladder.store, n), 0.0, follows_redirect=True)  # type: ignore[arg-type]
        for c, n in zip(conns, ("alice", "bob"), strict=True)
    ]
    async with trio.open_nursery() as nursery:
        await nursery.start(ladder.results.run)
        await nursery.start(ladder.starter.run)
        await ladder.starter.start(Pairing(("alice", "bob"), "duel", 5), seated)
        await wait_for(lambda: all(c.closed for c in conns))
        (job,) = workers.jobs
        assert job.names == ("alice", "bob") and job.seed == 5 and job.engine_config == {"map": "duel"}
        redirects = [c.sent[-1] for c in conns]
        assert all(r["type"] == "redirect" and r["host"] == "127.0.0.1" for r in redirects)
        assert ladder.starter.playing() == {"alice", "bob"}  # under way there
        workers.done[job.ladder_id].set()
        await wait_for(lambda: ladder.store.match(job.ladder_id).status == "finished")  # type: ignore[union-attr]
        nursery.cancel_scope.cancel()
    match = ladder.store.match(job.ladder_id)
    assert match is not None and match.winner == "alice" and not ladder.starter.remote
    assert match.replay is not None and Path(match.replay).read_bytes() == b"replay bytes"


class RelayingWorkers(LocalWorkers):
    """`LocalWorkers` whose matches the ladder's spectators can watch (`Relays`)."""

    async def relay(self, ladder_id: int, conn: Any) -> bool:
        return False


def test_a_spectator_waits_for_the_next_match_wherever_it_plays_while_the_one_here_is_ending(
    tmp_path: Path,
) -> None:
    """With matches played here and in workers, a spectator that names no match watches the newest;
    a match here that is ending takes none (`Lobby.watch`), so the starter keeps it for the next
    match, which may be a worker's: left to the lobby, it would wait for the lobby's next match."""
    ladder = services(tmp_path, "alice", "bob", hand_off=RelayingWorkers())
    here = FakeMatch(1)
    ladder.starter.live[here] = Live(here, 7, ())  # type: ignore[index, arg-type]
    # It plays here: the lobby's to give.
    assert not ladder.starter.spectate(FakeConn(), {"role": "spectator"})  # type: ignore[arg-type]
    here.closing = True
    waiting = FakeConn()
    assert ladder.starter.spectate(waiting, {"role": "spectator"})  # type: ignore[arg-type]
    assert ladder.starter.watchers.conns == [waiting]
