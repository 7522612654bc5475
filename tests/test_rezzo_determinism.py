"""Rezzo is deterministic: equal configs, seeds and moves give equal state hashes, on any instance,
in any process; different histories that reach different states give different hashes."""

from __future__ import annotations

import copy
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from rezzo_boards import engine_from

from cellarena.sdk.games.rezzo import Move
from cellarena.server.games.rezzo.engine import RezzoEngine

TICKS = 500
HERE = Path(__file__).resolve().parent


def random_moves(rng: random.Random, pending: dict[int, dict[str, Any]]) -> dict[int, dict[int, int]]:
    """One seeded-random move per live agent; moving moves are favoured so the world keeps changing."""
    choices = [Move.ADVANCE, Move.ADVANCE, Move.BUILD, Move.LEFT, Move.RIGHT, Move.HIT, Move.NOOP]
    return {
        seat: {k: int(rng.choice(choices)) for k in req["agents"]} for seat, req in sorted(pending.items())
    }


def play(seed: int, ticks: int = TICKS, *, last_tick_turn: bool = False) -> Any:
    """A duel driven by moves from random.Random(seed); optionally agent 0 of the first seat also turns
    right on the very last tick (turning is always legal, so the final states differ)."""
    engine = RezzoEngine.new({"map": "duel"}, seed=seed)
    rng = random.Random(seed)
    for i in range(ticks):
        pending = engine.pending()
        if not pending:
            break
        actions = random_moves(rng, pending)
        if last_tick_turn and i == ticks - 1:
            seat = min(actions)
            actions[seat][0] = Move.RIGHT if actions[seat].get(0) != Move.RIGHT else Move.LEFT
        engine.apply(actions)
    return engine


def test_same_seed_and_moves_give_the_same_hash_after_500_ticks() -> None:
    a, b = play(1234), play(1234)
    assert a.result() is None and a.tick == b.tick == 1 + TICKS  # the duel is still running
    assert a.state_hash() == b.state_hash()
    # The hash stands for the state: the states really are equal, too.
    assert (a.cells() == b.cells()).all() and (a.damage() == b.damage()).all()
    assert [vars(x) for x in a.agents()] == [vars(x) for x in b.agents()]
    assert a.result() == b.result()


def test_different_moves_give_a_different_hash() -> None:
    a, b = play(1234), play(1234, last_tick_turn=True)
    assert a.tick == b.tick
    assert [x.facing for x in a.agents()] != [x.facing for x in b.agents()]
    assert a.state_hash() != b.state_hash()
    assert play(99).state_hash() != a.state_hash()


def test_hash_is_a_stable_hex_string() -> None:
    engine = play(7, ticks=20)
    first = engine.state_hash()
    assert isinstance(first, str) and first and all(ch in "0123456789abcdef" for ch in first)
    assert engine.state_hash() == first  # reading it changes nothing
    engine.pending()
    engine.frame()
    assert engine.state_hash() == first


def test_hash_does_not_depend_on_object_identity() -> None:
    board = "B0 . . # @ ~\n. A0> . . . G0\n. . . . . .\nG1 . . . A1< .\n~ @ # . . B1"
    a, b = engine_from(board, 2), engine_from(board, 2)
    assert a is not b and a.state_hash() == b.state_hash()
    for actions in ({0: [Move.ADVANCE], 1: [Move.BUILD]}, {0: [Move.RIGHT]}, {}):
        a.apply(actions)
        b.apply(actions)
        assert a.state_hash() == b.state_hash()
    assert copy.deepcopy(a).state_hash() == a.state_hash()


def test_equal_states_reached_differently_hash_equal() -> None:
    # Four right turns leave the same state as four no-ops; the CA (an electron loop) runs meanwhile.
    board = "# # # .\n@ . ~ .\n# # # .\n. . . A0\nA1 . . ."
    turned, idle = engine_from(board, 2), engine_from(board, 2)
    for _ in range(4):
        turned.apply({0: [Move.RIGHT]})
        idle.apply({0: [Move.NOOP]})
    assert turned.state_hash() == idle.state_hash()
    turned.apply({0: [Move.RIGHT]})
    idle.apply({})
    assert turned.state_hash() != idle.state_hash()


def test_hash_is_the_same_in_another_process() -> None:
    # A fresh interpreter with a different string-hash seed must agree: no id() or hash() in the digest.
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from test_rezzo_determinism import play; print(play(5, ticks=60).state_hash())"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", script, str(HERE)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    )
    assert out.stdout.strip() == play(5, ticks=60).state_hash()
