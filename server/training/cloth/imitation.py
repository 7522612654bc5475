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

from types import ModuleType
from typing import Any

from cellarena.sdk.games import cloth
from cellarena.server.games.cloth.engine import ClothConfig, ClothEngine
from cellarena.server.training.imitation import InProcessMatch, Samples, SeatRows
from cellarena.server.training.trainer import GameImitation


def batch_samples(view: cloth.View, units: list[Any], net: ModuleType) -> list[tuple[Any, Any, Any, int]]:
    """(cells, extra, mask, label) of each unit of one batch the game placed, then the batch's end."""
    out: list[tuple[Any, Any, Any, int]] = []
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
    found: list[tuple[Any, Any, Any, int]] = []
    for request, units in rows.requests():
        if isinstance(units, list):
            with rows.readable(ValueError):
                found += batch_samples(cloth.make_view(request), units, net)
    return Samples.from_rows(net, found)


def answer(bot: Any, tick: int, request: dict[str, Any]) -> Any:
    """What an SDK bot answers to a request, as the engine takes it."""
    view = cloth.make_view({"tick": tick, **request})
    return cloth.units_for(bot.on_tick(view), view.max_units)


def _engine(config: dict[str, Any]) -> ClothEngine:
    """The neutral cells of ``config["seed"]`` (the evaluation numbers its matches)."""
    seed = int(config.pop("seed", 0))
    return ClothEngine.new(config, seed=seed)


#: One match in-process (`InProcessMatch`).
play = InProcessMatch("cloth", _engine, answer)


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
