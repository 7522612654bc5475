"""Rezzo maps: the built-in maps are valid, point-symmetric and alive; bad maps fail at file:line:col."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import numpy as np
import pytest

from cellarena.sdk.games.rezzo import Cell, Facing
from cellarena.server.games.base import ConfigError
from cellarena.server.games.rezzo.engine import RezzoEngine
from cellarena.server.games.rezzo.maps import (
    LEGEND,
    AgentStart,
    MapError,
    RezzoMap,
    builtin_maps,
    check_point_symmetry,
    load_map,
    parse_map,
)

BUILTINS = builtin_maps()
ALIVE_TICKS = 100

# A small valid map. Lines: 1 version, 2 comment, 3 name, 4 players, 5 agents, 6 facing, 7 '---',
# grid rows y = 0..8 on lines 8..16, so cell (x, y) is at line 8 + y, column x + 1.
TINY = """\
rezzo-map 1
; the smallest interesting map
name: Tiny
players: 2
agents: 1            ; agents per player
facing: N S
---
....B....
.........
....1....
.b.......
....#....
.......a.
....0....
.........
....A....
"""


def grid_line(y: int) -> int:
    return 8 + y


def with_cell(text: str, x: int, y: int, ch: str) -> str:
    """``text`` (laid out like TINY) with one grid cell replaced."""
    lines = text.split("\n")
    row = lines[grid_line(y) - 1]
    lines[grid_line(y) - 1] = row[:x] + ch + row[x + 1 :]
    return "\n".join(lines)


def with_line(text: str, lineno: int, new: str | None) -> str:
    """``text`` with one line replaced (or removed when ``new`` is None)."""
    lines = text.split("\n")
    if new is None:
        del lines[lineno - 1]
    else:
        lines[lineno - 1] = new
    return "\n".join(lines)


def parse_error(text: str, source: str = "tiny.txt") -> str:
    with pytest.raises(MapError) as info:
        parse_map(text, source)
    return str(info.value)


def doc_anchors() -> set[str]:
    """The anchors of the rules page's headings, as GitHub makes them."""
    anchors = set()
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^a-z0-9 -]", "", title).replace(" ", "-"))
    return anchors


def assert_error(message: str, prefix: str, *words: str) -> None:
    """``message`` starts at ``prefix``, holds ``words`` and ends by linking an existing doc section."""
    assert message.startswith(prefix + " "), message
    for word in words:
        assert word in message, f"{word!r} missing from: {message}"
    link = re.search(r" \(see docs/games/rezzo\.md#([a-z0-9-]+)\)$", message)
    assert link is not None, f"no link to the rules page at the end of: {message}"
    assert link.group(1) in doc_anchors(), f"no section #{link.group(1)} in {DOC}"


# --------------------------------------------------------------------------- the parser on good input


def test_tiny_map_parses_to_codes_and_agents_in_reading_order() -> None:
    m = parse_map(TINY, "tiny.txt")
    assert (m.name, m.source, m.players, m.agents_per_player) == ("Tiny", "tiny.txt", 2, 1)
    assert (m.width, m.height) == (9, 9)
    assert m.cells.dtype == np.uint8
    assert m.cells[0, 4] == Cell.BASE + 1
    assert m.cells[8, 4] == Cell.BASE
    assert m.cells[3, 1] == Cell.GEYSER + 1
    assert m.cells[5, 7] == Cell.GEYSER
    assert m.cells[4, 4] == Cell.CONDUCTOR
    assert m.cells[2, 4] == Cell.AGENT + 1
    assert m.cells[6, 4] == Cell.AGENT
    # Reading order: player 1's agent (row 2) comes before player 0's (row 6).
    assert m.agents == (AgentStart(1, 4, 2, Facing.S), AgentStart(0, 4, 6, Facing.N))
    check_point_symmetry(m)


def test_legend_maps_every_character_to_its_public_code() -> None:
    assert [LEGEND[ch] for ch in ".#@~"] == [Cell.BLANK, Cell.CONDUCTOR, Cell.ELECTRON, Cell.TAIL]
    assert [LEGEND[ch] for ch in "ABCDEFGH"] == [Cell.BASE + i for i in range(8)]
    assert [LEGEND[ch] for ch in "abcdefgh"] == [Cell.GEYSER + i for i in range(8)]
    assert [LEGEND[ch] for ch in "01234567"] == [Cell.AGENT + i for i in range(8)]
    assert len(LEGEND) == 28  # no flags or photons: a map never starts with them


