"""Colorblocks' part of `cellarena train` (`cellarena.server.training.trainer`): a seat's rows as
samples, and one match in-process.

A turn is a list of actions, so a turn is several samples, as the training environment builds one
(`cellarena.server.env.games.colorblocks`): the request read by the SDK's `View` (units, guards and
the turn are only in the msgpack, so the trainer reads it), then each action the seat sent, in
order, labelled with its number in the SDK's `ActionCodes` and played on the View's board before
the next; and last the end of the turn. An action the game refused did nothing, so it is no sample
and is not played.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any

import numpy as np

from cellarena.sdk import MatchInfo
from cellarena.sdk.games import colorblocks
from cellarena.server.games.colorblocks.engine import ColorblocksEngine
from cellarena.server.training.imitation import ImitationError, Samples, SeatRows
from cellarena.server.training.trainer import GameImitation


def _key(action: Any) -> tuple[Any, ...]:
    return tuple(action) if isinstance(action, list | tuple) else (action,)


def turn_samples(view: colorblocks.View, actions: list[Any], net: ModuleType) -> list[tuple[Any, ...]]:
    """(cells, extra, mask, label) of each action of one turn the game applied, then the turn's end."""
    out = []
    played = 0
    for action in actions:
        if played >= colorblocks.MAX_ACTIONS:
            break
        codes = {_key(a): code for code, a in net.CODES_OF.legal(view).items()}
        code = codes.get(_key(action))
        if code is not None:
            c, e = net.observe(view, played)
            out.append((c, e, net.legal(view, played), code))
        if view.play(action):  # refused: did nothing in the game either
            played += 1
    c, e = net.observe(view, played)
    out.append((c, e, net.legal(view, played), net.CODES_OF.end_turn))
    return out


def seat_samples(rows: SeatRows, net: ModuleType) -> Samples:
    """One seat's samples: each action of each turn it played, and each turn's end."""
    found: list[tuple[Any, ...]] = []
    for tick, message, actions in zip(rows.ticks, rows.observations, rows.actions, strict=True):
        if message is None or not isinstance(actions, list):
            continue
        try:
            view = colorblocks.make_view({"tick": tick, **message})
            found += turn_samples(view, actions, net)
        except (ValueError, colorblocks.Refused) as exc:
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
    """One match in-process: the bot folder's ``bot.py`` (its ``Trained`` class, playing ``policy``) in
    ``seat`` against an instance of ``opponent``; the winner's seat, or None for a draw."""
    mine = bot.Trained(policy)
    bots = [mine, opponent()] if seat == 0 else [opponent(), mine]
    engine = ColorblocksEngine.new(dict(config))
    for s, b in enumerate(bots):
        b.info = MatchInfo(seat=s, players=2, names=("a", "b"), game="colorblocks")
        b.on_start(b.info)
    while engine.result() is None:
        engine.apply({
            s: colorblocks.actions_of(bots[s].on_tick(colorblocks.make_view({"tick": engine.tick, **req})))
            for s, req in engine.pending().items()
        })  # fmt: skip
    result = engine.result()
    assert result is not None
    return result.winner


#: The action numbers' kinds for the classic map's size, which the template's network reads (the
#: report's names).
_CODES = colorblocks.ActionCodes(colorblocks.WIDTH, colorblocks.HEIGHT)
_KINDS = (
    (_CODES.move, "place"), (_CODES.capture_dead, "move"), (_CODES.act, "capture"),
    (_CODES.destruct, "act"), (_CODES.guard, "destruct"), (_CODES.spawn, "guard"),
    (_CODES.end_turn, "spawn"), (_CODES.size, "end_turn"),
)  # fmt: skip


def _move_name(action: int) -> str:
    """The report counts actions by verb (as numbered for the classic map's size)."""
    return next((name for below, name in _KINDS if action < below), "end_turn")


#: What `cellarena train colorblocks` needs of Colorblocks (found by `cellarena.server.cli.imitate`).
IMITATION = GameImitation(
    game="colorblocks",
    seat_samples=seat_samples,
    play=play,
    opponents={"random_legal": "RandomLegal", "greedy": "Greedy"},
    move_name=_move_name,
    against="random_legal,greedy",
    match_options={
        "map": ("classic", "The evaluation's map."),
        "max_turns": (100, "The evaluation's turn cap."),
    },
    messages=True,
)
