"""The example bots: valid, legal and deterministic moves on any view, and real play.

Each bot is loaded from its file, as `python example_bots/rezzo/<name>.py` would run it. Offline checks feed
`on_tick` random and hand-made views; the play checks drive the bots through the real Rezzo engine,
and one match goes through `cellarena match`, server and sockets included.
"""

from __future__ import annotations

import ast
import json
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from bot_files import EXAMPLE_BOTS, example_bot, load_example_bot
from cellarena_cli import cellarena
from hypothesis import given, settings
from hypothesis import strategies as st

from cellarena.sdk import Bot, Cell, MatchInfo, Move, View, Viewport, moves_for

REZZO_BOTS = EXAMPLE_BOTS / "rezzo"
BOTS = {"random_walker": "RandomWalker", "builder": "Builder", "raider": "Raider"}
CODES = [0, 1, 2, 3, 4, 7] + [k + o for k in (8, 16, 24, 32) for o in range(4)]


MODULES = {name: load_example_bot("rezzo", name) for name in BOTS}


def make(name: str) -> Bot:
    return getattr(MODULES[name], BOTS[name])()


def random_viewport(rng: random.Random, blank: float = 0.5) -> Viewport:
    cells = bytearray(0 if rng.random() < blank else rng.choice(CODES) for _ in range(169))
    cells[12 * 13 + 6] = Cell.AGENT
    return Viewport(bytes(cells), bytes(rng.randrange(4) for _ in range(169)))


def check_legal(answer: object, view: View) -> list[int]:
    """The answer is well-formed, and never walks into a non-blank cell or hits an unhittable one."""
    codes = moves_for(answer, len(view.agents))
    for code, viewport in zip(codes, view.viewports, strict=True):
        if code in (Move.ADVANCE, Move.BUILD):
            assert viewport.can_advance(), (Move(code), str(viewport))
        if code == Move.HIT:
            assert viewport.can_hit(), str(viewport)
    return codes


# ======================================================================================== any view
@pytest.mark.parametrize("name", BOTS)
def test_bots_answer_random_views_with_legal_moves(name: str) -> None:
    rng = random.Random(name)
    for agents in (1, 2, 3):
        bot = make(name)  # no on_start: offline tests call on_tick directly
        for t in range(1, 60):
            view = View(
                t, list(range(agents)), [random_viewport(rng, rng.random()) for _ in range(agents)], 66
            )
            check_legal(bot.on_tick(view), view)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(sorted(BOTS)),
    st.lists(st.binary(min_size=169, max_size=169), min_size=1, max_size=3),
    st.integers(1, 3000),
)
def test_bots_never_raise_on_any_bytes(name: str, planes: list[bytes], tick: int) -> None:
    """Even codes no server sends (5, 6, 40..255) must not crash a bot."""
    view = View(tick, list(range(len(planes))), [Viewport(p, bytes(169)) for p in planes], 66)
    moves_for(make(name).on_tick(view), len(planes))


@pytest.mark.parametrize("name", BOTS)
def test_bots_are_deterministic(name: str) -> None:
    rng = random.Random(7)
    views = [View(t, [0, 1], [random_viewport(rng), random_viewport(rng)], 66) for t in range(1, 60)]
    first, second = make(name), make(name)
    assert [first.on_tick(v) for v in views] == [second.on_tick(v) for v in views]


# ======================================================================================== crafted views
def test_raider_hits_an_enemy_flag_right_ahead() -> None:
    for owner in (1, 2, 3):
        view = View(5, [0], [Viewport.from_cells({(1, 0): Cell.FLAG + owner})])
        assert make("raider").on_tick(view) == [Move.HIT]


def test_raider_hits_wire_next_to_an_enemy_geyser() -> None:
    view = View.from_ascii(
        """
        . . . . . . . . . . . . .
        . . . . . . . . . . . . .
        . . . . . . . . . . . . .
        . . . . . . . . . . . . .
        . . . . . . . . . . . . .
        . . . . . . . . . . . . .
        . . . . . . . . . . . . .
        . . . . . . . . . . . . .
        . . . . . . . . . . . . .
        . . . . . . . . . . . . .
        . . . . . . G1 . . . . . .
        . . . . . . #  . . . . . .
        . . . . . . A0 . . . . . .
        """
    )
    assert make("raider").on_tick(view) == [Move.HIT]


