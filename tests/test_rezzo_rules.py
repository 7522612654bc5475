"""One scenario per Rezzo resolution (rulebook "2. Rezzo", resolutions 1-17), on hand-drawn boards.

Board pictures use the legend of `rezzo_boards` ('.' blank, '#' wire, '@' electron, '~' tail, '*' photon,
B/G/F/A + owner for base, geyser, flag and agent, an arrow for an agent's facing, ':d' for damage).
Pure-CA scenarios are checked against both the engine and the slow reference, so each expectation
here also vouches for the reference used by the differential tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rezzo_boards import agent_at, cells_of, engine_from, parse_board, positions, render
from rezzo_reference import reference_step

from cellarena.sdk.games.rezzo import VIEW_AGENT_COL, VIEW_AGENT_ROW, Cell, Facing, Move
from cellarena.server.games.rezzo.engine import RezzoEngine
from cellarena.server.games.rezzo.maps import builtin_maps, load_map

# A small point-symmetric map in the map-file format (docs/games/rezzo.md, "Maps"): bases A/B, geysers
# a/b three cells (Chebyshev) from the nearest base, agents 0/1 facing N/S, one wire in the middle.
TINY_MAP = """rezzo-map 1
name: Tiny
players: 2
agents: 1
facing: N S
---
....B....
....1....
.b.......
....#....
.......a.
....0....
....A....
"""
TINY_WORLD = """
    .  .  .  .  B1 .  .  .  .
    .  .  .  .  A1 .  .  .  .
    .  G1 .  .  .  .  .  .  .
    .  .  .  .  #  .  .  .  .
    .  .  .  .  .  .  .  G0 .
    .  .  .  .  A0 .  .  .  .
    .  .  .  .  B0 .  .  .  .
