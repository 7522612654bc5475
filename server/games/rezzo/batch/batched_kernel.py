"""numba-compiled loops for `BatchedRezzo`'s step: the transition, the viewports and the agent phase.

The numpy transition makes about 39 passes over every cell of the batch, one ufunc call each; at 1024
duels that is most of a step. Compiled, it is three short passes per world (per-cell values, row sums,
then the next code) within a scratch that stays in L1, in byte arithmetic that LLVM vectorises. The
viewports likewise become one loop that reads each cell once, a viewport row at a time, and makes
owners relative through a table as it writes. The agent phase, a vectorised move per resolution
slot in numpy, becomes a plain loop over each world's agents in their order.

numba is optional (the ``[rl]`` extra): `batched` imports this module only for the numba backend, and
its numpy code stays the fallback and the reference. Each loop follows its numpy twin rule for rule,
so the two agree bit for bit (tests/test_rezzo_batched.py runs both against the engine and the slow
reference). Two details matter for speed: every operand is a uint8 (numba widens mixed integers to
int64, which vectorises 8x narrower), and loops index from 0 upward (numba's wraparound check for a
negative index stops vectorisation when LLVM cannot prove the index is not negative).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

import numpy as np

from cellarena.sdk.games.rezzo import (
    FORWARD,
    MAX_DAMAGE,
    RIGHTWARD,
    VIEW_AGENT_COL,
    VIEW_AGENT_ROW,
    VIEW_SIZE,
    Facing,
)

# The codes as plain ints, which numba folds in as constants.
from cellarena.server.games.rezzo.batch.cells import (
    ADVANCE,
    AGENT,
    BASE,
    BLANK,
    BUILD,
    CONDUCTOR,
    ELECTRON,
    FLAG,
    HIT,
    LEFT,
    NOOP,
    PHOTON,
    RIGHT,
    TAIL,
    AgentArgs,
    TransitionArgs,
    ViewArgs,
)
from cellarena.server.games.rezzo.planes import AT_BASE, BURNT, FORMED

#: Per facing N, E, S, W: (dy, dx) of a step forward, and of a step to the right (along a viewport row).
_FWD = np.array([[FORWARD[f][1], FORWARD[f][0]] for f in Facing], np.intp)
_SIDE = np.array([[RIGHTWARD[f][1], RIGHTWARD[f][0]] for f in Facing], np.intp)


def _found_row(found: np.ndarray, b: int, cell: int, kind: int, owner: int) -> None:
    """A row (world, cell, kind, owner) after the count in ``found[0, 0]``."""
    k = found[0, 0] + 1
    found[k, 0], found[k, 1], found[k, 2], found[k, 3] = b, cell, kind, owner
    found[0, 0] = k


def _photon(c: np.ndarray, i: int, pw: int, photon: np.ndarray) -> int:
    """What the photon at inner cell ``i`` (``c[i + pw]``) becomes, by its neighbours' owner bits."""
    bits = 0
    for dy in (0, pw, 2 * pw):
        for dx in (-1, 0, 1):
            a = c[i + dy + dx]
            if FLAG <= a < BASE:
                bits |= 1 << (a & 7)
    return int(photon[bits])


def _resolve_word(
    c: np.ndarray,
    b: int,
    w: int,
    nb: np.ndarray,
    pw: int,
    photon: np.ndarray,
    new: np.ndarray,
    mark: np.ndarray,
    found: np.ndarray,
) -> int:
    """The 8 cells of word ``w`` of ``mark`` that are marked, in world ``b`` (inner cell i is
    ``c[i + pw]``): photons become flags or wire, flags beside a base and burnt ones are found.
    Returns the loser bits."""
    losers = 0
    for i in range(8 * w, 8 * w + 8):
        if not mark[i]:
            continue
        x = c[i + pw]
        if x == PHOTON:
            new[i] = _photon(c, i, pw, photon)
            if new[i] >= FLAG:
                _found_row(found, b, i + pw, FORMED, new[i] & 7)
            continue
        if (nb[i] >> (x & 7)) & 1:
            losers |= 1 << (x & 7)
            _found_row(found, b, i + pw, AT_BASE, x & 7)
        if new[i] == CONDUCTOR:
            _found_row(found, b, i + pw, BURNT, x & 7)
    return losers


