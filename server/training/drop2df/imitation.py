"""drop2df's part of `cellarena train` (`cellarena.server.training.trainer`): a seat's rows as samples,
and one match in-process.

Every seat answers every turn, so each row with an observation is one sample (a pass included): the
request read by the SDK's `View` (the turn and the turns are only in the msgpack, so the trainer
reads it), the bot folder's ``policy.observe`` for the inputs, and the ops the game applied as the
SDK's `ActionCodes` number them for the policy's row length (0 passes, ``a < cells`` edits cell
``a``, above an edit and a token in either order).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from cellarena.sdk.games import drop2df
from cellarena.server.games.drop2df.engine import Drop2dfConfig, Drop2dfEngine
from cellarena.server.training.imitation import InProcessMatch, Samples, SeatRows, request_samples
from cellarena.server.training.trainer import GameImitation


def action_of(ops: Any, codes: drop2df.ActionCodes) -> int | None:
    """The action of a replay's ops (at most one edit and one token, in either order); None for
    anything else (the network has no action for it)."""
    decoded = drop2df.decode_ops(ops)
    if decoded is None or len(decoded) > 2:
        return None
    edits = [op for op in decoded if isinstance(op, int)]
    tokens = [op for op in decoded if not isinstance(op, int)]
    if len(edits) > 1 or len(tokens) > 1:
        return None
    edit = edits[0] if edits else 0
    if not 0 <= edit < codes.cells:
        return None
    if not tokens:
        return edit
    face, cell = tokens[0]
    if face not in drop2df.FACES or not 0 <= cell < codes.cells:
        return None
    return codes.action(edit, face, cell, token_first=bool(edits) and decoded[0] is tokens[0])


def seat_samples(rows: SeatRows, net: ModuleType) -> Samples:
    """One seat's samples: each request it was sent, labelled with the ops the game applied."""
    codes = drop2df.ActionCodes(net.CROP)
    return request_samples(
        rows, net, drop2df.make_view, lambda ops: action_of([] if ops is None else ops, codes)
    )


def answer(bot: Any, tick: int, request: dict[str, Any]) -> Any:
    """What an SDK bot answers to a request, as the engine takes it."""
    return drop2df.moves_for(bot.on_tick(drop2df.make_view({"tick": tick, **request})))


def _engine(config: dict[str, Any]) -> Drop2dfEngine:
    """Two seats on the board of ``config["seed"]`` (the evaluation numbers its matches)."""
    seed = int(config.pop("seed", 0))
    return Drop2dfEngine.new({**config, "players": 2}, seed=seed)


#: One match in-process (`InProcessMatch`).
play = InProcessMatch("drop2df", _engine, answer)


#: The cells of a row of the default length, which the template's network reads (the report's names).
DEFAULT_CELLS = Drop2dfConfig().length + 3


def _move_name(action: int) -> str:
    """The report counts moves by kind: pass, edit, token (with an edit or not), as numbered for rows
    of the default length."""
    return "pass" if action == 0 else "edit" if action < DEFAULT_CELLS else "token"


#: What `cellarena train drop2df` needs of drop2df (found by `cellarena.server.cli.imitate`).
IMITATION = GameImitation(
    game="drop2df",
    seat_samples=seat_samples,
    play=play,
    opponents={"passer": "Passer", "planner": "Planner"},
    move_name=_move_name,
    against="passer,planner",
    match_options={"turns": (30, "The evaluation's number of turns.")},
    messages=True,
    seeded=True,
)
