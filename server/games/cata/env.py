"""C.A.T.A. as a PettingZoo `AECEnv`: each single move is one step of the seat whose move it is.

The observation is built from the seat's request as its bot receives it (the SDK's `View.from_message`
of the server's tick message), flattened by `view_array`: the board's cells, the 32 rule entries, both
healths in hit points, then turn, move, moves left, blocked, meditated, opponent meditated and seat.
Action ``a`` is the move ``[a // 32, a % 32]`` (code, index: `docs/games/cata.md`); ``infos[agent]
["action_mask"]`` marks the legal ones. A finished match gives +1 to the winner, -1 to the loser, 0 in
a draw. Needs the ``[rl]`` extra.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from cellarena.sdk.games.cata import View
from cellarena.server.env.turns import TurnAECEnv
from cellarena.server.games.cata.engine import CataEngine

RULE = 32
ACTIONS = 4 * RULE
EXTRA = 9  # healths (2), turn, move, moves left, blocked, meditated, opponent meditated, seat


def view_array(view: View) -> np.ndarray:
    """A view as its observation vector (float32). The env and a trained bot both use this."""
    head = np.asarray(view.board, np.float32).reshape(-1)
    hp = [h / view.cells_per_hp for h in view.health]
    flags = [view.turn, view.move, view.moves_left, view.blocked, view.meditated, view.opponent_meditated]
    tail = np.asarray([*hp, *flags, view.seat], np.float32)
    return np.concatenate([head, np.asarray(view.rule, np.float32), tail])


def action_mask(view: View) -> np.ndarray:
    """1 for each action that is a legal move of this view."""
    mask = np.zeros(ACTIONS, np.int8)
    for code, index in view.legal_moves():
        mask[code * RULE + index] = 1
    return mask


class CataAECEnv(TurnAECEnv):
    """One C.A.T.A. match (its options, e.g. ``{"size": 32, "max_turns": 40}``)."""

    metadata: dict[str, Any] = {"name": "cellarena_cata_v0", "render_modes": [], "is_parallelizable": False}  # noqa: RUF012

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        size = int(CataEngine.new(dict(config or {}), 0).public_config()["size"])
        obs = spaces.Box(0.0, np.inf, (size * size + RULE + EXTRA,), np.float32)
        super().__init__(config, obs, spaces.Discrete(ACTIONS))

    def new_engine(self, seed: int) -> CataEngine:
        return CataEngine.new(self.config, seed)

    def observation(self, message: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        view = View.from_message(message)
        return view_array(view), action_mask(view)

    def answer(self, action: int, message: dict[str, Any]) -> Any:
        return [action // RULE, action % RULE]
