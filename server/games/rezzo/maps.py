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

The format is strict (whitespace is space and tab only, the version line and the separator are
exact, only blank lines may be indented), so that every program that reads a map agrees with this one.
Every error is a `MapError` whose message starts with ``file:line:col: `` (1-based), says what is
wrong and what to do, so an editor can jump to the cell, and ends with the section of the rules page
that states the rule. Map texts that replays carry are read by `parse_embedded_map`, which also
accepts what the parser before the strict format did. The built-in maps are files
``maps/<name>.txt`` next to this module, shipped as package data.
"""

from __future__ import annotations

import re
import unicodedata
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


# --------------------------------------------------------------------------- errors

#: The rules page; every map error ends by naming the section of it that states the rule broken.
DOC_PAGE = "docs/games/rezzo.md"
# Anchors of that page's sections (tests/test_rezzo_maps.py checks that each exists).
CHARACTERS = "characters-and-lines"
COMMENTS = "comments-and-blank-lines"
VERSION_LINE = "the-version-line"
HEADER = "the-header"
SEPARATOR = "the-separator"
GRID = "the-grid"
PLAYERS = "players-and-agents"
GEYSERS = "geysers-and-bases"
SYMMETRY = "point-symmetry"
SECTIONS = (CHARACTERS, COMMENTS, VERSION_LINE, HEADER, SEPARATOR, GRID, PLAYERS, GEYSERS, SYMMETRY)


def _fail(source: str, line: int, col: int, message: str, section: str) -> MapError:
    """A MapError whose message ends with the doc section of the rule, so an author can read it."""
    return MapError(source, line, col, f"{message} (see {DOC_PAGE}#{section})")


# --------------------------------------------------------------------------- characters and lines

_BOM = "\ufeff"
# ASCII control characters other than tab and LF, and a CR that does not end a CRLF line end.
_BAD_ASCII = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\r(?!\n)")
#: Unicode categories refused anywhere in a map file: only space, tab, LF and CRLF's CR separate.
_BAD_CATEGORIES = frozenset({"Cc", "Zs", "Zl", "Zp"})
_CHAR_NAMES = {
    "\r": "a carriage return (CR) that is not part of a CRLF line end",
    "\x0b": "a vertical tab (U+000B)",
    "\x0c": "a form feed (U+000C)",
    _BOM: "a byte-order mark (U+FEFF) after the start of the file",
}


def _char_name(ch: str) -> str:
    if ch in _CHAR_NAMES:
        return _CHAR_NAMES[ch]
    name = unicodedata.name(ch, "")
    return f"U+{ord(ch):04X} {name}".rstrip() if name else f"the control character U+{ord(ch):04X}"


def _check_characters(text: str, source: str) -> None:
    """Refuse any whitespace but space, tab, LF and CRLF, and any control character, anywhere.

    The whole file obeys one rule, so that no parser has to guess whether a form feed, a no-break space
    or U+2028 is whitespace, text or a line end. ASCII text is checked with one regex; the rarely
    non-ASCII characters are checked once each, however big the file.
    """
    first = _BAD_ASCII.search(text)
    at = first.start() if first else len(text)
    if not text.isascii():
        for ch in set(text):
            if not ch.isascii() and (ch == _BOM or unicodedata.category(ch) in _BAD_CATEGORIES):
                at = min(at, text.find(ch))
    if at == len(text):
        return
    line = text.count("\n", 0, at) + 1
    col = at - (text.rfind("\n", 0, at) + 1) + 1
    raise _fail(
        source,
        line,
        col,
        f"{_char_name(text[at])} is not allowed in a map file: separate with spaces and tabs only, "
        "and end lines with LF or CRLF",
        CHARACTERS,
    )


def _content(line: str) -> str:
    """A line without its line end's CR and its trailing spaces and tabs."""
    return line.removesuffix("\r").rstrip(" \t")


def _is_skippable(content: str) -> bool:
    """Blank lines and comment lines (first character ';') count for nothing before the grid."""
    return not content or content.startswith(";")


