"""The rules' loose ends (issue 44): sentences of docs/replays.md, docs/games/*.md and the Rezzo map
format that an independent reading found could be read two ways, each checked against the engine
(which agrees with itself; the doc now says what it does). No clock, no processes."""

from __future__ import annotations

import re

import pytest
from cellarena_cli import ROOT
from rezzo_boards import engine_from
from test_cata import PASS, Q, first_turn, play, set_up_tally
from test_cloth_engine import still, turn

from cellarena.server.games.cata.engine import CataEngine
from cellarena.server.games.rezzo.maps import MapError, parse_map

DOCS = ROOT / "docs"

# ------------------------------------------------------------------- Rezzo's events (docs/replays.md)
#: Player 0 loses in this board's first transition: its flags at (0, 1) and (0, 2) touch player 1's
#: base at (1, 1). In the same transition a flag of player 0 forms at (5, 0) (a photon beside its
#: geyser), one burns at (7, 1) (an electron beside it), and the flag at (0, 2) burns too.
LOSING_TRANSITION = """
.  .  .  .  G0 *  .  .  .
F0 B1 .  .  .  .  .  F0 @
F0 .  .  .  .  .  .  .  .
@  .  .  .  A0 .  .  .  A1
"""


def _losing_log() -> list[dict[str, object]]:
    engine = engine_from(LOSING_TRANSITION, 2)
    return list(engine.apply({}).log)


def test_events_order_by_cell_then_kind_and_a_losers_flags_are_reported() -> None:
    assert _losing_log() == [
        {"kind": "flag_formed", "tick": 1, "seat": 0, "cell": [5, 0]},
        {"kind": "flag_at_base", "tick": 1, "seat": 0, "flag": [0, 1], "base": [1, 1], "by": 1},
        {"kind": "flag_destroyed", "tick": 1, "seat": 0, "cell": [7, 1], "how": "electron"},
        {"kind": "flag_at_base", "tick": 1, "seat": 0, "flag": [0, 2], "base": [1, 1], "by": 1},
        {"kind": "flag_destroyed", "tick": 1, "seat": 0, "cell": [0, 2], "how": "electron"},
        {"kind": "out", "tick": 1, "seat": 0, "cause": "flag_at_base"},
    ]


def test_the_docs_say_so() -> None:
    replays = " ".join((DOCS / "replays.md").read_text().split())
    for sentence in (
        "one `flag_at_base` event per flag that touches a base, so a seat can have several in one tick",
        "`cause`: the cause's word (`\"flag_at_base\"`), not the cause's map",
        "by cell first (row, then column), and by kind only among the events of one cell",
        "A loser's flags formed or destroyed in the transition it loses in are reported",
        "Reading order is that of the map's own coordinates (row 0 first, then column 0 first), "
        "also with `torus`",
        "`territory` when the scores are level and one territory is larger, and `tick_cap` (a draw)",
        "health in cells",
    ):
        assert sentence in replays, sentence
    # The causes' table stays one table: the sentences sit after it, not between its rows.
    lines = (DOCS / "replays.md").read_text().splitlines()
    first = lines.index("| cause | when | fields |")
    rows = lines[first : lines.index("", first)]
    assert all(r.startswith("|") for r in rows) and rows[-1].startswith("| `unknown` |"), rows[-1]


def test_out_names_the_cause_word_and_the_result_holds_the_first_flags_cause() -> None:
    engine = engine_from(LOSING_TRANSITION, 2)
    (out,) = [e for e in engine.apply({}).log if e["kind"] == "out"]
    assert out["cause"] == "flag_at_base" and isinstance(out["cause"], str)
    result = engine.result()
    assert result is not None
    # The cause object is the result's: the first flag_at_base event of the seat, in the log's order.
    assert result.causes[0]["cause"] == "flag_at_base"
    assert (result.causes[0]["flag"], result.causes[0]["base"]) == ([0, 1], [1, 1])


def test_the_first_base_in_reading_order_on_a_torus_is_by_the_maps_own_rows() -> None:
    # The flag in the last row touches the base in row 0 across the wrap and the base in row 3
    # directly: reading order counts the map's rows from its top, so the base in row 0 is first.
    picture = """
    .  .  B1 .  .
    A0 .  .  .  A1
    .  .  .  .  .
    .  B1 .  .  .
    .  .  F0 .  .
    """
    (at_base,) = [e for e in engine_from(picture, 2, torus=True).apply({}).log if e["kind"] == "flag_at_base"]
    assert at_base["base"] == [2, 0]
    # Without the wrap only the base in row 3 touches it.
    (direct,) = [e for e in engine_from(picture, 2).apply({}).log if e["kind"] == "flag_at_base"]
    assert direct["base"] == [1, 3]


