"""Rezzo as a Gymnasium vector environment on `BatchedRezzo`: B worlds of one map stepped at once.

**Each agent is a sub-environment.** A world of N agents (a duel: 2) gives N sub-environments, so
``num_envs = B * N`` and sub-environment ``b * N + p * K + k`` is world b's agent k of player p (K
agents per player). This is the shape self-play training wants: one policy maps a (num_envs, 2, 13, 13)
batch of observations to num_envs moves, whichever player each agent plays for, and every standard
Gymnasium learner takes it as it is. (The alternative, one sub-environment per world with a
multi-agent observation, would make every learner unpack the agents itself.)

- Observation (`single_observation_space`): Box(0, 255, (2, 13, 13), uint8), what that agent's bot
  receives over the wire: the viewport's cell codes with owners relative to the viewer (0 is always
  the viewer's own player), then its damage. The same layout as the PettingZoo environment's.
- Action (`single_action_space`): Discrete(6), the move codes of `cellarena.sdk.games.rezzo.Move`.
- Reward: 0 until the agent's world ends; then +1 for the sole winner's agents, -1 for every other
  agent of that world, and 0 for all in a draw.
- Termination: the world ended by losses (at most one player left). Truncation: the world reached
  its tick cap (`max_ticks`) with two or more players in. Both apply to every agent of that world.
- Autoreset: ``metadata["autoreset_mode"]`` is `AutoresetMode.SAME_STEP`. A world that ends is reset
  to the map's start within the same `step`: the observations returned for its agents are the new
  episode's first, and the last ones of the episode that ended are in ``infos["final_obs"]`` (an
  object array with an observation where ``infos["_final_obs"]`` is True, as Gymnasium's
  `SyncVectorEnv` gives them in this mode). The next step's actions play the new episode.
- Events: with ``events=True``, ``infos["events"]``, when a step had any, maps a world's index to the
  game events of its step (`Events.log`, exactly as `RezzoEngine.apply` reports them: flags formed,
  destroyed and beside a base, players out, cells blanked by hits), for rewards shaped on them. Off
  by default: making them halves the numba step's rate in a busy duel.
- In maps of more than two players, the agents of a player who lost while the others play on keep
  their last observation, get reward 0 and have their actions ignored until their world resets.

Rezzo is deterministic and every world starts from the map: ``reset(seed=...)`` seeds `np_random`
only. Needs the ``[rl]`` extra (gymnasium).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from cellarena.sdk.games.rezzo import VIEW_SIZE, Move
from cellarena.server.games.rezzo.batched import BatchedRezzo
from cellarena.server.games.rezzo.engine import RezzoEngine

#: One agent's observation: cell codes, then damage, each 13x13 (the PettingZoo environment's layout).
OBS_SHAPE = (2, VIEW_SIZE, VIEW_SIZE)


class RezzoVectorEnv(VectorEnv[np.ndarray, np.ndarray, np.ndarray]):
    """``worlds`` worlds of one Rezzo map (the options of `RezzoConfig`), every agent a sub-environment.

    ``copy``: return fresh arrays from `reset` and `step` (as Gymnasium's vector environments do by
    default); False returns the environment's own buffers, which the next call overwrites. ``start``:
    every episode's first state, instead of the config's map (e.g. `RezzoEngine.from_board`).
    ``backend``: `BatchedRezzo`'s ("auto": numba where it is installed, else numpy; same results).
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}  # noqa: RUF012

    def __init__(
        self,
        worlds: int,
        config: dict[str, Any] | None = None,
        *,
        copy: bool = True,
        start: RezzoEngine | None = None,
        backend: str = "auto",
        events: bool = False,
    ) -> None:
        if worlds < 1:
            raise ValueError(f"a vector environment needs at least one world, got {worlds}")
        if start is None:
            start = RezzoEngine.new(dict(config or {}))
        self.template = BatchedRezzo([start], backend=backend)
        self.worlds = BatchedRezzo([start] * worlds, backend=backend, events=events)
        self.batch, self.n_agents = worlds, self.worlds.n_agents
        self.players, self.agents_per_player = self.worlds.players, self.worlds.agents_per_player
        self.num_envs = worlds * self.n_agents
        self.copy = copy
        self.single_observation_space = spaces.Box(0, 255, OBS_SHAPE, np.uint8)
        self.single_action_space = spaces.Discrete(len(Move))
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._obs = self.worlds.observations.reshape(self.num_envs, *OBS_SHAPE)
        self._player_of = np.arange(self.n_agents) // self.agents_per_player
        self._rewards = np.zeros(self.num_envs, np.float32)
        self._terminations = np.zeros(self.num_envs, bool)
        self._truncations = np.zeros(self.num_envs, bool)
        self._all = np.arange(worlds)

    def _out(self, array: np.ndarray) -> np.ndarray:
        return array.copy() if self.copy else array

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Every world back to the map's start: (observations (num_envs, 2, 13, 13), infos {})."""
        super().reset(seed=seed)
        if options:
            raise ValueError(f"RezzoVectorEnv.reset takes no options, got {sorted(options)}")
        self.worlds.restore(self._all, self.template)
        self.worlds.views()
        return self._out(self._obs), {}

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One move code per sub-environment, shape (num_envs,); codes that are no move are no-ops.

        Returns (observations, rewards, terminations, truncations, infos) as the module says.
        """
        moves = np.asarray(actions)
        if moves.size != self.num_envs or moves.ndim not in (1, 2):
            raise ValueError(
                f"actions must have shape ({self.num_envs},): one move code for each of the "
                f"{self.batch} worlds' {self.n_agents} agents; got shape {moves.shape}"
            )
        worlds = self.worlds
        ended = worlds.step(moves.reshape(self.batch, self.n_agents))
        rewards = self._rewards.reshape(self.batch, self.n_agents)
        rewards.fill(0.0)
        self._terminations.fill(False)
        self._truncations.fill(False)
        infos: dict[str, Any] = {}
        if happened := worlds.last_events():  # before the reset below forgets them
            infos["events"] = happened
        if ended.any():
            done = np.flatnonzero(ended)
            for b in done:
                winner = worlds.winner(int(b))
                if winner is not None:
                    rewards[b] = np.where(self._player_of == winner, 1.0, -1.0)
            capped = worlds.player_alive[done].sum(axis=1) > 1
            self._truncations.reshape(self.batch, self.n_agents)[done[capped]] = True
            self._terminations.reshape(self.batch, self.n_agents)[done[~capped]] = True
            final = worlds.views_of(done).reshape(-1, *OBS_SHAPE)
            final_obs = np.full(self.num_envs, None, dtype=object)
            agents = (done[:, None] * self.n_agents + np.arange(self.n_agents)).reshape(-1)
            for i, agent in enumerate(agents):
                final_obs[agent] = final[i]
            mask = np.zeros(self.num_envs, bool)
            mask[agents] = True
            infos.update({"final_obs": final_obs, "_final_obs": mask})
            worlds.restore(done, self.template)
        worlds.views()
        return (
            self._out(self._obs),
            self._out(self._rewards),
            self._out(self._terminations),
            self._out(self._truncations),
            infos,
        )