def _check_indent(content: str, lineno: int, source: str) -> None:
    """Only blank lines may be indented: one rule for every kind of line, so none is a surprise."""
    if content[:1] in (" ", "\t"):
        what = "a space" if content[0] == " " else "a tab"
        raise _fail(
            source,
            lineno,
            1,
            f"this line starts with {what}: remove it (only a blank line may start with a space or tab)",
            CHARACTERS,
        )


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


def _strip_comment(content: str) -> str:
    return content.split(";", 1)[0].rstrip(" \t")


def _parse_int(v: _HeaderValue, key: str, lo: int, hi: int, source: str) -> int:
    # ASCII digits without a sign or leading zero: int() alone would take '+2', '0_1' and '２'.
    if not re.fullmatch(r"0|[1-9][0-9]*", v.text):
        raise _fail(
            source,
            v.line,
            v.col,
            f"bad number {v.text!r} for '{key}': write a whole number {lo}..{hi} in the digits 0-9, "
            "with no sign and no leading zero",
            HEADER,
        )
    # Ten digits are out of range already; int() refuses more than 4,300 digits with a ValueError.
    n = int(v.text) if len(v.text) < 10 else hi + 1
    if not lo <= n <= hi:
        raise _fail(
            source, v.line, v.col, f"'{key}: {v.text}' is out of range: use a number {lo}..{hi}", HEADER
        )
    return n


def _parse_facings(v: _HeaderValue, players: int, source: str) -> list[Facing]:
    facings: list[Facing] = []
    for match in re.finditer(r"[^ \t]+", v.text):
        token, col = match.group(), v.col + match.start()
        if token not in Facing.__members__:
            raise _fail(
                source,
                v.line,
                col,
                f"bad facing {token!r}: use one of N, E, S, W (capitals) per player, separated by spaces",
                HEADER,
            )
        if len(facings) == players:
            raise _fail(
                source,
                v.line,
                col,
                f"too many facings: 'players: {players}' needs exactly {players}, one per player; "
                f"remove {token!r}",
                HEADER,
            )
        facings.append(Facing[token])
    if len(facings) < players:
        raise _fail(
            source,
            v.line,
            v.col + len(v.text),
            f"'facing' gives {len(facings)} facing(s) but 'players: {players}' needs {players}, "
            "one per player (N, E, S or W)",
            HEADER,
        )
    return facings


def _header_line(content: str, lineno: int, source: str) -> tuple[str, _HeaderValue]:
    """One ``key: value`` line: the key, exactly as listed, at column 1, then ':' right after it."""
    body = _strip_comment(content)
    raw_key, colon, value = body.partition(":")
    if not colon:
        if set(body) <= set(LEGEND):
            raise _fail(
                source,
                lineno,
                1,
                "this looks like a grid row: put a line '---' between the header and the grid",
                SEPARATOR,
            )
        raise _fail(
            source,
            lineno,
            1,
            f"expected 'key: value' (keys: {', '.join(HEADER_KEYS)}) or '---' to start the grid",
            HEADER,
        )
    if raw_key not in HEADER_KEYS:
        key = raw_key.rstrip(" \t")
        if key in HEADER_KEYS:
            message = f"no space may come between the key and ':': write '{key}:'"
            raise _fail(source, lineno, len(key) + 1, message, HEADER)
        if key.lower() in HEADER_KEYS:
            message = f"header keys are lower case: write '{key.lower()}:'"
            raise _fail(source, lineno, 1, message, HEADER)
        message = f"unknown header key {raw_key!r}: the keys are {', '.join(HEADER_KEYS)}"
        raise _fail(source, lineno, 1, message, HEADER)
    text = value.lstrip(" \t")
    col = len(raw_key) + 2 + len(value) - len(text)
    if not text:
        message = f"'{raw_key}' has no value: write '{_KEY_HELP[raw_key]}'"
        raise _fail(source, lineno, col, message, HEADER)
    return raw_key, _HeaderValue(text, lineno, col)


# --------------------------------------------------------------------------- parsing


