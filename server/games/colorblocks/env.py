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

from cellarena.sdk.games.colorblocks import MAX_ACTIONS, ActionCodes, View
from cellarena.sdk.games.colorblocks import observation as view_array
from cellarena.server.env.turns import TurnAECEnv
from cellarena.server.games.colorblocks.engine import ColorblocksEngine
from cellarena.server.games.colorblocks.render import render_engine

__all__ = ["MAX_ACTIONS", "ColorblocksAECEnv", "view_array"]


class ColorblocksAECEnv(TurnAECEnv):
    """One Colorblocks match (its options, e.g. ``{"max_turns": 40}``)."""

    metadata: dict[str, Any] = {**TurnAECEnv.metadata, "name": "cellarena_colorblocks_v0"}  # noqa: RUF012
    draw = render_engine

    def __init__(self, config: dict[str, Any] | None = None, render_mode: str | None = None) -> None:
        cfg = ColorblocksEngine.new(dict(config or {}), 0).public_config()
        self.width, self.height = int(cfg["width"]), int(cfg["height"])
        self.codes = ActionCodes(self.width, self.height, int(cfg["guards"]))
        self.end_turn = self.codes.end_turn
        obs = spaces.Box(0, 255, (4, self.height, self.width), np.uint8)
        super().__init__(config, obs, spaces.Discrete(self.codes.size), render_mode)
        self._views: dict[str, View] = {}
        self._codes: dict[str, dict[int, list[Any]]] = {}
        self._turn: list[list[Any]] = []

    def view(self, agent: str) -> View:
        """The SDK `View` the agent's observation was made from (this turn's actions played on it)."""
        return self._views[agent]

    def actions(self, agent: str) -> dict[int, list[Any]]:
        """Action number -> the SDK action it plays, for the actions legal now (end of turn not included)."""
        return dict(self._codes.get(agent, {}))

    def new_engine(self, seed: int) -> ColorblocksEngine:
        return ColorblocksEngine.new(self.config, seed)

    def observation(self, message: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        view = View.from_message(message)
        agent = f"player_{view.seat}"
        self._views[agent] = view
        self._turn = []
        return self._observe_view(agent)

    def _observe_view(self, agent: str) -> tuple[np.ndarray, np.ndarray]:
        view = self._views[agent]
        codes = self.codes.legal(view) if len(self._turn) < MAX_ACTIONS else {}
        self._codes[agent] = codes
        mask = np.zeros(self.codes.size, np.int8)
        mask[list(codes)] = 1
        mask[self.end_turn] = 1
        return view_array(view), mask

    def answer(self, action: int, message: dict[str, Any]) -> Any:
        return list(self._turn)

    def step(self, action: int | None) -> None:
        agent = self.agent_selection
        chosen = self._codes.get(agent, {}).get(int(action or 0))
        if self.terminations[agent] or self.truncations[agent] or chosen is None:
            super().step(self.end_turn if action is not None else action)  # end of turn (or a dead step)
            return
        # One more action of this turn, on the SDK's copy of the board; the same seat goes on.
        self._cumulative_rewards[agent] = 0.0
        self._views[agent].play(chosen)
        self._turn.append(chosen)
        self._obs[agent], self.infos[agent]["action_mask"] = self._observe_view(agent)
        self._clear_rewards()
        self._accumulate_rewards()