def test_raider_leaves_its_own_harmless_flag_alone() -> None:
    view = View(5, [0], [Viewport.from_cells({(1, 0): Cell.FLAG})])  # ours, no base anywhere near
    assert make("raider").on_tick(view) != [Move.HIT]


def test_random_walker_only_walks_where_it_can() -> None:
    bot = make("random_walker")
    walled = View(1, [0], [Viewport.from_cells({(1, 0): Cell.OOB})])
    wired = View(1, [0], [Viewport.from_cells({(1, 0): Cell.CONDUCTOR})])
    seen: Counter[int] = Counter()
    for t in range(1, 200):
        walled.tick = wired.tick = t
        assert check_legal(bot.on_tick(walled), walled)[0] in (Move.LEFT, Move.RIGHT)
        seen[check_legal(bot.on_tick(wired), wired)[0]] += 1
    assert seen[Move.HIT] > 0 and seen[Move.LEFT] > 0 and seen[Move.RIGHT] > 0


# ======================================================================================== real play
def play(
    bots: list[Bot],
    ticks: int,
    map_name: str = "duel",
    board: str | None = None,
    until: Callable[[Any], bool] = lambda _engine: False,
) -> tuple[Any, Counter[tuple[int, int]]]:
    """Drive ``bots`` (one per seat) through the engine; returns the engine and (seat, move) counts."""
    from cellarena.server.games.rezzo.engine import RezzoEngine

    if board is None:
        engine = RezzoEngine.new({"map": map_name, "max_ticks": ticks})
    else:
        from rezzo_boards import engine_from

        engine = engine_from(board, players=len(bots), max_ticks=ticks)
    for seat, bot in enumerate(bots):
        bot.info = MatchInfo(seat=seat, players=engine.players, names=("a", "b"), game="rezzo")
        bot.on_start(bot.info)
    moves: Counter[tuple[int, int]] = Counter()
    illegal: Counter[int] = Counter()
    while engine.result() is None and not until(engine):
        actions = {}
        for seat, request in engine.pending().items():
            view = View.from_message({"type": "tick", **request})
            codes = check_legal(bots[seat].on_tick(view), view)
            moves.update((seat, c) for c in codes)
            actions[seat] = codes
        illegal.update(engine.apply(actions).illegal)
    engine.illegal_total = illegal
    return engine, moves


@pytest.mark.parametrize("name", BOTS)
def test_each_bot_really_plays_a_match(name: str) -> None:
    """On the duel map against the random walker: it moves, turns, and builds or hits."""
    engine, moves = play([make(name), make("random_walker")], 400)
    used = {m for (seat, m), n in moves.items() if seat == 0 and n}
    assert {Move.ADVANCE, Move.LEFT, Move.RIGHT} <= used
    if name in ("random_walker", "builder"):
        assert moves[(0, Move.BUILD)] >= 10
    if name in ("random_walker", "raider"):
        assert moves[(0, Move.HIT)] >= 4
    # Moves that are legal by their view stay legal, unless another agent took the cell first.
    assert engine.illegal_total[0] <= 4


def test_builder_lays_wire_by_the_enemy_geyser() -> None:
    """Across the whole duel map, the builder finds the enemy's geyser and tangles wire round it."""
    from cellarena.server.games.rezzo.maps import load_map

    before = load_map("duel").cells
    engine, moves = play([make("builder"), Bot()], 250)
    after = engine.cells()
    geyser = next(zip(*((before == Cell.GEYSER + 1).nonzero()), strict=True))
    gy, gx = int(geyser[0]), int(geyser[1])
    near = (slice(gy - 3, gy + 4), slice(gx - 3, gx + 4))
    wire = (Cell.CONDUCTOR, Cell.ELECTRON, Cell.TAIL, Cell.PHOTON)
    new_wire = sum(
        int(a in wire and b == Cell.BLANK)
        for a, b in zip(after[near].ravel(), before[near].ravel(), strict=True)
    )
    assert moves[(0, Move.BUILD)] >= 20
    assert new_wire >= 8


