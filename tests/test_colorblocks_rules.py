"""Colorblocks rules, one scenario each: colour change, placement, units, guards, capture, spawn, turns.

Boards are drawn as text in the map legend (``.`` neutral, ``R``/``B`` colour, ``T`` true neutral,
``X`` dead, ``1``/``2`` objectives, ``s``/``t`` spawns) plus ``G``/``H``: a guard of red/blue on a
neutral block. Coordinates are (x, y); red is seat 0, blue seat 1.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from cellarena.sdk.games.colorblocks import LEGEND, Block, Board, Refused, Unit

R, B = 0, 1


def board(text: str) -> Board:
    rows = [line.split() for line in text.strip().splitlines()]
    blocks = np.array([[LEGEND.get(ch, Block.NEUTRAL) for ch in row] for row in rows], np.uint8)
    guards = np.array([[{"G": 0, "H": 1}.get(ch, -1) for ch in row] for row in rows], np.int8)
    return Board(blocks, guards)


def add(b: Board, owner: int, kind: str, x: int, y: int) -> Unit:
    unit = Unit(b.next_id, owner, kind, x, y)
    b.units[unit.id] = unit
    b.next_id += 1
    return unit


def row(b: Board, y: int = 0) -> str:
    chars = {v: k for k, v in LEGEND.items()}
    return " ".join(chars[int(c)] for c in b.blocks[y])


def refused(b: Board, seat: int, action: list[Any], why: str) -> None:
    before = (b.blocks.copy(), b.guards.copy(), {k: (u.x, u.y) for k, u in b.units.items()})
    with pytest.raises(Refused, match=why):
        b.play(seat, action)
    assert (b.blocks == before[0]).all() and (b.guards == before[1]).all()
    assert {k: (u.x, u.y) for k, u in b.units.items()} == before[2]


# ---------------------------------------------------------------------------- colour change
@pytest.mark.parametrize(
    ("dx", "dy"), [(1, 0), (-1, 0), (0, 1), (0, -1)], ids=["east", "west", "south", "north"]
)
def test_color_change_in_each_direction(dx: int, dy: int) -> None:
    b = board("\n".join(" ".join("." for _ in range(7)) for _ in range(7)))
    b.blocks[3 + 3 * dy, 3 + 3 * dx] = Block.RED
    b.blocks[3 + 2 * dy, 3 + 2 * dx] = Block.BLUE  # enemy blocks convert too
    b.play(R, ["place", 3, 3])
    for k in range(4):
        assert b.blocks[3 + k * dy, 3 + k * dx] == Block.RED
    assert np.count_nonzero(b.blocks == Block.RED) == 4


def test_changes_in_several_directions_at_once() -> None:
    b = board("""
        . . R . .
        . . . . .
        R B . . R
        . . . . .
        . . B . .
    """)
    b.play(R, ["place", 2, 2])
    assert row(b, 2) == "R R R R R"
    assert b.blocks[1, 2] == Block.RED and b.blocks[3, 2] == Block.NEUTRAL  # south ends on blue, not red


def test_only_up_to_the_nearest_own_block() -> None:
    b = board(". . R . R")
    b.play(R, ["place", 0, 0])
    assert row(b) == "R R R . R"


@pytest.mark.parametrize(
    "blocker", ["edge", "G", "H", "T", "X", "1", "2", "s", "t"], ids=lambda c: f"stopped-by-{c}"
)
def test_each_blocker_stops_the_change(blocker: str) -> None:
    line = ". . B ." if blocker == "edge" else f". B {blocker} . . R"
    refused(board(line), R, ["place", 0, 0], "would convert nothing")
    if blocker != "edge":
        b = board(line)
        b.play(R, ["place", 3, 0])  # beyond the blocker a change still works
        assert b.blocks[0, 4] == Block.RED and b.blocks[0, 1] == Block.BLUE


def test_unguarded_own_block_under_a_guard_is_no_anchor() -> None:
    b = board(". . R")
    b.guards[0, 2] = R
    refused(b, R, ["place", 0, 0], "would convert nothing")


def test_units_do_not_stop_a_change() -> None:
    b = board(". B B R")
    add(b, R, "fighter", 3, 0)  # on the anchor
    b.play(R, ["place", 0, 0])
    assert row(b) == "R R R R"


# ---------------------------------------------------------------------------- placement
def test_placement_that_converts_nothing_is_refused() -> None:
    refused(board(". . . ."), R, ["place", 0, 0], "would convert nothing")
    refused(board(". R . ."), R, ["place", 2, 0], "would convert nothing")


def test_placement_only_on_neutral_or_own_free_block_and_once_per_turn() -> None:
    b = board("B . R . . R")
    refused(b, R, ["place", 0, 0], "place on a neutral or your own block")
    b.play(R, ["place", 2, 0])  # an unoccupied own block may trigger a change
    assert row(b) == "B . R R R R"
    b2 = board("R . . R . . R")
    b2.play(R, ["place", 1, 0])
    refused(b2, R, ["place", 4, 0], "only one colour block")
    b2.begin_turn(R)
    b2.play(R, ["place", 4, 0])
    assert row(b2) == "R R R R R R R"
    b3 = board("R . . R . . R")
    add(b3, R, "paver", 3, 0)
    refused(b3, R, ["place", 3, 0], "has a unit or guard")
    refused(board("R G . R"), R, ["place", 1, 0], "has a unit or guard")


def test_converted_enemy_units_die_unless_shielded() -> None:
    b = board("""
        . B B B R
        . . . . .
    """)
    victim = add(b, B, "fighter", 1, 0)
    b.play(R, ["place", 0, 0])
    assert victim.id not in b.units

    b = board("""
        . B B B R
        . . . . .
    """)
    covered = add(b, B, "fighter", 1, 0)
    add(b, B, "shield", 2, 0)  # the shield itself is not next to a shield: it dies
    b.play(R, ["place", 0, 0])
    assert covered.id in b.units and (covered.x, covered.y) == (1, 0)
    assert [u.kind for u in b.units.values()] == ["fighter"]
    assert b.blocks[0, 1] == Block.RED  # the block converts under the survivor


def test_a_shield_of_either_side_protects() -> None:
    b = board("""
        . B B R
        . R . .
    """)
    unit = add(b, B, "paver", 1, 0)
    add(b, R, "shield", 1, 1)  # the placer's own shield protects the enemy too: it is literal
    b.play(R, ["place", 0, 0])
    assert unit.id in b.units


def test_own_units_on_converted_blocks_live() -> None:
    b = board(". B R")
    mine = add(b, R, "fighter", 1, 0)  # a red unit left standing on blue
    b.play(R, ["place", 0, 0])
    assert mine.id in b.units


# ---------------------------------------------------------------------------- movement
def test_moves_are_straight_over_own_blocks_spawn_and_true_neutral() -> None:
    b = board("R s T R . R B")
    u = add(b, R, "fighter", 0, 0)
    b.play(R, ["move", u.id, 3, 0])
    assert (u.x, u.y) == (3, 0)
    refused(b, R, ["move", u.id, 0, 0], "already moved")
    b.begin_turn(B)  # any begin_turn resets the limits (blue has no spawn here)
    refused(b, R, ["move", u.id, 5, 0], r"cannot pass \(4, 0\)")  # neutral
    b.blocks[0, 4] = Block.RED
    b.play(R, ["move", u.id, 5, 0])
    b.begin_turn(B)
    refused(b, R, ["move", u.id, 6, 0], "cannot pass")  # enemy colour
    refused(b, R, ["move", u.id, 5, 0], "at least one cell")


def test_moves_are_blocked_by_units_guards_and_diagonals() -> None:
    b = board("""
        R R R R
        R R R R
    """)
    u = add(b, R, "paver", 0, 0)
    add(b, B, "fighter", 2, 0)
    refused(b, R, ["move", u.id, 3, 0], "a unit")
    refused(b, R, ["move", u.id, 1, 1], "along a row or column")
    b.guards[1, 0] = B
    refused(b, R, ["move", u.id, 0, 1], "a guard")
    refused(b, R, ["move", 99, 0, 1], "no unit 99")
    refused(b, B, ["move", u.id, 1, 0], "not yours")
    refused(b, R, ["move", u.id, 9, 0], "off the")


# ---------------------------------------------------------------------------- unit actions
def test_fighter_destroys_an_adjacent_unit_of_either_side() -> None:
    b = board("R R R R R")
    f = add(b, R, "fighter", 1, 0)
    enemy = add(b, B, "paver", 2, 0)
    friend = add(b, R, "paver", 0, 0)
    far = add(b, B, "paver", 4, 0)
    refused(b, R, ["act", f.id, 3, 0], "neighbouring cell")
    b.play(R, ["act", f.id, 2, 0])
    assert enemy.id not in b.units
    refused(b, R, ["act", f.id, 0, 0], "already acted")
    b.begin_turn(R)
    b.play(R, ["act", f.id, 0, 0])
    assert friend.id not in b.units and far.id in b.units
    b.begin_turn(R)
    refused(b, R, ["act", f.id, 2, 0], "no unit")


def test_fighter_cannot_destroy_a_shielded_unit() -> None:
    b = board("R R R R")
    f = add(b, R, "fighter", 0, 0)
    add(b, B, "paver", 1, 0)
    add(b, B, "shield", 2, 0)
    refused(b, R, ["act", f.id, 1, 0], "next to a shield")


def test_paver_colours_an_adjacent_free_neutral_or_enemy_block_without_a_change() -> None:
    b = board(". R . B R")
    p = add(b, R, "paver", 1, 0)
    b.play(R, ["act", p.id, 2, 0])
    assert row(b) == ". R R B R"  # no colour change follows, though (3, 0) now sits between reds
    b.begin_turn(R)
    refused(b, R, ["act", p.id, 3, 0], "neighbouring cell")
    b.blocks[0, 0] = Block.RED
    refused(b, R, ["act", p.id, 0, 0], "neutral or enemy block")
    b.blocks[0, 0] = Block.BLUE
    add(b, B, "fighter", 0, 0)
    refused(b, R, ["act", p.id, 0, 0], "has a unit or guard")


def test_cleaner_neutralises_an_adjacent_free_colour_block_of_either_side() -> None:
    b = board("B R R T")
    c = add(b, R, "cleaner", 1, 0)
    b.play(R, ["act", c.id, 0, 0])
    assert row(b) == ". R R T"
    b.begin_turn(R)
    b.play(R, ["act", c.id, 2, 0])
    assert row(b) == ". R . T"
    b.begin_turn(R)
    refused(b, R, ["act", c.id, 0, 0], "turns a colour block neutral")


def test_shooter_hits_two_or_three_away_over_anything() -> None:
    b = board("""
        R X B . B
        . . . . .
        . . . . .
        B . . . .
        . . . . .
    """)
    s = add(b, R, "shooter", 0, 0)
    refused(b, R, ["act", s.id, 1, 0], "2 or 3 away")
    refused(b, R, ["act", s.id, 4, 0], "2 or 3 away")
    refused(b, R, ["act", s.id, 2, 2], "2 or 3 away")
    b.play(R, ["act", s.id, 2, 0])  # over the dead block
    assert b.blocks[0, 2] == Block.RED
    b.begin_turn(R)
    b.play(R, ["act", s.id, 0, 3])
    assert b.blocks[3, 0] == Block.RED


def test_shield_has_no_action_and_any_unit_may_self_destruct() -> None:
    b = board("R R")
    s = add(b, R, "shield", 0, 0)
    refused(b, R, ["act", s.id, 1, 0], "no action")
    b.play(R, ["move", s.id, 1, 0])
    b.play(R, ["destruct", s.id])  # after moving, as its action
    assert not b.units
    f = add(b, R, "fighter", 0, 0)
    add(b, B, "fighter", 1, 0)
    b.play(R, ["act", f.id, 1, 0])
    refused(b, R, ["destruct", f.id], "already acted")


def test_a_unit_may_act_then_move() -> None:
    b = board("R . R R")
    p = add(b, R, "paver", 2, 0)
    b.play(R, ["act", p.id, 1, 0])
    b.play(R, ["move", p.id, 0, 0])
    assert (p.x, p.y) == (0, 0)


# ---------------------------------------------------------------------------- guards
def test_guards_from_reserve_relocation_and_limits() -> None:
    b = board("R . B T X 1 s")
    b.reserves = [1, 2]
    for x, why in (
        (2, "neutral or your own"),
        (3, "TRUE_NEUTRAL"),
        (4, "DEAD"),
        (5, "OBJECTIVE"),
        (6, "SPAWN"),
    ):
        refused(b, R, ["guard", x, 0], why)
    b.play(R, ["guard", 1, 0])
    assert b.guards[0, 1] == R and b.reserves == [0, 2]
    refused(b, R, ["guard", 0, 0, 1, 0], "one guard move per turn")
    b.begin_turn(R)
    refused(b, R, ["guard", 0, 0], "no guard left")
    refused(b, R, ["guard", 0, 0, 2, 0], "no guard of yours")
    refused(b, B, ["guard", 0, 0, 1, 0], "no guard of yours")
    b.play(R, ["guard", 0, 0, 1, 0])
    # The block under a guard returns when it leaves.
    assert b.guards[0, 0] == R and b.guards[0, 1] == -1 and b.blocks[0, 1] == Block.NEUTRAL
    assert b.blocks[0, 0] == Block.RED
    b.begin_turn(R)
    add(b, R, "fighter", 1, 0)
    refused(b, R, ["guard", 1, 0, 0, 0], "has a unit or guard")


def test_guards_stop_changes_and_cannot_be_converted_or_walked_through() -> None:
    b = board(". B H R")
    refused(b, R, ["place", 0, 0], "would convert nothing")
    b = board("R G R")
    u = add(b, R, "fighter", 0, 0)
    refused(b, R, ["move", u.id, 2, 0], "a guard")
    p = add(b, R, "paver", 2, 0)
    refused(b, R, ["act", p.id, 1, 0], "has a unit or guard")


# ---------------------------------------------------------------------------- capture and spawn
def test_capture_from_next_to_the_objective_wins_at_once() -> None:
    b = board("R R 2 B")
    u = add(b, R, "fighter", 0, 0)
    refused(b, R, ["move", u.id, 2, 0], "must be next to the objective")
    b.play(R, ["move", u.id, 1, 0])
    b.begin_turn(R)
    b.play(R, ["move", u.id, 2, 0])
    assert b.winner == R and b.blocks[0, 2] == Block.RED
    refused(b, R, ["place", 3, 0], "the game is over")


def test_with_several_objectives_all_must_fall_and_dead_is_chosen() -> None:
    b = board("2 R 2")
    u = add(b, R, "fighter", 1, 0)
    b.play(R, ["move", u.id, 0, 0, "dead"])
    assert b.winner is None and b.blocks[0, 0] == Block.DEAD
    b.begin_turn(R)
    refused(b, R, ["move", u.id, 1, 0, "dead"], "only a capture")


def test_spawn_at_turn_start_unless_occupied_with_the_chosen_kind() -> None:
    b = board("R s R . t")
    first = b.begin_turn(R)
    assert first is not None and first.kind == "fighter" and (first.x, first.y) == (1, 0)
    b.play(R, ["spawn", "shooter"])
    assert b.begin_turn(R) is None  # the fighter still stands on the spawn
    b.play(R, ["move", first.id, 0, 0])
    second = b.begin_turn(R)
    assert second is not None and second.kind == "shooter"
    refused(b, R, ["spawn", "wizard"], "unknown unit kind")