def _transition(args: TransitionArgs, scratch: np.ndarray, start: int, found: np.ndarray) -> int:
    """`numpy_transition.NumpyTransition` for worlds ``start``.. : ``args`` (codes, near, advancing,
    pw, photon, loss_any), the next codes of the advancing worlds of ``codes`` (B, plane) in place,
    and their loss bits (judged on the old state) in ``loss_any``. ``near``: `BatchedRezzo._near`;
    ``photon``: its photon table; ``scratch``: (5, plane rounded up to a multiple of 8) zeros.

    The flags touched go to ``found`` as rows (world, cell, kind, owner) after the count in
    ``found[0, 0]`` (row 0 holds the count): formed, burnt, beside a base (`planes.FORMED`...). A world
    may add up to two rows per cell, so the kernel stops before a world that might not fit and
    returns its index (the caller makes room and calls again from there); B when all are done."""
    codes, near, advancing, pw, photon, loss_any = args
    u8 = np.uint8
    plane = codes.shape[1]
    n = plane - 2 * pw  # the inner cells: rows 1..ph-2, whose 3x3 blocks lie within the world
    v, hs, hf, new = scratch[0], scratch[1, 1:], scratch[2, 1:], scratch[3, :n]
    up, mid, down = scratch[1, :n], scratch[1, pw : pw + n], scratch[1, 2 * pw :]
    f_up, f_mid, f_down = scratch[2, :n], scratch[2, pw : pw + n], scratch[2, 2 * pw :]
    # Marks of the cells to resolve one by one, and the same as words (the row's tail stays 0).
    mark, words = scratch[4], scratch[4].view(np.uint64)
    for b in range(start, codes.shape[0]):
        loss_any[b] = 0
        if not advancing[b]:
            continue
        if found[0, 0] + 2 * n + 1 > found.shape[0]:
            return b
        c, inner, nb = codes[b], codes[b, pw : pw + n], near[b, pw : pw + n]
        # Electrons count 1 and tails 16, so one 3x3 sum counts both (at most 9 each); bit 7 marks a
        # flag or geyser (codes 16..31), kept out of the sums.
        for i in range(plane):
            x = c[i]
            v[i] = u8(
                u8(x == u8(ELECTRON)) + u8(16) * u8(x == u8(TAIL)) + u8(128) * u8(u8(x - u8(16)) < u8(16))
            )
        # Row sums and ORs; hs[i] is the sum at cell i + 1. Row ends fall in the OOB border.
        for i in range(plane - 2):
            a0, a1, a2 = v[i], v[i + 1], v[i + 2]
            hs[i] = u8((a0 & u8(127)) + (a1 & u8(127)) + (a2 & u8(127)))
            hf[i] = u8((a0 | a1 | a2) >> u8(7))
        for i in range(n):
            s = u8(up[i] + mid[i] + down[i])
            fm = u8(f_up[i] | f_mid[i] | f_down[i])
            es = u8(s & u8(15))  # electron neighbours (the centre is no electron where it matters)
            x = inner[i]
            e = u8(x == u8(ELECTRON))
            flag = u8(x - u8(FLAG))
            is_flag = u8(flag < u8(8))
            # conductor -> electron beside 1 or 2 electrons (+1); electron -> tail (+1), or photon (+2)
            # beside a tail and a flag or geyser; tail -> conductor (-2); flag -> conductor beside an
            # electron (minus code - 1).
            y = u8(x + (u8(x == u8(CONDUCTOR)) & u8(u8(es - u8(1)) < u8(2))) + e + (e & u8(s > u8(15)) & fm))
            y = u8(y - u8(2) * u8(x == u8(TAIL)))
            burnt = is_flag & u8(es != u8(0))
            new[i] = u8(y - burnt * u8(flag + u8(FLAG - CONDUCTOR)))
            mark[i] = u8(x == u8(PHOTON)) | (is_flag & u8(nb[i] != u8(0))) | burnt
        rare = np.uint64(0)  # (an OR in the loop above would stop its vectorisation)
        for w in range(words.shape[0]):
            rare |= words[w]
        if rare:
            # Photons and flags beside a base, cell by cell: found 8 marks at a time.
            for w in range(words.shape[0]):
                if words[w] != 0:
                    loss_any[b] |= u8(_resolve_word(c, b, w, nb, pw, photon, new, mark, found))
        for i in range(n):
            inner[i] = new[i]
    return codes.shape[0]


