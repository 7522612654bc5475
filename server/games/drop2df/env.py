"""Drop2df as a PettingZoo `AECEnv`: the seats answer one after the other, then the turn is played.

The observation is the seat's row as its bot receives it (the SDK's `View.from_message` of the server's
tick message): one uint8 code per cell. Action ``a`` is ``a == 0``: pass, else: edit cell ``a`` (cell 0 is
a hole and never editable, so 0 is free for the pass). Tokens are not offered as actions. The reward of a
turn is the score it brought the seat (+1 per ``@`` that falls into the hole). Needs the ``[rl]`` extra.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv
from pettingzoo.utils import AgentSelector

from cellarena.sdk.games.drop2df import View
from cellarena.sdk.protocol.messages import tick as tick_message
from cellarena.server.games.drop2df.engine import Drop2dfEngine


def row_array(view: View) -> np.ndarray:
    """A view as its observation: the row's cell codes. The env and a trained bot both use this."""
    return np.frombuffer(view.row, np.uint8).copy()


class Drop2dfAECEnv(AECEnv[str, np.ndarray, int]):
    """One drop2df match (the options of its config, e.g. ``{"turns": 30}``)."""

    metadata: dict[str, Any] = {"name": "cellarena_drop2df_v0", "render_modes": [], "is_parallelizable": True}  # noqa: RUF012

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.config = dict(config or {})
        self.engine = Drop2dfEngine.new(self.config, 0)
        self.possible_agents = [f"player_{p}" for p in range(self.engine.players)]
        cells = len(self.engine.public_config()["start"])
        self._obs_space = spaces.Box(0, 255, (cells,), np.uint8)
        self._act_space = spaces.Discrete(cells)
        self._obs: dict[str, np.ndarray] = {}

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Space[Any]:
        return self._act_space

    def observe(self, agent: str) -> np.ndarray:
        return self._obs[agent]

    def _refresh(self) -> None:
        for seat, request in self.engine.pending().items():
            view = View.from_message(tick_message(self.engine.tick, 0, request))
            self._obs[f"player_{seat}"] = row_array(view)
            self._scores[seat] = view.score

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self.engine = Drop2dfEngine.new(self.config, seed or 0)
        self.agents = list(self.possible_agents)
        self._scores = [0] * len(self.agents)
        self._obs = {a: np.zeros(self._obs_space.shape or (), np.uint8) for a in self.agents}
        self._refresh()
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        self._chosen: dict[str, int] = {}
        self._selector = AgentSelector(self.agents)
        self.agent_selection = self._selector.next()

    def step(self, action: int | None) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        self._chosen[agent] = int(action or 0)
        if self._selector.is_last():
            before = list(self._scores)
            answers = {
                int(a.split("_")[1]): ([a_] if (a_ := self._chosen.get(a, 0)) else []) for a in self.agents
            }
            self.engine.apply(answers)
            self._chosen = {}
            done = self.engine.result() is not None
            if done:
                # The last turn's scores: the engine's frame holds them once no request is left.
                self._scores = [int(s) for s in self.engine.frame()["scores"]]
            else:
                self._refresh()
            for a in self.agents:
                seat = int(a.split("_")[1])
                self.rewards[a] = float(self._scores[seat] - before[seat])
                self.terminations[a] = done
        else:
            self._clear_rewards()
        self.agent_selection = self._selector.next()
        self._accumulate_rewards()