def parse_map(text: str, source: str = "<string>") -> RezzoMap:
    """Parse and validate a map. Raises MapError (``source:line:col: ...``) on the first problem.

    This is the strict format of docs/games/rezzo.md; `parse_embedded_map` also reads what earlier
    versions of cellarena accepted, for the map texts that older replays carry.
    """
    if text.startswith(_BOM):  # Windows editors write one; columns count from after it
        text = text[1:]
    _check_characters(text, source)
    return _parse(text.split("\n"), source)


def parse_embedded_map(text: str, source: str = "<string>") -> RezzoMap:
    """A map text from a config or a replay: strictly if it can be, else as cellarena read it before.

    Replays embed their map's text, and the parser became strict after replays had been written with
    maps in spellings it now refuses (`rezzo-map  01`, `players : 2`, trailing no-break spaces...).
    Such a text is rewritten line by line into the strict spelling of what the old parser read, so an
    old replay rebuilds the very same map. A text neither reads gives the strict parser's error.
    """
    try:
        return parse_map(text, source)
    except MapError as strict:
        try:
            return _parse(legacy_lines(text), source)
        except MapError:
            raise strict from None


def _parse(lines: list[str], source: str) -> RezzoMap:
    i = 0
    # Version line: the first line that is neither blank nor a comment.
    while i < len(lines) and _is_skippable(_content(lines[i])):
        i += 1
    if i == len(lines):
        raise _fail(source, 1, 1, f"empty map: the first line must be 'rezzo-map {VERSION}'", VERSION_LINE)
    _check_version(_content(lines[i]), i + 1, source)
    i += 1

    header: dict[str, _HeaderValue] = {}
    sep_line = 0
    while i < len(lines):
        content, lineno = _content(lines[i]), i + 1
        i += 1
        if _is_skippable(content):
            continue
        _check_indent(content, lineno, source)
        if content.startswith("---"):
            if content != "---":
                raise _fail(
                    source,
                    lineno,
                    4,
                    "nothing may follow '---' on its line, not even a comment: put a comment on a "
                    "line of its own",
                    SEPARATOR,
                )
            sep_line = lineno
            break
        key, value = _header_line(content, lineno, source)
        if key in header:
            raise _fail(
                source,
                lineno,
                1,
                f"duplicate header key {key!r} (first given on line {header[key].line}); keep one",
                HEADER,
            )
        header[key] = value
    if not sep_line:
        # At the end of the file: the header never ended.
        raise _fail(
            source,
            len(lines),
            len(lines[-1]) + 1,
            "no '---' line: end the header with '---' and put the grid after it",
            SEPARATOR,
        )
    for key in HEADER_KEYS:
        if key not in header:
            raise _fail(
                source,
                sep_line,
                1,
                f"missing header key '{key}': add '{_KEY_HELP[key]}' before '---'",
                HEADER,
            )

    name = header["name"].text
    players = _parse_int(header["players"], "players", MIN_PLAYERS, MAX_PLAYERS, source)
    agents_per_player = _parse_int(header["agents"], "agents", 1, MAX_AGENTS, source)
    facings = _parse_facings(header["facing"], players, source)

    cells, row_lines = _parse_grid(lines, i, sep_line, source)
    hdr = _Header(name, players, agents_per_player, facings, header)
    return _build(cells, row_lines, hdr, source)