def test_comments_blank_lines_trailing_whitespace_and_crlf_are_ignored() -> None:
    text = "\n; leading comment\n \t\n" + TINY.replace("\n", " \t\r\n") + "\n\t\n"
    m = parse_map(text)
    assert np.array_equal(m.cells, parse_map(TINY).cells)
    # Comment lines inside the grid are skipped too.
    m2 = parse_map(TINY.replace("....B....\n", "....B....\n; a note\n"))
    assert np.array_equal(m2.cells, m.cells)


def test_map_error_is_a_config_error_and_pickles() -> None:
    err = MapError("x.txt", 3, 4, "something is wrong")
    assert isinstance(err, ConfigError)
    assert str(err) == "x.txt:3:4: something is wrong"
    again = pickle.loads(pickle.dumps(err))
    assert (str(again), again.line, again.col) == (str(err), 3, 4)


# --------------------------------------------------------------------------- one test per malformed map


def test_unknown_character() -> None:
    msg = parse_error(with_cell(TINY, 2, 1, "x"))
    assert_error(msg, "tiny.txt:9:3:", "unknown map character 'x'", "'#' wire")


def test_locations_count_comment_lines_and_value_spacing() -> None:
    text = with_cell(TINY, 3, 5, "%").replace("....B....\n", "....B....\n; a note\n")
    assert_error(parse_error(text), "tiny.txt:14:4:", "unknown map character '%'")
    assert_error(parse_error(text.replace("players: 2", "players: \t x")), "tiny.txt:4:12:", "bad number 'x'")


def test_leading_space_in_a_row_is_an_error() -> None:
    msg = parse_error(with_line(TINY, grid_line(1), " ........"))
    assert_error(msg, "tiny.txt:9:1:", "starts with a space", "only a blank line may")
    msg = parse_error(with_line(TINY, grid_line(1), "....\t...."))
    assert_error(msg, "tiny.txt:9:5:", "unknown map character a tab")


def test_ragged_row_too_short() -> None:
    msg = parse_error(with_line(TINY, grid_line(1), "......."))
    assert_error(msg, "tiny.txt:9:8:", "ragged row", "7 cells wide", "line 8", "same width")


def test_ragged_row_too_long() -> None:
    msg = parse_error(with_line(TINY, grid_line(1), ".........#"))
    assert_error(msg, "tiny.txt:9:10:", "ragged row", "10 cells wide")


def test_blank_line_inside_grid() -> None:
    msg = parse_error(TINY.replace("....1....\n", "....1....\n\n"))
    assert_error(msg, "tiny.txt:11:1:", "blank line inside the grid")


def test_missing_header_key() -> None:
    msg = parse_error(with_line(TINY, 5, None))
    assert_error(msg, "tiny.txt:6:1:", "missing header key 'agents'", "before '---'")


def test_unknown_header_key() -> None:
    msg = parse_error(with_line(TINY, 2, "size: 9x9"))
    assert_error(msg, "tiny.txt:2:1:", "unknown header key 'size'", "name, players, agents, facing")


def test_duplicate_header_key() -> None:
    msg = parse_error(with_line(TINY, 2, "name: Again"))
    assert_error(msg, "tiny.txt:3:1:", "duplicate header key 'name'", "line 2")


def test_header_line_without_colon() -> None:
    msg = parse_error(with_line(TINY, 2, "players 2"))
    assert_error(msg, "tiny.txt:2:1:", "expected 'key: value'")


def test_bad_number() -> None:
    msg = parse_error(with_line(TINY, 4, "players: two"))
    assert_error(msg, "tiny.txt:4:10:", "bad number 'two'", "'players'", "2..8")


def test_number_out_of_range() -> None:
    msg = parse_error(with_line(TINY, 4, "players:   9"))
    assert_error(msg, "tiny.txt:4:12:", "'players: 9' is out of range", "2..8")
    msg = parse_error(with_line(TINY, 5, "agents: 0"))
    assert_error(msg, "tiny.txt:5:9:", "'agents: 0' is out of range")