def _views(args: ViewArgs) -> None:
    """Row j of ``out`` (len(worlds), N, 2, 169): the viewports of world ``worlds[j]`` as
    `BatchedRezzo.views` gives them; ``state``: codes, damage, x, y, facing; ``size``: (H, W);
    ``relative[p]`` maps a code to what player p's bot sees. Off the world: OOB, no damage (the
    state's corner cell)."""
    state, worlds, size, relative, per_player, out = args
    codes, dmg, x, y, facing = state
    height, width = size
    fwd, right = _FWD, _SIDE
    pw = width + 2
    for j in range(worlds.shape[0]):
        b = worlds[j]
        c, d = codes[b], dmg[b]
        for a in range(x.shape[1]):
            rel = relative[a // per_player]
            ax, ay, f = x[b, a], y[b, a], facing[b, a]
            fy, fx, ry, rx = fwd[f, 0], fwd[f, 1], right[f, 0], right[f, 1]
            step = ry * pw + rx
            oc, od = out[j, a, 0], out[j, a, 1]
            for row in range(VIEW_SIZE):
                ahead = VIEW_AGENT_ROW - row
                y0, x0 = ay + ahead * fy - VIEW_AGENT_COL * ry, ax + ahead * fx - VIEW_AGENT_COL * rx
                y1, x1 = y0 + (VIEW_SIZE - 1) * ry, x0 + (VIEW_SIZE - 1) * rx
                o = row * VIEW_SIZE
                if min(y0, y1) >= 0 and max(y0, y1) < height and min(x0, x1) >= 0 and max(x0, x1) < width:
                    at = (y0 + 1) * pw + x0 + 1
                    for k in range(VIEW_SIZE):  # the whole row lies in the world
                        oc[o + k] = rel[c[at]]
                        od[o + k] = d[at]
                        at += step
                    continue
                for k in range(VIEW_SIZE):
                    cy, cx = y0 + k * ry, x0 + k * rx
                    at = (cy + 1) * pw + cx + 1 if 0 <= cy < height and 0 <= cx < width else 0
                    oc[o + k] = rel[c[at]]
                    od[o + k] = d[at]


def _turned(f: int, m: int) -> int:
    """Facing ``f`` after move ``m`` (a turn left or right; any other move keeps it)."""
    if m == LEFT:
        return (f + 3) % 4
    if m == RIGHT:
        return (f + 1) % 4
    return f


def _agent_phase(args: AgentArgs) -> None:
    """`BatchedRezzo._agent_phase`: each running world's agents move in resolution order (slot k of
    every player, the player whose turn it is first). ``args`` (`cells.AgentArgs`): the state
    (codes, damage, then x, y, facing, alive (B, N), and tick), the moves (B, N) int64, the running
    worlds, the shape, the hittable table, the counts (``illegal`` and ``blocked`` (B, P), each
    player's illegal moves and, of those, advances and builds refused) and the cuts (per agent whose
    hit blanked a cell, that cell and the code it held; else left as it is)."""
    state, moves, running, shape, hittable, counts, cuts = args
    codes, dmg, x, y, facing, alive, tick = state
    illegal, blocked = counts
    players, per_player, pw = shape
    for b in range(codes.shape[0]):
        if not running[b]:
            continue
        c, d = codes[b], dmg[b]
        first = tick[b] % players
        for k in range(per_player):
            for i in range(players):
                player = (first + i) % players
                a = player * per_player + k
                m = moves[b, a]
                if not alive[b, a] or m == NOOP:
                    continue
                f = _turned(facing[b, a], m)
                facing[b, a] = f
                fy, fx = _FWD[f, 0], _FWD[f, 1]
                here = (y[b, a] + 1) * pw + x[b, a] + 1
                front = here + fy * pw + fx
                target = c[front]
                if m in (ADVANCE, BUILD):
                    if target != BLANK:
                        illegal[b, player] += 1
                        blocked[b, player] += 1
                        continue
                    c[front] = AGENT + player
                    c[here] = CONDUCTOR if m == BUILD else BLANK
                    d[here] = 0
                    x[b, a] += fx
                    y[b, a] += fy
                elif m == HIT:
                    if not hittable[target]:
                        illegal[b, player] += 1
                    elif d[front] >= MAX_DAMAGE:
                        cuts[b, a, 0], cuts[b, a, 1] = front, target
                        c[front] = BLANK
                        d[front] = 0
                    else:
                        d[front] += 1


def _compile(numba: Any, function: Any, **options: Any) -> Any:
    """``function`` compiled on first call, cached on disk if numba finds a writable cache directory."""
    try:
        return numba.njit(cache=True, **options)(function)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return numba.njit(function, **options)


#: The functions the loops call. A compiled function calls only compiled ones, which it finds among
#: the module's names as it compiles: so each is compiled first, in place of its plain function.
_CALLED = ("_found_row", "_photon", "_resolve_word", "_turned")


@functools.cache
def compile_called(numba: Any) -> None:
    names = globals()
    for name in _CALLED:
        # Inlined where called: a call per marked word would otherwise cost its arrays' reference counts.
        names[name] = _compile(numba, names[name], inline="always")


#: The loops' signatures, which mypy checks the calls of their compiled forms against.
AgentPhase = Callable[[AgentArgs], None]
Transition = Callable[[TransitionArgs, np.ndarray, int, np.ndarray], int]
Views = Callable[[ViewArgs], None]


class Kernels:
    """The compiled loops: `_agent_phase`, `_transition` and `_views`. Constructing it imports numba
    (ImportError without it); each loop compiles, or loads from numba's cache, on its first call."""

    agent_phase: AgentPhase
    transition: Transition
    views: Views

    def __init__(self) -> None:
        numba = importlib.import_module("numba")
        compile_called(numba)
        self.agent_phase = _compile(numba, _agent_phase)
        self.transition = _compile(numba, _transition)
        self.views = _compile(numba, _views)
