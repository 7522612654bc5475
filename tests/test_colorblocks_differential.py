"""The SDK's colour change (the per-placement scan and the vectorised gain map) against the reference."""

from __future__ import annotations

import numpy as np
from colorblocks_reference import reference_color_change, reference_gains
from hypothesis import given, settings
from hypothesis import strategies as st

from cellarena.sdk.games.colorblocks import Block, Board, color_change, placement_gains

# Weighted towards neutral and colour blocks, where the interesting runs are.
CODES = [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 4, 5, 6, 7, 8]


@st.composite
def boards(draw: st.DrawFn) -> Board:
    h = draw(st.integers(1, 12))
    w = draw(st.integers(1, 12))
    cells = draw(st.lists(st.sampled_from(CODES), min_size=h * w, max_size=h * w))
    guard_cells = draw(st.lists(st.sampled_from([-1] * 8 + [0, 1]), min_size=h * w, max_size=h * w))
    blocks = np.array(cells, np.uint8).reshape(h, w)
    guards = np.array(guard_cells, np.int8).reshape(h, w)
    # A guard only ever stands on a neutral or colour block.
    guards[~np.isin(blocks, [Block.NEUTRAL, Block.RED, Block.BLUE])] = -1
    return Board(blocks, guards)


@settings(max_examples=150, deadline=None)
@given(boards(), st.integers(0, 1))
def test_gain_map_matches_reference(board: Board, seat: int) -> None:
    want = reference_gains(board.blocks.tolist(), board.guards.tolist(), seat)
    got = placement_gains(board.blocks, board.guards, seat)
    assert got.tolist() == want


@settings(max_examples=150, deadline=None)
@given(boards(), st.integers(0, 1), st.data())
def test_scan_matches_reference(board: Board, seat: int, data: st.DataObject) -> None:
    x = data.draw(st.integers(0, board.width - 1))
    y = data.draw(st.integers(0, board.height - 1))
    want = reference_color_change(board.blocks.tolist(), board.guards.tolist(), x, y, seat)
    got = color_change(board, x, y, seat)
    assert len(got) == len(set(got))
    assert set(got) == want