@pytest.mark.parametrize("map_name", ["duel", "field"])
@pytest.mark.parametrize("seat", [0, 1])
def test_builder_traps_an_idle_enemy_into_a_loss(map_name: str, seat: int) -> None:
    """Where the trap's layout is, the builder drives the enemy's flags into a base: a win, not a draw."""
    bots = [Bot(), Bot()]
    bots[seat] = make("builder")
    engine, _ = play(bots, 400, map_name)
    result = engine.result()
    assert result.winner == seat and result.ticks < 300, result


def test_raider_cuts_its_way_to_an_enemy_flag() -> None:
    """Five cells ahead lies an enemy flag behind nothing: the raider walks up and blanks it."""
    board = "\n".join(
        [
            "B1 . . . . . . . . .",
            ". . . . . . . . . .",
            ". . . . F1 . . . . .",
            ". . . . . . . . . .",
            ". . . . . . . . . .",
            ". . . . . . . . . .",
            ". . . . . . . . . .",
            ". . . . A0 . . . . .",
            ". . . . . . . . . .",
            "B0 . . . . . . . . A1",
        ]
    )
    engine, moves = play([make("raider"), Bot()], 30, board=board)
    assert moves[(0, Move.HIT)] >= 4
    assert engine.cells()[2, 4] == Cell.BLANK


def test_raider_defends_against_its_own_flag_by_a_base() -> None:
    """Its own flag two cells from a base: the raider hits that one first."""
    board = "\n".join(
        [
            ". . . . . . . . . .",
            ". . B0 . F0 . . . . .",
            ". . . . . . . F1 . .",
            ". . . . . . . . . .",
            ". . . . A0 . . . . .",
            ". . . . . . . . . .",
            "B1 . . . . . . . . A1",
        ]
    )
    engine, _ = play([make("raider"), Bot()], 30, board=board, until=lambda e: e.cells()[1, 4] == Cell.BLANK)
    assert engine.cells()[1, 4] == Cell.BLANK  # our flag is gone
    assert engine.cells()[2, 7] == Cell.FLAG + 1 and engine.damage()[2, 7] == 0  # the enemy's is untouched


# ======================================================================================== programs
@pytest.mark.parametrize("name", BOTS)
def test_bots_import_only_the_sdk_and_the_standard_library(name: str) -> None:
    tree = ast.parse((REZZO_BOTS / f"{name}.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert (
                node.module == "__future__"
                or node.module in sys.stdlib_module_names
                or (node.module or "").startswith("cellarena.sdk")
            ), node.module
        elif isinstance(node, ast.Import):
            assert all(a.name.split(".")[0] in sys.stdlib_module_names for a in node.names)


@pytest.mark.parametrize("name", BOTS)
def test_bots_are_standalone_programs(name: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(REZZO_BOTS / f"{name}.py"), "--help"],
        capture_output=True,
        text=True,
        cwd="/",
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "--port" in proc.stdout and "CELLARENA_" in proc.stdout


def test_bots_play_through_cellarena_match(tmp_path: Path) -> None:
    """The whole path: `cellarena match` starts a server and the bot processes, which connect and play."""
    bots = [f"{name}={example_bot('rezzo', name)}" for name in ("builder", "raider")]
    proc = cellarena(
        *("match", "rezzo", "--fast", "--max-ticks", "60", "--json", "--log-dir", str(tmp_path)),
        *(arg for bot in bots for arg in ("--bot", bot)),
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["ticks"] == 60 and set(summary["ranks"]) == {"builder", "raider"}
    assert summary["invalid"] == {"builder": 0, "raider": 0} and summary["forfeits"] == []
    for name in ("builder", "raider"):
        log = (tmp_path / f"{name}.log").read_text()
        assert "after 60 ticks" in log and "Traceback" not in log
