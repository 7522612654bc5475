"""B same-shape Rezzo worlds stepped as one array operation, for training and vector environments.

A real Rezzo world is small (a duel is 32x32), so stepping one world at a time is dominated by numpy's
per-call cost. Here all B worlds live in one byte array, one code per cell, each world inside a
one-cell border of OOB cells. Then:

- the transition is a fixed number of elementwise passes over chunks of worlds: 3x3 sums and ORs of
  small per-cell values, then the next code as the old one plus per-rule differences;
- the agent phase runs one resolution slot at a time, each slot a vectorised move of one agent in
  every world (moves within a world stay sequential, as the rulebook wants);
- every agent's 13x13 viewport, in all worlds, is one `take` from a copy of the worlds inside an OOB
  border as wide as a viewport reaches.

The border makes bounds checks free: an OOB cell is never blank or hittable, and its 3x3 values are 0.
It agrees bit for bit with `RezzoEngine` (tests/test_rezzo_batched.py); only bounded worlds are batched
(a torus would need wrapped borders refreshed every tick).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cellarena.sdk.games.rezzo import (
    FORWARD,
    MAX_DAMAGE,
    RIGHTWARD,
    VIEW_AGENT_COL,
    VIEW_AGENT_ROW,
    VIEW_SIZE,
    Cell,
    Facing,
    Move,
)
from cellarena.server.games.rezzo.engine import RezzoEngine

#: How far a viewport reaches from its agent, and so the width of the OOB border around each world.
MARGIN = VIEW_SIZE - 1
#: The state's own border: one OOB cell, enough for 3x3 neighbourhoods and the cell in front of an agent.
BORDER = 1
VIEW_CELLS = VIEW_SIZE * VIEW_SIZE
#: Worlds per transition chunk: a duel chunk's ~20 scratch arrays stay in L2 (measured: 64 beats 1024 2x).
CHUNK = 64
_NOOP, _ADVANCE, _LEFT, _RIGHT, _BUILD, _HIT = (int(m) for m in Move)
#: Per facing N, E, S, W: the step forward.
_FX = np.array([FORWARD[f][0] for f in Facing], np.intp)
_FY = np.array([FORWARD[f][1] for f in Facing], np.intp)


def _tables(players: int) -> dict[str, np.ndarray]:
    """The lookup tables of the transition for ``players`` players (indexed by code, or by 3x3 sums)."""
    c = np.arange(256)
    owner = c & 7
    is_flag = (c >= Cell.FLAG) & (c < Cell.GEYSER) & (owner < players)
    is_geyser = (c >= Cell.GEYSER) & (c < Cell.BASE) & (owner < players)
    # Electrons count 1 and tails 16: one 3x3 sum gives both counts (at most 9 each: no overflow).
    et = np.where(c == Cell.ELECTRON, 1, np.where(c == Cell.TAIL, 16, 0)).astype(np.uint8)
    fg = np.where(is_flag | is_geyser, 1 << owner, 0).astype(np.uint8)
    flag = np.where(is_flag, 1 << owner, 0).astype(np.uint8)
    # Sum class: electrons 0 / 1..2 / 3+ (3 classes) times any tail (2): 6 classes.
    s = np.arange(256)
    e, t = s & 15, s >> 4
    e_cls = np.where(e == 0, 0, np.where(e <= 2, 1, 2))
    s_cls = (e_cls * 2 + (t > 0)).astype(np.uint16)
    # Owner class of the OR of flag-or-geyser bits: 0 none, 1 + o a single owner o, 9 several.
    m = np.arange(256)
    single = (m != 0) & ((m & (m - 1)) == 0)
    lowest = np.array([(int(v) & -int(v)).bit_length() - 1 if v else 0 for v in m])
    f_cls = np.where(m == 0, 0, np.where(single, 1 + lowest, 9)).astype(np.uint16)
    # key = code * 60 + s_cls * 10 + f_cls; next code by key.
    nxt = np.repeat(c.astype(np.uint8), 60).reshape(256, 6, 10)
    e_cls_k = (np.arange(6) // 2)[:, None]
    t_any_k = (np.arange(6) % 2)[:, None]
    f_k = np.arange(10)[None, :]
    nxt[Cell.CONDUCTOR] = np.where(e_cls_k == 1, Cell.ELECTRON, Cell.CONDUCTOR) + 0 * f_k
    nxt[Cell.ELECTRON] = np.where((f_k > 0) & (t_any_k == 1), Cell.PHOTON, Cell.TAIL)
    nxt[Cell.TAIL] = Cell.CONDUCTOR
    nxt[Cell.PHOTON] = np.where((f_k >= 1) & (f_k <= 8), Cell.FLAG + f_k - 1, Cell.CONDUCTOR) + 0 * e_cls_k
    for o in range(players):
        nxt[Cell.FLAG + o] = np.where(e_cls_k > 0, Cell.CONDUCTOR, Cell.FLAG + o) + 0 * f_k
    hittable = np.isin(c, [Cell.CONDUCTOR, Cell.ELECTRON, Cell.TAIL]) | is_flag
    rel = [np.where(c >= Cell.AGENT, (c & 0xF8) + ((c & 7) - v) % players, c) for v in range(players)]
    return {
        "et": et,
        "fg": fg,
        "flag": flag,
        "s_cls": s_cls * 10,
        "f_cls": f_cls,
        "code_key": (c * 60).astype(np.uint16),
        "next": nxt.reshape(-1),
        "photon": np.where(single, Cell.FLAG + lowest, Cell.CONDUCTOR).astype(np.uint8),
        "hittable": hittable,
        "relative": np.array(rel, np.uint8).reshape(-1),
    }


class BatchedRezzo:
    """B bounded Rezzo worlds of one shape, player count and agents per player, stepped together.

    World b's agent of player p with index k is agent ``p * K + k``. `step` does for every world that
    is not done what `RezzoEngine.apply` does: that world's agent phase, then the next transition and
    loss processing. `views` gives every agent's viewport as a bot would receive it.
    """

    def __init__(self, engines: Sequence[RezzoEngine]) -> None:
        if not engines:
            raise ValueError("a batch needs at least one world")
        first = engines[0]
        if first.torus:
            raise ValueError("only bounded worlds can be batched (torus is not supported)")
        self.batch = len(engines)
        self.height, self.width, self.players = first.height, first.width, first.players
        self.agents_per_player = max(1, *(e.agents_per_player for e in engines))
        self.n_agents = self.players * self.agents_per_player
        self.own_base_counts = first.world.own_base_counts
        b, n, p = self.batch, self.n_agents, self.players
        self.ph, self.pw = self.height + 2 * BORDER, self.width + 2 * BORDER
        self.plane = self.ph * self.pw
        # Viewports read a copy of the worlds inside an OOB border as wide as a viewport reaches.
        self.vph, self.vpw = self.height + 2 * MARGIN, self.width + 2 * MARGIN
        self._vgrid = np.full((b, self.vph, self.vpw), Cell.OOB, np.uint8)
        self._vdmg = np.zeros((b, self.vph, self.vpw), np.uint8)
        m = MARGIN
        self._vgrid_in = self._vgrid[:, m : m + self.height, m : m + self.width]
        self._vdmg_in = self._vdmg[:, m : m + self.height, m : m + self.width]
        self._t = _tables(p)
        self.codes = np.full((b, self.plane), Cell.OOB, np.uint8)
        self.dmg = np.zeros((b, self.plane), np.uint8)
        # Per-cell bits of the players against whose flags a base lies in the 3x3 block (static).
        self._near = np.zeros((b, self.plane), np.uint8)
        self.x = np.zeros((b, n), np.intp)
        self.y = np.zeros((b, n), np.intp)
        self.facing = np.zeros((b, n), np.intp)
        self.alive = np.zeros((b, n), bool)
        self.tick = np.zeros(b, np.int64)
        self.max_ticks = np.zeros(b, np.int64)
        self.player_alive = np.zeros((b, p), bool)
        self.lost_at = np.zeros((b, p), np.int64)
        #: Per world, its ranks once done (1 is best), else 0.
        self.ranks = np.zeros((b, p), np.int64)
        self.done = np.zeros(b, bool)
        #: Illegal moves per world and player since the last `clear_counts`.
        self.illegal = np.zeros((b, p), np.int64)
        # Transition scratch over the rows the transition reads: one OOB row above and below the world.
        self._lo = (BORDER - 1) * self.pw
        self._hi = (BORDER + self.height + 1) * self.pw
        span = self._hi - self._lo
        inner = self.height * self.pw
        # The transition runs on chunks of worlds whose scratch fits in the CPU caches.
        self.chunk = c = min(b, CHUNK)
        self._v = np.zeros((c, span), np.uint8)
        self._f = np.zeros((c, span), np.uint8)
        self._hs = np.zeros((c, span), np.uint8)
        self._hf = np.zeros((c, span), np.uint8)
        self._s = np.zeros((c, inner), np.uint8)
        self._fm = np.zeros((c, inner), np.uint8)
        # Per-cell masks over the span (electron, tail, flag-or-geyser) and the owner; scratch for the rest.
        self._is_e = np.zeros((c, span), bool)
        self._is_t = np.zeros((c, span), bool)
        self._is_fg = np.zeros((c, span), bool)
        self._owner = np.zeros((c, span), np.uint8)
        self._u1 = np.zeros((c, span), np.uint8)
        self._u2 = np.zeros((c, inner), np.uint8)
        self._m1 = np.zeros((c, inner), bool)
        self._m2 = np.zeros((c, inner), bool)
        self._m3 = np.zeros((c, inner), bool)
        self._is_flag = np.zeros((c, inner), bool)
        self._new = np.zeros((c, inner), np.uint8)
        self._loss = np.zeros((c, inner), np.uint8)
        self._loss_any = np.zeros(b, np.uint8)
        self._rows = np.arange(b, dtype=np.intp)
        self._world_base = self._rows * self.plane
        self._vworld_base = self._rows * self.vph * self.vpw
        self._codes_in = self.codes.reshape(b, self.ph, self.pw)[:, 1:-1, 1:-1]
        self._dmg_in = self.dmg.reshape(b, self.ph, self.pw)[:, 1:-1, 1:-1]
        # Viewports: flat offsets per facing (4, 169) and preallocated index and output arrays.
        r = np.arange(VIEW_SIZE)[:, None]
        col = np.arange(VIEW_SIZE)[None, :]
        offs = np.zeros((4, VIEW_CELLS), np.intp)
        for f in Facing:
            (fx, fy), (rx, ry) = FORWARD[f], RIGHTWARD[f]
            dx = (VIEW_AGENT_ROW - r) * fx + (col - VIEW_AGENT_COL) * rx
            dy = (VIEW_AGENT_ROW - r) * fy + (col - VIEW_AGENT_COL) * ry
            offs[f] = (dy * self.vpw + dx).reshape(-1)
        self._view_offsets = offs
        self._vi = np.zeros((b, n, VIEW_CELLS), np.intp)
        self._voff = np.zeros((b, n, VIEW_CELLS), np.intp)
        self._vpos = np.zeros((b, n), np.intp)
        self._vcodes = np.zeros((b, n, VIEW_CELLS), np.uint8)
        self._vrel = np.zeros((b, n, VIEW_CELLS), np.intp)
        self._viewer = (np.arange(n, dtype=np.intp) // self.agents_per_player * 256)[None, :, None]
        self.view_codes = np.zeros((b, n, VIEW_CELLS), np.uint8)
        self.view_damage = np.zeros((b, n, VIEW_CELLS), np.uint8)
        for i, engine in enumerate(engines):
            self.load(i, engine)

    # ----------------------------------------------------------------- loading and reading
    def _interior(self, arr: np.ndarray, b: int) -> np.ndarray:
        m = BORDER
        return arr[b].reshape(self.ph, self.pw)[m : m + self.height, m : m + self.width]

    def load(self, b: int, engine: RezzoEngine) -> None:
        """Put ``engine``'s state (at its decision point, every player still in) into slot ``b``."""
        if (engine.height, engine.width, engine.players) != (self.height, self.width, self.players):
            raise ValueError("every world of a batch needs the same size and number of players")
        if engine.torus:
            raise ValueError("only bounded worlds can be batched (torus is not supported)")
        frame = engine.frame()
        if len(frame["alive"]) != self.players or engine.result() is not None:
            raise ValueError("only worlds in which every player is still in can be loaded")
        self._interior(self.codes, b)[:] = engine.world.codes_view()
        self._interior(self.dmg, b)[:] = engine.damage()
        self.alive[b] = False
        for a in engine.agents():
            if a.index >= self.agents_per_player:
                raise ValueError("every world of a batch needs the same number of agents per player")
            i = a.player * self.agents_per_player + a.index
            self.x[b, i], self.y[b, i], self.facing[b, i], self.alive[b, i] = a.x, a.y, int(a.facing), a.alive
        self.tick[b], self.max_ticks[b] = engine.tick, engine.max_ticks
        self.player_alive[b], self.lost_at[b], self.ranks[b] = True, 0, 0
        self.done[b] = False
        self.illegal[b] = 0
        self._update_near(b)

    def restore(self, worlds: np.ndarray, template: BatchedRezzo) -> None:
        """Make each world in ``worlds`` (indices) a copy of ``template``'s world 0: an auto-reset."""
        if (template.plane, template.n_agents) != (self.plane, self.n_agents):
            raise ValueError("the template needs the batch's world size and agents")
        for name in ("codes", "dmg", "_near", "x", "y", "facing", "alive", "tick", "max_ticks", "done"):
            getattr(self, name)[worlds] = getattr(template, name)[0]
        for name in ("player_alive", "lost_at", "ranks", "illegal"):
            getattr(self, name)[worlds] = getattr(template, name)[0]

    def cells(self, b: int) -> np.ndarray:
        """World ``b`` as (H, W) public codes with absolute owners (a copy)."""
        return self._interior(self.codes, b).copy()

    def damage(self, b: int) -> np.ndarray:
        return self._interior(self.dmg, b).copy()

    def _update_near(self, b: int) -> None:
        """Bit o of a cell: a base that counts against player o's flags lies in its 3x3 block."""
        grid = self.codes[b].reshape(self.ph, self.pw)
        p = self.players
        bits = np.zeros((self.ph, self.pw), np.uint8)
        is_base = (grid >= Cell.BASE) & (grid < Cell.BASE + p)
        owner = grid & 7
        for o in range(p):
            counts = is_base if self.own_base_counts else is_base & (owner != o)
            bits |= counts.astype(np.uint8) << o
        near = bits.copy()
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                near[1:-1, 1:-1] |= bits[1 + dy : self.ph - 1 + dy, 1 + dx : self.pw - 1 + dx]
        self._near[b] = near.reshape(-1)

    # ----------------------------------------------------------------- viewports
    def views(self) -> tuple[np.ndarray, np.ndarray]:
        """Every agent's viewport in every world: cell codes (owners relative to the viewer) and damage.

        Two (B, N, 169) arrays, refilled in place by each call; rows of dead agents hold stale data.
        """
        np.copyto(self._vgrid_in, self._codes_in)
        np.copyto(self._vdmg_in, self._dmg_in)
        np.add(self.y, MARGIN, out=self._vpos)
        np.multiply(self._vpos, self.vpw, out=self._vpos)
        np.add(self._vpos, self.x, out=self._vpos)
        np.add(self._vpos, MARGIN, out=self._vpos)
        np.add(self._vpos, self._vworld_base[:, None], out=self._vpos)
        np.take(self._view_offsets, self.facing, axis=0, out=self._voff, mode="clip")
        np.add(self._voff, self._vpos[:, :, None], out=self._vi)
        np.take(self._vgrid.reshape(-1), self._vi, out=self._vcodes, mode="clip")
        np.take(self._vdmg.reshape(-1), self._vi, out=self.view_damage, mode="clip")
        np.add(self._vcodes, self._viewer, out=self._vrel)
        np.take(self._t["relative"], self._vrel, out=self.view_codes, mode="clip")
        return self.view_codes, self.view_damage

    # ----------------------------------------------------------------- the step
    def step(self, moves: np.ndarray) -> np.ndarray:
        """Every running world's agent phase with ``moves`` (B, N), then its next transition and losses.

        Move codes that are not moves are no-ops. Returns the (B,) mask of worlds that ended in this call.
        """
        running = ~self.done
        self._agent_phase(np.asarray(moves), running)
        capped = running & (self.tick >= self.max_ticks)
        advancing = running & ~capped
        ended = capped.copy()
        for b in np.flatnonzero(capped):
            self._finish(int(b))
        self._transition(advancing)
        for b in np.flatnonzero(advancing & (self.tick > self.max_ticks)):
            if not self.done[b]:
                self._finish(int(b))
        ended |= advancing & self.done
        return ended

    def _agent_phase(self, moves: np.ndarray, running: np.ndarray) -> None:
        p, k_n = self.players, self.agents_per_player
        rows = self._rows
        flat, dmg = self.codes.reshape(-1), self.dmg.reshape(-1)
        hittable = self._t["hittable"]
        first = self.tick % p
        for k in range(k_n):
            for i in range(p):
                player = (first + i) % p
                a = player * k_n + k
                m = moves[rows, a]
                act = running & self.alive[rows, a] & (m != _NOOP)
                if not act.any():
                    continue
                f = self.facing[rows, a]
                f = np.where(act & (m == _LEFT), (f + 3) % 4, f)
                f = np.where(act & (m == _RIGHT), (f + 1) % 4, f)
                self.facing[rows, a] = f
                x, y = self.x[rows, a], self.y[rows, a]
                here = self._world_base + (y + BORDER) * self.pw + x + BORDER
                front = here + _FY[f] * self.pw + _FX[f]
                target = flat[front]
                walk = act & ((m == _ADVANCE) | (m == _BUILD))
                ok_walk = walk & (target == Cell.BLANK)
                hit = act & (m == _HIT)
                ok_hit = hit & hittable[target]
                bad = (walk & ~ok_walk) | (hit & ~ok_hit)
                if bad.any():
                    np.add.at(self.illegal, (rows[bad], player[bad]), 1)
                if ok_walk.any():
                    w = np.flatnonzero(ok_walk)
                    flat[front[w]] = Cell.AGENT + player[w]
                    flat[here[w]] = np.where(m[w] == _BUILD, Cell.CONDUCTOR, Cell.BLANK)
                    dmg[here[w]] = 0
                    aw = a[w]
                    self.x[w, aw] += _FX[f[w]]
                    self.y[w, aw] += _FY[f[w]]
                if ok_hit.any():
                    h = front[ok_hit]
                    cut = dmg[h] >= MAX_DAMAGE
                    flat[h[cut]] = Cell.BLANK
                    dmg[h] = np.where(cut, 0, dmg[h] + 1)

    def _transition(self, advancing: np.ndarray) -> None:
        """The CA transition and loss processing of every world (those not advancing are put back).

        Only elementwise ufuncs on preallocated arrays (a table `take` costs ~20 of them): the next
        code is the old one plus per-rule differences, e.g. conductor 1 -> electron 2 adds 1.
        """
        for c0 in range(0, self.batch, self.chunk):
            self._transition_chunk(c0, min(self.batch, c0 + self.chunk), advancing)
        self.tick[advancing] += 1
        lost = advancing & (self._loss_any != 0)
        for b in np.flatnonzero(lost):
            self._process_losses(int(b), int(self._loss_any[b]))

    def _transition_chunk(self, c0: int, c1: int, advancing: np.ndarray) -> None:
        """`_transition` for worlds c0..c1-1; losses are only detected here, into ``_loss_any``."""
        u8, w = np.uint8, slice(0, c1 - c0)
        band, bor, add, sub, eq = np.bitwise_and, np.bitwise_or, np.add, np.subtract, np.equal
        lo, hi, pw = self._lo, self._hi, self.pw
        span = self.codes[c0:c1, lo:hi]
        inner = self.codes[c0:c1, lo + pw : hi - pw]
        n = self._s.shape[1]
        rows = slice(pw, pw + n)  # the world's rows within the span
        is_e, is_t, is_fg, owner, u1 = (
            self._is_e[w],
            self._is_t[w],
            self._is_fg[w],
            self._owner[w],
            self._u1[w],
        )
        v, f, hs, hf, s, fm = self._v[w], self._f[w], self._hs[w], self._hf[w], self._s[w], self._fm[w]
        m1, m2, m3, u2 = self._m1[w], self._m2[w], self._m3[w], self._u2[w]
        is_flag, new = self._is_flag[w], self._new[w]
        # Per cell: electrons count 1 and tails 16 (one 3x3 sum gives both counts, at most 9 each), and
        # the bit of the owner of a flag or geyser (codes 16..31). OOB (7) and blank give nothing.
        eq(span, Cell.ELECTRON, out=is_e)
        eq(span, Cell.TAIL, out=is_t)
        np.left_shift(is_t.view(u8), 4, out=v)
        add(v, is_e.view(u8), out=v)
        np.right_shift(span, 4, out=u1)
        eq(u1, 1, out=is_fg)
        band(span, 7, out=owner)
        np.left_shift(is_fg.view(u8), owner, out=f)
        # Losses are judged on the state before the transition: flags (codes 16..23) next to a base.
        np.right_shift(inner, 3, out=u2)
        eq(u2, Cell.FLAG >> 3, out=is_flag)
        np.left_shift(is_flag.view(u8), owner[:, rows], out=u2)
        band(u2, self._near[c0:c1, lo + pw : hi - pw], out=u2)
        np.bitwise_or.reduce(u2, axis=1, out=self._loss_any[c0:c1])
        # 3x3 sums and ORs: a row pass, then a column pass. Row ends fall in the OOB border.
        add(v[:, :-2], v[:, 1:-1], out=hs[:, 1:-1])
        add(hs[:, 1:-1], v[:, 2:], out=hs[:, 1:-1])
        bor(f[:, :-2], f[:, 1:-1], out=hf[:, 1:-1])
        bor(hf[:, 1:-1], f[:, 2:], out=hf[:, 1:-1])
        add(hs[:, :n], hs[:, pw : pw + n], out=s)
        add(s, hs[:, 2 * pw : 2 * pw + n], out=s)
        bor(hf[:, :n], hf[:, pw : pw + n], out=fm)
        bor(fm, hf[:, 2 * pw : 2 * pw + n], out=fm)
        np.copyto(new, inner)
        # conductor -> electron with 1 or 2 electron neighbours (the centre is no electron: it counts 0)
        band(s, 15, out=u2)
        sub(u2, 1, out=u2)  # 0 electrons wraps to 255
        np.less(u2, 2, out=m1)
        eq(inner, Cell.CONDUCTOR, out=m2)
        band(m1, m2, out=m1)
        add(new, m1.view(u8), out=new)
        # electron -> tail (+1), or photon (+2) beside a tail and a flag or geyser
        e_in, t_in = is_e[:, rows], is_t[:, rows]
        add(new, e_in.view(u8), out=new)
        np.greater(s, 15, out=m1)
        np.not_equal(fm, 0, out=m2)
        band(m1, m2, out=m1)
        band(m1, e_in, out=m1)
        add(new, m1.view(u8), out=new)
        # tail 3 -> conductor 1
        np.left_shift(t_in.view(u8), 1, out=u2)
        sub(new, u2, out=new)
        # flag -> conductor next to an electron: subtract (code - 1)
        band(s, 15, out=u2)
        np.not_equal(u2, 0, out=m1)
        band(m1, is_flag, out=m1)
        sub(inner, 1, out=u2)
        np.multiply(u2, m1.view(u8), out=u2)
        sub(new, u2, out=new)
        # photon -> the flag of its single flag-or-geyser owner, else conductor (photons are few)
        eq(inner, Cell.PHOTON, out=m3)
        if np.count_nonzero(m3):
            at = np.flatnonzero(m3)
            new.reshape(-1)[at] = self._t["photon"].take(fm.reshape(-1)[at])
        moving = advancing[c0:c1]
        if moving.all():
            np.copyto(inner, new)
        else:
            idx = np.flatnonzero(moving)
            inner[idx] = new[idx]

    def _process_losses(self, b: int, mask: int) -> None:
        """Loss conversion of world ``b`` for the players in bit ``mask``, on the new state."""
        losers = [o for o in range(self.players) if mask >> o & 1]
        grid, dmg = self.codes[b], self.dmg[b]
        for o in losers:
            grid[grid == Cell.FLAG + o] = Cell.CONDUCTOR
            for kind in (Cell.AGENT, Cell.GEYSER, Cell.BASE):
                grid[grid == kind + o] = Cell.BLANK
            lo, hi = o * self.agents_per_player, (o + 1) * self.agents_per_player
            for i in range(lo, hi):
                if self.alive[b, i]:
                    dmg[(self.y[b, i] + BORDER) * self.pw + self.x[b, i] + BORDER] = 0
            self.alive[b, lo:hi] = False
            self.player_alive[b, o] = False
            self.lost_at[b, o] = self.tick[b]
        self._update_near(b)
        if self.player_alive[b].sum() <= 1:
            self._finish(b)

    def _finish(self, b: int) -> None:
        """Ranks of world ``b`` as `RezzoEngine` gives them: survivors first, then by how late they lost."""
        key = np.where(self.player_alive[b], self.tick[b] + 1, self.lost_at[b])
        self.ranks[b] = 1 + (key[None, :] > key[:, None]).sum(axis=1)
        self.done[b] = True

    def winner(self, b: int) -> int | None:
        """The winner of finished world ``b``, or None for a draw (or a world still running)."""
        firsts = np.flatnonzero(self.ranks[b] == 1)
        return int(firsts[0]) if self.done[b] and firsts.size == 1 else None
