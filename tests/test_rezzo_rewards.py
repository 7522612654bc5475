"""The vector environment's shaped reward terms (issue 30, `rewards`): on small constructed boards,
each term moves the reward of the agents it concerns in the direction docs/training.md says, and
leaves the others alone."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from rezzo_boards import engine_from

from cellarena.sdk.games.rezzo import Move
from cellarena.server.training.rezzo.vector_env import REWARD_TERMS, RezzoVectorEnv

# One agent per player: sub-environment 0 is player 0's agent, 1 player 1's.
NOOP, ADVANCE, BUILD, HIT = int(Move.NOOP), int(Move.ADVANCE), int(Move.BUILD), int(Move.HIT)

# Player 0's geyser beside a photon-to-be: the electron (~ is a tail, * an electron) becomes a photon
# and then player 0's flag at (2, 1), beside player 1's base: player 0 is out the tick after.
FLAG_BESIDE_A_BASE = """
. . . . .
. G0 * B1 .
. . ~ . .
A0> . . . A1<
"""
# Player 1's flag, three hits taken, in front of player 0's agent.
FLAG_TO_HIT = """
. F1:3 . #:3 .
. A0^ . A1^ .
"""


def env_on(picture: str, **weights: float) -> RezzoVectorEnv:
    env = RezzoVectorEnv(1, start=engine_from(picture, 2, max_ticks=20), reward_weights=weights)
    env.reset(seed=0)
    return env


def rewards_of(env: RezzoVectorEnv, moves: list[int]) -> list[float]:
    return env.step(np.array(moves))[1].tolist()


def test_every_term_is_listed_and_unknown_ones_are_refused() -> None:
    assert set(REWARD_TERMS) == {
        "outcome",
        "own_flags",
        "enemy_flags",
        "flag_formed",
        "own_flag_destroyed",
        "enemy_flag_destroyed",
        "own_flag_distance",
        "enemy_flag_distance",
        "wire_built",
    }
    with pytest.raises(ValueError, match="unknown reward term 'flags_built'"):
        RezzoVectorEnv(1, {"map": "duel"}, reward_weights={"flags_built": 1.0})


def test_a_flag_formed_pays_its_owner() -> None:
    env = env_on(FLAG_BESIDE_A_BASE, flag_formed=0.5)
    assert rewards_of(env, [NOOP, NOOP]) == [0.5, 0.0]


def test_a_flag_beside_a_base_costs_its_owner_and_pays_the_opponent_by_distance() -> None:
    """The flag forms at distance 1 from player 1's base: player 0 had no flag (distance 5, the
    board's larger side), so its flag came 4 cells nearer to a base that counts against it."""
    env = env_on(FLAG_BESIDE_A_BASE, own_flag_distance=0.25)
    assert rewards_of(env, [NOOP, NOOP]) == [-1.0, 0.0]
    env = env_on(FLAG_BESIDE_A_BASE, enemy_flag_distance=0.25)
    assert rewards_of(env, [NOOP, NOOP]) == [0.0, 1.0]
    # The next step ends the world (player 0 is out): the outcome pays, the distance terms do not.
    _, got, terminated, _, _ = env.step(np.array([NOOP, NOOP]))
    assert got.tolist() == [-1.0, 1.0] and terminated.all()


def test_a_flag_hit_to_pieces_pays_the_hitter_and_costs_the_owner_as_weighed() -> None:
    env = env_on(FLAG_TO_HIT, enemy_flag_destroyed=1.0, own_flag_destroyed=-0.5)
    assert rewards_of(env, [HIT, NOOP]) == [1.0, -0.5]
    assert rewards_of(env, [NOOP, NOOP]) == [0.0, 0.0]  # nothing destroyed: nothing paid


def test_wire_built_pays_for_each_conductor_laid_and_nothing_for_a_refused_build() -> None:
    env = env_on(FLAG_BESIDE_A_BASE, wire_built=0.1)
    got = rewards_of(env, [BUILD, BUILD])  # both step onto blank cells, laying wire behind them
    assert got == pytest.approx([0.1, 0.1])
    env = env_on(FLAG_TO_HIT, wire_built=0.1)
    assert rewards_of(env, [BUILD, ADVANCE]) == [0.0, 0.0]  # player 0 faces its flag: blocked


def test_flag_counts_on_the_board_follow_the_flags() -> None:
    env = env_on(FLAG_BESIDE_A_BASE, own_flags=1.0, enemy_flags=-2.0)
    assert rewards_of(env, [NOOP, NOOP]) == [1.0, -2.0]


def test_event_terms_need_no_events_in_infos() -> None:
    """A term read from events makes the batch make them, but ``infos`` carries them only when asked."""
    env = env_on(FLAG_BESIDE_A_BASE, flag_formed=1.0)
    infos: dict[str, Any] = env.step(np.array([NOOP, NOOP]))[-1]
    assert "events" not in infos
    assert env.worlds.record_events
