"""Colorblocks's PettingZoo AEC environment: PettingZoo's API and render tests, a whole match against the
engine, and an action number for every action of the game."""

from __future__ import annotations

from typing import Any

import numpy as np
from env_checks import assert_render_is_the_watch_picture, assert_rewards_follow_the_result
from pettingzoo.test import api_test

from cellarena.sdk.games.colorblocks import KINDS, ActionCodes, Block, Board, Unit, View
from cellarena.server.env.games.colorblocks import ColorblocksAECEnv
from cellarena.server.games.colorblocks.engine import ColorblocksEngine
from cellarena.server.games.colorblocks.render import render_engine

SMALL = {"max_turns": 12}


def test_api() -> None:
    api_test(ColorblocksAECEnv(SMALL), num_cycles=60)


def test_a_match_plays_as_the_engine_and_rewards_the_winner() -> None:
    env = ColorblocksAECEnv(SMALL)
    env.reset(seed=2)
    twin = ColorblocksEngine.new(SMALL, 2)
    rng = np.random.default_rng(0)
    totals = dict.fromkeys(env.possible_agents, 0.0)
    turn: list = []
    for agent in env.agent_iter():
        _, reward, term, trunc, info = env.last()
        totals[agent] += reward
        if term or trunc:
            env.step(None)
            continue
        assert list(twin.pending()) == [int(agent.split("_")[1])]
        legal = np.flatnonzero(info["action_mask"])
        action = int(rng.choice(legal))
        if action == env.end_turn:
            twin.apply({int(agent.split("_")[1]): turn})
            turn = []
        else:
            turn.append(env.actions(agent)[action])
        env.step(action)
    result = twin.result()
    assert result is not None and twin.state_hash() == env.engine.state_hash()
    assert_rewards_follow_the_result(result, totals)


def test_render_shows_the_watch_picture() -> None:
    assert_render_is_the_watch_picture(
        lambda render_mode=None: ColorblocksAECEnv(SMALL, render_mode=render_mode), render_engine
    )


def _every_action(view: View) -> list[list[Any]]:
    """What a turn could hold now: the SDK's legal actions, a capture's "dead" form, every spawn."""
    legal = view.legal_actions()
    dead = [[*a, "dead"] for a in legal if a[0] == "move" and view.board.blocks[a[3], a[2]] in (5, 6)]
    return legal + dead + [["spawn", kind] for kind in KINDS]


def test_every_action_of_the_game_has_its_own_number() -> None:
    """Through a match of random turns, each position's actions (each unit's moves and acts, both
    guards' moves, destructs, spawns) map one to one onto numbers below the end of the turn."""
    env = ColorblocksAECEnv({"max_turns": 30})
    env.reset(seed=3)
    rng = np.random.default_rng(4)
    seen: set[str] = set()
    for agent in env.agent_iter():
        _, _, term, trunc, info = env.last()
        if term or trunc:
            env.step(None)
            continue
        codes = env.actions(agent)
        want = _every_action(env.view(agent))
        assert sorted(map(repr, codes.values())) == sorted(map(repr, want))
        assert all(0 <= n < env.end_turn for n in codes) and info["action_mask"].sum() == len(codes) + 1
        seen |= {repr(a[0]) + str(len(a)) for a in codes.values()}
        legal = np.flatnonzero(info["action_mask"])
        env.step(int(rng.choice(legal)) if rng.random() < 0.9 else env.end_turn)
    # Placements, unit moves and acts, destructs, guard placements and moves, spawns all came up.
    assert {"'place'3", "'move'4", "'act'4", "'destruct'2", "'guard'3", "'guard'5", "'spawn'2"} <= seen


def test_a_capture_can_leave_a_dead_block() -> None:
    """On a map with two objectives, a unit next to one may capture it either way; the "dead" one wins
    nothing yet and leaves a dead block, as the rules say."""
    board = Board.from_blocks(
        np.array(
            [[2, 6, 2, 6, 2], [0, 8, 0, 0, 0], [0, 0, 0, 0, 0], [0, 7, 0, 0, 0], [1, 5, 1, 1, 1]], np.uint8
        )
    )
    board.units[0] = Unit(0, 0, "fighter", 3, 1)  # red, below blue's objective at (3, 0)
    view = View(board, seat=0, turn=3, max_turns=100, refused=[])
    codes = ActionCodes(5, 5).legal(view)
    captures = {n: a for n, a in codes.items() if a[0] == "move" and (a[2], a[3]) == (3, 0)}
    assert sorted(map(repr, captures.values())) == ["['move', 0, 3, 0, 'dead']", "['move', 0, 3, 0]"]
    dead = next(a for a in captures.values() if len(a) == 5)
    assert view.play(dead) and board.blocks[0, 3] == Block.DEAD and board.winner is None
