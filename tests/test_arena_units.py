"""The arena's parts without processes: schedule, ratings, storage and bot discovery."""

from __future__ import annotations

import itertools
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
from cellarena_cli import line_within

from cellarena.arena import ratings
from cellarena.arena.discovery import DiscoveryError, discover
from cellarena.arena.schedule import Scheduled, schedule
from cellarena.arena.tournament_store import MatchRecord, SeatRecord, Store, StoreError

ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------------------------ schedule
def seat_counts(matches: Sequence[Scheduled]) -> dict[str, Counter[int]]:
    """How often each bot sits in each seat: equal per bot when the schedule is balanced."""
    counts: dict[str, Counter[int]] = {}
    for m in matches:
        for seat, bot in enumerate(m.bots):
            counts.setdefault(bot, Counter())[seat] += 1
    return counts


def test_two_player_schedule_every_pair_both_orders_every_map_every_round() -> None:
    bots = ["a", "b", "c", "d"]
    matches = schedule(bots, [("duel", 2), ("field", 2)], rounds=3, seed=0)
    assert len(matches) == 6 * 2 * 2 * 3 == 72
    assert [m.index for m in matches] == list(range(72))
    for r, map_ in itertools.product((1, 2, 3), ("duel", "field")):
        orders = {m.bots for m in matches if m.round == r and m.map == map_}
        assert orders == set(itertools.permutations(bots, 2))
    counts = seat_counts(matches)
    assert all(c == {0: 18, 1: 18} for c in counts.values())  # every bot as often in each seat
    assert len({m.key for m in matches}) == 72


def test_four_player_map_rotates_each_group_so_every_bot_sits_in_every_seat() -> None:
    bots = ["a", "b", "c", "d", "e"]
    matches = schedule(bots, [("quad", 4)], rounds=1, seed=0)
    assert len(matches) == 5 * 4  # C(5, 4) groups, 4 rotations each
    counts = seat_counts(matches)
    assert all(set(c.values()) == {4} and sorted(c) == [0, 1, 2, 3] for c in counts.values())


def test_seeds_depend_on_the_match_not_on_its_place_in_the_schedule() -> None:
    full = schedule(["a", "b", "c"], [("duel", 2)], rounds=2, seed=7)
    fewer = schedule(["a", "b", "c"], [("duel", 2)], rounds=1, seed=7)
    by_key = {m.key: m.seed for m in full}
    assert all(by_key[m.key] == m.seed for m in fewer)
    other = schedule(["a", "b", "c"], [("duel", 2)], rounds=1, seed=8)
    assert [m.seed for m in other] != [m.seed for m in fewer]
    assert len({m.seed for m in full}) == len(full)


def test_schedule_refuses_too_few_bots_for_the_map() -> None:
    with pytest.raises(ValueError, match="4 seats but only 3 bots"):
        schedule(["a", "b", "c"], [("quad", 4)], rounds=1, seed=0)


# ------------------------------------------------------------------------------------ ratings
def test_ratings_move_the_right_way() -> None:
    start = {"a": ratings.initial(), "b": ratings.initial()}
    new = ratings.update(start, ["a", "b"], [1, 2])
    assert new["a"].mu > start["a"].mu > new["b"].mu
    assert new["a"].sigma < start["a"].sigma  # more certain after a game
    drawn = ratings.update(start, ["a", "b"], [1, 1])
    assert drawn["a"].mu == pytest.approx(start["a"].mu) == pytest.approx(drawn["b"].mu)
    # An upset moves ratings more than an expected result does.
    strong = {"a": ratings.Rating(35.0, 3.0), "b": ratings.Rating(15.0, 3.0)}
    expected = ratings.update(strong, ["a", "b"], [1, 2])
    upset = ratings.update(strong, ["a", "b"], [2, 1])
    assert abs(upset["a"].mu - 35.0) > abs(expected["a"].mu - 35.0)


def test_a_bot_that_keeps_winning_rises_to_the_top() -> None:
    results = [(i, ["w", "x"] if i % 2 else ["x", "w"], [1, 2] if i % 2 else [2, 1]) for i in range(20)]
    final = ratings.replay({}, results)[-1][1]
    assert final["w"].conservative > final["x"].conservative


# ------------------------------------------------------------------------------------ storage
SPEC = {"game": "rezzo", "bots": [["a", "x", None], ["b", "y", None]], "rounds": 1}


def record(
    winner: str | None, bots: tuple[str, str], ranks: tuple[int, int], crashed: str = ""
) -> MatchRecord:
    seats = tuple(
        SeatRecord(
            b,
            r,
            late=1,
            invalid=0,
            illegal=2,
            forfeit=b == crashed,
            crashed=b == crashed,
            exit_code=0,
            log=None,
        )
        for b, r in zip(bots, ranks, strict=True)
    )
    return MatchRecord(winner, "test", 100, 0.5, None, seats)


def test_standings_do_not_depend_on_the_order_matches_finished(tmp_path: Path) -> None:
    matches = schedule(["a", "b", "c"], [("duel", 2)], rounds=2, seed=0)
    outcomes = {}
    for m in matches:
        first = min(m.bots)  # the alphabetically first bot wins, except one draw
        ranks = (1, 1) if m.index == 3 else tuple(1 if b == first else 2 for b in m.bots)
        outcomes[m.index] = record(first if m.index != 3 else None, m.bots, ranks)  # type: ignore[arg-type]
    standings = []
    for n, order in enumerate([matches, list(reversed(matches)), matches[1::2] + matches[::2]]):
        with Store(tmp_path / f"r{n}.sqlite", SPEC) as store:
            for m in order:
                store.commit(m, outcomes[m.index])
            standings.append(store.standings(["a", "b", "c"]))
    assert standings[0] == standings[1] == standings[2]
    top = standings[0]
    assert [s.bot for s in top] == ["a", "b", "c"]
    a_matches = [m for m in matches if "a" in m.bots]
    drawn = 1 if "a" in matches[3].bots else 0
    assert (top[0].wins, top[0].draws, top[0].losses) == (len(a_matches) - drawn, drawn, 0)
    assert top[0].late_rate == pytest.approx(1 / 100)


