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
from pettingzoo import AECEnv

from cellarena.sdk.games.cata import View
from cellarena.sdk.protocol.messages import tick as tick_message
from cellarena.server.games.cata.engine import CataEngine

RULE = 32
ACTIONS = 4 * RULE
EXTRA = 9  # healths (2), turn, move, moves left, blocked, meditated, opponent meditated, seat


def view_array(view: View) -> np.ndarray:
    """A view as its observation vector (float32). The env and a trained bot both use this."""
    head = np.asarray(view.board, np.float32).reshape(-1)
    hp = [h / view.cells_per_hp for h in view.health]
    flags = [view.turn, view.move, view.moves_left, view.blocked, view.meditated, view.opponent_meditated]
    return np.concatenate(
        [head, np.asarray(view.rule, np.float32), np.asarray([*hp, *flags, view.seat], np.float32)]
    )


def action_mask(view: View) -> np.ndarray:
    """1 for each action that is a legal move of this view."""
    mask = np.zeros(ACTIONS, np.int8)
    for code, index in view.legal_moves():
        mask[code * RULE + index] = 1
    return mask


class CataAECEnv(AECEnv[str, np.ndarray, int]):
    """One C.A.T.A. match (its options, e.g. ``{"size": 32, "max_turns": 40}``)."""

    metadata: dict[str, Any] = {"name": "cellarena_cata_v0", "render_modes": [], "is_parallelizable": False}  # noqa: RUF012

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.config = dict(config or {})
        self.engine = CataEngine.new(self.config, 0)
        self.possible_agents = [f"player_{p}" for p in range(self.engine.players)]
        size = int(self.engine.public_config()["size"])
        self._obs_space = spaces.Box(0.0, np.inf, (size * size + RULE + EXTRA,), np.float32)
        self._act_space = spaces.Discrete(ACTIONS)

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Space[Any]:
        return self._act_space

    def observe(self, agent: str) -> np.ndarray:
        return self._obs[agent]

    def _refresh(self) -> None:
        """Decode the pending request and select the seat it is for."""
        for seat, request in self.engine.pending().items():
            view = View.from_message(dict(tick_message(self.engine.tick, 0, request)))
            agent = f"player_{seat}"
            self._obs[agent] = view_array(view)
            self.infos[agent] = {"action_mask": action_mask(view)}
            self.agent_selection = agent

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self.engine = CataEngine.new(self.config, seed or 0)
        self.agents = list(self.possible_agents)
        shape = self._obs_space.shape or ()
        self._obs = {a: np.zeros(shape, np.float32) for a in self.agents}
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos: dict[str, dict[str, Any]] = {
            a: {"action_mask": np.zeros(ACTIONS, np.int8)} for a in self.agents
        }
        self._refresh()

    def step(self, action: int | None) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            if self.agents:
                self.agent_selection = self.agents[0]
            return
        self._cumulative_rewards[agent] = 0.0
        a = int(action or 0)
        self.engine.apply({int(agent.split("_")[1]): [a // RULE, a % RULE]})
        self._clear_rewards()
        result = self.engine.result()
        if result is None:
            self._refresh()
        else:
            for other in self.agents:
                seat = int(other.split("_")[1])
                if result.winner is not None:
                    self.rewards[other] = 1.0 if seat == result.winner else -1.0
                self.terminations[other] = True
        self._accumulate_rewards()