def _check_version(content: str, lineno: int, source: str) -> None:
    expected = f"rezzo-map {VERSION}"
    body = _strip_comment(content)
    if body == expected:
        return
    _check_indent(content, lineno, source)
    if not body.startswith("rezzo-map"):
        raise _fail(
            source,
            lineno,
            1,
            f"expected the version line '{expected}' first; is this a Rezzo map?",
            VERSION_LINE,
        )
    if re.fullmatch(r"rezzo-map (0|[1-9][0-9]*)", body):
        raise _fail(
            source,
            lineno,
            len("rezzo-map ") + 1,
            f"unsupported map format version {body[len('rezzo-map ') :]}: this server reads '{expected}'",
            VERSION_LINE,
        )
    raise _fail(
        source,
        lineno,
        1,
        f"bad version line: write exactly '{expected}' (one space, the digit 1, then at most a comment)",
        VERSION_LINE,
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
        row = _content(lines[i])
        if not row:
            pending_blank = pending_blank or lineno
            continue
        if row.startswith(";"):  # no grid row holds ';', so this is a comment
            continue
        if pending_blank:
            where = "inside the grid" if rows else "between '---' and the first grid row"
            raise _fail(
                source,
                pending_blank,
                1,
                f"blank line {where}: remove it (blank lines may only follow the last row)",
                COMMENTS,
            )
        _check_indent(row, lineno, source)
        if len(rows) == MAX_SIZE:
            raise _fail(
                source,
                lineno,
                1,
                f"the grid has more than {MAX_SIZE} rows; a map is at most {MAX_SIZE}x{MAX_SIZE}",
                GRID,
            )
        if width < 0 and len(row) > MAX_SIZE:
            raise _fail(
                source,
                lineno,
                MAX_SIZE + 1,
                f"row is {len(row)} cells wide; a map is at most {MAX_SIZE}x{MAX_SIZE}",
                GRID,
            )
        raw = row.encode("utf-8")
        codes = _LUT[np.frombuffer(raw, np.uint8)] if row.isascii() else None
        if codes is None or (codes == _INVALID).any():
            col = _first_bad_column(row)
            ch = row[col - 1]
            what = "a space" if ch == " " else "a tab" if ch == "\t" else f"{ch!r}"
            raise _fail(source, lineno, col, f"unknown map character {what}: use {_LEGEND_HELP}", GRID)
        if width < 0:
            width, first_line = len(row), lineno
        elif len(row) != width:
            col = width + 1 if len(row) > width else len(row) + 1
            raise _fail(
                source,
                lineno,
                col,
                f"ragged row: this row is {len(row)} cells wide but the first "
                f"row (line {first_line}) is {width}; every row must have the same width",
                GRID,
            )
        rows.append(codes)
        row_lines.append(lineno)
    if not rows:
        raise _fail(source, sep_line + 1, 1, "the grid is empty: add rows of cells after '---'", GRID)
    if len(rows) < MIN_SIZE or width < MIN_SIZE:
        raise _fail(
            source,
            row_lines[0],
            1,
            f"the grid is {width}x{len(rows)} (width x height); a map is at least {MIN_SIZE}x{MIN_SIZE}",
            GRID,
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
        raise _fail(
            *at(x, y),
            f"{_describe(code)} but 'players: {players}' allows owners 0..{players - 1} "
            f"only; use a player 0..{players - 1} or raise 'players'",
            PLAYERS,
        )

    kinds = np.where(owned, cells & 0xF8, cells)
    census = np.bincount(cells.ravel(), minlength=256)  # cells per code
    p_line, p_col = header["players"].line, header["players"].col
    for p in range(players):
        for kind in (Cell.BASE, Cell.GEYSER):
            if not census[kind + p]:
                letter = _OWNED_LETTERS[kind][p]
                raise _fail(
                    source,
                    p_line,
                    p_col,
                    f"player {p} has no {_KIND_NAMES[kind]} ({letter!r}): every player 0..{players - 1} "
                    f"needs at least one base, one geyser and {agents_per_player} agent(s)",
                    PLAYERS,
                )
    agent_cells = np.argwhere(kinds == Cell.AGENT)  # reading order
    count = [0] * players
    starts = []
    for y, x in agent_cells:
        p = int(owners[y, x])
        count[p] += 1
        if count[p] > agents_per_player:
            raise _fail(
                *at(int(x), int(y)),
                f"player {p} has more than {agents_per_player} agent(s): remove "
                f"this one or raise 'agents' (line {header['agents'].line})",
                PLAYERS,
            )
        starts.append(AgentStart(p, int(x), int(y), hdr.facings[p]))
    for p in range(players):
        if count[p] < agents_per_player:
            v = header["agents"]
            raise _fail(
                source,
                v.line,
                v.col,
                f"player {p} has {count[p]} agent(s) ({_OWNED_LETTERS[Cell.AGENT][p]!r}) but "
                f"'agents: {agents_per_player}' needs exactly {agents_per_player} per player",
                PLAYERS,
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
                raise _fail(
                    m.source,
                    *_where(m, gx, gy),
                    f"{_describe(int(cells[gy, gx]))} is {dist} cell(s) from the "
                    f"{_describe(int(cells[by, bx]))} at {line}:{col}{wrap}; "
                    f"keep every geyser at least {MIN_GEYSER_BASE_DISTANCE} cells "
                    "(Chebyshev) from every base, or a player could lose as soon as a flag forms",
                    GEYSERS,
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
        return _fail(
            m.source,
            line,
            col,
            f"not point-symmetric: {_describe(int(cells[y, x]))} at x={x}, y={y} "
            f"mirrors to {_describe(int(mirror[y, x]))} at {mline}:{mcol} (x={w - 1 - x}, "
            f"y={h - 1 - y}); {why}",
            SYMMETRY,
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
            raise _fail(
                name_or_path,
                1,
                1,
                f"the file is {size} bytes; a map file is at most "
                f"{MAX_FILE_BYTES} bytes ({MAX_SIZE}x{MAX_SIZE} cells)",
                CHARACTERS,
            )
        data = path.read_bytes()
    except OSError as exc:
        raise MapError(name_or_path, 1, 1, f"cannot read the map file: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        col = len(before[before.rfind(b"\n") + 1 :].decode("utf-8")) + 1  # in characters, as elsewhere
        raise _fail(
            name_or_path,
            line,
            col,
            "the file is not UTF-8 text: save it as UTF-8 (the grid itself is ASCII)",
            CHARACTERS,
        ) from exc
    return text, name_or_path


# --------------------------------------------------------------------------- older map texts


def legacy_lines(text: str) -> list[str]:
    """``text`` as the parser before the strict format read it, line by line, in the strict spelling.

    That parser treated any Unicode whitespace as whitespace (``str.strip``), skipped indented comment
    lines, allowed leading whitespace and a comment on the version, header and separator lines, spaces
    before a key's ':', leading zeros in numbers and any decimal digit in the version. Each line it
    accepted becomes the line the strict parser reads the same way; every other line is kept as it is,
    so the strict parser refuses what the old one refused. Line numbers do not change.
    """
    out: list[str] = []
    stage = "version"
    for line in text.split("\n"):
        stripped = line.strip()
        if stage == "grid":
            row = line.rstrip()
            out.append(";" if row.lstrip().startswith(";") else row)
            continue
        if not stripped or stripped.startswith(";"):
            out.append(";" if stripped else "")
            continue
        body = line.split(";", 1)[0].rstrip()
        if stage == "version":
            stage = "header"
            tokens = body.split()
            old_ok = len(tokens) == 2 and tokens[0] == "rezzo-map" and _decimal_is(tokens[1], VERSION)
            out.append(f"rezzo-map {VERSION}" if old_ok else line)
            continue
        if body.strip() == "---":
            stage = "grid"
            out.append("---")
            continue
        raw_key, colon, value = body.partition(":")
        key, value = raw_key.strip(), value.strip()
        if not colon or key not in HEADER_KEYS:
            out.append(line)
        elif key == "facing":
            out.append(f"facing: {' '.join(value.split())}")
        elif key != "name" and re.fullmatch(r"[0-9]+", value):
            out.append(f"{key}: {value.lstrip('0') or '0'}")
        else:
            out.append(f"{key}: {value}")
    return out


def _decimal_is(token: str, n: int) -> bool:
    """Whether ``token`` is ``n`` in decimal digits of any script, as int() read it (without int()'s
    4,300-digit limit, which would raise)."""
    if not token.isdecimal():
        return False
    digits = "".join(str(unicodedata.decimal(ch)) for ch in token).lstrip("0") or "0"
    return digits == str(n)