def test_empty_header_value() -> None:
    msg = parse_error(with_line(TINY, 3, "name:"))
    assert_error(msg, "tiny.txt:3:6:", "'name' has no value")


def test_too_few_facings() -> None:
    msg = parse_error(with_line(TINY, 6, "facing: N"))
    assert_error(msg, "tiny.txt:6:10:", "gives 1 facing(s)", "'players: 2' needs 2")


def test_too_many_facings() -> None:
    msg = parse_error(with_line(TINY, 6, "facing: N S E"))
    assert_error(msg, "tiny.txt:6:13:", "too many facings", "remove 'E'")


def test_bad_facing_letter() -> None:
    msg = parse_error(with_line(TINY, 6, "facing: N down"))
    assert_error(msg, "tiny.txt:6:11:", "bad facing 'down'", "N, E, S, W")


def test_missing_separator_before_grid() -> None:
    msg = parse_error(with_line(TINY, 7, None))
    assert_error(msg, "tiny.txt:7:1:", "looks like a grid row", "'---'")


def test_missing_separator_at_end_of_file() -> None:
    text = "rezzo-map 1\nname: X\nplayers: 2\n"
    msg = parse_error(text)
    assert_error(msg, "tiny.txt:4:1:", "no '---' line")


def test_wrong_version_number() -> None:
    msg = parse_error(with_line(TINY, 1, "rezzo-map 2"))
    assert_error(msg, "tiny.txt:1:11:", "unsupported map format version 2", "'rezzo-map 1'")


def test_not_a_version_line() -> None:
    msg = parse_error(with_line(TINY, 1, "name: Tiny"))
    assert_error(msg, "tiny.txt:1:1:", "expected the version line 'rezzo-map 1'")


def test_empty_file() -> None:
    assert_error(parse_error("\n; nothing here\n"), "tiny.txt:1:1:", "empty map", "rezzo-map 1")


def test_empty_grid() -> None:
    text = TINY.split("---", maxsplit=1)[0] + "---\n\n"
    msg = parse_error(text)
    assert_error(msg, "tiny.txt:8:1:", "the grid is empty")


def test_grid_too_small() -> None:
    text = TINY.split("---", maxsplit=1)[0] + "---\n..\n..\n"
    msg = parse_error(text)
    assert_error(msg, "tiny.txt:8:1:", "2x2", "at least 3x3")


def test_player_without_base() -> None:
    msg = parse_error(with_cell(TINY, 4, 0, "."))
    assert_error(msg, "tiny.txt:4:10:", "player 1 has no base ('B')")


def test_player_without_geyser() -> None:
    msg = parse_error(with_cell(TINY, 1, 3, "."))
    assert_error(msg, "tiny.txt:4:10:", "player 1 has no geyser ('b')")


def test_too_few_agents() -> None:
    msg = parse_error(with_line(TINY, 5, "agents: 2"))
    assert_error(msg, "tiny.txt:5:9:", "player 0 has 1 agent(s) ('0')", "needs exactly 2")


def test_too_many_agents() -> None:
    msg = parse_error(with_cell(TINY, 6, 7, "0"))
    assert_error(msg, "tiny.txt:15:7:", "player 0 has more than 1 agent(s)", "line 5")


def test_owner_not_below_players() -> None:
    msg = parse_error(with_cell(TINY, 0, 4, "C"))
    assert_error(msg, "tiny.txt:12:1:", "base of player 2 ('C')", "'players: 2' allows owners 0..1")


def test_geyser_too_near_a_base() -> None:
    # Both geysers moved to distance 2 of their bases, symmetrically; 'b' comes first in reading order.
    text = with_cell(with_cell(TINY, 1, 3, "."), 7, 5, ".")
    text = with_cell(with_cell(text, 2, 2, "b"), 6, 6, "a")
    msg = parse_error(text)
    assert_error(
        msg,
        "tiny.txt:10:3:",
        "geyser of player 1 ('b') is 2 cell(s) from the base of player 1",
        "at 8:5",
        "at least 3",
    )


