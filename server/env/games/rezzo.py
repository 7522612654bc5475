"""Rezzo as a PettingZoo `ParallelEnv`: one PettingZoo agent per Rezzo agent, all moving at once.

The observation is what the bot of that agent's player receives over the wire, decoded by the SDK's own
`View.from_message` (the code a `Bot` gets its `View` from) and the SDK's `observation` of each
`Viewport`, which a trained bot calls too, as a (2, 13, 13) uint8 array: the cell codes with owners
relative to the viewer, then the damage (`viewport_array`). Actions are the documented move codes 0..5
(`cellarena.sdk.games.rezzo.Move`), every move of the game. A finished match gives +1 to the sole
winner's agents and -1 to the agents of every player who lost; a draw gives 0. ``render_mode="ansi"``
makes `render` return the picture `cellarena match --watch` draws. Needs the ``[rl]`` extra.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from cellarena.sdk.games.rezzo import VIEW_SIZE, Move, View, Viewport, observation
from cellarena.server.env import ansi
from cellarena.server.env.fixed_spaces import FixedSpaces, env_metadata
from cellarena.server.games.rezzo.engine import RezzoEngine
from cellarena.server.games.rezzo.render import render_engine
from cellarena.server.replay import replay_start

OBS_SHAPE = (2, VIEW_SIZE, VIEW_SIZE)


def viewport_array(viewport: Viewport) -> np.ndarray:
    """A viewport as the (2, 13, 13) uint8 observation: cell codes, then damage, in the wire layout.

    The environments and a trained bot both turn an SDK `Viewport` into an array with this function.
    """
    planes = np.frombuffer(observation(viewport), np.uint8)
    return planes.reshape(OBS_SHAPE)


def agent_name(player: int, index: int) -> str:
    return f"player_{player}_agent_{index}"


def _player(agent: str) -> int:
    return int(agent.split("_")[1])


class RezzoParallelEnv(FixedSpaces, ParallelEnv[str, np.ndarray, int]):
    """One Rezzo match (the options of `RezzoConfig`, e.g. ``{"map": "duel", "max_ticks": 500}``)."""

    metadata = env_metadata("cellarena_rezzo_v0", parallelizable=True)

    def __init__(self, config: dict[str, Any] | None = None, render_mode: str | None = None) -> None:
        self.render_mode = ansi.check_mode(render_mode)
        self.config = dict(config or {})
        self.engine = RezzoEngine.new(self.config)
        k = max(1, self.engine.agents_per_player)
        self.possible_agents = [agent_name(p, i) for p in range(self.engine.players) for i in range(k)]
        self.agents = list(self.possible_agents)
        self._obs_space = spaces.Box(0, 255, OBS_SHAPE, np.uint8)
        self._act_space = spaces.Discrete(len(Move))
        self._requests: dict[int, dict[str, Any]] = {}

    def render(self) -> str | None:
        """The world as `cellarena match --watch` draws it: a string in "ansi" mode."""
        return ansi.render(self.render_mode, lambda: render_engine(self.engine))

    def close(self) -> None:
        """Nothing to release: the engine is plain memory."""

    def _observe(self) -> dict[str, np.ndarray]:
        """Every live agent's observation, through the SDK's decoder of the server's tick messages."""
        self._requests = self.engine.pending()
        obs: dict[str, np.ndarray] = {}
        for seat, request in self._requests.items():
            for index, viewport in View.from_message(request):
                obs[agent_name(seat, index)] = viewport_array(viewport)
        return obs

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        """A new match, or with ``options={"replay": PATH, "tick": N}`` that replay's state at N."""
        start = replay_start(options, RezzoEngine.name)
        self.engine = start if isinstance(start, RezzoEngine) else RezzoEngine.new(self.config, seed or 0)
        obs = self._observe()
        if start is not None:
            assert options is not None
            k = max(1, self.engine.agents_per_player)
            if self.engine.players * k != len(self.possible_agents):
                raise ValueError(
                    f"options['replay']: {options['replay']} has {self.engine.players} players of {k} "
                    f"agents, this environment {len(self.possible_agents)} agents: make the environment "
                    "with the replay's config (its header's 'config')"
                )
        self.agents = [a for a in self.possible_agents if a in obs]
        return obs, {a: {} for a in self.agents}

    def step(
        self, actions: dict[str, Any]
    ) -> tuple[
        dict[str, np.ndarray],
        dict[str, float],
        dict[str, bool],
        dict[str, bool],
        dict[str, dict[str, Any]],
    ]:
        answers = {
            seat: [int(actions.get(agent_name(seat, index), Move.NOOP)) for index in request["agents"]]
            for seat, request in self._requests.items()
        }
        events = self.engine.apply(answers)
        before = list(self.agents)
        obs = self._observe()
        result = self.engine.result()
        rewards = dict.fromkeys(before, 0.0)
        terminations = {a: a not in obs for a in before}
        truncations = dict.fromkeys(before, False)
        if result is not None:
            capped = result.reason.startswith("tick cap")
            for a in before:
                if result.winner is not None:
                    rewards[a] = 1.0 if _player(a) == result.winner else -1.0
                terminations[a] = not capped
                truncations[a] = capped
        for a in before:
            if a not in obs:  # a finished agent's last observation: nothing to see
                obs[a] = np.zeros(OBS_SHAPE, np.uint8)
        infos: dict[str, dict[str, Any]] = {a: {"illegal": events.illegal.get(_player(a), 0)} for a in before}
        self.agents = [a for a in before if not (terminations[a] or truncations[a])]
        return obs, rewards, terminations, truncations, infos
