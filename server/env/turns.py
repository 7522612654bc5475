"""A PettingZoo `AECEnv` for games that ask one seat at a time: each decision point is one step.

A game's environment says how to build its engine, how a request becomes an observation (through the
SDK's decoder of the server's tick message, so that what is trained is what a bot sees), how an action
becomes an answer, and which actions are legal. This class does the PettingZoo bookkeeping: the seat the
engine asks next is the selected agent, and a finished match gives +1 to the winner and -1 to the
others (0 to everyone in a draw).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv
from rich.text import Text

from cellarena.sdk.protocol.messages import tick as tick_message
from cellarena.server.env import ansi
from cellarena.server.env.fixed_spaces import FixedSpaces, env_metadata
from cellarena.server.env.replay_start import check_shape
from cellarena.server.games.base import Engine
from cellarena.server.replay import replay_start


def agent_name(seat: int) -> str:
    return f"player_{seat}"


def seat_of(agent: str) -> int:
    return int(agent.rpartition("_")[2])


class TurnAECEnv(FixedSpaces, AECEnv[str, np.ndarray, int]):
    """Subclasses set the spaces, and implement `new_engine`, `observation`, `answer` and `picture`."""

    metadata = env_metadata("cellarena_turns_v0", parallelizable=False)
    _obs_space: spaces.Box
    _act_space: spaces.Discrete

    def __init__(
        self,
        config: dict[str, Any] | None,
        obs_space: spaces.Box,
        act_space: spaces.Discrete,
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        self.render_mode = ansi.check_mode(render_mode)
        self.config = dict(config or {})
        self.engine = self.new_engine(0)
        self.possible_agents = [agent_name(p) for p in range(self.engine.players)]
        self._obs_space, self._act_space = obs_space, act_space
        self._obs: dict[str, np.ndarray] = {}

    # ----------------------------------------------------------------- what a game says
    def new_engine(self, seed: int) -> Engine:
        raise NotImplementedError

    def observation(self, message: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """The observation and the action mask (1 = legal) of one tick message."""
        raise NotImplementedError

    def answer(self, action: int, message: dict[str, Any]) -> Any:
        """The ``moves`` a bot would send for ``action``."""
        raise NotImplementedError

    # ----------------------------------------------------------------- PettingZoo
    def observe(self, agent: str) -> np.ndarray:
        return self._obs[agent]

    def picture(self) -> Text:
        """The game's terminal picture of the match (what `cellarena match --watch` draws)."""
        raise NotImplementedError

    def render(self) -> str | None:
        """The match as `cellarena match --watch` draws it: a string in "ansi" mode."""
        return ansi.render(self.render_mode, self.picture)

    def close(self) -> None:
        """Nothing to release: the engine is plain memory (PettingZoo wants close beside render)."""

    def _refresh(self) -> None:
        """Decode the pending request and select the seat it is for."""
        self._messages = {}
        for seat, request in self.engine.pending().items():
            message = dict(tick_message(self.engine.tick, 0, request))
            agent = agent_name(seat)
            self._messages[agent] = message
            self._obs[agent], mask = self.observation(message)
            self.infos[agent] = {"action_mask": mask}
            self.agent_selection = agent

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """A new match, or with ``options={"replay": PATH, "tick": N}`` that replay's state at N."""
        start = replay_start(options, self.engine.name)
        self.engine = start if start is not None else self.new_engine(seed or 0)
        self.agents = list(self.possible_agents)
        shape = self._obs_space.shape or ()
        self._obs = {a: np.zeros(shape, self._obs_space.dtype) for a in self.agents}
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        n = int(self._act_space.n)
        self.infos: dict[str, dict[str, Any]] = {
            a: {"action_mask": np.zeros(n, np.int8)} for a in self.agents
        }
        self._refresh()
        if start is not None:
            assert options is not None
            check_shape(options["replay"], self._obs[self.agent_selection].shape, self._obs_space.shape)

    def step(self, action: int | None) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            if self.agents:
                self.agent_selection = self.agents[0]
            return
        self._cumulative_rewards[agent] = 0.0
        self.engine.apply({seat_of(agent): self.answer(int(action or 0), self._messages[agent])})
        self._clear_rewards()
        result = self.engine.result()
        if result is None:
            self._refresh()
        else:
            for other in self.agents:
                if result.winner is not None:
                    self.rewards[other] = 1.0 if seat_of(other) == result.winner else -1.0
                self.terminations[other] = True
        self._accumulate_rewards()


class PartsAECEnv(TurnAECEnv):
    """A `TurnAECEnv` whose answers are lists built one part per step (a Colorblocks turn's actions, a
    Cloth batch's units): each step adds one legal part, and the action `end` (or any action not
    legal now) sends the list so far as the seat's answer.

    Subclasses implement `begin` (decode a request into the seat's own copy of the position), `parts`
    (action -> part, for the parts legal now on that copy), `add` (play a part on the copy) and `array`
    (the copy as an observation), and set `end` and `max_parts`.
    """

    end: int = 0
    max_parts: int = 64
    #: Whether sending an empty list is legal (else `end` is masked until a part was added).
    empty_ok: bool = True

    #: Per seat, the parts legal now by action number; and the parts of the answer so far.
    _parts: dict[str, dict[int, Any]]
    _so_far: list[Any]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self._parts, self._so_far = {}, []
        super().reset(seed, options)

    def begin(self, message: dict[str, Any]) -> str:
        """Decode ``message`` into the seat's copy of the position; the agent it is for."""
        raise NotImplementedError

    def parts(self, agent: str) -> dict[int, Any]:
        raise NotImplementedError

    def add(self, agent: str, part: Any) -> None:
        raise NotImplementedError

    def array(self, agent: str) -> np.ndarray:
        raise NotImplementedError

    def actions(self, agent: str) -> dict[int, Any]:
        """Action number -> the part it adds, for the parts legal now (`end` not included)."""
        return dict(self._parts.get(agent, {}))

    def observation(self, message: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        agent = self.begin(message)
        self._so_far = []
        return self._observe_parts(agent)

    def _observe_parts(self, agent: str) -> tuple[np.ndarray, np.ndarray]:
        codes = self.parts(agent) if len(self._so_far) < self.max_parts else {}
        self._parts[agent] = codes
        mask = np.zeros(int(self._act_space.n), np.int8)
        mask[list(codes)] = 1
        mask[self.end] = 1 if (self.empty_ok or self._so_far or not codes) else 0
        return self.array(agent), mask

    def answer(self, action: int, message: dict[str, Any]) -> Any:
        return list(self._so_far)

    def step(self, action: int | None) -> None:
        agent = self.agent_selection
        part = self._parts.get(agent, {}).get(int(action or 0))
        if self.terminations[agent] or self.truncations[agent] or part is None:
            super().step(self.end if action is not None else action)  # send the list (or a dead step)
            return
        # One more part of this answer, on the seat's own copy; the same seat goes on.
        self._cumulative_rewards[agent] = 0.0
        self.add(agent, part)
        self._so_far.append(part)
        self._obs[agent], self.infos[agent]["action_mask"] = self._observe_parts(agent)
        self._clear_rewards()
        self._accumulate_rewards()
