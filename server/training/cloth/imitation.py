"""Cloth of Gold's part of `cellarena train` (`cellarena.server.training.trainer`): a seat's rows as
samples, and one match in-process.

A batch is several units, so a batch is several samples, as the training environment builds one
(`cellarena.server.env.games.cloth`): the request read by the SDK's `View` (the first-unit flag and
the batch's size are only in the msgpack, so the trainer reads it), then each unit the seat sent, in
order, labelled with its cell ``y * width + x`` and placed on the View's board by the SDK's `place`
before the next; and last the end of the batch (``width * height``). A unit the game refused was
not placed, so it is no sample.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any

import numpy as np

from cellarena.sdk import MatchInfo
from cellarena.sdk.games import cloth
from cellarena.server.games.cloth.engine import ClothConfig, ClothEngine
from cellarena.server.training.imitation import ImitationError, Samples, SeatRows
from cellarena.server.training.trainer import GameImitation


def batch_samples(view: cloth.View, units: list[Any], net: ModuleType) -> list[tuple[Any, ...]]:
    """(cells, extra, mask, label) of each unit of one batch the game placed, then the batch's end."""
    out = []
    placed = 0
    for unit in units[: view.max_units]:
        c, e = net.observe(view, placed)
        mask = net.legal(view, placed)
        done, _ = cloth.place(view.board, [unit], view.me, view.first)
        if not done:  # refused: not placed in the game either
            continue
        x, y = done[0]
        out.append((c, e, mask, y * view.width + x))
        placed += 1
        view.first = False
        view.territory = cloth.territory_plane(view.board)
    c, e = net.observe(view, placed)
    mask = net.legal(view, placed)
    mask[net.END] = True  # the batch ended here, whatever the mask says
    out.append((c, e, mask, net.END))
    return out


def seat_samples(rows: SeatRows, net: ModuleType) -> Samples:
    """One seat's samples: each unit of each batch it placed, and each batch's end."""
    found: list[tuple[Any, ...]] = []
    for tick, message, units in zip(rows.ticks, rows.observations, rows.actions, strict=True):
        if message is None or not isinstance(units, list):
            continue
        try:
            found += batch_samples(cloth.make_view({"tick": tick, **message}), units, net)
        except ValueError as exc:
            raise ImitationError(
                f"match {rows.match}, seat {rows.seat}: observation not readable ({exc})"
            ) from None
    if not found:
        return Samples(
            np.zeros((0, net.CROP), np.uint8), np.zeros((0, net.EXTRA), np.float32),
            np.zeros((0, net.MOVES), bool), np.zeros(0, np.int64),
        )  # fmt: skip
    cells, extras, masks, labels = zip(*found, strict=True)
    return Samples(np.array(cells, np.uint8), np.array(extras, np.float32), np.array(masks, bool),
                   np.array(labels, np.int64))  # fmt: skip


def play(
    bot: ModuleType, policy: Any, opponent: type[Any], seat: int, config: Mapping[str, Any]
) -> int | None:
    """One match in-process on the neutral cells of ``config["seed"]`` (the evaluation numbers its
    matches): the bot folder's ``bot.py`` (its ``Trained`` class, playing ``policy``) in ``seat``
    against an instance of ``opponent``; the winner's seat, or None for a draw."""
    options = dict(config)
    seed = int(options.pop("seed", 0))
    mine = bot.Trained(policy)
    bots = [mine, opponent()] if seat == 0 else [opponent(), mine]
    engine = ClothEngine.new(options, seed=seed)
    for s, b in enumerate(bots):
        b.info = MatchInfo(seat=s, players=2, names=("a", "b"), game="cloth")
        b.on_start(b.info)
    while engine.result() is None:
        moves = {}
        for s, req in engine.pending().items():
            view = cloth.make_view({"tick": engine.tick, **req})
            moves[s] = cloth.units_for(bots[s].on_tick(view), view.max_units)
        engine.apply(moves)
    result = engine.result()
    assert result is not None
    return result.winner


#: The end of a batch on a board of the default size, which the template's network reads (the report's
#: names).
DEFAULT_END = ClothConfig().width * ClothConfig().height


def _move_name(action: int) -> str:
    """The report counts units and ends of batches (as numbered for the default board)."""
    return "end" if action == DEFAULT_END else "unit"


#: What `cellarena train cloth` needs of Cloth of Gold (found by `cellarena.server.cli.imitate`).
IMITATION = GameImitation(
    game="cloth",
    seat_samples=seat_samples,
    play=play,
    opponents={"random_placer": "RandomPlacer", "planner": "Planner"},
    move_name=_move_name,
    against="random_placer,planner",
    match_options={
        "max_rounds": (20, "The evaluation's round cap."),
        "generations": (168, "The evaluation's generations after each round's placements."),
    },
    messages=True,
    seeded=True,
)