def test_geyser_too_near_a_base_across_the_edge() -> None:
    # 'a' is 7 rows from 'A' inside the world but 2 across the top/bottom edge (the torus variant).
    text = """rezzo-map 1
name: Edge
players: 2
agents: 1
facing: N S
---
.......B.
.a.......
....1....
.........
....#....
.........
....0....
.......b.
.A.......
"""
    msg = parse_error(text)
    assert_error(
        msg,
        "tiny.txt:8:2:",
        "geyser of player 0 ('a') is 2 cell(s) from the base of player 0",
        "at 15:2",
        "across the world's edge",
        "torus",
    )


def test_asymmetric_cell() -> None:
    msg = parse_error(with_cell(TINY, 1, 1, "#"))
    assert_error(
        msg,
        "tiny.txt:9:2:",
        "not point-symmetric",
        "wire ('#') at x=1, y=1",
        "blank ('.') at 15:8 (x=7, y=7)",
    )


def test_asymmetric_owner_pairing() -> None:
    # The bases and agents pair player 0 with player 1, but the geysers 'a' at (1, 3) and (7, 5)
    # mirror onto each other, pairing player 0 with itself.
    text = with_cell(with_cell(TINY, 1, 3, "a"), 0, 0, "b")
    text = with_cell(text, 8, 8, "a")
    msg = parse_error(text)
    assert_error(
        msg,
        "tiny.txt:14:5:",
        "not point-symmetric",
        "agent of player 0 ('0') at x=4, y=6",
        "mirrors to agent of player 1",
        "player 0's first cell at 11:2 mirrors to player 0's",
        "consistent pairing",
    )


def test_asymmetric_facing() -> None:
    msg = parse_error(with_line(TINY, 6, "facing: N N"))
    assert_error(
        msg,
        "tiny.txt:10:5:",
        "not point-symmetric",
        "agent of player 1",
        "faces N",
        "must face S",
        "opposite facings",
    )


def test_odd_player_count_cannot_be_symmetric() -> None:
    # Player 2 has to be its own mirror image, so its centre agent would have to face E and W at once.
    text = """rezzo-map 1
name: Three
players: 3
agents: 1
facing: N S E
---
......B......
.............
...b..1..c...
.............
C.....2.....C
.............
...c..0..a...
.............
......A......
"""
    msg = parse_error(text)
    assert_error(
        msg,
        "tiny.txt:11:7:",
        "not point-symmetric",
        "player 2 is their own mirror image",
        "both E and W",
        "pair every player with another",
    )


def test_check_point_symmetry_on_a_map_built_in_code() -> None:
    good = parse_map(TINY)
    cells = good.cells.copy()
    cells[1, 1] = Cell.CONDUCTOR
    m = RezzoMap("hand-made", "<code>", cells, 2, 1, good.agents)
    with pytest.raises(MapError) as info:
        check_point_symmetry(m)
    # Without a file behind it, line:col are the grid's row + 1 and column + 1.
    assert str(info.value).startswith("<code>:2:2: not point-symmetric")


# --------------------------------------------------------------------------- loading


def test_load_unknown_name_lists_the_builtins() -> None:
    with pytest.raises(MapError) as info:
        load_map("no-such-map")
    msg = str(info.value)
    assert msg.startswith("no-such-map:1:1: "), msg
    assert "built-in maps: " + ", ".join(BUILTINS) in msg


def test_load_a_file_and_its_errors_carry_the_path(tmp_path: Path) -> None:
    good = tmp_path / "tiny.txt"
    good.write_text(TINY, encoding="utf-8")
    m = load_map(str(good))
    assert m.source == str(good)
    assert m.name == "Tiny"

    bad = tmp_path / "bad.txt"
    bad.write_text(with_cell(TINY, 2, 1, "?"), encoding="utf-8")
    with pytest.raises(MapError) as info:
        load_map(str(bad))
    assert str(info.value).startswith(f"{bad}:9:3: unknown map character '?'")


