"""drop2df's part of `cellarena train` (`cellarena.server.training.trainer`): a seat's rows as samples,
and one match in-process.

Every seat answers every turn, so each row with an observation is one sample (a pass included): the
request read by the SDK's `View` (the turn and the turns are only in the msgpack, so the trainer
reads it), the bot folder's ``policy.observe`` for the inputs, and the ops the game applied as the
SDK's `ActionCodes` number them for the policy's row length (0 passes, ``a < cells`` edits cell
``a``, above an edit and a token in either order).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any

import numpy as np

from cellarena.sdk import MatchInfo
from cellarena.sdk.games import drop2df
from cellarena.server.games.drop2df.engine import Drop2dfConfig, Drop2dfEngine
from cellarena.server.training.imitation import ImitationError, Samples, SeatRows
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
    cells, extras, masks, labels = [], [], [], []
    for tick, message, ops in zip(rows.ticks, rows.observations, rows.actions, strict=True):
        label = action_of([] if ops is None else ops, codes)
        if message is None or label is None:
            continue
        try:
            view = drop2df.make_view({"tick": tick, **message})
            c, e = net.observe(view)
        except ValueError as exc:
            raise ImitationError(
                f"match {rows.match}, seat {rows.seat}: observation not readable ({exc})"
            ) from None
        m = net.legal(view)
        m[label] = True  # the move played is a choice even where the mask would not offer it
        cells.append(c)
        extras.append(e)
        masks.append(m)
        labels.append(label)
    if not labels:
        return Samples(
            np.zeros((0, net.CROP), np.uint8), np.zeros((0, net.EXTRA), np.float32),
            np.zeros((0, net.MOVES), bool), np.zeros(0, np.int64),
        )  # fmt: skip
    return Samples(np.array(cells, np.uint8), np.array(extras, np.float32), np.array(masks, bool),
                   np.array(labels, np.int64))  # fmt: skip


def play(
    bot: ModuleType, policy: Any, opponent: type[Any], seat: int, config: Mapping[str, Any]
) -> int | None:
    """One match in-process on the board of ``config["seed"]`` (the evaluation numbers its matches):
    the bot folder's ``bot.py`` (its ``Trained`` class, playing ``policy``) in ``seat`` against an
    instance of ``opponent``; the winner's seat, or None for a draw."""
    options = dict(config)
    seed = int(options.pop("seed", 0))
    mine = bot.Trained(policy)
    bots = [mine, opponent()] if seat == 0 else [opponent(), mine]
    engine = Drop2dfEngine.new({**options, "players": 2}, seed=seed)
    for s, b in enumerate(bots):
        b.info = MatchInfo(seat=s, players=2, names=("a", "b"), game="drop2df")
        b.on_start(b.info)
    while engine.result() is None:
        engine.apply({
            s: drop2df.moves_for(bots[s].on_tick(drop2df.make_view({"tick": engine.tick, **req})))
            for s, req in engine.pending().items()
        })  # fmt: skip
    result = engine.result()
    assert result is not None
    return result.winner


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
