"""The "why" summary's parts without a match: a bot's first exception (from its answers, else its
log), the failures' words, the summary's lines, and the answer's ``error`` as the server keeps it."""

from __future__ import annotations

from pathlib import Path

from cellarena.arena.results import MatchRow, SeatRow
from cellarena.arena.why import failure_word, first_exception, why_by_bot, why_lines
from cellarena.sdk.bot import _first_line
from cellarena.sdk.protocol import debug as debug_layer


def _seat(bot: str, rank: int, word: str, invalid: int = 0, forfeit: bool = False) -> SeatRow:
    return SeatRow(bot, rank, 0, invalid, 0, forfeit, False, {"cause": word, "text": f"{bot}: {word}"})


def _match(index: int, ticks: int, *seats: SeatRow) -> MatchRow:
    return MatchRow(index, f"r1|m|{index}", 1, "duel", None, "r", ticks, None, "now", seats)


def test_the_summary_counts_each_bots_ends_by_its_own_cause_and_names_its_failures() -> None:
    matches = [
        _match(
            0,
            4,
            _seat("raiser", 1, "last_player_standing", invalid=3),
            _seat("hung", 2, "unresponsive", forfeit=True),
        ),
        _match(1, 10, _seat("raiser", 1, "tick_cap", invalid=10), _seat("walker", 1, "tick_cap")),
    ]
    failures = [
        {"bot": "raiser", "forfeit": False, "cause": {"cause": "last_player_standing"}, "log": "a/raiser.log",
         "exception": None},
        {"bot": "raiser", "forfeit": False, "cause": {"cause": "tick_cap"}, "log": "b/raiser.log",
         "exception": {"tick": 2, "text": "on_tick raised KeyError: 'x'"}},
        {"bot": "hung", "forfeit": True, "cause": {"cause": "unresponsive"}, "log": "a/hung.log",
         "exception": None},
    ]  # fmt: skip
    why = why_by_bot(["raiser", "walker", "hung", "idle"], matches, failures)
    assert why[0]["won"] == {"last_player_standing": 1} and why[0]["drew"] == {"tick_cap": 1}
    assert (why[0]["invalid"], why[0]["ticks"], why[0]["failures"]) == (13, 14, 2)
    assert why[0]["log"] == "a/raiser.log" and why[0]["exception"]["tick"] == 2  # the first one known
    assert why_lines(why) == [
        "raiser: won 1 (last_player_standing 1); drew 1 (tick_cap 1); 13 invalid answers in 14 ticks",
        "  2 failures; first exception at tick 2: on_tick raised KeyError: 'x'; log: a/raiser.log",
        "walker: drew 1 (tick_cap 1)",
        "hung: lost 1 (unresponsive 1); 1 forfeit (unresponsive 1)",
        "  1 failure; log: a/hung.log",
        "idle: no match played",
    ]


def test_a_failure_says_what_the_seat_did() -> None:
    forfeit = {"forfeit": True, "crashed": True, "cause": {"cause": "exited"}, "invalid": 0}
    assert failure_word(forfeit, 9) == "forfeited (exited)"
    assert failure_word({**forfeit, "forfeit": False}, 9) == "crashed"
    quiet = {"forfeit": False, "crashed": False, "invalid": 1}
    assert failure_word(quiet, 1) == "answered mostly invalid (1 invalid answer in 1 tick)"


def test_the_first_exception_of_a_bot_without_the_sdk_comes_from_its_log(tmp_path: Path) -> None:
    log = tmp_path / "bot.log"
    log.write_text("starting\nthread 'main' panicked at src/main.rs:9:5:\nno plan\n")
    assert first_exception(None, 0, str(log)) == {
        "tick": None,
        "text": "thread 'main' panicked at src/main.rs:9:5:",
    }
    log.write_text("py: tick 7: on_tick raised KeyError: 'x'; this tick counts as invalid\nTraceback\n")
    assert first_exception(tmp_path / "none.replay", 0, str(log)) == {
        "tick": 7,
        "text": "on_tick raised KeyError: 'x'",
    }
    log.write_text("all well\n")
    assert first_exception(None, 0, str(log)) is None
    assert (
        first_exception(None, 0, str(tmp_path / "gone.log")) is None
        and first_exception(None, 0, None) is None
    )


def test_the_answers_error_is_kept_as_a_drawing_is_cut_and_checked() -> None:
    kept = debug_layer.clean({"error": "on_tick raised ValueError: no"})
    assert kept.kept == {"error": "on_tick raised ValueError: no"} and kept.dropped == 0
    long = debug_layer.clean({"error": "x" * 500, "text": ["a"]})
    assert long.kept == {"text": ["a"], "error": "x" * debug_layer.MAX_ERROR}
    for bad in (7, "two\nlines", ["a"]):
        assert debug_layer.clean({"error": bad}) == debug_layer.Cleaned(None, 1)
    # What the SDK sends: the first line, printable, within the cap.
    assert _first_line("on_tick raised ValueError: a\nb") == "on_tick raised ValueError: a"
    assert _first_line("bell\x07 " + "y" * 300) == ("bell? " + "y" * 300)[: debug_layer.MAX_ERROR]


def test_an_answers_error_is_optional_and_changes_nothing_else() -> None:
    """docs/protocol.md#debug-drawing: an optional key of an optional map; a bot that never sends it
    (every kit but the Python SDK's, and older ones) answers as before, and the move is judged alike."""
    from cellarena.sdk import protocol

    plain = {"type": "moves", "tick": 3, "moves": [1]}
    raised = {"type": "moves", "tick": 3, "debug": {"error": "on_tick raised KeyError: 'x'"}}
    assert "debug" not in protocol.check_moves(plain)
    assert protocol.check_moves({**raised, "moves": [1]})["moves"] == protocol.check_moves(plain)["moves"]
    assert debug_layer.clean({"text": ["hi"], "error": "x"}).kept == {"text": ["hi"], "error": "x"}
