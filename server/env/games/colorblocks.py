"""Colorblocks as a PettingZoo `AECEnv`: a turn is built one action per step, then ended by a step.

The observation is the seat's board as its bot sees it: the SDK's `View.from_message` of the server's
tick message, then the SDK's own `View.play` for the actions chosen so far this turn, made an array by
the SDK's `observation` (`cellarena.sdk.games.colorblocks`), which a trained bot calls on its own
`View` too: (4, H, W) uint8, block codes, units, guards, your seat. The actions are the SDK's
`ActionCodes`: every action of the game has a number (placements, moves and captures, captures that
leave a dead block, unit actions, self-destructs, guard placements and moves, spawn choices), and one
more ends the turn (`end_turn`; so does any action not legal now). ``infos[agent]["action_mask"]`` marks
what is legal now; after 64 actions (the most one answer may hold) only the end of the turn is. A
finished match gives +1 to the winner, -1 to the loser, 0 in a draw. ``render_mode="ansi"`` makes
`render` return the picture `cellarena match --watch` draws. Needs the ``[rl]`` extra.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from rich.text import Text

from cellarena.sdk.games.colorblocks import MAX_ACTIONS, ActionCodes, View
from cellarena.sdk.games.colorblocks import observation as view_array
from cellarena.server.env.turns import PartsAECEnv, agent_name
from cellarena.server.games.colorblocks.engine import ColorblocksEngine
from cellarena.server.games.colorblocks.render import render_engine

__all__ = ["MAX_ACTIONS", "ColorblocksAECEnv", "view_array"]


class ColorblocksAECEnv(PartsAECEnv):
    """One Colorblocks match (its options, e.g. ``{"max_turns": 40}``)."""

    metadata: dict[str, Any] = {**PartsAECEnv.metadata, "name": "cellarena_colorblocks_v0"}  # noqa: RUF012
    max_parts = MAX_ACTIONS

    def __init__(self, config: dict[str, Any] | None = None, render_mode: str | None = None) -> None:
        cfg = ColorblocksEngine.new(dict(config or {}), 0).public_config()
        self.width, self.height = int(cfg["width"]), int(cfg["height"])
        self.codes = ActionCodes(self.width, self.height, int(cfg["guards"]))
        self.end = self.end_turn = self.codes.end_turn
        self._views: dict[str, View] = {}
        obs = spaces.Box(0, 255, (4, self.height, self.width), np.uint8)
        super().__init__(config, obs, spaces.Discrete(self.codes.size), render_mode)

    def view(self, agent: str) -> View:
        """The SDK `View` the agent's observation was made from (this turn's actions played on it)."""
        return self._views[agent]

    def picture(self) -> Text:
        return render_engine(self.engine)

    def new_engine(self, seed: int) -> ColorblocksEngine:
        return ColorblocksEngine.new(self.config, seed)

    def begin(self, message: dict[str, Any]) -> str:
        view = View.from_message(message)
        agent = agent_name(view.seat)
        self._views[agent] = view
        return agent

    def parts(self, agent: str) -> dict[int, Any]:
        return self.codes.legal(self._views[agent])

    def add(self, agent: str, part: Any) -> None:
        self._views[agent].play(part)

    def array(self, agent: str) -> np.ndarray:
        return view_array(self._views[agent])
