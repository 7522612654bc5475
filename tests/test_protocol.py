"""The protocol's messages: constructors, the one validator behind every check, and the hello rules.

The constructors must build the very bytes the server and the SDK have always sent (msgpack keeps
key order); every bad field of every message is reported in one form; and no input whatever makes
a check raise anything but ProtocolError.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cellarena.sdk import protocol
from cellarena.sdk.protocol import ProtocolError, as_int, is_int, is_number
from cellarena.sdk.protocol.fields import Length, Printable, describe, rule_for

# ------------------------------------------------------------------ one good message of each type
GOOD: dict[str, dict[str, Any]] = {
    "hello": dict(protocol.hello("me", "rezzo", token="t0")),
    "welcome": dict(
        protocol.welcome(
            seat=1,
            game="rezzo",
            match=3,
            players=2,
            names=["a", "me"],
            tick_rate=15.0,
            budget_ms=67,
            config={"map": "Duel"},
        )
    ),
    "tick": dict(protocol.tick(41, 67, {"agents": [0], "cells": bytes(169), "damage": bytes(169)})),
    "moves": dict(protocol.moves(41, [1])),
    "end": dict(
        protocol.end(ticks=9, result="win", rank=1, ranks=[1, 2], winner=0, reason="r", late=1, illegal=2)
    ),
    "error": dict(protocol.error(protocol.FLOOD, "too many")),
    "redirect": dict(protocol.redirect("worker-1", 41873, "t0k3n", tls=True)),
    "frame": dict(protocol.frame({"tick": 4, "width": 2, "cells": b"ab"}, final=True)),
}

#: A value of the wrong wire type for each wire type (bools where ints belong, first of all).
WRONG = {
    "int": True,
    "float": "1.5",
    "str": 7,
    "bool": 1,
    "bin": "bytes?",
    "map": [1],
    "array of int": [1, False],
    "array of str": ["a", 2],
    "int or nil": False,
}


def test_every_constructor_builds_a_valid_message() -> None:
    assert set(GOOD) == set(protocol.SPECS)
    for message in GOOD.values():
        assert protocol.validate(message) is message
        decoded = protocol.FrameReader(protocol.MAX_SERVER_FRAME).feed(protocol.encode(message))
        assert decoded == [message]


def test_constructors_send_todays_bytes() -> None:
    """The dict literals the server and the SDK built before the constructors, byte for byte."""
    request = {"tick": 5, "agents": [0, 2], "cells": b"\x01" * 338, "damage": bytes(338)}
    old_tick = {"type": "tick", "tick": 5, "budget_ms": 50, **request}
    assert protocol.encode(protocol.tick(5, 50, request)) == protocol.encode(old_tick)
    assert protocol.encode_tick(5, 50, request) == protocol.encode(old_tick)
    assert list(protocol.tick(5, 50, request)) == ["type", "tick", "budget_ms", "agents", "cells", "damage"]

    welcome = protocol.welcome(
        seat=None, game="cata", match=2, players=2, names=["a", "b"], tick_rate=0.0, budget_ms=1000, config={}
    )
    assert list(welcome) == [
        "type",
        "protocol",
        "role",
        "game",
        "match",
        "players",
        "names",
        "tick_rate",
        "budget_ms",
        "config",
    ]
    assert welcome["role"] == "spectator"
    seated = protocol.welcome(
        seat=0, game="cata", match=2, players=2, names=["a", "b"], tick_rate=0.0, budget_ms=1000, config={}
    )
    assert list(seated)[-1] == "seat" and seated["role"] == "bot"

    end = protocol.end(ticks=3, result="draw", rank=0, ranks=[1, 1], winner=None, reason="cap")
    assert list(end) == [
        "type",
        "ticks",
        "result",
        "rank",
        "ranks",
        "winner",
        "reason",
        "late",
        "invalid",
        "illegal",
    ]
    assert (end["late"], end["invalid"], end["illegal"]) == (0, 0, 0)
    world = {"tick": 7, "width": 1}
    assert protocol.encode(protocol.frame(world, final=False)) == protocol.encode(
        {"type": "frame", **world, "final": False}
    )
    body = msgpack.packb({"type": "error", "code": "flood", "message": "x"}, use_bin_type=True)
    assert protocol.encode(protocol.error("flood", "x")) == protocol.HEADER.pack(len(body)) + body


def test_encode_tick_makes_the_bytes_of_the_dict_literal() -> None:
    """The server's hot path, one tick request per seat per tick, builds exactly the frame of the
    message it stands for, with and without a time bank. (Its cost is a benchmark's business, not a
    timed test's: a shared machine makes such a test flake.)"""
    request = {"tick": 5, "agents": [0], "cells": bytes(169), "damage": bytes(169)}
    literal = protocol.encode({"type": "tick", "tick": 5, "budget_ms": 67, **request})
    assert protocol.encode_tick(5, 67, request) == literal
    banked = protocol.encode({"type": "tick", "tick": 5, "budget_ms": 67, "bank_ms": 900, **request})
    assert protocol.encode_tick(5, 67, request, bank_ms=900) == banked


# ------------------------------------------------------------------ one report for every bad field
CASES = [
    (kind, f.name, f.rule.wire)
    for kind, spec in protocol.SPECS.items()
    for f in spec.fields
    if f.rule.wire in WRONG and f.name != "type"
]


@pytest.mark.parametrize(("kind", "name", "wire"), CASES)
def test_every_bad_field_is_reported_the_same_way(kind: str, name: str, wire: str) -> None:
    spec = protocol.SPECS[kind]
    field = spec.field(name)
    bad = {**GOOD[kind], name: WRONG[wire]}
    if field.lenient:
        checked = spec.check(bad)
        assert name not in checked and name in bad  # left out of a copy; the message is untouched
        return
    with pytest.raises(ProtocolError) as info:
        protocol.validate(bad)
    assert info.value.code == spec.code
    expected = re.escape(f"{kind}: the field '{name}' must be {field.rule.expected} (got ")
    assert re.fullmatch(expected + r".+\)", info.value.message), info.value.message


@pytest.mark.parametrize(
    ("kind", "name"),
    [(kind, f.name) for kind, spec in protocol.SPECS.items() for f in spec.fields if f.required],
)
def test_every_missing_field_is_reported_the_same_way(kind: str, name: str) -> None:
    message = {k: v for k, v in GOOD[kind].items() if k != name}
    if name == "type":
        with pytest.raises(ProtocolError, match="needs a string field 'type'"):
            protocol.validate(message)
        return
    with pytest.raises(ProtocolError) as info:
        protocol.validate(message)
    assert info.value.code == protocol.SPECS[kind].code
    assert info.value.message == f"{kind}: the field '{name}' is missing"


def test_bad_hellos_are_bad_hello_and_other_messages_bad_message() -> None:
    assert protocol.SPECS["hello"].code == protocol.BAD_HELLO
    assert {s.code for k, s in protocol.SPECS.items() if k != "hello"} == {protocol.BAD_MESSAGE}


@pytest.mark.parametrize("kind", sorted(GOOD))
def test_unknown_fields_are_ignored(kind: str) -> None:
    message = {**GOOD[kind], "later_version_field": {"x": [1, 2]}, "x": True}
    assert protocol.validate(message) is message


def test_optional_fields_may_be_absent() -> None:
    hello = {k: v for k, v in GOOD["hello"].items() if k not in ("role", "token")}
    assert protocol.validate(hello) is hello
    spectator = {k: v for k, v in GOOD["welcome"].items() if k != "seat"} | {"role": "spectator"}
    assert protocol.check_welcome(spectator) is spectator


def test_a_bots_welcome_names_its_seat() -> None:
    seatless = {k: v for k, v in GOOD["welcome"].items() if k != "seat"}
    with pytest.raises(ProtocolError, match=r"welcome: the field 'seat' is missing \(a bot's welcome"):
        protocol.validate(seatless)


def test_unknown_and_missing_types() -> None:
    with pytest.raises(ProtocolError) as info:
        protocol.validate({"type": "chat"})
    assert info.value.code == protocol.UNKNOWN_TYPE and "'chat'" in info.value.message
    for message in ({}, {"type": 5}):
        with pytest.raises(ProtocolError) as info:
            protocol.validate(message)
        assert info.value.code == protocol.BAD_MESSAGE


def test_moves_carry_anything_the_game_judges() -> None:
    for moves in ([1, 2], None, {"0": 1}, [[0, 3]], "x"):
        protocol.validate({"type": "moves", "tick": 1, "moves": moves})


# ------------------------------------------------------------------ random input
_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=True)
    | st.text(max_size=70)
    | st.binary(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_names = st.sampled_from(sorted({f.name for s in protocol.SPECS.values() for f in s.fields})) | st.text(
    max_size=8
)


@settings(max_examples=400, deadline=None)
@given(
    kind=st.sampled_from([*sorted(protocol.SPECS), "chat"]) | _values,
    fields=st.dictionaries(_names, _values, max_size=12),
)
def test_no_input_raises_anything_but_protocol_error(kind: Any, fields: dict[str, Any]) -> None:
    message = {**fields, "type": kind}
    for check in (protocol.validate, lambda m: protocol.check_hello(m, game="rezzo")):
        try:
            checked = check(message)
        except ProtocolError as exc:
            assert exc.code in protocol.ERROR_CODES
        else:
            assert checked["type"] == kind


@settings(max_examples=200, deadline=None)
@given(base=st.sampled_from(sorted(GOOD)), name=_names, value=_values)
def test_one_changed_field_is_accepted_or_reported_by_name(base: str, name: str, value: Any) -> None:
    message = {**GOOD[base], name: value}
    try:
        protocol.validate(message)
    except ProtocolError as exc:
        assert f"'{name}'" in exc.message or exc.code == protocol.UNKNOWN_TYPE


# ------------------------------------------------------------------ the server's hello check
def hello_with(**fields: Any) -> dict[str, Any]:
    return {**protocol.hello("bot", "rezzo"), **fields}


@pytest.mark.parametrize(
    ("message", "code", "text"),
    [
        ({"type": "dance"}, protocol.BAD_HELLO, "the first message must be 'hello', got 'dance'"),
        ({"type": "moves", "tick": 1}, protocol.BAD_HELLO, "the first message must be 'hello', got 'moves'"),
        (hello_with(protocol=7), protocol.BAD_VERSION, "protocol 7 is not spoken here; this server speaks 1"),
        (hello_with(protocol=True), protocol.BAD_HELLO, "the field 'protocol' must be an int (got bool"),
        (hello_with(protocol="1"), protocol.BAD_HELLO, "the field 'protocol' must be an int (got str '1')"),
        (hello_with(protocol=1.0), protocol.BAD_HELLO, "the field 'protocol' must be an int (got float"),
        ({"type": "hello", "name": "x", "game": "rezzo"}, protocol.BAD_HELLO, "field 'protocol' is missing"),
        (hello_with(game="chess"), protocol.BAD_HELLO, "this server plays 'rezzo', not 'chess'"),
        (hello_with(name=""), protocol.BAD_HELLO, "hello: the field 'name' must be a printable string of 1"),
        (hello_with(name="x" * 65), protocol.BAD_HELLO, "of 1 to 64 characters (got str 'xxx"),
        (hello_with(name="a\nb"), protocol.BAD_HELLO, "the field 'name' must be a printable string"),
        (hello_with(name=12), protocol.BAD_HELLO, "the field 'name' must be a printable string"),
        (hello_with(role="referee"), protocol.BAD_HELLO, "'role' must be 'bot' or 'spectator' (got str 'ref"),
        (hello_with(game=None), protocol.BAD_HELLO, "hello: the field 'game' must be a string (got nil)"),
    ],
)
def test_check_hello_refuses_with_todays_codes(message: dict[str, Any], code: str, text: str) -> None:
    with pytest.raises(ProtocolError) as info:
        protocol.check_hello(message, game="rezzo")
    assert info.value.code == code
    assert text in info.value.message


def test_check_hello_takes_good_hellos_and_leaves_tokens_to_the_lobby() -> None:
    hello = hello_with(role="spectator", token="t1")
    assert protocol.check_hello(hello, game="rezzo") is hello
    assert protocol.check_hello(hello_with(name="x" * 64), game="rezzo")["name"] == "x" * 64
    # A token that is not a string has always been ignored where no seat is reserved: it is left out.
    for token in (None, 7, ["a"]):
        odd = hello_with(token=token)
        checked = protocol.check_hello(odd, game="rezzo")
        assert "token" not in checked and odd["token"] == token


# ------------------------------------------------------------------ the helpers
@pytest.mark.parametrize(
    ("value", "integer", "number", "index"),
    [
        (3, True, True, 3),
        (-(2**70), True, True, -(2**70)),
        (True, False, False, None),
        (False, False, False, None),
        (1.0, False, True, None),
        ("1", False, False, None),
        (None, False, False, None),
    ],
)
def test_is_int_and_friends(value: Any, integer: bool, number: bool, index: int | None) -> None:
    assert is_int(value) is integer
    assert is_number(value) is number
    assert as_int(value) == index


def test_as_int_takes_numpy_integers_but_not_numpy_bools() -> None:
    np = pytest.importorskip("numpy")
    assert as_int(np.int64(4)) == 4 and type(as_int(np.uint8(4))) is int
    assert as_int(np.bool_(True)) is None
    assert not is_int(np.int64(4))  # not a wire value: msgpack never gives one


def test_rules_read_from_type_hints() -> None:
    rule = rule_for(list[int] | None)
    assert rule.wire == "array of int or nil"
    assert rule.check(None) and rule.check([1]) and not rule.check([True])

    name = rule_for(Annotated[str, Printable(), Length(1, 3)])
    assert name.expected == "a printable string of 1 to 3 characters"
    assert name.check("abc") and not name.check("abcd") and not name.check("") and not name.check("\x00")
    pair = rule_for(Annotated[list[int], Length(2, 2)])
    assert pair.wire == "array of 2 int" and pair.check([1, 2]) and not pair.check([1])
    with pytest.raises(TypeError, match="no wire form"):
        rule_for(set[int])
    assert describe(None) == "nil" and describe(b"ab") == "bin b'ab'" and describe([1]) == "array [1]"


@pytest.mark.parametrize(
    ("rank", "ranks", "outcome"),
    [(1, [1, 2], "win"), (2, [1, 2], "loss"), (1, [1, 1], "draw"), (1, [1, 1, 3], "draw"),
     (3, [1, 1, 3], "loss"), (1, [2, 1, 3], "win"), (2, [2, 2, 1], "loss")],
)  # fmt: skip
def test_one_rule_gives_a_seats_result_from_the_ranks(rank: int, ranks: list[int], outcome: str) -> None:
    """First alone wins, first shared draws, the rest lose: the server's `end` and the ladder's records."""
    from cellarena.arena.ladder import records

    assert protocol.outcome_of(rank, ranks) == outcome
    assert records.outcome is protocol.outcome_of
