"""`BatchedRezzo`'s agent phase in numpy: one resolution slot at a time, each slot a vectorised move of
one agent in every world (moves within a world stay sequential, as the rulebook wants). It takes the
arguments of `batched_kernel._agent_phase`, its compiled twin."""

from __future__ import annotations

import numpy as np

from cellarena.sdk.games.rezzo import FORWARD, MAX_DAMAGE, Facing
from cellarena.server.games.rezzo.batch.cells import (
    ADVANCE,
    AGENT,
    BLANK,
    BORDER,
    BUILD,
    CONDUCTOR,
    HIT,
    LEFT,
    NOOP,
    RIGHT,
    AgentArgs,
)

#: Per facing N, E, S, W: the step forward.
_FX = np.array([FORWARD[f][0] for f in Facing], np.intp)
_FY = np.array([FORWARD[f][1] for f in Facing], np.intp)


def agent_phase(args: AgentArgs) -> None:
    """``args`` as `cells.AgentArgs` says: the state (codes, damage, x, y, facing, alive, tick), the
    moves (B, N), the running worlds, the shape, the hittable table, the counts (the illegal moves
    and the blocked agents, per world and player) and the cuts (B, N, 2: per agent whose hit blanked
    a cell, that cell and the code it held)."""
    state, moves, running, shape, hittable, counts, cuts = args
    codes, dmg_2d, xs, ys, facing, alive, tick = state
    p, k_n, pw = shape
    rows = np.arange(codes.shape[0], dtype=np.intp)
    world_base = rows * codes.shape[1]
    flat, dmg = codes.reshape(-1), dmg_2d.reshape(-1)
    first = tick % p
    for k in range(k_n):
        for i in range(p):
            player = (first + i) % p
            a = player * k_n + k
            m = moves[rows, a]
            act = running & alive[rows, a] & (m != NOOP)
            if not act.any():
                continue
            f = facing[rows, a]
            f = np.where(act & (m == LEFT), (f + 3) % 4, f)
            f = np.where(act & (m == RIGHT), (f + 1) % 4, f)
            facing[rows, a] = f
            here = world_base + (ys[rows, a] + BORDER) * pw + xs[rows, a] + BORDER
            front = here + _FY[f] * pw + _FX[f]
            target = flat[front]
            walk = act & ((m == ADVANCE) | (m == BUILD))
            ok_walk = walk & (target == BLANK)
            hit = act & (m == HIT)
            ok_hit = hit & hittable[target]
            blocked = walk & ~ok_walk
            bad = blocked | (hit & ~ok_hit)
            if bad.any():
                np.add.at(counts[0], (rows[bad], player[bad]), 1)
                np.add.at(counts[1], (rows[blocked], player[blocked]), 1)
            if ok_walk.any():
                w = np.flatnonzero(ok_walk)
                flat[front[w]] = AGENT + player[w]
                flat[here[w]] = np.where(m[w] == BUILD, CONDUCTOR, BLANK)
                dmg[here[w]] = 0
                aw = a[w]
                xs[w, aw] += _FX[f[w]]
                ys[w, aw] += _FY[f[w]]
            if ok_hit.any():
                h = front[ok_hit]
                cut = dmg[h] >= MAX_DAMAGE
                if cut.any():
                    wc = np.flatnonzero(ok_hit)[cut]
                    cuts[wc, a[wc], 0] = front[wc] - world_base[wc]
                    cuts[wc, a[wc], 1] = target[wc]
                flat[h[cut]] = BLANK
                dmg[h] = np.where(cut, 0, dmg[h] + 1)
