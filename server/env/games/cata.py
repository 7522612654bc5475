"""C.A.T.A. as a PettingZoo `AECEnv`: each single move is one step of the seat whose move it is.

The observation is built from the seat's request as its bot receives it: the SDK's `View.from_message`
of the server's tick message, then the SDK's `observation` (`cellarena.sdk.games.cata`), which a trained
bot calls on its own `View` too: the board's cells, the 32 rule entries, both healths in hit points, then
turn, move, moves left, blocked, meditated, opponent meditated and seat. Action ``a`` is the move
``[a // 32, a % 32]`` (code, index: `docs/games/cata.md`), so every move of the game has an action;
``infos[agent]["action_mask"]`` marks the legal ones (the SDK's `action_mask`). A finished match gives +1
to the winner, -1 to the loser, 0 in a draw. ``render_mode="ansi"`` makes `render` return the picture
`cellarena match --watch` draws. Needs the ``[rl]`` extra.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from rich.text import Text

from cellarena.sdk.games.cata import (
    ACTIONS,
    OBSERVATION_EXTRA,
    RULE_SIZE,
    START_HP,
    View,
    action_mask,
    action_move,
)
from cellarena.sdk.games.cata import observation as view_array
from cellarena.server.env.turns import TurnAECEnv
from cellarena.server.games.cata.engine import CataEngine
from cellarena.server.games.cata.render import render

RULE = RULE_SIZE
EXTRA = OBSERVATION_EXTRA
__all__ = ["ACTIONS", "EXTRA", "RULE", "CataAECEnv", "action_mask", "view_array"]


class CataAECEnv(TurnAECEnv):
    """One C.A.T.A. match (its options, e.g. ``{"size": 32, "max_turns": 40}``)."""

    metadata: dict[str, Any] = {**TurnAECEnv.metadata, "name": "cellarena_cata_v0"}  # noqa: RUF012

    def __init__(self, config: dict[str, Any] | None = None, render_mode: str | None = None) -> None:
        public = CataEngine.new(dict(config or {}), 0).public_config()
        size = int(public["size"])
        # Health starts at START_HP and only falls; the turn counts up to max_turns.
        high = float(max(START_HP, int(public["max_turns"])))
        obs = spaces.Box(0.0, high, (size * size + RULE + EXTRA,), np.float32)
        super().__init__(config, obs, spaces.Discrete(ACTIONS), render_mode)

    def picture(self) -> Text:
        return render(self.engine)

    def new_engine(self, seed: int) -> CataEngine:
        return CataEngine.new(self.config, seed)

    def observation(self, message: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        view = View.from_message(message)
        return view_array(view), action_mask(view)

    def answer(self, action: int, message: dict[str, Any]) -> Any:
        return list(action_move(action))