def test_a_failed_commit_leaves_nothing_behind(tmp_path: Path) -> None:
    (m0, m1, *_) = schedule(["a", "b"], [("duel", 2)], rounds=1, seed=0)
    path = tmp_path / "r.sqlite"
    with Store(path, SPEC) as store:
        store.commit(m0, record("a", m0.bots, (1, 2)))  # type: ignore[arg-type]
        with pytest.raises(StoreError, match=f"cannot record match {m0.key} .*UNIQUE.*run the same command"):
            store.commit(m0, record("a", m0.bots, (1, 2)))  # type: ignore[arg-type]  # the same match twice
        bad = record("b", m1.bots, (1, 2))  # type: ignore[arg-type]
        bad = MatchRecord(bad.winner, bad.reason, bad.ticks, bad.seconds, None, (bad.seats[0], bad.seats[0]))
        object.__setattr__(bad.seats[0], "rank", None)  # NOT NULL fails inside the transaction
        with pytest.raises(StoreError, match="NOT NULL"):
            store.commit(m1, bad)
        assert store.finished_keys() == {m0.key}
    db = sqlite3.connect(path)
    assert db.execute("SELECT COUNT(*) FROM seats").fetchone() == (2,)
    assert db.execute("SELECT COUNT(DISTINCT match) FROM ratings").fetchone() == (1,)


def test_a_results_folder_of_another_tournament_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    Store(path, SPEC).close()
    with pytest.raises(StoreError, match=r"different tournament \(it differs in: rounds\).*another --out"):
        Store(path, {**SPEC, "rounds": 2})
    path2 = tmp_path / "junk.sqlite"
    path2.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a usable results database"):
        Store(path2, SPEC)


def test_one_coordinator_at_a_time_per_results_folder(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    code = (
        "import sys, time; from pathlib import Path; from cellarena.arena.tournament_store import Store; "
        f"s = Store(Path({str(path)!r}), {SPEC!r}); print('open', flush=True); time.sleep(30)"
    )
    other = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert line_within(other.stdout, what="word that the store is open") == "open\n"
        with pytest.raises(StoreError, match="another tournament is running there right now"):
            Store(path, SPEC)
    finally:
        other.kill()  # SIGKILL: the kernel drops its lock with the process
        other.wait()
    with Store(path, SPEC) as store:  # free again
        assert store.finished_keys() == set()


# ------------------------------------------------------------------------------------ discovery
def test_example_bots_are_found_for_rezzo_from_the_top_folder() -> None:
    bots = discover(ROOT / "example_bots", "rezzo")
    names = [b.spec.name for b in bots]
    assert names == ["builder", "js_random", "raider", "random_walker", "trained"]
    js = bots[1]
    assert js.spec.command == "node bot.js" and js.spec.cwd == str(
        ROOT / "example_bots" / "rezzo" / "js_random"
    )
    assert bots[0].spec.command.startswith("python ") and bots[0].spec.cwd is None
    trained = bots[4].spec  # a folder with its bot.toml and committed weights: nothing to set up
    assert trained.command == "python bot.py --weights rezzo.npz" and trained.cwd == str(
        ROOT / "example_bots" / "rezzo" / "trained"
    )


def test_a_bot_folder_given_as_dot_is_named_after_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A starter's README says `cellarena tournament --bots-dir .`: the bot is the folder's, by name."""
    _manifest(tmp_path, "my_bot", 'command = "build/my_bot"\n')
    monkeypatch.chdir(tmp_path / "my_bot")
    (bot,) = discover(Path("."), "rezzo")
    assert bot.spec.name == "my_bot" and bot.spec.cwd == str(tmp_path / "my_bot")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: (d / "lonely").mkdir(), r"lonely: a bot folder needs a bot.toml"),
        (lambda d: (d / "broken.py").write_text("def f(:\n"), r"broken.py:1:\d+: not valid Python"),
        (lambda d: _manifest(d, "nocmd", 'name = "x"\n'), r"nocmd/bot.toml: missing command"),
        (lambda d: _manifest(d, "badtoml", "command = \n"), r"badtoml/bot.toml: not valid TOML"),
        (
            lambda d: _manifest(d, "typo", 'command = "x"\ncomand = "y"\n'),
            r"typo/bot.toml: unknown key\(s\) comand",
        ),
        (lambda d: _manifest(d, "empty", 'command = ""\n'), r"empty/bot.toml: command must be a non-empty"),
        (lambda d: _manifest(d, "good", 'command = "x"\nname = "ok"\n'), r"'ok' is already used"),
    ],
)
def test_a_broken_entry_is_named_in_the_error(tmp_path: Path, make: object, message: str) -> None:
    (tmp_path / "ok.py").write_text("if __name__ == '__main__':\n    print('hi')\n")
    (tmp_path / "README.md").write_text("not a bot, ignored\n")
    (tmp_path / "_helpers").mkdir()  # skipped: starts with _
    make(tmp_path)  # type: ignore[operator]
    with pytest.raises(DiscoveryError, match=message):
        discover(tmp_path, "rezzo")


def _manifest(folder: Path, name: str, text: str) -> None:
    (folder / name).mkdir()
    (folder / name / "bot.toml").write_text(text)
