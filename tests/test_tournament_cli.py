"""`cellarena tournament` end to end: real processes, bad bots, SIGKILL and resume, Ctrl-C."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bot_files import RAW_BOT as RAW
from bot_processes import BotPids, descendants, wait_until_dead
from cellarena_cli import CLOCK_FREE, cellarena, invoke, refused, run_here, start_cellarena

GHOST = f'{sys.executable} -c "import time; time.sleep(60)"'  # starts, never connects


def tournament(*args: str, timeout: float = 240, env: dict[str, str] | None = None) -> dict:
    proc = cellarena("tournament", "rezzo", *args, "--json", timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


# Real time: asserts the tournament's real elapsed time, and a good bot in time for 40 ms budgets.
@pytest.mark.realtime
def test_crashing_hanging_and_absent_bots_rank_last_and_stall_nothing(
    tmp_path: Path, bot_pids: BotPids
) -> None:
    started = time.monotonic()
    result = tournament(
        "--bot", f"good={RAW} random",
        "--bot", f"crasher={RAW} crash",
        "--bot", f"hangs={RAW} silent",
        "--bot", f"ghost={GHOST}",
        "--max-ticks", "40",
        "--budget-ms", "40",
        "--connect-timeout", "1",  # as the strict test's below: the ghost's six matches wait it each
        "--out", str(tmp_path / "out"),
        "--jobs", "2",
        env=bot_pids.env,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert result["matches"] == 12 and result["failed"] == []
    standings = {s["bot"]: s for s in result["standings"]}
    assert result["standings"][0]["bot"] == "good"
    assert standings["good"]["wins"] == 6 and standings["good"]["crashes"] == 0
    for bad in ("crasher", "hangs", "ghost"):
        # Each forfeits both matches against the good bot; against another bad bot it may outlast it.
        assert 2 <= standings[bad]["crashes"] <= 6, standings[bad]
        assert standings[bad]["losses"] >= 2
        assert standings[bad]["rating"] < standings["good"]["rating"]
    assert standings["hangs"]["late_rate"] > 0.5
    # Nothing waited on a bad bot beyond its own limits: 25 missed ticks or the connect timeout.
    assert elapsed < 120
    assert bot_pids.wait_until_dead() == []


def read_matches(db: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1.0)
        try:
            return con.execute("SELECT COUNT(*) FROM matches").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def test_a_tournament_killed_with_sigkill_resumes_and_ends_with_the_same_standings(
    tmp_path: Path, bot_pids: BotPids
) -> None:
    env = bot_pids.env
    # Three bots, six matches a run (each match starts two bot processes): a random one, a slower
    # one and a crasher are what a resume must score the same as a run that was never stopped.
    args = [
        "--bot", f"r1={RAW} random",
        "--bot", f"r3={RAW} delay:2",
        "--bot", f"crasher={RAW} crash",
        "--max-ticks", "80",
        *CLOCK_FREE,
        "--seed", "4",
        "--jobs", "1",
    ]  # fmt: skip
    straight = tournament(*args, "--out", str(tmp_path / "straight"), env=env)
    assert straight["matches"] == straight["played"] == 6

    out = tmp_path / "resumed"
    proc = start_cellarena(
        "tournament", "rezzo", *args, "--out", str(out), "--json",
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while read_matches(out / "results.sqlite") < 2 and time.monotonic() < deadline:
        assert proc.poll() is None, "the tournament ended before it could be killed"
        time.sleep(0.05)
    # Its pool's fork server, worker and the bots of the match under way.
    under = descendants(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = read_matches(out / "results.sqlite")
    # Nothing it started outlives it: the worker sees the coordinator gone, stops its match and exits,
    # and then the fork server, which lives as long as a worker does.
    assert len(under) >= 2 and wait_until_dead(under, 60) == []
    assert 2 <= killed_at < 6
    resumed = tournament(*args, "--out", str(out), env=env)
    assert resumed["matches"] == 6
    assert resumed["played"] == 6 - killed_at  # only the missing ones
    assert resumed["standings"] == straight["standings"]
    con = sqlite3.connect(out / "results.sqlite")
    assert con.execute("SELECT COUNT(*), COUNT(DISTINCT key) FROM matches").fetchone() == (6, 6)
    assert con.execute("SELECT COUNT(*) FROM seats").fetchone() == (12,)
    assert bot_pids.wait_until_dead() == []  # the killed run's orphaned match finished and its bots exited
    # Every attempt folder is a recorded match's, or marked as cut short.
    recorded = {Path(r).parent.name for (r,) in con.execute("SELECT replay FROM matches")}
    for attempt in (out / "matches").iterdir():
        if attempt.name not in recorded:
            assert attempt.name.endswith("-cut-short") and (attempt / "CUT-SHORT.txt").exists()


def test_ctrl_c_stops_every_bot_and_keeps_only_whole_matches(tmp_path: Path, bot_pids: BotPids) -> None:
    out = tmp_path / "out"
    proc = start_cellarena(
        "tournament", "rezzo",
        "--bot", f"a={RAW} delay:20",
        "--bot", f"b={RAW} delay:20",
        "--bot", f"c={RAW} delay:20",
        "--max-ticks", "3000",
        "--out", str(out),
        "--jobs", "2",
        env=bot_pids.env,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while len(bot_pids.running()) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(bot_pids.running()) >= 4, "two matches should be running"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "every bot process was stopped" in err and "run the same command again" in err
    assert bot_pids.wait_until_dead(5.0) == []
    con = sqlite3.connect(out / "results.sqlite")
    assert con.execute("SELECT COUNT(*) FROM matches").fetchone() == (0,)
    assert con.execute("SELECT COUNT(*) FROM seats").fetchone() == (0,)


def test_bots_dir_with_a_broken_entry_names_it(tmp_path: Path) -> None:
    (tmp_path / "fine.py").write_text("print('a bot')\n")
    (tmp_path / "other.py").write_text("print('a bot')\n")
    (tmp_path / "mybot").mkdir()
    proc = refused("tournament", "rezzo", "--bots-dir", str(tmp_path), "--out", str(tmp_path / "o"))
    assert f"{tmp_path / 'mybot'}: a bot folder needs a bot.toml" in proc.stderr
    assert "--bots-dir" in proc.stderr


def test_bad_arguments_get_clear_errors(tmp_path: Path) -> None:
    """In this process (what is tested is the command's answer, as in test_command_args.py), the
    first tournament too; the tests around it run the command as a process."""
    both = refused("tournament", "rezzo", "--bot", f"a={RAW}", "--bots-dir", str(tmp_path))
    assert "no bots found" in both.stderr
    one = refused("tournament", "rezzo", "--bot", f"a={RAW}")
    assert "at least 2 bots" in one.stderr
    quad = refused("tournament", "rezzo", "--bot", f"a={RAW}", "--bot", f"b={RAW}", "--maps", "quad")
    assert "map quad has 4 seats but only 2 bots" in quad.stderr
    nomap = refused("tournament", "rezzo", "--bot", f"a={RAW}", "--bot", f"b={RAW}", "--maps", "nowhere")
    assert "nowhere" in nomap.stderr and "--map" in nomap.stderr
    out_bad = refused("tournament", "rezzo", "--bot", f"a={RAW}", "--bot", f"b={RAW}", "--out", "/proc/no")
    assert "--out: /proc/no: cannot create this folder" in out_bad.stderr
    unknown = refused("tournament", "chess")
    assert "No such command 'chess'" in unknown.stderr
    # Another tournament's results folder is refused, not mixed.
    out = tmp_path / "out"
    first = run_here(
        "tournament", "rezzo", "--bot", f"a={RAW}", "--bot", f"b={RAW}", "--max-ticks", "5", "--out", str(out)
    )
    assert first.returncode == 0, first.stderr
    second = refused(
        "tournament", "rezzo", "--bot", f"a={RAW}", "--bot", f"b={RAW}", "--max-ticks", "6", "--out", str(out)
    )
    assert "holds a different tournament" in second.stderr


def test_with_strict_a_bot_for_another_game_stops_the_tournament_and_is_named(
    tmp_path: Path, bot_pids: BotPids
) -> None:
    out = tmp_path / "out"
    proc = cellarena(
        "tournament", "rezzo", "--bot", f"good={RAW} random", "--bot", f"stray={RAW} game:cata",
        "--max-ticks", "20", "--out", str(out), "--jobs", "1", "--strict", env=bot_pids.env,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "bot 'stray'" in proc.stderr and "asked to play 'cata'" in proc.stderr
    assert "this tournament plays 'rezzo'" in proc.stderr and "keep only rezzo bots" in proc.stderr
    assert read_matches(out / "results.sqlite") == 0  # a refused bot's match is not a result
    # One match started: with --strict none waits in the worker's queue, to be started for nothing.
    assert len(bot_pids.listed()) == 2 and bot_pids.wait_until_dead() == []


# Real time: asserts six matches of 1 s connect timeouts take under 60 s of real time.
@pytest.mark.realtime
def test_with_strict_bots_that_never_say_hello_forfeit_by_the_connect_timeout_and_are_named(
    tmp_path: Path, bot_pids: BotPids
) -> None:
    """Issue 38: --strict stops only for a bot of another game. One that holds its connection and
    says nothing, and one that never touches it, each forfeit every match at the connect timeout as
    ``never_connected``, named in the results and among the problems; nothing stalls."""
    out = tmp_path / "out"
    started = time.monotonic()
    proc = cellarena(
        "tournament", "rezzo", "--bot", f"good={RAW} random", "--bot", f"mute={RAW} nohello",
        "--bot", f"ghost={RAW} noconnect", "--maps", "duel", "--max-ticks", "5",
        "--connect-timeout", "1", "--out", str(out), "--jobs", "2", "--strict", "--json",
        env=bot_pids.env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started < 60  # six matches, each waits its 1 s deadline at most
    result = json.loads(proc.stdout)
    assert result["played"] == result["total"] == 6
    detail = "its connection was open, but no hello came within 1 s"
    for bad in ("mute", "ghost"):
        assert result["problems"][bad] == [{"reason": f"never took its seat: {detail}", "matches": 4}]
    code, results = invoke("results", str(out), "--json")  # in this process: a second of imports less
    assert code == 0, results
    seats = [s for m in json.loads(results)["matches"] for s in m["seats"] if s["bot"] != "good"]
    assert len(seats) == 8 and all(s["forfeit"] for s in seats)
    assert all(s["cause"]["cause"] == "never_connected" and s["cause"]["detail"] == detail for s in seats)
    assert bot_pids.wait_until_dead() == []


def test_a_bad_bot_forfeits_its_matches_and_the_others_go_on(tmp_path: Path) -> None:
    out = tmp_path / "out"
    # In this process: see `run_here` on tournaments. The tests above run it as a process.
    proc = run_here(
        "tournament", "rezzo", "--bot", f"good={RAW} random", "--bot", f"other={RAW} random",
        "--bot", f"stray={RAW} game:cata", "--bot", "ghost=/nonexistent/bot",
        "--maps", "duel", "--max-ticks", "5", "--out", str(out), "--jobs", "2", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["played"] == result["total"] == 12  # every pair, both seat orders
    problems = result["problems"]
    assert problems["stray"] == [{"reason": "asked to play 'cata', not 'rezzo'", "matches": 6}]
    [ghost] = problems["ghost"]
    assert ghost["matches"] == 6 and "cannot start '/nonexistent/bot'" in ghost["reason"]
    assert set(problems) == {"stray", "ghost"}
    # Its table, from the results alone (every match is recorded): in this process.
    code, output = invoke(
        "tournament", "rezzo", "--bot", f"good={RAW} random", "--bot", f"other={RAW} random",
        "--bot", f"stray={RAW} game:cata", "--bot", "ghost=/nonexistent/bot",
        "--maps", "duel", "--max-ticks", "5", "--out", str(out),
    )  # fmt: skip
    assert code == 0, output
    said = " ".join(output.split())  # rich wraps long lines
    assert "stray forfeited or crashed in 6 matches: asked to play 'cata', not 'rezzo'" in said


def test_the_standings_fit_80_columns_with_whole_names(capsys: pytest.CaptureFixture[str]) -> None:
    """Eleven columns and whole bot names in an 80-column terminal (rich's width off a terminal):
    each name and each heading printed whole, no line wider than 80."""
    from types import SimpleNamespace

    from cellarena.arena.cli.tournament import _print_standings

    names = ["random_walker", "trained", "js_random"]
    row = dict(rating=-0.58, mu=19.31, sigma=6.63, wins=0, draws=4, losses=4, late_rate=0.0, invalid_rate=0.0)
    report = SimpleNamespace(
        already=0,
        played=6,
        total=6,
        standings=[SimpleNamespace(bot=n, crashes=0, **row) for n in names],
        forfeits={},
        notes={},
        failed=[],
    )
    _print_standings(report, Path("runs"))
    out = capsys.readouterr().out
    assert all(len(line) <= 80 for line in out.splitlines()), out
    heading = out.splitlines()[2].split()
    assert heading == ["rank", "bot", "rating", "mu", "sigma", "W", "D", "L", "late", "invalid", "crashes"], (
        out
    )
    assert all(f" {n} " in out for n in names) and "…" not in out, out
