"""Rezzo maps: the built-in maps are valid, point-symmetric and alive; bad maps fail at file:line:col."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import numpy as np
import pytest
from cellarena_cli import invoke
from rezzo_boards import engine_from

from cellarena.arena import ratings
from cellarena.sdk.games.rezzo import Cell, Facing
from cellarena.server.games.base import ConfigError
from cellarena.server.games.rezzo import maps as maps_module
from cellarena.server.games.rezzo.engine import RezzoEngine
from cellarena.server.games.rezzo.maps import (
    LEGEND,
    AgentStart,
    MapError,
    RezzoMap,
    builtin_maps,
    check_point_symmetry,
    legacy_lines,
    load_map,
    parse_embedded_map,
    parse_map,
    read_map,
)
from cellarena.server.replay import board_at, read_replay, verify

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


def anchor_of(line: str) -> str | None:
    """The anchor GitHub gives a Markdown heading line, or None if it is no heading."""
    heading = re.match(r"#+ (.*)", line)
    if heading is None:
        return None
    return re.sub(r"[^a-z0-9 -]", "", heading.group(1).strip().lower()).replace(" ", "-")


def doc_anchors() -> set[str]:
    """The anchors of the rules page's headings."""
    return {a for line in DOC.read_text(encoding="utf-8").splitlines() if (a := anchor_of(line))}


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


# --------------------------------------------------------------------------- the rules to the letter
# One test per point the rules page used to leave loose: each checks the page's statement, then the
# parser against it.


