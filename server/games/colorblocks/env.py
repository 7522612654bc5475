"""Colorblocks as a PettingZoo `AECEnv`: a turn is built one action per step, then ended by a step.

The observation is the seat's board as its bot sees it (the SDK's `View.from_message` of the server's
tick message, then the SDK's own `View.play` for the actions chosen so far this turn), a (4, H, W)
uint8 array (`view_array`): block codes, units (1 + kind index for yours, 6 + kind index for the
opponent's), guards (1 yours, 2 the opponent's), and your seat everywhere. Actions: ``kind * W * H +
y * W + x`` for kind 0 place at (x, y), 1 move a unit to (x, y), 2 act on (x, y), 3 move a guard to
(x, y), each standing for the first legal SDK action of that kind and cell; ``4 * W * H`` (or any
action not legal now) ends the turn. ``infos[agent]["action_mask"]`` marks what is legal now.
Destruct and spawn choices are not offered (the spawn keeps its default). A finished match gives +1
to the winner, -1 to the loser, 0 in a draw. Needs the ``[rl]`` extra.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from cellarena.sdk.games.colorblocks import KINDS, View
from cellarena.server.env.turns import TurnAECEnv
from cellarena.server.games.colorblocks.engine import ColorblocksEngine

#: The SDK action name of each action kind, and where its target cell is in the action.
ACTION_KINDS = (("place", 1), ("move", 2), ("act", 2), ("guard", 1))
MAX_ACTIONS = 64  # the most actions one answer may hold


def view_array(view: View) -> np.ndarray:
    """A view as its observation (4, H, W) uint8. The env and a trained bot both use this."""
    board = view.board
    out = np.zeros((4, board.height, board.width), np.uint8)
    out[0] = board.blocks
    for unit in board.units.values():
        out[1, unit.y, unit.x] = 1 + KINDS.index(unit.kind) + (0 if unit.owner == view.seat else 5)
    out[2] = np.where(board.guards < 0, 0, np.where(board.guards == view.seat, 1, 2))
    out[3] = view.seat
    return out


def encode(view: View) -> dict[int, list[Any]]:
    """Action index -> the first legal SDK action it stands for."""
    w, h = view.board.width, view.board.height
    names = [name for name, _ in ACTION_KINDS]
    out: dict[int, list[Any]] = {}
    for action in view.legal_actions():
        if action[0] not in names:
            continue
        kind = names.index(action[0])
        at = ACTION_KINDS[kind][1]
        out.setdefault(kind * w * h + int(action[at + 1]) * w + int(action[at]), action)
    return out


class ColorblocksAECEnv(TurnAECEnv):
    """One Colorblocks match (its options, e.g. ``{"max_turns": 40}``)."""

    metadata: dict[str, Any] = {  # noqa: RUF012 (PettingZoo declares it a plain attribute)
        "name": "cellarena_colorblocks_v0",
        "render_modes": [],
        "is_parallelizable": False,
    }

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        cfg = ColorblocksEngine.new(dict(config or {}), 0).public_config()
        self.width, self.height = int(cfg["width"]), int(cfg["height"])
        self.end_turn = 4 * self.width * self.height
        obs = spaces.Box(0, 255, (4, self.height, self.width), np.uint8)
        super().__init__(config, obs, spaces.Discrete(self.end_turn + 1))
        self._views: dict[str, View] = {}
        self._codes: dict[str, dict[int, list[Any]]] = {}
        self._turn: list[list[Any]] = []

    def view(self, agent: str) -> View:
        """The SDK `View` the agent's observation was made from (this turn's actions played on it)."""
        return self._views[agent]

    def actions(self, agent: str) -> dict[int, list[Any]]:
        """Action index -> the SDK action it plays, for the actions legal now (end of turn not included)."""
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
        codes = encode(view) if len(self._turn) < MAX_ACTIONS else {}
        self._codes[agent] = codes
        mask = np.zeros(self.end_turn + 1, np.int8)
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