"""

ADV, BUILD, HIT, LEFT, RIGHT, NOOP = Move.ADVANCE, Move.BUILD, Move.HIT, Move.LEFT, Move.RIGHT, Move.NOOP
FRONT_ROW = VIEW_AGENT_ROW - 1


def assert_world(engine: RezzoEngine, picture: str) -> None:
    """The engine's cells and damage equal the picture (agents' facings are not compared)."""
    want = parse_board(picture)
    got_cells, got_damage = engine.cells(), engine.damage()
    assert np.array_equal(got_cells, want.cells) and np.array_equal(got_damage, want.damage), (
        f"\nwant:\n{render(want.cells, want.damage)}\ngot:\n{render(got_cells, got_damage)}"
    )


def expect_ca(
    before: str,
    *after: str,
    players: int = 2,
    losers: tuple[list[int], ...] | None = None,
    own_base_counts: bool = True,
    torus: bool = False,
) -> RezzoEngine:
    """Idle ticks from ``before`` must give the ``after`` pictures in turn, in the engine and the reference.

    ``losers`` optionally gives the losers of each tick. Returns the engine, for further checks.
    """
    board = parse_board(before)
    engine = engine_from(board, players, own_base_counts=own_base_counts, torus=torus)
    cells, damage = board.cells, board.damage
    for i, picture in enumerate(after):
        want = parse_board(picture)
        ref_cells, damage, ref_losers = reference_step(
            cells, damage, players, own_base_counts=own_base_counts, torus=torus
        )
        assert np.array_equal(ref_cells, want.cells) and np.array_equal(damage, want.damage), (
            f"reference, tick {i + 1}:\nwant:\n{picture}\ngot:\n{render(ref_cells, damage)}"
        )
        cells = ref_cells
        events = engine.apply({})
        assert_world(engine, picture)
        if losers is not None:
            assert ref_losers == losers[i], f"reference losers at tick {i + 1}"
            assert sorted(events.losers) == losers[i], f"engine losers at tick {i + 1}"
    return engine


# ------------------------------------------------------------------------------ 1. flags next to bases


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param("B0 F0 .\n. . .", ". # .\n. . .", id="own-base-orthogonal"),
        pytest.param("B0 . .\n. F0:2 .", ". . .\n. #:2 .", id="own-base-diagonal"),
    ],
)
def test_r01_flag_next_to_own_base_loses(before: str, after: str) -> None:
    # The base goes blank and the flag becomes wire (the loss conversion); player 1 is left and wins.
    engine = expect_ca(before, after, losers=([0],))
    result = engine.result()
    assert result is not None and result.winner == 1


@pytest.mark.parametrize("before", ["B0 F0 .\n. . .", "B0 . .\n. F0:2 ."])
def test_r01_own_base_does_not_count_in_the_variant(before: str) -> None:
    engine = expect_ca(before, before, before, losers=([], []), own_base_counts=False)
    assert engine.result() is None


@pytest.mark.parametrize("own_base_counts", [True, False])
def test_r01_flag_next_to_enemy_base_loses_in_both_variants(own_base_counts: bool) -> None:
    expect_ca(
        "B1 F0 .",
        "B1 # .",
        losers=([0],),
        own_base_counts=own_base_counts,
    )


# ------------------------------------------------------------------------------ 2. when the loss is checked


def test_r02_loss_is_judged_on_the_old_state_and_the_flag_still_transitions() -> None:
    # The flag sees an electron, so it turns into wire in this very transition; its owner loses anyway.
    expect_ca(
        "B1 F0:1 @ #",
        "B1 #:1 ~ @",
        losers=([0],),
    )


def test_r02_flag_made_this_tick_loses_only_next_tick() -> None:
    # The photon becomes a flag next to an enemy base: no flag existed at state t, so no loss yet.
    expect_ca(
        "G0 * B1",
        "G0 F0 B1",
        ". # B1",
        losers=([], [0]),
    )


def test_r02_every_qualifying_player_loses_in_the_same_tick() -> None:
    engine = expect_ca(
        "B0 F1 . F0 B1 . G2",
        ". # . # . . G2",
        players=3,
        losers=([0, 1],),
    )
    assert engine.result() is not None and engine.result().winner == 2


# ------------------------------------------------------------------------------ 3. applying a loss


def test_r03_loss_converts_every_owned_kind_on_the_new_state() -> None:
    before = """
        B0  F0:2  .   A0>  .
        .   .     .   .    .
        G0  *:1   .   A1<  G1
        .   .     .   .    .
        B1  .     .   A2   G2
    """
    # The photon beside G0 becomes p0's flag in this transition and is converted with the rest.
    after = """
        .   #:2   .   .    .
        .   .     .   .    .
        .   #:1   .   A1   G1
        .   .     .   .    .
        B1  .     .   A2   G2
    """
    engine = expect_ca(before, after, players=3, losers=([0],))
    assert not agent_at(engine, 0, 0).alive
    assert agent_at(engine, 1, 0).alive and agent_at(engine, 2, 0).alive
    # The loser's agent is gone before the next agent phase: no request for seat 0, and its moves do nothing.
    pending = engine.pending()
    assert 0 not in pending and sorted(pending) == [1, 2]
    events = engine.apply({0: [ADV]})
    assert events.losers == []
    assert_world(engine, after)
    assert engine.result() is None


# ------------------------------------------------------------------------------ 4. photon ownership


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param("F0 * F1", "F0 # F1", id="two-owners-flags"),
        pytest.param("G0 * G1", "G0 # G1", id="two-owners-geysers"),
        pytest.param("G2 * F1", "G2 # F1", id="geyser-and-flag-of-two-owners"),
        pytest.param("F1 * .", "F1 F1 .", id="one-flag"),
        pytest.param("F0 * G0", "F0 F0 G0", id="flag-and-geyser-same-owner"),
        pytest.param(". * .", ". # .", id="no-owner"),
        pytest.param("F0 *:3 .", "F0 F0:3 .", id="damage-kept-as-flag"),
        pytest.param("F0 *:2 F1", "F0 #:2 F1", id="damage-kept-as-wire"),
        # Agents and bases have owners but do not vote.
        pytest.param("A1 * F0\nB1 . .", "A1 F0 F0\nB1 . .", id="agents-and-bases-ignored"),
        # Owners are read at state t: the flag of 1 turns to wire now, but still makes the photon mixed.
        pytest.param("@ F1 * F0", "~ # # F0", id="owners-at-state-t"),
        pytest.param("G0 .\n. *\n. .", "G0 .\n. F0\n. .", id="diagonal-geyser"),
    ],
)
def test_r04_photon_becomes_flag_only_with_a_single_owner_around(before: str, after: str) -> None:
    expect_ca(before, after, players=3)


# ------------------------------------------------------------------------------ 5. electron -> photon


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param("G0 @ ~", "G0 * #", id="geyser-and-tail"),
        pytest.param("G1 @ ~", "G1 * #", id="owner-does-not-matter"),
        pytest.param("F1 @ ~", "# * #", id="flag-and-tail"),
        pytest.param("G0 .\n. @\n~ .", "G0 .\n. *\n# .", id="diagonal-neighbours"),
        pytest.param("G0 @:2 ~:1", "G0 *:2 #:1", id="damage-rides-along"),
        pytest.param("G0 @ #", "G0 ~ @", id="no-tail"),
        pytest.param(". @ ~", ". ~ #", id="no-flag-or-geyser"),
        pytest.param("B0 @ ~", "B0 ~ #", id="a-base-is-not-a-geyser"),
        pytest.param("A0 @ ~", "A0 ~ #", id="an-agent-is-not-a-geyser"),
    ],
)
def test_r05_electron_with_flag_or_geyser_and_tail_becomes_photon(before: str, after: str) -> None:
    expect_ca(before, after)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param("@ # .", "~ @ .", id="one-electron-fires"),
        pytest.param("@ # @", "~ @ ~", id="two-electrons-fire"),
        pytest.param("@ # @\n. @ .", "~ # ~\n. ~ .", id="three-electrons-do-not"),
        pytest.param("@ @ @\n@ # .", "~ ~ ~\n~ # .", id="four-electrons-do-not"),
        pytest.param("~ # .", "# # .", id="tail-becomes-wire"),
    ],
)
def test_r05_the_rest_of_wireworld(before: str, after: str) -> None:
    expect_ca(before, after)


# ------------------------------------------------------------------------------ 6. agents are not wire


def test_r06_agent_is_not_a_conductor_and_never_changes() -> None:
    # An electron runs along the wire into the agent and dies there; the wire beyond stays quiet.
    expect_ca(
        "~ @ # A0> # #",
        "# ~ @ A0 # #",
        "# # ~ A0 # #",
        "# # # A0 # #",
        "# # # A0 # #",
    )


def test_r06_agent_between_two_electrons_stays_an_agent() -> None:
    expect_ca(
        ". @ .\n. A1 .\n. @ .",
        ". ~ .\n. A1 .\n. ~ .",
    )


# ------------------------------------------------------------------------------ 7. moving agents and the CA


def test_r07_build_leaves_fresh_wire_that_the_next_transition_sees() -> None:
    engine = engine_from(". . . .\n@ A0> . .\n. . . .", 2)
    events = engine.apply({0: [BUILD]})
    assert not events.illegal
    # The CA runs on the world after the moves: the new wire is next to an electron and fires.
    assert_world(engine, ". . . .\n~ @ A0 .\n. . . .")
    assert positions(engine)[(0, 0)] == (2, 1, Facing.E)


def test_r07_advance_leaves_blank() -> None:
    engine = engine_from(". . . .\n@ A0> . .\n. . . .", 2)
    engine.apply({0: [ADV]})
    assert_world(engine, ". . . .\n~ . A0 .\n. . . .")


def test_r07_built_wire_has_no_damage() -> None:
    engine = engine_from("#:3 A0> .", 2)
    engine.apply({0: {0: BUILD}})
    assert_world(engine, "#:3 # A0")


# ------------------------------------------------------------------------------ 8. damage


def test_r08_four_hits_blank_a_wire_and_reset_its_damage() -> None:
    engine = engine_from(". # .\n. A0 .", 2)
    for damage in (1, 2, 3):
        events = engine.apply({0: [HIT]})
        assert not events.illegal
        assert_world(engine, f". #:{damage} .\n. A0 .")
    engine.apply({0: [HIT]})
    assert_world(engine, ". . .\n. A0 .")
    # The blanked cell can be entered, and is a plain blank (the damage does not come back).
    engine.apply({0: [BUILD]})
    assert_world(engine, ". A0 .\n. # .")


@pytest.mark.parametrize(
    ("target", "after"),
    [
        pytest.param("#", "#:1", id="conductor"),
        pytest.param("@", "~:1", id="electron"),
        pytest.param("~", "#:1", id="tail"),
        pytest.param("F0", "F0:1", id="own-flag"),
        pytest.param("F1", "F1:1", id="enemy-flag"),
        pytest.param("#:3", ".", id="fourth-hit-wire"),
        pytest.param("F1:3", ".", id="fourth-hit-flag"),
    ],
)
def test_r08_hit_is_legal_on_wire_electron_tail_and_flag(target: str, after: str) -> None:
    engine = engine_from(f"{target}\nA0", 2)
    events = engine.apply({0: [HIT]})
    assert not events.illegal
    assert_world(engine, f"{after}\nA0")


@pytest.mark.parametrize(
    ("target", "after"),
    [
        pytest.param(".", ".", id="blank"),
        pytest.param("*", "#", id="photon"),
        pytest.param("A1", "A1", id="agent"),
        pytest.param("B1", "B1", id="base"),
        pytest.param("G1", "G1", id="geyser"),
    ],
)
def test_r08_hit_is_illegal_on_everything_else(target: str, after: str) -> None:
    engine = engine_from(f"{target}\nA0", 2)
    events = engine.apply({0: [HIT]})
    assert events.illegal == {0: 1}
    assert_world(engine, f"{after}\nA0")  # no damage anywhere
    assert all(a.alive for a in engine.agents())  # agents cannot be destroyed by hits


def test_r08_damage_persists_through_electron_tail_wire_cycles() -> None:
    expect_ca(
        "@:1 # # #:2 #",
        "~:1 @ # #:2 #",
        "#:1 ~ @ #:2 #",
        "#:1 # ~ @:2 #",
        "#:1 # # ~:2 @",
        "#:1 # # #:2 ~",
        "#:1 # # #:2 #",
    )


def test_r08_damage_persists_from_electron_to_photon_to_flag() -> None:
    expect_ca(
        "G0 @:3 ~",
        "G0 *:3 #",
        "G0 F0:3 #",
    )


def test_r08_damage_persists_through_loss_conversion_and_electron_hits() -> None:
    expect_ca("B0 F0:2 . @ F1:1", ". #:2 . ~ #:1", losers=([0],))


# ------------------------------------------------------------------------------ 9. move order


CONTESTED = """
    .    A0v  .
    A1>  .    A2<
    .    .    .