def doc_section(anchor: str) -> str:
    """The text of the rules page's section ``anchor`` (up to the next heading), spaces collapsed."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if anchor_of(line) == anchor)
    end = next((i for i in range(start + 1, len(lines)) if anchor_of(lines[i])), len(lines))
    return " ".join(" ".join(lines[start + 1 : end]).split())


def doc_says(anchor: str, *phrases: str) -> None:
    text = doc_section(anchor)
    for phrase in phrases:
        assert " ".join(phrase.split()) in text, f"docs/games/rezzo.md#{anchor} no longer says: {phrase}"


def test_every_section_a_map_error_links_exists() -> None:
    assert set(maps_module.SECTIONS) <= doc_anchors()


def test_1_no_blank_line_between_the_separator_and_the_first_row() -> None:
    doc_says(
        "comments-and-blank-lines",
        "A blank line between `---` and the first grid row, or between two grid rows, is an error. "
        "Comment lines there are fine.",
        "Blank lines may appear before the version line, in the header, before the separator and after "
        "the last grid row.",
    )
    msg = parse_error(TINY.replace("---\n", "---\n\n"))
    assert_error(msg, "tiny.txt:8:1:", "blank line between '---' and the first grid row", "remove it")
    msg = parse_error(TINY.replace("---\n", "---\n; the grid\n \t\n"))
    assert_error(msg, "tiny.txt:9:1:", "blank line between '---' and the first grid row")
    # A comment line there is fine; so are blank lines before the separator and after the last row.
    fine = "\n" + TINY.replace("---\n", "\n---\n; the grid\n").replace("facing", "\nfacing") + "\n \n\t\n"
    assert np.array_equal(parse_map(fine).cells, parse_map(TINY).cells)


@pytest.mark.parametrize(
    "line",
    [
        "rezzo-map  1",
        "rezzo-map\t1",
        "rezzo-map 01",
        "rezzo-map 1.0",
        "rezzo-map 1 1",
        "rezzo-map1",
        "rezzo-map",
    ],
)
def test_2_the_version_line_is_exactly_rezzo_map_1(line: str) -> None:
    doc_says(
        "the-version-line",
        "Without its comment and its trailing spaces and tabs it must be exactly `rezzo-map 1`: one space, "
        "the digit 1, no leading zero.",
    )
    msg = parse_error(with_line(TINY, 1, line))
    assert_error(msg, "tiny.txt:1:1:", "bad version line", "write exactly 'rezzo-map 1'")


def test_2_what_the_version_line_may_hold_and_other_versions() -> None:
    doc_says("the-version-line", "`rezzo-map 2` (a whole number other than 1, written as the numbers of")
    for line in ("rezzo-map 1 ; the format", "rezzo-map 1;x", "rezzo-map 1 \t"):
        assert parse_map(with_line(TINY, 1, line)).name == "Tiny"
    for version in ("0", "2", "10"):
        msg = parse_error(with_line(TINY, 1, f"rezzo-map {version} ; later"))
        assert_error(msg, "tiny.txt:1:11:", f"unsupported map format version {version}:")
    assert_error(parse_error(with_line(TINY, 1, "Rezzo-map 1")), "tiny.txt:1:1:", "is this a Rezzo map?")


@pytest.mark.parametrize("line", ["--- ; the grid", "---;x", "----", "--- x"])
def test_3_the_separator_is_exactly_three_dashes(line: str) -> None:
    doc_says(
        "the-separator",
        "A line that is exactly `---` ends the header. Nothing may follow it on its line except spaces and "
        "tabs: no comment.",
    )
    msg = parse_error(with_line(TINY, 7, line))
    assert_error(msg, "tiny.txt:7:4:", "nothing may follow '---'", "not even a comment")


def test_3_the_separator_may_end_in_spaces_tabs_and_crlf() -> None:
    for line in ("---  ", "---\t", "---\r"):
        assert np.array_equal(parse_map(with_line(TINY, 7, line)).cells, parse_map(TINY).cells)


@pytest.mark.parametrize(
    ("lineno", "line", "what"),
    [
        (1, " rezzo-map 1", "a space"),
        (2, "\t; an indented comment", "a tab"),
        (3, "  name: Tiny", "a space"),
        (4, "\tplayers: 2", "a tab"),
        (7, " ---", "a space"),
        (grid_line(2), "  ; an indented comment in the grid", "a space"),
    ],
)
def test_4_only_blank_lines_may_be_indented(lineno: int, line: str, what: str) -> None:
    doc_says("characters-and-lines", "Only a blank line may start with a space or a tab.")
    msg = parse_error(with_line(TINY, lineno, line))
    assert_error(msg, f"tiny.txt:{lineno}:1:", f"this line starts with {what}", "only a blank line may")


def test_4_the_colon_follows_the_key_directly() -> None:
    doc_says("the-header", "The `:` follows the key directly (`players : 2` is an error).")
    assert_error(parse_error(with_line(TINY, 4, "players : 2")), "tiny.txt:4:8:", "write 'players:'")
    assert_error(parse_error(with_line(TINY, 4, "players\t: 2")), "tiny.txt:4:8:", "no space may come")
    # Spaces and tabs after the colon are fine, and the value's column is after them.
    assert parse_map(with_line(TINY, 4, "players:\t 2")).players == 2


def test_5_a_name_is_text_of_at_least_one_character() -> None:
    doc_says(
        "the-header",
        "the map's display name: any text without `;`, at least one character",
        "A key with no value (`name:`) is an error.",
    )
    for line in ("name:", "name:   ", "name: ; only a comment"):
        assert_error(
            parse_error(with_line(TINY, 3, line)), "tiny.txt:3:6:", "'name' has no value", "name: <text>"
        )
    assert parse_map(with_line(TINY, 3, "name:  Tíny — a map: with 'colons' ; comment ")).name == (
        "Tíny — a map: with 'colons'"
    )
    assert parse_map(with_line(TINY, 3, "name:x")).name == "x"


@pytest.mark.parametrize(
    ("line", "key"), [("Name: Tiny", "name"), ("PLAYERS: 2", "players"), ("Facing: N S", "facing")]
)
def test_6_header_keys_are_lower_case(line: str, key: str) -> None:
    doc_says("the-header", "written exactly as in the table, in lower case (`Name:` is an unknown key)")
    lineno = {"name": 3, "players": 4, "facing": 6}[key]
    msg = parse_error(with_line(TINY, lineno, line))
    assert_error(msg, f"tiny.txt:{lineno}:1:", "header keys are lower case", f"write '{key}:'")


def test_6_facings_are_capital_letters() -> None:
    doc_says("the-header", "Facings are the capital letters `N`, `E`, `S`, `W`.")
    assert_error(
        parse_error(with_line(TINY, 6, "facing: n s")), "tiny.txt:6:9:", "bad facing 'n'", "capitals"
    )


@pytest.mark.parametrize(
    ("ch", "name"),
    [
        ("\x0c", "a form feed (U+000C)"),
        ("\x0b", "a vertical tab (U+000B)"),
        ("\x00", "the control character U+0000"),
        ("\x85", "the control character U+0085"),
        ("\u00a0", "U+00A0 NO-BREAK SPACE"),
        ("\u3000", "U+3000 IDEOGRAPHIC SPACE"),
        ("\u2028", "U+2028 LINE SEPARATOR"),
        ("\u2029", "U+2029 PARAGRAPH SEPARATOR"),
        ("\r", "a carriage return (CR) that is not part of a CRLF line end"),
    ],
)
def test_7_whitespace_is_space_and_tab_only(ch: str, name: str) -> None:
    doc_says(
        "characters-and-lines",
        "**Whitespace means the ASCII space and tab, nothing else.**",
        "may appear anywhere in the file, comments and the name included.",
        "Lines end with LF or CRLF; the CR of a CRLF belongs to the line end. A CR anywhere else is an error",
    )
    # In a grid row, a comment and the name: refused at that character.
    for lineno, col, text in (
        (grid_line(1), 6, with_line(TINY, grid_line(1), "....." + ch + "....")),
        (2, 4, with_line(TINY, 2, "; a" + ch + "comment")),
        (3, 10, with_line(TINY, 3, "name: Ti " + ch + "ny")),
    ):
        assert_error(parse_error(text), f"tiny.txt:{lineno}:{col}:", name, "is not allowed in a map file")


def test_7_trailing_spaces_tabs_and_crlf_are_ignored_and_lines_end_only_at_lf() -> None:
    doc_says("characters-and-lines", "Spaces and tabs at the end of any line are ignored.")
    crlf = TINY.replace("\n", "\r\n").replace("N S\r\n", "N S \t \r\n")
    assert np.array_equal(parse_map(crlf).cells, parse_map(TINY).cells)
    # A bare CR is no line end: two rows joined by one are refused where the CR is.
    joined = TINY.replace(".........\n....1....", ".........\r....1....")
    assert_error(parse_error(joined), "tiny.txt:9:10:", "a carriage return (CR)")


def test_8_a_byte_order_mark_is_ignored_at_the_start_only(tmp_path: Path) -> None:
    doc_says(
        "characters-and-lines",
        "A byte-order mark (U+FEFF, which some Windows editors write) is ignored at the very start of the "
        "file; anywhere else it is an error.",
        "after the byte-order mark if there is one.",
    )
    path = tmp_path / "bom.txt"
    path.write_text(TINY.replace("\n", "\r\n"), encoding="utf-8-sig")  # as Notepad saves it
    assert path.read_bytes().startswith(b"\xef\xbb\xbfrezzo-map 1\r\n")
    assert np.array_equal(load_map(str(path)).cells, parse_map(TINY).cells)
    # Columns on the first line count from after the mark.
    msg = parse_error("\ufeff" + with_line(TINY, 1, "rezzo-map 3"))
    assert_error(msg, "tiny.txt:1:11:", "unsupported map format version 3")
    for text, where in (("\ufeff\ufeff" + TINY, "1:1"), (with_line(TINY, 3, "name: \ufeffTiny"), "3:7")):
        assert_error(parse_error(text), f"tiny.txt:{where}:", "a byte-order mark (U+FEFF) after the start")


@pytest.mark.parametrize("value", ["02", "+2", "-2", "２", "0_2", "2.0", "2e0", "0x2", "٢"])
def test_9_numbers_are_ascii_digits_without_sign_or_leading_zero(value: str) -> None:
    doc_says(
        "the-header",
        "Numbers are written in the ASCII digits `0` to `9`, with no sign and no leading zero: "
        "`players: 2`, not `02`, `+2`, `2.0` or `２` (a fullwidth digit).",
    )
    msg = parse_error(with_line(TINY, 4, "players: " + value))
    assert_error(msg, "tiny.txt:4:10:", f"bad number {value!r} for 'players'", "no sign and no leading zero")


@pytest.mark.parametrize("digit", ["¹", "１", "٣", "𝟏"])
def test_9_a_version_in_other_digits_is_a_map_error_not_a_crash(digit: str, tmp_path: Path) -> None:
    # 'rezzo-map ¹' used to pass str.isdigit() and then crash int() with a ValueError.
    assert_error(parse_error(with_line(TINY, 1, "rezzo-map " + digit)), "tiny.txt:1:1:", "bad version line")
    path = tmp_path / "sup.txt"
    path.write_text(with_line(TINY, 1, "rezzo-map " + digit), encoding="utf-8")
    code, out = invoke("maps", "check", str(path))
    assert code == 1
    assert f"error: {path}:1:1: bad version line" in out and "Traceback" not in out, out


def test_9_numbers_too_long_for_int_are_map_errors_not_crashes() -> None:
    # int() refuses strings of more than 4,300 digits with a ValueError.
    huge = "9" * 5000
    for read in (parse_map, parse_embedded_map):
        with pytest.raises(MapError, match=r"^tiny\.txt:4:10: 'players: 9+' is out of range"):
            read(with_line(TINY, 4, "players: " + huge), "tiny.txt")
        with pytest.raises(MapError, match=r"^tiny\.txt:1:11: unsupported map format version 9+"):
            read(with_line(TINY, 1, "rezzo-map " + huge), "tiny.txt")
        with pytest.raises(MapError, match=r"^tiny\.txt:1:1: bad version line"):
            read(with_line(TINY, 1, "rezzo-map ¹" + huge), "tiny.txt")


# Each row of the page's table "Where errors point": a map with that problem, and where its error must
# point (line, column). The test checks the table has exactly these rows.
_POINTS: dict[str, list[tuple[str, int, int]]] = {
    (
        "a forbidden character (a control character, a Unicode space, a CR outside CRLF, "
        "a late byte-order mark)"
    ): [
        (with_line(TINY, 3, "name: a\x0cb"), 3, 8),
        (with_line(TINY, grid_line(8), "....A....\u00a0"), grid_line(8), 10),
    ],
    "a line other than a blank line starts with a space or tab": [(with_line(TINY, 5, " agents: 1"), 5, 1)],
    "no version line (the file is empty, blank or only comments)": [("", 1, 1), ("\n \n; c\n", 1, 1)],
    "a bad version line": [(with_line(TINY, 1, "rezzo-map 1 2"), 1, 1)],
    "an unsupported version (`rezzo-map 2`)": [(with_line(TINY, 1, "rezzo-map 2 ; new"), 1, 11)],
    "a header line that is not `key: value`, an unknown key, a repeated key": [
        (with_line(TINY, 4, "players 2"), 4, 1),
        (with_line(TINY, 2, "size: 9x9"), 2, 1),
        (with_line(TINY, 2, "facing: N S"), 6, 1),
    ],
    "a space between a key and its `:`": [(with_line(TINY, 5, "agents  : 1"), 5, 7)],
    "a key without a value": [(with_line(TINY, 5, "agents:  ; none"), 5, 8)],
    "a bad or out-of-range number": [(with_line(TINY, 5, "agents:  65"), 5, 10)],
    "a bad facing, one facing too many": [
        (with_line(TINY, 6, "facing: N X"), 6, 11),
        (with_line(TINY, 6, "facing: N  S\tW"), 6, 14),
    ],
    "too few facings": [(with_line(TINY, 6, "facing:  N  ; one"), 6, 11)],
    "something after `---` on its line": [(with_line(TINY, 7, "--- grid"), 7, 4)],
    "a grid row where a header line belongs (no `---`)": [(with_line(TINY, 7, None), 7, 1)],
    "no `---` at all": [("rezzo-map 1\nname: X\n", 3, 1), ("rezzo-map 1\nname: X  ", 2, 10)],
    "a missing header key": [(with_line(TINY, 3, None), 6, 1)],
    "a blank line between `---` and the first row, or between rows": [
        (TINY.replace("---\n", "---\n\n\n"), 8, 1),
        (TINY.replace("....1....\n", "....1....\n \n\n"), 11, 1),
    ],
    "a character that is not in the legend": [(with_cell(TINY, 5, 3, "x"), grid_line(3), 6)],
    "a grid too tall": [(TINY.split("---", maxsplit=1)[0] + "---\n" + "...\n" * 4097, 8 + 4096, 1)],
    "a grid too wide": [(TINY.split("---", maxsplit=1)[0] + "---\n" + "." * 4097 + "\n", 8, 4097)],
    "a ragged grid": [
        (with_line(TINY, grid_line(2), "........"), grid_line(2), 9),
        (with_line(TINY, grid_line(2), "..........."), grid_line(2), 10),
    ],
    "an empty grid": [(TINY.split("---", maxsplit=1)[0] + "---\n; nothing\n", 8, 1)],
    "a grid smaller than 3x3": [(TINY.split("---", maxsplit=1)[0] + "---\n; rows\n...\n...\n", 9, 1)],
    "an owner not below `players`, an agent too many": [
        (with_cell(with_cell(TINY, 0, 0, "c"), 8, 8, "c"), grid_line(0), 1),
        (with_cell(with_cell(TINY, 0, 1, "0"), 8, 7, "1"), grid_line(6), 5),
    ],
    "a player without a base or a geyser": [(with_cell(with_cell(TINY, 4, 0, "."), 4, 8, "."), 4, 10)],
    "a player with too few agents": [(with_line(TINY, 5, "agents: 2"), 5, 9)],
    "a geyser too close to a base": [
        (
            with_cell(with_cell(with_cell(with_cell(TINY, 1, 3, "."), 7, 5, "."), 6, 1, "b"), 2, 7, "a"),
            grid_line(1),
            7,
        )
    ],
    "a symmetry break": [(with_cell(with_cell(TINY, 8, 4, "#"), 1, 2, "@"), grid_line(2), 2)],
}


def test_10_where_errors_point_is_the_table_on_the_page() -> None:
    section = DOC.read_text(encoding="utf-8").split("### Where errors point", 1)[1].split("\n### ", 1)[0]
    rows = [line.split(" | ")[0].removeprefix("| ") for line in section.splitlines() if line.startswith("| ")]
    assert rows[0] == "problem"
    assert [r for r in rows[1:] if r != "a file that is not UTF-8"] == list(_POINTS)


@pytest.mark.parametrize("problem", list(_POINTS))
def test_10_each_error_points_where_the_table_says(problem: str) -> None:
    for text, line, col in _POINTS[problem]:
        assert_error(parse_error(text), f"tiny.txt:{line}:{col}:")


def test_10_of_several_problems_the_first_in_the_pages_order_is_reported(tmp_path: Path) -> None:
    doc_says(
        "validation",
        "It stops at the first problem, in this order: reading the file (its size, UTF-8), the characters "
        "of the whole file, the file from top to bottom up to the separator, whether a header key is "
        "missing, the header's values (`players`, `agents`, `facing`), the grid row by row, and then the "
        "rules below in the order given.",
    )
    # Problems added from the last in that order to the first: each time, the newest is the one reported.
    steps = [
        (lambda t: with_cell(t, 1, 1, "#"), "tiny.txt:9:2:", "not point-symmetric"),
        (lambda t: with_cell(t, 0, 4, "C"), "tiny.txt:12:1:", "base of player 2"),
        (lambda t: with_cell(t, 0, 8, "?"), "tiny.txt:16:1:", "unknown map character '?'"),
        (lambda t: with_line(t, 6, "facing: N X"), "tiny.txt:6:11:", "bad facing 'X'"),
        (lambda t: with_line(t, 3, "; no name"), "tiny.txt:7:1:", "missing header key 'name'"),
        (lambda t: with_line(t, 5, "  agents: 1"), "tiny.txt:5:1:", "starts with a space"),
        (lambda t: t + "\f", "tiny.txt:17:1:", "a form feed"),
    ]
    text = TINY
    for add, prefix, words in steps:
        text = add(text)
        assert_error(parse_error(text), prefix, words)
    path = tmp_path / "tiny.txt"
    path.write_bytes(text.encode() + b"\xff")
    with pytest.raises(MapError) as info:
        load_map(str(path))
    assert_error(str(info.value), f"{path}:17:2:", "not UTF-8")


def test_10_a_file_that_is_not_utf8_points_at_the_byte_in_characters(tmp_path: Path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes(
        "rezzo-map 1\nname: Tíny \xe9\n".replace("\xe9", "@").encode("utf-8").replace(b"@", b"\xe9")
    )
    with pytest.raises(MapError) as info:
        load_map(str(path))
    assert_error(str(info.value), f"{path}:2:12:", "not UTF-8")


def test_11_ranks_skip_the_places_a_tie_fills_as_the_page_says() -> None:
    text = " ".join(
        DOC.read_text(encoding="utf-8").split("- **Ranks:**", 1)[1].split("## Options")[0].split()
    )
    assert (
        '("competition ranking"): a player\'s rank is 1 plus the number of players who did strictly better'
        in text
    )
    said = re.search(r"The ranks of players 0 to 3 are (\d), (\d), (\d), (\d)", text)
    assert said is not None
    # Players 0 and 1 lose in tick 1 (a flag beside a base), player 3 in tick 2 (its photon becomes a
    # flag beside its base in tick 1), and player 2 is left.
    engine = engine_from(
        """
        B0 F0 . .  .  . .  . .
        B1 F1 . G3 *  B3 . . .
        .  .  . .  .  . .  . B2
        """,
        4,
    )
    assert engine.apply({}).losers == [0, 1]
    assert engine.apply({}).losers == [3]
    result = engine.result()
    assert result is not None and result.winner == 2
    assert [result.ranks[p] for p in range(4)] == [int(r) for r in said.groups()]


def test_11_tournaments_rate_competition_ranks_by_their_order_alone() -> None:
    text = " ".join((DOC.parent.parent / "tournaments.md").read_text(encoding="utf-8").split())
    assert "so two seats tied for first and one behind them rank 1, 1, 3" in text
    assert "The ratings use only the order of the ranks: 1, 1, 3 rates exactly as 1, 1, 2 would." in text
    start = {b: ratings.initial() for b in "xyz"}
    assert ratings.update(start, list("xyz"), [1, 1, 3]) == ratings.update(start, list("xyz"), [1, 1, 2])


# --------------------------------------------------------------------------- maps check and old replays


def test_maps_check_links_the_rule_of_each_error(tmp_path: Path) -> None:
    cases = {
        "indent.txt": (with_line(TINY, 4, "  players: 2"), "characters-and-lines"),
        "blank.txt": (TINY.replace("---\n", "---\n\n"), "comments-and-blank-lines"),
        "version.txt": (with_line(TINY, 1, "rezzo-map 01"), "the-version-line"),
        "key.txt": (with_line(TINY, 3, "Name: Tiny"), "the-header"),
        "sep.txt": (with_line(TINY, 7, "--- ; grid"), "the-separator"),
        "ragged.txt": (with_line(TINY, grid_line(1), "........"), "the-grid"),
        "owner.txt": (with_cell(TINY, 0, 4, "C"), "players-and-agents"),
        "near.txt": (with_cell(with_cell(TINY, 3, 1, "b"), 5, 7, "a"), "geysers-and-bases"),
        "sym.txt": (with_cell(TINY, 1, 1, "#"), "point-symmetry"),
    }
    for name, (text, _) in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    code, out = invoke("maps", "check", *(str(tmp_path / name) for name in cases))
    assert code == 1
    errors = [line for line in out.splitlines() if line.startswith("error: ")]
    assert len(errors) == len(cases), out
    for line, (name, (_, anchor)) in zip(errors, cases.items(), strict=True):
        assert line.startswith(f"error: {tmp_path / name}:"), line
        assert_error(
            line.removeprefix("error: "), f"{tmp_path / name}:{line.split(':')[2]}:{line.split(':')[3]}:"
        )
        assert line.endswith(f"(see docs/games/rezzo.md#{anchor})"), line


OLD_REPLAY = Path(__file__).resolve().parent / "replays" / "rezzo-old-map-grammar.replay"


def test_a_replay_whose_map_only_the_old_parser_read_still_loads_and_verifies() -> None:
    rep = read_replay(OLD_REPLAY)
    with pytest.raises(MapError):  # the strict rules refuse its map...
        parse_map(rep.config["map_text"])
    report = verify(rep)  # ...yet it rebuilds the very same match
    assert report.ok and report.complete and report.ticks_verified == 60, report.summary()
    engine = board_at(rep, 1)
    assert engine.map_name == "Old\rgrammar\x0bduel"
    assert np.array_equal(parse_embedded_map(rep.config["map_text"]).cells, load_map("duel").cells)
    code, out = invoke("replay", "verify", str(OLD_REPLAY))
    assert code == 0 and "ok: 60 ticks verified" in out, out


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("rezzo-map 1", "  rezzo-map\t 01 ; v"),
        ("rezzo-map 1", "rezzo-map １"),
        ("; the smallest interesting map", "\u3000 ; an indented comment"),
        ("name: Tiny", " name :\u00a0Tiny\u2028"),
        ("players: 2", "players:  002"),
        ("facing: N S", "\tfacing:N\u00a0\x0cS"),
        ("---", "\x0c--- ; grid"),
        ("....0....", "....0....\u00a0\x1f"),
        ("....1....", "....1....\n \u3000 ; note"),
    ],
)
def test_embedded_map_texts_read_as_the_old_parser_read_them(old: str, new: str) -> None:
    text = TINY.replace(old + "\n", new + "\n", 1)
    with pytest.raises(MapError):
        parse_map(text)
    m = parse_embedded_map(text, "<map x>")
    assert (m.name, m.players, m.agents) == ("Tiny", 2, parse_map(TINY).agents)
    assert np.array_equal(m.cells, parse_map(TINY).cells)
    # The config's map_text is read this way; a map file never is.
    assert RezzoEngine.new({"map": "tiny", "map_text": text}).map_name == "Tiny"


def test_embedded_map_texts_the_old_parser_refused_get_the_strict_error(tmp_path: Path) -> None:
    for text, where in (
        (TINY.replace("---\n", "---\n\n"), "8:1"),  # refused then too
        (with_line(TINY, 4, "players: 2.0"), "4:10"),
        ("\ufeff" + with_line(TINY, 1, "rezzo-map 01"), "1:1"),
    ):
        with pytest.raises(MapError) as info:
            parse_embedded_map(text, "<map x>")
        assert str(info.value).startswith(f"<map x>:{where}: "), str(info.value)
    path = tmp_path / "old.txt"
    path.write_text(with_line(TINY, 1, "rezzo-map 01"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"old\.txt:1:1: bad version line"):
        RezzoEngine.new({"map": str(path)})


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_maps_read_the_same_embedded(name: str) -> None:
    text, _ = read_map(name)
    # The old reading of a map in the strict format is the same map: only its comments are dropped.
    old = parse_map("\n".join(legacy_lines(text)))
    new = load_map(name)
    assert (old.name, old.players, old.agents) == (new.name, new.players, new.agents)
    assert np.array_equal(old.cells, new.cells)
    assert np.array_equal(parse_embedded_map(text).cells, load_map(name).cells)