# ------------------------------------------------------------------- Cloth's ends at the round cap
def test_the_round_cap_causes_are_score_territory_then_tick_cap() -> None:
    words = []
    for a, b in (
        ([[2, 2], [3, 2]], [[15, 15]]),
        ([[2, 2], [3, 2]], [[15, 15], [17, 17]]),
        ([[2, 2]], [[15, 15]]),
    ):
        e = still(max_rounds=1)
        turn(e, 0, a)
        turn(e, 1, b)
        result = e.result()
        assert result is not None
        words.append((result.causes[0]["cause"], result.winner))
    assert words == [("score", 0), ("territory", 1), ("tick_cap", None)]
    cloth = " ".join((DOCS / "games" / "cloth.md").read_text().split())
    assert (
        "the cause is `score`; on equal scores the larger territory (cause `territory`); "
        "otherwise a draw (cause `tick_cap`)" in cloth
    )


# ------------------------------------------------------------------- C.A.T.A.'s health
def test_health_in_events_and_causes_is_in_cells_and_the_scores_in_hp() -> None:
    engine = CataEngine.new({})
    first_turn(engine)
    set_up_tally(engine, [100, 40 * Q], whites=300)
    for _ in range(3):
        play(engine, PASS)
    _, events = play(engine, PASS)
    (reaction,) = [e for e in events.log if e["kind"] == "reaction"]
    assert reaction["health"] == [100 - 300, 40 * Q - (64 * 64 - 300)] == engine.health  # cells
    assert reaction["damage"] == [300, 64 * 64 - 300]
    result = engine.result()
    assert result is not None
    assert result.causes[0]["cause"] == "health_zero" and result.causes[0]["health"] == engine.health
    assert result.scores == {0: engine.health[0] / Q, 1: engine.health[1] / Q}  # HP
    cata = " ".join((DOCS / "games" / "cata.md").read_text().split())
    assert "events and causes give health in cells, as the requests do; the result's scores are in HP" in cata


# ------------------------------------------------------------------- the Rezzo map format
TINY = """rezzo-map 1
name: T
players: 2
agents: 1
facing: {facing}
{separator}
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


def _error(text: str) -> tuple[int, int, str]:
    with pytest.raises(MapError) as caught:
        parse_map(text, "m.txt")
    found = re.match(r"m\.txt:(\d+):(\d+): (.*)", str(caught.value))
    assert found, str(caught.value)
    return int(found.group(1)), int(found.group(2)), found.group(3)


def test_four_dashes_are_something_after_the_separator_at_column_4() -> None:
    assert _error(TINY.format(facing="N S", separator="----"))[:2] == (6, 4)


def test_facings_may_be_separated_by_several_spaces_and_tabs() -> None:
    assert [a.facing.name for a in parse_map(TINY.format(facing="N  \t S", separator="---")).agents] == [
        "S",
        "N",
    ]


def test_a_facing_symmetry_error_points_at_the_first_agent_in_reading_order() -> None:
    # Player 1's agent (row 3) comes before player 0's (row 7) in reading order.
    line, col, message = _error(TINY.format(facing="N N", separator="---"))
    assert (line, col) == (9, 5) and "mirrors to agent of player 0 ('0') at 13:5" in message


def test_a_bad_character_wins_over_a_wrong_width_in_its_row() -> None:
    text = TINY.format(facing="N S", separator="---").replace("....#....\n", "..x.#....##\n")
    line, col, message = _error(text)
    assert (line, col) == (11, 3) and message.startswith("unknown map character 'x'")


def test_the_map_format_doc_says_so() -> None:
    rezzo = " ".join((DOCS / "games" / "rezzo.md").read_text().split())
    for sentence in (
        "`----` is something after `---`: column 4",
        "any run of spaces and tabs separates two facings (`facing: N  S` is two facings)",
        "a facing that breaks the symmetry: the first agent in reading order whose mirror does not face "
        "the opposite way",
        "a row with both a character not in the legend and the wrong width: the character",
    ):
        assert " ".join(sentence.split()) in rezzo, sentence  # the doc's line breaks are spaces