def test_load_a_directory_or_non_utf8_file(tmp_path: Path) -> None:
    with pytest.raises(MapError, match="not a file"):
        load_map(str(tmp_path))
    binary = tmp_path / "bin.txt"
    binary.write_bytes(b"rezzo-map 1\nname: \xff\n")
    with pytest.raises(MapError) as info:
        load_map(str(binary))
    assert str(info.value).startswith(f"{binary}:2:7: the file is not UTF-8")


def test_engine_reports_a_bad_map_as_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text(with_line(TINY, 6, "facing: N"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.txt:6:10: "):
        RezzoEngine.new({"map": str(bad)})


# --------------------------------------------------------------------------- the built-in maps


def test_the_expected_builtins_exist() -> None:
    assert {"duel", "duel2", "field", "quad"} <= set(BUILTINS)


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_parses_and_is_point_symmetric(name: str) -> None:
    m = load_map(name)
    check_point_symmetry(m)
    assert 2 <= m.players <= 8
    assert len(m.agents) == m.players * m.agents_per_player
    assert m.cells.dtype == np.uint8
    for a in m.agents:
        assert m.cells[a.y, a.x] == Cell.AGENT + a.player


def test_builtin_sizes() -> None:
    sizes = {name: (load_map(name).width, load_map(name).height, load_map(name).players) for name in BUILTINS}
    assert sizes["duel"] == (32, 32, 2)
    assert sizes["field"] == (64, 64, 2)
    assert sizes["quad"] == (48, 48, 4)
    assert load_map("duel2").agents_per_player == 2


@pytest.mark.parametrize("torus", [False, True], ids=["bounded", "torus"])
@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_is_alive(name: str, torus: bool) -> None:
    """With nobody moving, every player gets a flag within 100 ticks and nobody loses."""
    m = load_map(name)
    engine = RezzoEngine.new({"map": name, "torus": torus})
    first_flag: dict[int, int] = {}
    for _ in range(ALIVE_TICKS):  # the worlds W_1 .. W_100
        cells = engine.cells()
        for p in range(m.players):
            if p not in first_flag and (cells == Cell.FLAG + p).any():
                first_flag[p] = engine.tick
        assert engine.result() is None, f"{name} ended at tick {engine.tick}: {engine.result()}"
        engine.apply({})
    assert sorted(first_flag) == list(range(m.players)), f"{name}: first flags {first_flag}"
    assert max(first_flag.values()) <= ALIVE_TICKS
    # A player who lost has had their bases blanked; every base must still be there.
    cells = engine.cells()
    assert engine.result() is None
    for p in range(m.players):
        assert (cells == Cell.BASE + p).sum() == (m.cells == Cell.BASE + p).sum(), f"{name}: player {p} lost"


# --------------------------------------------------------------------------- the rules page stays true

DOC = Path(__file__).resolve().parent.parent / "docs" / "games" / "rezzo.md"


def first_flag_ticks(name: str) -> dict[int, int]:
    m = load_map(name)
    engine = RezzoEngine.new({"map": name})
    first: dict[int, int] = {}
    while len(first) < m.players and engine.tick <= ALIVE_TICKS:
        cells = engine.cells()
        for p in range(m.players):
            if p not in first and (cells == Cell.FLAG + p).any():
                first[p] = engine.tick
        engine.apply({})
    return first


def test_docs_example_map_is_valid() -> None:
    text = DOC.read_text(encoding="utf-8")
    example = text.split("## Maps", 1)[1].split("```\n", 2)[1]
    assert example.startswith("rezzo-map 1\n")
    m = parse_map(example, "rezzo.md")
    assert np.array_equal(m.cells, parse_map(TINY).cells)


def test_docs_table_of_builtin_maps_matches_the_maps() -> None:
    text = DOC.read_text(encoding="utf-8").split("### Built-in maps", 1)[1]
    rows = {}
    for line in text.splitlines():
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cols) == 6 and cols[0].startswith("`"):
            rows[cols[0].strip("`")] = cols
    assert sorted(rows) == BUILTINS
    for name, (_, size, players, k, _, first) in rows.items():
        m = load_map(name)
        assert size == f"{m.width}x{m.height}", name
        assert (int(players), int(k)) == (m.players, m.agents_per_player), name
        ticks = set(first_flag_ticks(name).values())
        assert first == f"tick {max(ticks)}" and len(ticks) == 1, (name, first, ticks)
