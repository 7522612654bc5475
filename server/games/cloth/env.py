"""Cloth of Gold as a PettingZoo `AECEnv`: each placement batch is one step of the seat placing now.

The observation is the seat's request as its bot receives it (the SDK's `View.from_message`): the
board's cell codes and the territory, a (2, H, W) uint8 array (`view_array`). Action ``a`` places one
unit at (a % W, a // W); ``infos[agent]["action_mask"]`` marks the legal cells (`View.legal`). Batches
of more than one unit are not offered as actions. A finished match gives +1 to the winner, -1 to the
loser, 0 in a draw. Needs the ``[rl]`` extra.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from cellarena.sdk.games.cloth import View
from cellarena.server.env.turns import TurnAECEnv
from cellarena.server.games.cloth.engine import ClothEngine


def view_array(view: View) -> np.ndarray:
    """A view as its observation: board codes and territory. The env and a trained bot both use this."""
    return np.stack([np.asarray(view.board, np.uint8), np.asarray(view.territory, np.uint8)])


class ClothAECEnv(TurnAECEnv):
    """One Cloth of Gold match (its options, e.g. ``{"width": 16, "height": 16, "max_rounds": 4}``)."""

    metadata: dict[str, Any] = {"name": "cellarena_cloth_v0", "render_modes": [], "is_parallelizable": False}  # noqa: RUF012

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        cfg = ClothEngine.new(dict(config or {}), 0).public_config()
        self.width, self.height = int(cfg["width"]), int(cfg["height"])
        obs = spaces.Box(0, 255, (2, self.height, self.width), np.uint8)
        super().__init__(config, obs, spaces.Discrete(self.width * self.height))

    def new_engine(self, seed: int) -> ClothEngine:
        return ClothEngine.new(self.config, seed)

    def observation(self, message: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        view = View.from_message(message)
        return view_array(view), view.legal().reshape(-1).astype(np.int8)

    def answer(self, action: int, message: dict[str, Any]) -> Any:
        return [[action % self.width, action // self.width]]
