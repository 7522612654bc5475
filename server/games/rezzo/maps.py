"""Rezzo maps: the plain-text format, its parser with file:line:col errors, and the built-in maps.

The format is documented for map authors in `docs/games/rezzo.md` ("Maps"). In short::

    rezzo-map 1
    ; comment lines start with ';'
    name: Duel
    players: 2
    agents: 1            ; agents per player (K)
    facing: N S          ; one facing per player, for all that player's agents
    ---
    ................
    ..#####.........

Every error is a `MapError` whose message starts with ``file:line:col: `` (1-based) and says what is
wrong and what to do, so an editor can jump to the cell. The built-in maps are files
``maps/<name>.txt`` next to this module, shipped as package data.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from cellarena.sdk.games.rezzo import MAX_PLAYERS, Cell, Facing
from cellarena.server.games.base import MapError

VERSION = 1
MIN_SIZE = 3
MAX_SIZE = 4096
MIN_PLAYERS = 2
MAX_AGENTS = 64
#: Bases and geysers closer than this (Chebyshev) would let a flag touch a base as soon as it forms.
MIN_GEYSER_BASE_DISTANCE = 3
#: A 4096x4096 grid is about 16.8 MB of text; anything much bigger is not a map.
MAX_FILE_BYTES = 32 * 1024 * 1024

HEADER_KEYS = ("name", "players", "agents", "facing")
_KEY_HELP = {
    "name": "name: <text>",
    "players": "players: <2..8>",
    "agents": f"agents: <1..{MAX_AGENTS}>",
    "facing": "facing: <one of N E S W per player>",
}

_OWNED_LETTERS = {Cell.BASE: "ABCDEFGH", Cell.GEYSER: "abcdefgh", Cell.AGENT: "01234567"}
#: Map character -> public cell code.
LEGEND: dict[str, int] = {".": Cell.BLANK, "#": Cell.CONDUCTOR, "@": Cell.ELECTRON, "~": Cell.TAIL}
for _kind, _letters in _OWNED_LETTERS.items():
    for _owner, _ch in enumerate(_letters):
        LEGEND[_ch] = int(_kind) + _owner
_INVALID = 255
_LUT = np.full(256, _INVALID, np.uint8)
for _ch, _code in LEGEND.items():
    _LUT[ord(_ch)] = _code
_LEGEND_HELP = "'.' blank, '#' wire, '@' electron, '~' tail, A-H base, a-h geyser, 0-7 agent"
_KIND_NAMES = {Cell.AGENT: "agent", Cell.GEYSER: "geyser", Cell.BASE: "base"}


@dataclass(frozen=True)
class AgentStart:
    player: int
    x: int
    y: int
    facing: Facing


@dataclass(frozen=True, eq=False)
class RezzoMap:
    """A parsed, validated map.

    ``cells`` is (height, width) uint8 of public `Cell` codes, agents included (AGENT + owner).
    ``agents`` lists every agent start; an agent's index within its player is its order in this list
    among that player's agents (reading order in the file).
    """

    name: str
    source: str
    cells: np.ndarray
    players: int
    agents_per_player: int
    agents: tuple[AgentStart, ...]

    @property
    def height(self) -> int:
        return int(self.cells.shape[0])

    @property
    def width(self) -> int:
        return int(self.cells.shape[1])


# The file line of each grid row of a parsed map, so checks that only get the RezzoMap (such as
# check_point_symmetry) can still point into the file. Maps built in code fall back to row + 1.
_ROW_LINES: weakref.WeakKeyDictionary[RezzoMap, tuple[int, ...]] = weakref.WeakKeyDictionary()


def _where(m: RezzoMap, x: int, y: int) -> tuple[int, int]:
    lines = _ROW_LINES.get(m)
    return (lines[y] if lines is not None else y + 1), x + 1


def _describe(code: int) -> str:
    """'base of player 1 (B)' or 'wire (#)' for messages."""
    if code < Cell.AGENT:
        name = {Cell.BLANK: "blank", Cell.CONDUCTOR: "wire", Cell.ELECTRON: "electron", Cell.TAIL: "tail"}
        ch = next(c for c, v in LEGEND.items() if v == code)
        return f"{name[Cell(code)]} ({ch!r})"
    kind, owner = Cell(code & 0xF8), code & 7
    return f"{_KIND_NAMES[kind]} of player {owner} ({_OWNED_LETTERS[kind][owner]!r})"


# --------------------------------------------------------------------------- header


@dataclass
class _HeaderValue:
    text: str
    line: int
    col: int  # column of the value's first character


@dataclass
class _Header:
    name: str
    players: int
    agents_per_player: int
    facings: list[Facing]
    values: dict[str, _HeaderValue]  # for error locations


def _strip_comment(line: str) -> str:
    return line.split(";", 1)[0].rstrip()


def _is_skippable(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith(";")


def _parse_int(v: _HeaderValue, key: str, lo: int, hi: int, source: str) -> int:
    if not re.fullmatch(r"[0-9]+", v.text):
        raise MapError(
            source, v.line, v.col, f"bad number {v.text!r} for '{key}': write a whole number {lo}..{hi}"
        )
    n = int(v.text)
    if not lo <= n <= hi:
        raise MapError(source, v.line, v.col, f"'{key}: {n}' is out of range: use a number {lo}..{hi}")
    return n


def _parse_facings(v: _HeaderValue, players: int, source: str) -> list[Facing]:
    facings: list[Facing] = []
    for match in re.finditer(r"\S+", v.text):
        token, col = match.group(), v.col + match.start()
        if token not in Facing.__members__:
            raise MapError(source, v.line, col, f"bad facing {token!r}: use one of N, E, S, W per player")
        if len(facings) == players:
            raise MapError(
                source,
                v.line,
                col,
                f"too many facings: 'players: {players}' needs exactly {players}, one per player; "
                f"remove {token!r}",
            )
        facings.append(Facing[token])
    if len(facings) < players:
        raise MapError(
            source,
            v.line,
            v.col + len(v.text),
            f"'facing' gives {len(facings)} facing(s) but 'players: {players}' needs {players}, "
            "one per player (N, E, S or W)",
        )
    return facings


# --------------------------------------------------------------------------- parsing


def parse_map(text: str, source: str = "<string>") -> RezzoMap:
    """Parse and validate a map. Raises MapError (``source:line:col: ...``) on the first problem."""
    lines = text.split("\n")
    i = 0
    # Version line: the first line that is neither blank nor a comment.
    while i < len(lines) and _is_skippable(lines[i]):
        i += 1
    if i == len(lines):
        raise MapError(source, 1, 1, f"empty map: the first line must be 'rezzo-map {VERSION}'")
    _check_version(lines[i], i + 1, source)
    i += 1

    header: dict[str, _HeaderValue] = {}
    key_lines: dict[str, int] = {}
    sep_line = 0
    while i < len(lines):
        raw, lineno = lines[i], i + 1
        i += 1
        if _is_skippable(raw):
            continue
        body = _strip_comment(raw)
        indent = len(body) - len(body.lstrip())
        if body.strip() == "---":
            sep_line = lineno
            break
        raw_key, colon, value = body.partition(":")
        if not colon:
            if set(body.strip()) <= set(LEGEND):
                raise MapError(
                    source,
                    lineno,
                    indent + 1,
                    "this looks like a grid row: put a line '---' between the header and the grid",
                )
            raise MapError(
                source,
                lineno,
                indent + 1,
                f"expected 'key: value' (keys: {', '.join(HEADER_KEYS)}) or '---' to start the grid",
            )
        key = raw_key.strip()
        if key not in HEADER_KEYS:
            raise MapError(
                source,
                lineno,
                indent + 1,
                f"unknown header key {key!r}: the keys are {', '.join(HEADER_KEYS)}",
            )
        if key in header:
            raise MapError(
                source,
                lineno,
                indent + 1,
                f"duplicate header key {key!r} (first given on line {key_lines[key]}); keep one",
            )
        value_col = len(raw_key) + 2 + (len(value) - len(value.lstrip()))
        value = value.strip()
        if not value:
            raise MapError(source, lineno, value_col, f"'{key}' has no value: write '{_KEY_HELP[key]}'")
        header[key] = _HeaderValue(value, lineno, value_col)
        key_lines[key] = lineno
    if not sep_line:
        raise MapError(
            source, len(lines), 1, "no '---' line: end the header with '---' and put the grid after it"
        )
    for key in HEADER_KEYS:
        if key not in header:
            raise MapError(
                source, sep_line, 1, f"missing header key '{key}': add '{_KEY_HELP[key]}' before '---'"
            )

    name = header["name"].text
    players = _parse_int(header["players"], "players", MIN_PLAYERS, MAX_PLAYERS, source)
    agents_per_player = _parse_int(header["agents"], "agents", 1, MAX_AGENTS, source)
    facings = _parse_facings(header["facing"], players, source)

    cells, row_lines = _parse_grid(lines, i, sep_line, source)
    hdr = _Header(name, players, agents_per_player, facings, header)
    return _build(cells, row_lines, hdr, source)


def _check_version(raw: str, lineno: int, source: str) -> None:
    body = _strip_comment(raw)
    col = len(body) - len(body.lstrip()) + 1
    tokens = body.split()
    expected = f"rezzo-map {VERSION}"
    if tokens[0] != "rezzo-map":
        raise MapError(
            source, lineno, col, f"expected the version line '{expected}' first; is this a Rezzo map?"
        )
    if len(tokens) != 2 or not tokens[1].isdigit():
        raise MapError(source, lineno, col, f"bad version line: write '{expected}'")
    if int(tokens[1]) != VERSION:
        vcol = body.index(tokens[1], col - 1 + len("rezzo-map")) + 1
        raise MapError(
            source,
            lineno,
            vcol,
            f"unsupported map format version {tokens[1]}: this server reads '{expected}'",
        )


def _parse_grid(lines: list[str], start: int, sep_line: int, source: str) -> tuple[np.ndarray, list[int]]:
    """The grid rows after '---' as an (H, W) array of codes, and the file line of each row."""
    rows: list[np.ndarray] = []
    row_lines: list[int] = []
    width = -1
    first_line = 0
    pending_blank = 0  # a blank line is fine only if no row follows it
    for i in range(start, len(lines)):
        lineno = i + 1
        row = lines[i].rstrip()  # trailing whitespace (and the '\r' of CRLF files) is ignored
        if not row:
            pending_blank = pending_blank or lineno
            continue
        if row.lstrip().startswith(";"):  # no grid row holds ';' or leading blanks, so this is a comment
            continue
        if pending_blank:
            raise MapError(
                source,
                pending_blank,
                1,
                "blank line inside the grid: remove it (blank lines may only follow the last row)",
            )
        if len(rows) == MAX_SIZE:
            raise MapError(
                source,
                lineno,
                1,
                f"the grid has more than {MAX_SIZE} rows; a map is at most {MAX_SIZE}x{MAX_SIZE}",
            )
        if width < 0 and len(row) > MAX_SIZE:
            raise MapError(
                source,
                lineno,
                MAX_SIZE + 1,
                f"row is {len(row)} cells wide; a map is at most {MAX_SIZE}x{MAX_SIZE}",
            )
        raw = row.encode("utf-8")
        codes = _LUT[np.frombuffer(raw, np.uint8)] if row.isascii() else None
        if codes is None or (codes == _INVALID).any():
            col = _first_bad_column(row)
            ch = row[col - 1]
            what = "a space" if ch == " " else "a tab" if ch == "\t" else f"{ch!r}"
            raise MapError(source, lineno, col, f"unknown map character {what}: use {_LEGEND_HELP}")
        if width < 0:
            width, first_line = len(row), lineno
        elif len(row) != width:
            col = width + 1 if len(row) > width else len(row) + 1
            raise MapError(
                source,
                lineno,
                col,
                f"ragged row: this row is {len(row)} cells wide but the first "
                f"row (line {first_line}) is {width}; every row must have the same width",
            )
        rows.append(codes)
        row_lines.append(lineno)
    if not rows:
        raise MapError(source, sep_line + 1, 1, "the grid is empty: add rows of cells after '---'")
    if len(rows) < MIN_SIZE or width < MIN_SIZE:
        raise MapError(
            source,
            row_lines[0],
            1,
            f"the grid is {width}x{len(rows)} (width x height); a map is at least {MIN_SIZE}x{MIN_SIZE}",
        )
    return np.stack(rows), row_lines


def _first_bad_column(row: str) -> int:
    for col, ch in enumerate(row, 1):
        if ch not in LEGEND:
            return col
    raise AssertionError("no bad character")  # pragma: no cover - only called when there is one


def _build(cells: np.ndarray, row_lines: list[int], hdr: _Header, source: str) -> RezzoMap:
    """Check ownership and counts, make the RezzoMap, then check geyser distance and symmetry."""
    players, agents_per_player, header = hdr.players, hdr.agents_per_player, hdr.values

    def at(x: int, y: int) -> tuple[str, int, int]:
        return source, row_lines[y], x + 1

    owned = cells >= Cell.AGENT
    owners = cells & 7
    bad = owned & (owners >= players)
    if bad.any():
        y, x = (int(v) for v in np.argwhere(bad)[0])
        code = int(cells[y, x])
        raise MapError(
            *at(x, y),
            f"{_describe(code)} but 'players: {players}' allows owners 0..{players - 1} "
            f"only; use a player 0..{players - 1} or raise 'players'",
        )

    kinds = np.where(owned, cells & 0xF8, cells)
    census = np.bincount(cells.ravel(), minlength=256)  # cells per code
    p_line, p_col = header["players"].line, header["players"].col
    for p in range(players):
        for kind in (Cell.BASE, Cell.GEYSER):
            if not census[kind + p]:
                letter = _OWNED_LETTERS[kind][p]
                raise MapError(
                    source,
                    p_line,
                    p_col,
                    f"player {p} has no {_KIND_NAMES[kind]} ({letter!r}): every player 0..{players - 1} "
                    f"needs at least one base, one geyser and {agents_per_player} agent(s)",
                )
    agent_cells = np.argwhere(kinds == Cell.AGENT)  # reading order
    count = [0] * players
    starts = []
    for y, x in agent_cells:
        p = int(owners[y, x])
        count[p] += 1
        if count[p] > agents_per_player:
            raise MapError(
                *at(int(x), int(y)),
                f"player {p} has more than {agents_per_player} agent(s): remove "
                f"this one or raise 'agents' (line {header['agents'].line})",
            )
        starts.append(AgentStart(p, int(x), int(y), hdr.facings[p]))
    for p in range(players):
        if count[p] < agents_per_player:
            v = header["agents"]
            raise MapError(
                source,
                v.line,
                v.col,
                f"player {p} has {count[p]} agent(s) ({_OWNED_LETTERS[Cell.AGENT][p]!r}) but "
                f"'agents: {agents_per_player}' needs exactly {agents_per_player} per player",
            )

    m = RezzoMap(
        name=hdr.name,
        source=source,
        cells=cells,
        players=players,
        agents_per_player=agents_per_player,
        agents=tuple(starts),
    )
    _ROW_LINES[m] = tuple(row_lines)
    _check_geyser_distance(m)
    check_point_symmetry(m)
    return m


def _check_geyser_distance(m: RezzoMap) -> None:
    """Every geyser at Chebyshev distance >= 3 from every base, also across the edges (torus variant)."""
    cells = m.cells
    kinds = cells & 0xF8
    bases = kinds == Cell.BASE
    r = MIN_GEYSER_BASE_DISTANCE - 1
    near = bases.copy()  # separable dilation by r, wrapping so the torus variant is covered too
    for axis in (1, 0):
        grown = near.copy()
        for d in range(1, r + 1):
            grown |= np.roll(near, d, axis) | np.roll(near, -d, axis)
        near = grown
    bad = near & (kinds == Cell.GEYSER)
    if not bad.any():
        return
    gy, gx = (int(v) for v in np.argwhere(bad)[0])
    h, w = cells.shape
    for dy in range(-r, r + 1):
        for dx in range(-r, r + 1):
            by, bx = (gy + dy) % h, (gx + dx) % w
            if kinds[by, bx] == Cell.BASE:
                dist = max(abs(dy), abs(dx))
                line, col = _where(m, bx, by)
                wrap = (
                    " (across the world's edge, which matters in the torus variant)"
                    if ((by, bx) != (gy + dy, gx + dx))
                    else ""
                )
                raise MapError(
                    m.source,
                    *_where(m, gx, gy),
                    f"{_describe(int(cells[gy, gx]))} is {dist} cell(s) from the "
                    f"{_describe(int(cells[by, bx]))} at {line}:{col}{wrap}; "
                    f"keep every geyser at least {MIN_GEYSER_BASE_DISTANCE} cells "
                    "(Chebyshev) from every base, or a player could lose as soon as a flag forms",
                )
    raise AssertionError("unreachable")  # pragma: no cover


def check_point_symmetry(m: RezzoMap) -> None:
    """Raise MapError unless rotating the map by 180° gives the same map up to a swap of players.

    The swap is one permutation π of the players, and it must be an involution (it is, automatically,
    when every cell agrees). Unowned cells must map onto the same state; an owned cell of player p
    onto the same kind of player π(p); an agent of p facing f onto an agent of π(p) facing opposite(f).
    The error names the first offending cell in reading order and its mirror.
    """
    cells = m.cells
    h, w = cells.shape
    mirror = cells[::-1, ::-1]
    owned = cells >= Cell.AGENT
    kinds = np.where(owned, cells & 0xF8, cells)
    mirror_kinds = kinds[::-1, ::-1]

    def fail(y: int, x: int, why: str) -> MapError:
        line, col = _where(m, x, y)
        mline, mcol = _where(m, w - 1 - x, h - 1 - y)
        return MapError(
            m.source,
            line,
            col,
            f"not point-symmetric: {_describe(int(cells[y, x]))} at x={x}, y={y} "
            f"mirrors to {_describe(int(mirror[y, x]))} at {mline}:{mcol} (x={w - 1 - x}, "
            f"y={h - 1 - y}); {why}",
        )

    diff = kinds != mirror_kinds
    if diff.any():
        y, x = (int(v) for v in np.argwhere(diff)[0])
        raise fail(y, x, "rotating the map by 180° must give the same map, with owners swapped in pairs")

    flat = np.flatnonzero(owned)  # reading order
    own = (cells.flat[flat] & 7).astype(np.int64)
    mown = (mirror.flat[flat] & 7).astype(np.int64)
    players_seen, first = np.unique(own, return_index=True)
    pi = np.full(MAX_PLAYERS, -1, np.int64)
    pi[players_seen] = mown[first]
    wrong = np.flatnonzero(pi[own] != mown)
    if wrong.size:
        k = int(wrong[0])
        p = int(own[k])
        y, x = divmod(int(flat[k]), w)
        fy, fx = divmod(int(flat[first[np.searchsorted(players_seen, p)]]), w)
        fline, fcol = _where(m, fx, fy)
        raise fail(
            y,
            x,
            f"but player {p}'s first cell at {fline}:{fcol} mirrors to player {int(pi[p])}'s; "
            "the rotation must swap the players by one consistent pairing",
        )

    facing = {(a.x, a.y): a for a in m.agents}
    for a in m.agents:
        b = facing.get((w - 1 - a.x, h - 1 - a.y))
        want = Facing((a.facing + 2) % 4)
        if b is None or b.facing == want:
            continue
        if b.player == a.player:
            # Facings are per player, so a player who is their own mirror image can never pass.
            raise fail(
                a.y,
                a.x,
                f"player {a.player} is their own mirror image, so their agents would have to face both "
                f"{a.facing.name} and {want.name}; the rotation must pair every player with another one",
            )
        raise fail(
            a.y,
            a.x,
            f"this agent faces {a.facing.name} and its mirror faces {b.facing.name}, but the "
            f"mirror must face {want.name}: give paired players opposite facings in 'facing:'",
        )


# --------------------------------------------------------------------------- loading


def _maps_dir() -> resources.abc.Traversable:
    return resources.files(__package__) / "maps"


def builtin_maps() -> list[str]:
    """The names of the built-in maps, sorted."""
    return sorted(p.name[:-4] for p in _maps_dir().iterdir() if p.name.endswith(".txt"))


def load_map(name_or_path: str) -> RezzoMap:
    """A built-in map by name (such as "duel"), else the map file at that path."""
    return parse_map(*read_map(name_or_path))


def read_map(name_or_path: str) -> tuple[str, str]:
    """The text of a built-in map or map file, and the source name its errors should carry."""
    builtins = builtin_maps()
    if name_or_path in builtins:
        text = (_maps_dir() / f"{name_or_path}.txt").read_text(encoding="utf-8")
        return text, f"<builtin>/{name_or_path}.txt"
    path = Path(name_or_path)
    listing = ", ".join(builtins)
    if not path.exists():
        raise MapError(
            name_or_path,
            1,
            1,
            f"no built-in map of that name and no such file; built-in maps: "
            f"{listing} (or give the path of a map file)",
        )
    if not path.is_file():
        raise MapError(name_or_path, 1, 1, f"not a file; give a map file's path or a built-in map: {listing}")
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise MapError(
                name_or_path,
                1,
                1,
                f"the file is {size} bytes; a map file is at most "
                f"{MAX_FILE_BYTES} bytes ({MAX_SIZE}x{MAX_SIZE} cells)",
            )
        data = path.read_bytes()
    except OSError as exc:
        raise MapError(name_or_path, 1, 1, f"cannot read the map file: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        col = len(before) - (before.rfind(b"\n") + 1) + 1
        raise MapError(
            name_or_path, line, col, "the file is not UTF-8 text; a map uses only ASCII characters"
        ) from exc
    return text, name_or_path
