"""Cloth of Gold as a PettingZoo `AECEnv`: a placement batch is built one unit per step, then sent.

The observation is the seat's request as its bot receives it (the SDK's `View.from_message`), with the
units chosen so far for this batch placed on it by the SDK's own `place`, made an array by the SDK's
`observation` (`cellarena.sdk.games.cloth`), which a trained bot calls on its own `View` too: the
board's cell codes and the territory, (2, H, W) uint8. Action ``a < W * H`` adds a unit at
(a % W, a // W) to the batch; action ``W * H`` (`end`), or any action not legal now, sends the batch.
``infos[agent]["action_mask"]`` marks the legal cells (the SDK's `legal_cells` on the board as the
batch so far left it) and, once the batch holds a unit, the end; after ``max_units`` units only the end
is legal. So every batch of legal units can be played, in any order. A finished match gives +1 to the
winner, -1 to the loser, 0 in a draw. ``render_mode="ansi"`` makes `render` return the picture
`cellarena match --watch` draws. Needs the ``[rl]`` extra.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from rich.text import Text

from cellarena.sdk.games.cloth import View, legal_cells, place, territory_plane
from cellarena.sdk.games.cloth import observation as view_array
from cellarena.server.env.turns import PartsAECEnv, agent_name
from cellarena.server.games.cloth.engine import ClothEngine
from cellarena.server.games.cloth.render import render

__all__ = ["ClothAECEnv", "view_array"]


class ClothAECEnv(PartsAECEnv):
    """One Cloth of Gold match (its options, e.g. ``{"width": 16, "height": 16, "max_rounds": 4}``)."""

    metadata: dict[str, Any] = {**PartsAECEnv.metadata, "name": "cellarena_cloth_v0"}  # noqa: RUF012
    empty_ok = False  # an empty batch is refused as a whole

    def __init__(self, config: dict[str, Any] | None = None, render_mode: str | None = None) -> None:
        cfg = ClothEngine.new(dict(config or {}), 0).public_config()
        self.width, self.height = int(cfg["width"]), int(cfg["height"])
        self.end = self.width * self.height
        self.max_parts = int(cfg["max_units"])
        self._views: dict[str, View] = {}
        obs = spaces.Box(0, 255, (2, self.height, self.width), np.uint8)
        super().__init__(config, obs, spaces.Discrete(self.end + 1), render_mode)

    def view(self, agent: str) -> View:
        """The SDK `View` the agent's observation was made from (this batch's units placed on it)."""
        return self._views[agent]

    def picture(self) -> Text:
        return render(self.engine)

    def new_engine(self, seed: int) -> ClothEngine:
        return ClothEngine.new(self.config, seed)

    def begin(self, message: dict[str, Any]) -> str:
        view = View.from_message(message)
        agent = agent_name(view.me - 1)
        self._views[agent] = view
        return agent

    def parts(self, agent: str) -> dict[int, Any]:
        view = self._views[agent]
        cells = np.flatnonzero(legal_cells(view.board, view.me, view.first))
        return {int(a): [int(a) % self.width, int(a) // self.width] for a in cells}

    def add(self, agent: str, part: Any) -> None:
        view = self._views[agent]
        placed, _ = place(view.board, [part], view.me, view.first)
        if placed:
            view.first = False
            view.territory = territory_plane(view.board)

    def array(self, agent: str) -> np.ndarray:
        return view_array(self._views[agent])
