"""Drop2df as a PettingZoo `AECEnv`: the seats answer one after the other, then the turn is played.

The observation is the seat's request as its bot receives it (the SDK's `View.from_message` of the
server's tick message), made an array by the SDK's `observation` (`cellarena.sdk.games.drop2df`), which
a trained bot calls on its own `View` too: the row's cell codes, then the seat's blank, ``+`` and ``-``
tokens left, (cells + 3,) uint8. The actions are the SDK's `ActionCodes`: ``a == 0`` passes, ``0 < a <
cells`` edits cell ``a``, and the numbers above spend a token, with or without an edit, in either order,
so every turn of the game has a number. ``infos[agent]["action_mask"]`` marks the actions none of whose
ops would be refused (tokens only with the ``tokens`` option); any other action is sent as it is, and
the game refuses what it must. The reward of a turn is the score it brought the seat (+1 per ``@`` that
falls into the hole). ``render_mode="ansi"`` makes `render` return the picture `cellarena match --watch`
draws. Needs the ``[rl]`` extra.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv
from pettingzoo.utils import AgentSelector

from cellarena.sdk.games.drop2df import FACES, ActionCodes, View, observation
from cellarena.sdk.protocol.messages import tick as tick_message
from cellarena.server.env import ansi
from cellarena.server.env.fixed_spaces import FixedSpaces, env_metadata
from cellarena.server.env.replay_start import check_shape
from cellarena.server.games.drop2df.engine import Drop2dfEngine
from cellarena.server.games.drop2df.render import render
from cellarena.server.replay import replay_start


def row_array(view: View) -> np.ndarray:
    """A view as its observation (the SDK's `observation` as a uint8 array)."""
    return np.frombuffer(observation(view), np.uint8).copy()


class Drop2dfAECEnv(FixedSpaces, AECEnv[str, np.ndarray, int]):
    """One drop2df match (the options of its config, e.g. ``{"turns": 30, "tokens": True}``)."""

    metadata = env_metadata("cellarena_drop2df_v0", parallelizable=True)

    def __init__(self, config: dict[str, Any] | None = None, render_mode: str | None = None) -> None:
        super().__init__()
        self.render_mode = ansi.check_mode(render_mode)
        self.config = dict(config or {})
        self.engine = Drop2dfEngine.new(self.config, 0)
        self.possible_agents = [f"player_{p}" for p in range(self.engine.players)]
        self.cells = len(self.engine.public_config()["start"])
        self.codes = ActionCodes(self.cells)
        # Codes 0..5; token counts up to the 4 faces rolled.
        self._obs_space = spaces.Box(0, 255, (self.cells + len(FACES),), np.uint8)
        self._act_space = spaces.Discrete(self.codes.size)
        self._obs: dict[str, np.ndarray] = {}

    def observe(self, agent: str) -> np.ndarray:
        return self._obs[agent]

    def render(self) -> str | None:
        """The match as `cellarena match --watch` draws it: a string in "ansi" mode."""
        return ansi.render(self.render_mode, lambda: render(self.engine))

    def close(self) -> None:
        """Nothing to release (PettingZoo wants close beside render)."""

    def _refresh(self) -> None:
        for seat, request in self.engine.pending().items():
            view = View.from_message(tick_message(self.engine.tick, 0, request))
            agent = f"player_{seat}"
            self._obs[agent] = row_array(view)
            self.infos[agent] = {"action_mask": np.frombuffer(self.codes.mask(view), np.int8).copy()}
            self._scores[seat] = view.score

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """A new match, or with ``options={"replay": PATH, "tick": N}`` that replay's state at N."""
        start = replay_start(options, Drop2dfEngine.name)
        self.engine = start if isinstance(start, Drop2dfEngine) else Drop2dfEngine.new(self.config, seed or 0)
        self.agents = list(self.possible_agents)
        self._scores = [0] * len(self.agents)
        self._obs = {a: np.zeros(self._obs_space.shape or (), np.uint8) for a in self.agents}
        self.infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        self._refresh()
        if start is not None:
            assert options is not None
            check_shape(options["replay"], self._obs["player_0"].shape, self._obs_space.shape)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
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
            answers = {int(a.split("_")[1]): self.codes.ops(self._chosen.get(a, 0)) for a in self.agents}
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