"""


@pytest.mark.parametrize("tick", range(6))
def test_r09_first_in_the_rotating_order_takes_a_contested_cell(tick: int) -> None:
    engine = engine_from(CONTESTED, 3, tick=tick)
    events = engine.apply({0: [ADV], 1: [ADV], 2: [ADV]})
    first = tick % 3  # the player order starts at player tick mod P
    assert engine.cells()[1, 1] == Cell.AGENT + first
    assert events.illegal == {p: 1 for p in range(3) if p != first}


def test_r09_first_player_rotates_from_tick_to_tick() -> None:
    # Two contests with two agents each: agents 0 fight at tick 0, agents 1 at tick 1.
    engine = engine_from(
        """
        A0> .  A1<  .   .  .
        .   .  .    .   .  .
        .   .  .    A0> .  A1<
        """,
        2,
    )
    events = engine.apply({0: [ADV, NOOP], 1: [ADV, NOOP]})
    assert events.illegal == {1: 1}
    assert engine.cells()[0, 1] == Cell.AGENT + 0
    events = engine.apply({0: [NOOP, ADV], 1: [NOOP, ADV]})
    assert events.illegal == {0: 1}
    assert engine.cells()[2, 4] == Cell.AGENT + 1


@pytest.mark.parametrize(
    ("picture", "tick0_illegal", "tick1_illegal"),
    [
        # p0 leads: at tick 0 it goes first and clears the way; at tick 1 p1 goes first and is blocked.
        pytest.param(". . A0< A1<", {}, {1: 1}, id="p0-in-front"),
        pytest.param(". . A1< A0<", {0: 1}, {}, id="p1-in-front"),
    ],
)
def test_r09_legality_is_checked_against_the_live_world(
    picture: str, tick0_illegal: dict[int, int], tick1_illegal: dict[int, int]
) -> None:
    engine = engine_from(picture, 2)
    assert engine.apply({0: [ADV], 1: [ADV]}).illegal == tick0_illegal
    assert engine.apply({0: [ADV], 1: [ADV]}).illegal == tick1_illegal


def test_r09_all_viewports_show_the_same_world_state() -> None:
    # Every request of a tick is made from W_t; the next tick's requests show every move of this one.
    engine = engine_from(". . A0< A1<", 2)
    before = engine.pending()
    assert before[0]["tick"] == before[1]["tick"] == 0
    codes, _ = engine.viewport(1, 0)
    assert codes[FRONT_ROW, VIEW_AGENT_COL] == Cell.AGENT + 1  # p1 sees p0 (relative owner 1) in front
    engine.apply({0: [ADV], 1: [ADV]})
    after = engine.pending()
    assert after[0]["tick"] == after[1]["tick"] == 1
    row = VIEW_AGENT_ROW * 13
    # p1 (now at x=2, facing W) sees p0 right in front (x=1); p0 (at x=1) sees the edge one further on.
    assert after[1]["cells"][row - 13 + VIEW_AGENT_COL] == Cell.AGENT + 1
    assert after[0]["cells"][row - 13 + VIEW_AGENT_COL] == Cell.BLANK
    assert after[0]["cells"][row - 26 + VIEW_AGENT_COL] == Cell.OOB


# ------------------------------------------------------------------------------ 10. late or missing moves


@pytest.mark.parametrize(
    "actions",
    [
        pytest.param({}, id="no-seat"),
        pytest.param({0: []}, id="empty-list"),
        pytest.param({0: {}}, id="empty-dict"),
        pytest.param({0: [ADV]}, id="short-list"),
        pytest.param({0: {0: ADV}}, id="dict-without-agent-1"),
    ],
)
def test_r10_a_missing_move_is_a_noop_and_not_an_offence(actions: dict[int, Any]) -> None:
    engine = engine_from(". .\nA0 A0\nA1 .", 2)
    events = engine.apply(actions)
    assert agent_at(engine, 0, 1).x == 1 and agent_at(engine, 0, 1).y == 1
    assert agent_at(engine, 0, 1).facing == Facing.N
    assert not events.malformed and not events.illegal


# ------------------------------------------------------------------------------ 11. legal actions


@pytest.mark.parametrize("target", ["#", "@", "~", "*", "F1", "G1", "B1", "A1"])
@pytest.mark.parametrize("move", [ADV, BUILD])
def test_r11_advance_and_build_need_a_blank_front_cell(target: str, move: Move) -> None:
    board = parse_board(f"{target}\nA0")
    engine = engine_from(board, 2)
    events = engine.apply({0: [move]})
    assert events.illegal == {0: 1}
    assert positions(engine)[(0, 0)] == (0, 1, Facing.N)
    assert engine.cells()[1, 0] == Cell.AGENT  # no wire left behind


@pytest.mark.parametrize("move", [ADV, BUILD, HIT])
def test_r11_moves_into_the_world_edge_are_illegal_noops(move: Move) -> None:
    engine = engine_from(". A0 .", 2)
    events = engine.apply({0: [move]})
    assert events.illegal == {0: 1}
    assert_world(engine, ". A0 .")
    assert positions(engine)[(0, 0)] == (1, 0, Facing.N)


def test_r11_turning_and_noop_are_always_legal() -> None:
    engine = engine_from("# # #\n# A0 #\n# # #", 2)
    for move, facing in [(RIGHT, Facing.E), (RIGHT, Facing.S), (NOOP, Facing.S), (LEFT, Facing.E)]:
        events = engine.apply({0: [move]})
        assert not events.illegal and not events.malformed
        assert agent_at(engine, 0, 0).facing == facing


@pytest.mark.parametrize("bad", [6, 7, -1, 255, "1", 2.5, "advance"])
@pytest.mark.parametrize("form", ["list", "dict"])
def test_r11_unknown_move_values_are_malformed_noops(bad: Any, form: str) -> None:
    engine = engine_from(". .\nA0 .", 2)
    before = engine.cells()
    events = engine.apply({0: [bad] if form == "list" else {0: bad}})
    assert events.malformed == {0: 1}
    assert not events.illegal
    assert np.array_equal(engine.cells(), before)
    assert positions(engine)[(0, 0)] == (0, 1, Facing.N)


def test_r11_moves_may_be_a_list_or_a_dict() -> None:
    engine = engine_from(". .\nA0 .", 2)
    engine.apply({0: {0: RIGHT}})
    engine.apply({0: [ADV]})
    assert positions(engine)[(0, 0)] == (1, 1, Facing.E)


# ------------------------------------------------------------------------------ 12. world edges


def test_r12_outside_the_world_counts_as_nothing_but_a_torus_wraps() -> None:
    before = "# . .\n. . .\n. . @"
    expect_ca(before, "# . .\n. . .\n. . ~")
    # On a torus the corner conductor's north-west neighbour is the far corner's electron.
    expect_ca(before, "@ . .\n. . .\n. . ~", torus=True)


def test_r12_edge_cells_fire_on_in_world_electrons_only() -> None:
    # The top-left wire has two electron neighbours inside the world: it fires (OOB is not an electron).
    expect_ca("# @\n@ .", "@ ~\n~ .")


def test_r12_torus_wraps_bases_and_flags() -> None:
    board = "F0 . . .\n. . . .\n. . . B1"
    expect_ca(board, board, losers=([],))
    expect_ca(board, "# . . .\n. . . .\n. . . B1", losers=([0],), torus=True)


def test_r12_torus_is_a_match_option(tmp_path: Path) -> None:
    path = tmp_path / "tiny.txt"
    path.write_text(TINY_MAP)
    # Agent 0 at (4, 5) facing N sees 12 rows ahead: past the top edge of a 7-row world.
    bounded = RezzoEngine.new({"map": str(path)})
    assert Cell.OOB in bounded.pending()[0]["cells"]
    wrapped = RezzoEngine.new({"map": str(path), "torus": True})
    assert Cell.OOB not in wrapped.pending()[0]["cells"]
    codes, _ = wrapped.viewport(0, 0)
    assert codes[6, 6] == Cell.BASE + 0  # 6 ahead of (4, 5) is (4, -1), which wraps to its own base


def test_r12_torus_wraps_movement_and_hits() -> None:
    engine = engine_from(". . .\nA0< . #\n. . .", 2, torus=True)
    events = engine.apply({0: [HIT]})  # the wire across the west edge
    assert not events.illegal
    assert_world(engine, ". . .\nA0 . #:1\n. . .")
    engine.apply({0: [LEFT]})
    engine.apply({0: [BUILD]})  # facing S from (0,1): to (0,2)
    engine.apply({0: [ADV]})  # and across the south edge to (0,0)
    assert_world(engine, "A0 . .\n# . #:1\n. . .")
    assert positions(engine)[(0, 0)] == (0, 0, Facing.S)


# ------------------------------------------------------------------------------ 13. the viewport


def test_r13_front_cell_is_above_the_agent_and_right_turns_cycle_n_e_s_w() -> None:
    # Each neighbour of the agent holds a different (static) state, so the front cell names the facing.
    engine = engine_from(". # .\nA1 A0 F1\n. G1 .", 2)
    front = {
        Facing.N: Cell.CONDUCTOR,
        Facing.E: Cell.FLAG + 1,
        Facing.S: Cell.GEYSER + 1,
        Facing.W: Cell.AGENT + 1,
    }
    facing = Facing.N
    for turn in [RIGHT, RIGHT, RIGHT, RIGHT, LEFT, LEFT]:
        codes, _ = engine.viewport(0, 0)
        assert codes[VIEW_AGENT_ROW, VIEW_AGENT_COL] == Cell.AGENT + 0
        assert codes[FRONT_ROW, VIEW_AGENT_COL] == front[facing], facing.name
        engine.apply({0: [turn]})
        facing = Facing((facing + (1 if turn == RIGHT else -1)) % 4)
        assert agent_at(engine, 0, 0).facing == facing


# ------------------------------------------------------------------------------ 14. owners in the viewport


def test_r14_viewport_owners_are_relative_and_damage_is_visible() -> None:
    engine = engine_from(
        """
        B0  F2:3  G1
        .   A1    .
        """,
        3,
    )
    codes, damage = engine.viewport(1, 0)
    row = codes[FRONT_ROW, VIEW_AGENT_COL - 1 : VIEW_AGENT_COL + 2].tolist()
    # viewer 1: itself 0, player 2 is 1, player 0 is 2
    assert row == [Cell.BASE + 2, Cell.FLAG + 1, Cell.GEYSER + 0]
    assert codes[VIEW_AGENT_ROW, VIEW_AGENT_COL] == Cell.AGENT + 0
    assert damage[FRONT_ROW, VIEW_AGENT_COL] == 3
    assert int(damage.sum()) == 3
    # The frame and cells() keep absolute owners.
    assert engine.cells()[0, 0] == Cell.BASE + 0


# ------------------------------------------------------------------------------ 15. several agents per player


@pytest.mark.parametrize(
    ("picture", "tick", "after"),
    [
        # tick 0 order: p0a0, p1a0, p0a1, p1a1. Each agent's front is freed by the one before it.
        pytest.param(". A0< A1< A0< A1<", 0, "A0 A1 A0 A1 .", id="tick0"),
        # tick 1 order: p1a0, p0a0, p1a1, p0a1.
        pytest.param(". A1< A0< A1< A0<", 1, "A1 A0 A1 A0 .", id="tick1"),
    ],
)
def test_r15_agents_interleave_round_robin(picture: str, tick: int, after: str) -> None:
    engine = engine_from(picture, 2, tick=tick)
    events = engine.apply({0: [ADV, ADV], 1: {0: ADV, 1: ADV}})
    assert not events.illegal  # in any other order someone would find its front cell taken
    assert_world(engine, after)


def test_r15_a_request_per_seat_holds_one_viewport_per_agent() -> None:
    engine = engine_from(". . . .\nA0 A1 A0 A1", 2)
    pending = engine.pending()
    for seat in (0, 1):
        assert pending[seat]["agents"] == [0, 1]
        assert len(pending[seat]["cells"]) == len(pending[seat]["damage"]) == 2 * 169
    engine.apply({0: [NOOP, RIGHT], 1: [RIGHT, NOOP]})
    assert agent_at(engine, 0, 1).facing == Facing.E and agent_at(engine, 1, 0).facing == Facing.E
    assert agent_at(engine, 0, 0).facing == Facing.N and agent_at(engine, 1, 1).facing == Facing.N


# ------------------------------------------------------------------------------ 16. end of the match


def test_r16_last_player_standing_wins_and_losers_rank_by_how_late_they_lost() -> None:
    engine = engine_from(
        """
        B0 F0 . . .
        .  .  . . .
        G1 *  B1 . A2
        """,
        3,
    )
    assert engine.apply({}).losers == [0]
    assert engine.result() is None
    assert engine.apply({}).losers == [1]  # the photon became p1's flag beside B1 at tick 1
    result = engine.result()
    assert result is not None
    assert result.winner == 2 and result.ranks == {2: 1, 1: 2, 0: 3}
    assert result.ticks == engine.tick == 2
    # The match is over: no more requests, and apply() changes nothing.
    assert engine.pending() == {}
    frozen = engine.state_hash()
    engine.apply({2: [ADV]})
    assert engine.state_hash() == frozen


def test_r16_all_remaining_losing_together_is_a_draw() -> None:
    engine = expect_ca("B0 F0 . F1 B1", ". # . # .", losers=([0, 1],))
    result = engine.result()
    assert result is not None and result.winner is None and result.draw
    assert result.ranks == {0: 1, 1: 1}


def test_r16_draw_among_the_last_two_ranks_earlier_losers_below() -> None:
    engine = engine_from(
        """
        B0 F0 . G2 * B2
        .  .  . .  . .
        B1 F1 . G3 * B3
        """,
        4,
    )
    assert engine.apply({}).losers == [0, 1]
    assert engine.result() is None
    assert engine.apply({}).losers == [2, 3]  # both photons became flags beside their bases at tick 1
    result = engine.result()
    assert result is not None and result.winner is None
    # p2 and p3 share first place; p0 and p1 share the place after the two above them.
    assert result.ranks == {2: 1, 3: 1, 0: 3, 1: 3}


def test_r16_tick_cap_is_a_draw_among_survivors() -> None:
    engine = engine_from("B0 F0 . . . . A1 . A2", 3, max_ticks=4)
    offered = []
    while engine.result() is None:
        offered.append(engine.pending()[1]["tick"])
        engine.apply({1: [RIGHT], 2: [LEFT]})
        assert len(offered) <= 10
    # Decision points run up to and including tick max_ticks, then the match ends.
    assert offered == [0, 1, 2, 3, 4]
    result = engine.result()
    assert result.winner is None and result.ticks == 4
    assert result.ranks == {1: 1, 2: 1, 0: 3}
    assert engine.pending() == {}


def test_r16_tick_cap_of_a_new_match_counts_ticks_from_one() -> None:
    engine = RezzoEngine.new({"map": "duel", "max_ticks": 5})
    offered = []
    while engine.result() is None and len(offered) <= 10:
        offered.append(engine.pending()[0]["tick"])
        engine.apply({})
    assert offered == [1, 2, 3, 4, 5]
    result = engine.result()
    assert result.winner is None and result.ranks == {0: 1, 1: 1} and result.reason


# ------------------------------------------------------------------------------ 17. maps


def test_r17_builtin_maps_are_point_symmetric_with_geysers_away_from_bases() -> None:
    names = builtin_maps()
    assert "duel" in names
    for name in names:
        m = load_map(name)
        cells = m.cells
        h, w = cells.shape
        kinds = np.where(cells >= Cell.AGENT, cells & 0xF8, cells)
        assert not np.isin(kinds, [Cell.FLAG, Cell.PHOTON]).any(), f"{name}: flags only arise at geysers"
        # Point symmetry: the states match, and owners map to owners by one fixed pairing of players.
        assert np.array_equal(kinds, kinds[::-1, ::-1]), name
        pairing: dict[int, int] = {}
        for y, x in zip(*np.nonzero(cells >= Cell.AGENT), strict=True):
            mirror = int(cells[h - 1 - y, w - 1 - x]) & 7
            assert pairing.setdefault(int(cells[y, x]) & 7, mirror) == mirror, (name, x, y)
        assert sorted(pairing.values()) == list(range(m.players)), name
        # Mirrored agents face opposite ways.
        starts = {(a.x, a.y): a for a in m.agents}
        for a in m.agents:
            assert starts[(w - 1 - a.x, h - 1 - a.y)].facing == (a.facing + 2) % 4, (name, a)
        # Every player has bases, geysers and K agents; geysers are >= 3 (Chebyshev) from every base.
        bases = [(x, y) for y in range(h) for x in range(w) if kinds[y, x] == Cell.BASE]
        geysers = [(x, y) for y in range(h) for x in range(w) if kinds[y, x] == Cell.GEYSER]
        for gx, gy in geysers:
            assert all(max(abs(gx - bx), abs(gy - by)) >= 3 for bx, by in bases), (name, gx, gy)
        for p in range(m.players):
            assert np.any(cells == Cell.BASE + p) and np.any(cells == Cell.GEYSER + p), (name, p)
            assert sum(a.player == p for a in m.agents) == m.agents_per_player >= 1
        for a in m.agents:
            assert cells[a.y, a.x] == Cell.AGENT + a.player


def test_r17_new_match_starts_after_the_first_transition() -> None:
    from cellarena.server.games.rezzo.maps import load_map

    m = load_map("duel")
    engine = RezzoEngine.new({"map": "duel"})
    assert engine.tick == 1
    assert (engine.width, engine.height, engine.players) == (m.width, m.height, m.players)
    want, _, losers = reference_step(m.cells, np.zeros_like(m.cells), m.players)
    assert losers == []
    assert np.array_equal(engine.cells(), want)
    pending = engine.pending()
    assert sorted(pending) == list(range(m.players))
    for request in pending.values():
        assert request["tick"] == 1
        assert request["agents"] == list(range(m.agents_per_player))
    starts = {(a.player, a.x, a.y, int(a.facing)) for a in m.agents}
    assert {(a.player, a.x, a.y, int(a.facing)) for a in engine.agents()} == starts


def test_r17_a_map_file_gives_bases_geysers_agents_and_facings(tmp_path: Path) -> None:
    path = tmp_path / "tiny.txt"
    path.write_text(TINY_MAP)
    engine = RezzoEngine.new({"map": str(path)})
    assert (engine.players, engine.width, engine.height, engine.tick) == (2, 9, 7, 1)
    assert_world(engine, TINY_WORLD)  # nothing in it moves in the first transition
    assert positions(engine) == {(0, 0): (4, 5, Facing.N), (1, 0): (4, 1, Facing.S)}


def test_r17_cells_of_helper_round_trip() -> None:
    # Guards the picture legend that every scenario above relies on.
    cells = cells_of("B3 G4 F5 A6 . # @ ~ *")
    assert cells.tolist() == [[Cell.BASE + 3, Cell.GEYSER + 4, Cell.FLAG + 5, Cell.AGENT + 6, 0, 1, 2, 3, 4]]
