"""C.A.T.A.'s part of `cellarena train` (`cellarena.server.training.trainer`): a seat's rows as samples,
and one match in-process.

A seat is asked for one move at a time, so each row with an observation is one sample: the request
read by the SDK's `View` (the rule and the healths are only in the msgpack, so the trainer reads it),
the bot folder's ``policy.observe`` for the inputs, and the move the game applied, ``(kind, index)``,
as the action ``kind * 32 + index`` (`cellarena.sdk.games.cata.ACTIONS`).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from cellarena.sdk.games import cata
from cellarena.server.games.cata.engine import CataEngine
from cellarena.server.training.imitation import InProcessMatch, Samples, SeatRows, request_samples
from cellarena.server.training.trainer import GameImitation


def _action(move: Any) -> int | None:
    """The action of a replay's move ``[kind, index]``; None for anything else (no move)."""
    if not isinstance(move, list) or len(move) != 2 or not all(isinstance(v, int) for v in move):
        return None
    kind, index = move
    if kind not in cata.Act._value2member_map_ or not 0 <= index < cata.RULE_SIZE:
        return None
    return int(kind) * cata.RULE_SIZE + int(index)


def seat_samples(rows: SeatRows, net: ModuleType) -> Samples:
    """One seat's samples: each request it was sent, labelled with the move the game applied."""
    return request_samples(rows, net, cata.make_view, _action)


def answer(bot: Any, tick: int, request: dict[str, Any]) -> Any:
    """What an SDK bot answers to a request, as the engine takes it."""
    return cata.move_for(bot.on_tick(cata.make_view({"tick": tick, **request})))


#: One match in-process (`InProcessMatch`).
play = InProcessMatch("cata", CataEngine.new, answer)


def _move_name(action: int) -> str:
    """The report counts moves by kind: strike, block, meditate, pass."""
    return cata.Act(cata.action_move(action)[0]).name.lower()


#: What `cellarena train cata` needs of C.A.T.A. (found by `cellarena.server.cli.imitate`).
IMITATION = GameImitation(
    game="cata",
    seat_samples=seat_samples,
    play=play,
    opponents={"random_legal": "RandomLegal", "lookahead": "Lookahead"},
    move_name=_move_name,
    against="random_legal,lookahead",
    match_options={
        "size": (32, "The evaluation's board size."),
        "max_turns": (60, "The evaluation's turn cap."),
    },
    messages=True,
)
