"""What the batched step's modules share: the OOB border, viewport sizes, codes as plain ints, and the
arrays its loops take (numpy, compiled, compiled over runs of worlds), typed once."""

from __future__ import annotations

import numpy as np

from cellarena.sdk.games.rezzo import VIEW_SIZE, Cell, Move

#: How far a viewport reaches from its agent, and so the width of the OOB border around each world.
MARGIN = VIEW_SIZE - 1
#: The state's own border: one OOB cell, enough for 3x3 neighbourhoods and the cell in front of an agent.
BORDER = 1
VIEW_CELLS = VIEW_SIZE * VIEW_SIZE
NOOP, ADVANCE, LEFT, RIGHT, BUILD, HIT = (int(m) for m in Move)
# Plain ints: an IntEnum operand makes numpy compute in int64, and its attribute lookups cost time.
BLANK, CONDUCTOR, ELECTRON, TAIL, PHOTON = (
    int(c) for c in (Cell.BLANK, Cell.CONDUCTOR, Cell.ELECTRON, Cell.TAIL, Cell.PHOTON)
)
AGENT, FLAG, BASE = int(Cell.AGENT), int(Cell.FLAG), int(Cell.BASE)

#: The agent phase's state as `BatchedRezzo` holds it: codes, damage, x, y, facing, alive, tick.
AgentState = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
#: The viewports' state: codes, damage, x, y, facing.
ViewState = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
#: The viewports' arguments: the state, the worlds whose viewports are asked for, the world's size
#: (H, W), the codes relative to each player, the agents per player, and the output.
ViewArgs = tuple[ViewState, np.ndarray, tuple[int, int], np.ndarray, int, np.ndarray]
#: The agent phase's counts per world and player: the illegal moves and, of those, the blocked ones.
Counts = tuple[np.ndarray, np.ndarray]
#: The agent phase's arguments: the state, the moves (B, N), the running worlds (B,), the shape
#: (players, agents per player, pw), the 256 codes' hittable table, the counts, and the cuts (B, N, 2).
AgentArgs = tuple[AgentState, np.ndarray, np.ndarray, tuple[int, int, int], np.ndarray, Counts, np.ndarray]
#: The transition's inputs: codes, `BatchedRezzo._near`, the advancing worlds, the padded width, the
#: photon table, and the loss bits it writes.
TransitionArgs = tuple[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray, np.ndarray]
