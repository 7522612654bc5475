"""The games do what docs/games/ says, in the places an independent implementation found them apart.

drop2df: a refused op uses up nothing, so a valid edit (or token) after a refused one still acts.
cloth: the field figures the page quotes are computed here from the engine's own field.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from cellarena.sdk.games import cloth
from cellarena.sdk.games.drop2df import EMPTY, PLUS, parse, step
from cellarena.server.games.drop2df.engine import Drop2dfEngine

DOCS = Path(__file__).resolve().parent.parent / "docs" / "games"
ROW = "[0][@][ ][#][+][-][ ][ ][ ][ ][0]"


def one_turn(ops: list[object], tokens: tuple[int, ...] = ()) -> tuple[Drop2dfEngine, dict[int, int]]:
    engine = Drop2dfEngine.from_row(parse(ROW), {"players": 1, "tokens": bool(tokens)})
    engine.set_tokens(0, tokens)
    events = engine.apply({0: ops})
    return engine, events.illegal


def test_drop2df_doc_says_the_other_ops_still_act() -> None:
    text = (DOCS / "drop2df.md").read_text()
    assert "The other ops of the same answer still act." in text


def test_drop2df_a_refused_edit_does_not_use_up_the_turns_edit() -> None:
    # cell 1 holds @ (refused), cell 11 is out of range (refused), then cell 2 is a valid edit.
    engine, illegal = one_turn([1, 11, 2])
    assert engine.row(0) == step(parse("[0][@][#][#][+][-][ ][ ][ ][ ][0]"))
    assert illegal == {0: 2}
    refused = engine.pending()[0]["refused"]
    assert len(refused) == 2 and "holds [@]" in refused[0] and "out of range" in refused[1]
    # An edit that acted does use up the turn's edit.
    engine, illegal = one_turn([2, 1, 3])
    assert engine.row(0) == step(parse("[0][@][#][#][+][-][ ][ ][ ][ ][0]"))
    assert illegal == {0: 2}
    assert engine.pending()[0]["refused"][1] == "a second edit in one turn"


def test_drop2df_a_refused_token_does_not_use_up_the_turns_token() -> None:
    # [PLUS, 6] cannot change [ ] (refused); [EMPTY, 2] then marks cell 2 with # and acts.
    engine, illegal = one_turn([[PLUS, 6], [EMPTY, 2]], (EMPTY, PLUS))
    assert engine.row(0) == step(parse("[0][@][#][#][+][-][ ][ ][ ][ ][0]"))
    assert illegal == {0: 1}
    assert engine.pending()[0]["tokens"] == [PLUS]
    # A token with a face the seat does not have, then a good one: the good one acts.
    engine, illegal = one_turn([[2, 5], [PLUS, 4]], (EMPTY, PLUS))
    assert engine.row(0) == step(parse("[0][@][ ][#][ ][-][ ][ ][ ][ ][0]"))
    assert illegal == {0: 1} and engine.pending()[0]["tokens"] == [EMPTY]
    # A refused token and a refused edit leave the edit and the token free for later ops.
    engine, illegal = one_turn([[PLUS, 6], 1, [EMPTY, 3], 2], (EMPTY, PLUS))
    assert engine.row(0) == step(parse("[0][@][#][ ][+][-][ ][ ][ ][ ][0]"))
    assert illegal == {0: 2} and engine.pending()[0]["tokens"] == [PLUS]


def _field_between(apart: int) -> np.ndarray:
    board = np.zeros((5, 30), np.uint8)
    board[2, 5] = board[2, 5 + apart] = cloth.A
    return cloth.field(board, cloth.A)[2]


def _exact(d2: float) -> float:
    return 2 * max(0.0, cloth.RADIUS**2 - d2) ** 2 / cloth.THRESHOLD


def test_cloth_field_figures_the_doc_quotes_are_the_engines() -> None:
    text = " ".join((DOCS / "cloth.md").read_text().split())
    lone = np.zeros((13, 13), np.uint8)
    lone[6, 6] = cloth.A
    f = cloth.field(lone, cloth.A)
    m = re.search(r"A lone unit's field is (\d\.\d\d) on its own cell and above 1 on the (\d+) cells", text)
    assert m, "cloth.md no longer quotes a lone unit's field"
    assert m[1] == f"{f[6, 6] / cloth.THRESHOLD:.2f}"
    assert int(m[2]) == int((f > cloth.THRESHOLD).sum())

    m = re.search(r"two units 8 apart in a row have field (\d\.\d\d) on their midpoint \((\d+)/729\)", text)
    assert m, "cloth.md no longer quotes two units 8 apart"
    mid = int(_field_between(8)[5 + 4])
    assert (m[1], int(m[2])) == (f"{mid / cloth.THRESHOLD:.2f}", mid) and mid > cloth.THRESHOLD

    m = re.search(
        r"9 apart they stay two separate squares \((\d\.\d\d) on the two cells nearest the midpoint, "
        r"(\d+)/729; (\d\.\d\d) at the exact midpoint",
        text,
    )
    assert m, "cloth.md no longer quotes two units 9 apart"
    row = _field_between(9)
    near = int(row[5 + 4])
    assert near == int(row[5 + 5]) and near <= cloth.THRESHOLD
    assert (m[1], int(m[2])) == (f"{near / cloth.THRESHOLD:.2f}", near)
    assert m[3] == f"{_exact(4.5**2):.2f}"
    assert m[1] != m[3]  # the figure a reader checks on the board is the nearest cells'
