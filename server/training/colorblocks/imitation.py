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

from types import ModuleType
from typing import Any

from cellarena.sdk.games import colorblocks
from cellarena.server.games.colorblocks.engine import ColorblocksEngine
from cellarena.server.training.imitation import InProcessMatch, Samples, SeatRows
from cellarena.server.training.trainer import GameImitation


def _key(action: Any) -> tuple[Any, ...]:
    return tuple(action) if isinstance(action, list | tuple) else (action,)


def turn_samples(
    view: colorblocks.View, actions: list[Any], net: ModuleType
) -> list[tuple[Any, Any, Any, int]]:
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
    found: list[tuple[Any, Any, Any, int]] = []
    for request, actions in rows.requests():
        if isinstance(actions, list):
            with rows.readable(ValueError, colorblocks.Refused):
                found += turn_samples(colorblocks.make_view(request), actions, net)
    return Samples.from_rows(net, found)


def answer(bot: Any, tick: int, request: dict[str, Any]) -> Any:
    """What an SDK bot answers to a request, as the engine takes it."""
    return colorblocks.actions_of(bot.on_tick(colorblocks.make_view({"tick": tick, **request})))


#: One match in-process (`InProcessMatch`).
play = InProcessMatch("colorblocks", ColorblocksEngine.new, answer)


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
