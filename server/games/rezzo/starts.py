"""Randomised starts: a map's agents moved a little and turned, written out as a map text of its own.

Training on one start teaches one opening by heart. A randomised start moves each agent to a blank
cell up to ``radius`` cells (Chebyshev) from where the map puts it, and gives each player a random
facing. Every start is itself a valid map in the strict format, written as text: the engine, the
vector environment and a replay (which embeds its map's text) all play the very same start, and
`cellarena replay verify` rebuilds it from the file alone.

Fairness is kept by the map's own point symmetry (every built-in map has it, and the strict parser
insists on it): an agent and its mirror image move by opposite offsets, and paired players face
opposite ways, so the start is as symmetric as the map. A map whose text does not pair its agents by
the 180° rotation (an old replay's lenient text) has no randomised starts: `random_start` returns it
as it is.
"""

from __future__ import annotations

import functools

import numpy as np

from cellarena.sdk.games.rezzo import Cell, Facing
from cellarena.server.games.rezzo.maps import LEGEND, VERSION, RezzoMap, parse_embedded_map

_CHAR_OF = {code: ch for ch, code in LEGEND.items()}


def map_text(m: RezzoMap, cells: np.ndarray, facings: list[Facing], comment: str = "") -> str:
    """``cells`` (absolute codes, agents included) as a map text in the strict format, named as ``m``."""
    lines = [f"rezzo-map {VERSION}"]
    if comment:
        lines.append(f"; {comment}")
    lines += [
        f"name: {m.name}",
        f"players: {m.players}",
        f"agents: {m.agents_per_player}",
        "facing: " + " ".join(f.name for f in facings),
        "---",
    ]
    lines += ["".join(_CHAR_OF[int(c)] for c in row) for row in cells]
    return "\n".join(lines) + "\n"


def _pairs(m: RezzoMap) -> tuple[list[tuple[int, int]], list[int]] | None:
    """The agents paired by the 180° rotation (each pair once, the earlier agent first), and the
    players' pairing; None if some agent has no mirror image of another player."""
    h, w = m.height, m.width
    at = {(a.x, a.y): i for i, a in enumerate(m.agents)}
    pairs: list[tuple[int, int]] = []
    partner = [-1] * m.players
    for i, a in enumerate(m.agents):
        j = at.get((w - 1 - a.x, h - 1 - a.y))
        if j is None or m.agents[j].player == a.player:
            return None
        partner[a.player] = m.agents[j].player
        if i < j:
            pairs.append((i, j))
    return pairs, partner


def random_start(text: str, rng: np.random.Generator, radius: int) -> str:
    """A randomised start of the map ``text`` (see the module docstring), or ``text`` itself when
    ``radius`` is 0 or the map does not pair its agents by the rotation."""
    if radius < 0:
        raise ValueError(f"the start radius must be 0 or more, got {radius}")
    m = _parsed(text)
    pairs = _pairs(m) if radius else None
    if pairs is None:
        return text
    agent_pairs, partner = pairs
    h, w = m.height, m.width
    cells = m.cells.copy()
    agent = (cells >= Cell.AGENT) & (cells < Cell.FLAG)
    cells[agent] = Cell.BLANK
    for i, j in agent_pairs:
        a, b = m.agents[i], m.agents[j]
        options = [
            (dx, dy)
            for dy in range(-radius, radius + 1)
            for dx in range(-radius, radius + 1)
            if 0 <= a.x + dx < w
            and 0 <= a.y + dy < h
            and cells[a.y + dy, a.x + dx] == Cell.BLANK
            and cells[b.y - dy, b.x - dx] == Cell.BLANK
            and (a.x + dx, a.y + dy) != (b.x - dx, b.y - dy)
        ]
        if not options:  # an earlier pair took this pair's cells: keep the map's own start
            return text
        dx, dy = options[int(rng.integers(len(options)))]
        cells[a.y + dy, a.x + dx] = Cell.AGENT + a.player
        cells[b.y - dy, b.x - dx] = Cell.AGENT + b.player
    facings: list[Facing] = [Facing.N] * m.players
    for p in range(m.players):
        q = partner[p]
        if p < q:
            facings[p] = Facing(int(rng.integers(4)))
            facings[q] = Facing((facings[p] + 2) % 4)
    # The engine parses it strictly when it loads it (tests/test_rezzo_training.py checks many).
    return map_text(m, cells, facings, f"a randomised start of {m.name} (radius {radius})")


@functools.lru_cache(maxsize=32)
def _parsed(text: str) -> RezzoMap:
    """The pool's few maps, parsed once: a vector environment draws a start at every episode."""
    return parse_embedded_map(text, "<start map>")
