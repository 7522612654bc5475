"""The Python SDK: framing, the Rezzo viewport helpers, the Tracker, and the Bot loop.

The loop is tested against a fake server: a plain blocking socket on 127.0.0.1, port 0, in a thread,
speaking the protocol with `cellarena.sdk.protocol` (welcome, a few ticks, end), and recording what
the bot sent.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import pickle
import random
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgpack
import pytest
from cellarena_cli import cellarena
from fake_server import Conn, FakeServer
from hypothesis import given, settings
from hypothesis import strategies as st

from cellarena.sdk import (
    Bot,
    Cell,
    Client,
    ConnectError,
    MatchInfo,
    MatchResult,
    Move,
    MovesError,
    ServerError,
    Tracker,
    View,
    Viewport,
    connect,
    moves_for,
    play,
    protocol,
    run,
)
from cellarena.sdk.client import ConnectionClosedError
from cellarena.sdk.games import GAMES, adapter
from cellarena.sdk.games.rezzo import FORWARD, RIGHTWARD, VIEW_CELLS, Facing, RezzoSettings
from cellarena.sdk.protocol import MAX_CLIENT_FRAME, FrameReader, ProtocolError, decode_body, encode

ROOT = Path(__file__).resolve().parent.parent

# ======================================================================================== framing
MESSAGES = [
    protocol.hello("wirelayer", "rezzo"),
    protocol.hello("x", "rezzo", token="t0k", role="spectator"),
    protocol.moves(41, [1, 0, 5]),
    protocol.tick(3, 66, {"agents": [0], "cells": bytes(range(169)), "damage": bytes(169)}),
    protocol.end(ticks=812, result="win", rank=1, ranks=[2, 1], winner=None, reason="é"),
]


def test_every_split_of_a_stream_gives_the_same_messages() -> None:
    stream = b"".join(encode(m) for m in MESSAGES)
    for size in range(1, 40):
        reader = FrameReader(protocol.MAX_SERVER_FRAME)
        out = []
        for i in range(0, len(stream), size):
            out += reader.feed(stream[i : i + size])
        assert out == MESSAGES
        assert reader.buffered == 0


_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.text(max_size=20)
    | st.binary(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.builds(
            lambda kind, extra: {**extra, "type": kind},
            st.text(max_size=10),
            st.dictionaries(st.text(max_size=6), _values, max_size=4),
        ),
        min_size=1,
        max_size=5,
    ),
    st.lists(st.integers(1, 64), min_size=1, max_size=30),
)
def test_framing_round_trips_in_pieces_of_any_size(messages: list[dict[str, Any]], cuts: list[int]) -> None:
    stream = b"".join(encode(m) for m in messages)
    reader = FrameReader(protocol.MAX_SERVER_FRAME)
    out: list[dict[str, Any]] = []
    pos, i = 0, 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        out += reader.feed(stream[pos : pos + step])
        pos += step
        i += 1
    assert out == messages


def test_frame_over_the_limit_is_refused_from_its_header_alone() -> None:
    reader = FrameReader(MAX_CLIENT_FRAME)
    with pytest.raises(ProtocolError) as info:
        reader.feed(protocol.HEADER.pack(MAX_CLIENT_FRAME + 1))  # no body at all
    assert info.value.code == protocol.TOO_LARGE
    assert str(MAX_CLIENT_FRAME) in info.value.message


def test_frame_of_exactly_the_limit_is_accepted() -> None:
    pad = MAX_CLIENT_FRAME - len(encode({"type": "x", "pad": b"\0" * 1000})) + protocol.HEADER.size + 1000
    frame = encode({"type": "x", "pad": b"\0" * pad})  # both paddings use a bin16 header
    assert len(frame) - protocol.HEADER.size == MAX_CLIENT_FRAME
    assert FrameReader(MAX_CLIENT_FRAME).feed(frame)[0]["pad"] == b"\0" * pad


def test_a_partial_frame_waits_for_the_rest() -> None:
    frame = encode(protocol.moves(1, [0]))
    reader = FrameReader(MAX_CLIENT_FRAME)
    assert reader.feed(frame[:3]) == []
    assert reader.feed(frame[3:-1]) == []
    assert reader.buffered == len(frame) - 1
    assert reader.feed(frame[-1:]) == [protocol.moves(1, [0])]


#: Any msgpack value, including maps keyed by arrays and maps (which Python cannot hold as a dict).
_MSGPACK_BODIES = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(), st.text(max_size=8),
        st.binary(max_size=8),
    ).map(msgpack.packb),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda xs: bytes([0x90 | len(xs)]) + b"".join(xs)),
        st.lists(st.tuples(inner, inner), max_size=4).map(
            lambda kvs: bytes([0x80 | len(kvs)]) + b"".join(k + v for k, v in kvs)
        ),
    ),
    max_leaves=12,
)  # fmt: skip


@given(st.one_of(_MSGPACK_BODIES, st.binary(max_size=40)))
@settings(max_examples=400, deadline=None)
def test_any_body_decodes_to_a_message_or_a_protocol_error(body: bytes) -> None:
    """Whatever a peer sends, decoding gives a message or a ProtocolError, never anything else."""
    try:
        message = decode_body(body)
    except ProtocolError as exc:
        assert exc.code in (protocol.BAD_FRAME, protocol.BAD_MESSAGE)
    else:
        assert isinstance(message, dict) and isinstance(message["type"], str)


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"\xc1", protocol.BAD_FRAME),  # a byte msgpack never uses
        (b"", protocol.BAD_FRAME),  # empty body
        (b"\x82\xa4type", protocol.BAD_FRAME),  # truncated map
        (msgpack.packb({"type": "a"}) + b"\x00", protocol.BAD_FRAME),  # two values in one frame
        (b"\x91" * 5000 + b"\xc0", protocol.BAD_FRAME),  # nested deeper than the unpacker allows
        (msgpack.packb([1, 2]), protocol.BAD_FRAME),  # not a map
        (msgpack.packb(7), protocol.BAD_FRAME),
        (msgpack.packb({"kind": "hello"}), protocol.BAD_MESSAGE),  # no type
        (msgpack.packb({"type": 1}), protocol.BAD_MESSAGE),  # type not a string
        (msgpack.packb({"type": b"hello"}), protocol.BAD_MESSAGE),  # bytes are not a string
        (b"\x81\x91\x01\x01", protocol.BAD_FRAME),  # a map with an array for a key
        (b"\x81\x80\x01", protocol.BAD_FRAME),  # a map with a map for a key
    ],
)
def test_every_bad_body_has_its_error_code(body: bytes, code: str) -> None:
    with pytest.raises(ProtocolError) as info:
        decode_body(body)
    assert info.value.code == code
    # FrameReader raises the same error for the same body in a frame.
    with pytest.raises(ProtocolError) as framed:
        FrameReader(protocol.MAX_SERVER_FRAME).feed(protocol.HEADER.pack(len(body)) + body)
    assert framed.value.code == code


def test_message_constructors_match_the_spec() -> None:
    assert protocol.hello("me", "rezzo") == {
        "type": "hello",
        "protocol": 1,
        "name": "me",
        "game": "rezzo",
        "role": "bot",
    }
    assert protocol.hello("me", "rezzo", token="k")["token"] == "k"
    assert protocol.moves(41, [1]) == {"type": "moves", "tick": 41, "moves": [1]}
    assert protocol.error(protocol.FLOOD, "x") == {"type": "error", "code": "flood", "message": "x"}


# ======================================================================================== viewports
def picture_with(marks: dict[tuple[int, int], str]) -> str:
    """A picture (row, col) -> token on blank ground, with you at the bottom centre."""
    grid = [["."] * 13 for _ in range(13)]
    grid[12][6] = "A0"
    for (r, c), token in marks.items():
        grid[r][c] = token
    return "\n".join(" ".join(row) for row in grid)


def test_relative_coordinates_follow_the_rulebook_layout() -> None:
    v = Viewport.from_ascii(
        picture_with({(11, 6): "F1", (0, 6): "G1", (12, 0): "B0", (12, 12): "#:3", (10, 5): "@"})
    )
    assert v.at(0, 0) == Cell.AGENT
    assert v.ahead() == v.at(1, 0) == v.cell(11, 6) == Cell.FLAG + 1
    assert v.ahead(12) == v.cell(0, 6) == Cell.GEYSER + 1
    assert v.at(0, -6) == Cell.BASE  # six to the left
    assert v.at(0, 6) == Cell.CONDUCTOR and v.damage_at(0, 6) == 3 and v.cell_damage(12, 12) == 3
    assert v.at(2, -1) == Cell.ELECTRON
    assert Viewport.to_row_col(2, -1) == (10, 5)
    assert Viewport.to_relative(10, 5) == (2, -1)
    for f in range(13):
        for r in range(-6, 7):
            assert Viewport.to_relative(*Viewport.to_row_col(f, r)) == (f, r)


@pytest.mark.parametrize(("forward", "right"), [(-1, 0), (13, 0), (0, -7), (0, 7), (20, 20)])
def test_outside_the_window_is_an_index_error(forward: int, right: int) -> None:
    v = Viewport.from_cells()
    assert not Viewport.in_view(forward, right)
    with pytest.raises(IndexError, match="outside the window"):
        v.at(forward, right)
    with pytest.raises(IndexError):
        v.cell(forward + 13, right + 13)


def test_oob_cells_read_as_oob() -> None:
    v = Viewport.from_ascii(
        "\n".join(["XXXXXXXXXXXXX"] * 6 + ["......." + "XXXXXX"] * 6 + [". . . . . . A0 . X X X X X"])
    )
    assert v.ahead(7) == Cell.OOB and v.ahead(12) == Cell.OOB  # the world ends 7 cells ahead
    assert v.ahead(6) == Cell.BLANK
    assert v.at(0, 2) == Cell.OOB and v.kind(v.at(0, 2)) is Cell.OOB
    assert v.owner(Cell.OOB) is None and not v.is_mine(Cell.OOB) and not v.is_theirs(Cell.OOB)
    assert not v.can_hit()


def test_kinds_and_owners() -> None:
    assert Viewport.kind(Cell.FLAG + 3) is Cell.FLAG
    assert Viewport.kind(Cell.TAIL) is Cell.TAIL
    assert Viewport.owner(Cell.BASE + 2) == 2 and Viewport.owner(Cell.CONDUCTOR) is None
    assert Viewport.is_mine(Cell.GEYSER) and not Viewport.is_theirs(Cell.GEYSER)
    assert Viewport.is_theirs(Cell.AGENT + 1) and not Viewport.is_mine(Cell.AGENT + 1)
    assert not Viewport.is_mine(Cell.BLANK) and not Viewport.is_theirs(Cell.BLANK)
    assert all(Viewport.is_wire(c) for c in (Cell.CONDUCTOR, Cell.ELECTRON, Cell.TAIL))
    assert not Viewport.is_wire(Cell.PHOTON)


def test_find_lists_nearest_first_and_filters_owners() -> None:
    v = Viewport.from_cells(
        {(1, 0): Cell.FLAG + 1, (3, -2): Cell.FLAG, (2, 2): Cell.GEYSER + 1, (5, 0): Cell.FLAG + 2}
    )
    assert v.find(Cell.FLAG) == [(1, 0), (3, -2), (5, 0)]
    assert v.find(Cell.FLAG, mine=True) == [(3, -2)]
    assert v.find(Cell.FLAG, mine=False) == [(1, 0), (5, 0)]
    assert v.find([Cell.FLAG, Cell.GEYSER], mine=False) == [(1, 0), (2, 2), (5, 0)]
    assert v.find(Cell.AGENT) == []  # never yourself
    with pytest.raises(ValueError, match="owned kinds"):
        v.find(Cell.CONDUCTOR, mine=True)


def test_can_advance_and_can_hit() -> None:
    assert Viewport.from_cells().can_advance()
    for code, hit in [
        (Cell.CONDUCTOR, True),
        (Cell.ELECTRON, True),
        (Cell.TAIL, True),
        (Cell.FLAG + 1, True),
    ]:
        v = Viewport.from_cells({(1, 0): code})
        assert v.can_hit() is hit and not v.can_advance()
    for code in (Cell.PHOTON, Cell.GEYSER + 1, Cell.BASE, Cell.AGENT + 1, Cell.OOB):
        v = Viewport.from_cells({(1, 0): code})
        assert not v.can_hit() and not v.can_advance()


def test_ascii_round_trip_and_errors() -> None:
    rng = random.Random(5)
    codes = [0, 1, 2, 3, 4, 7] + [k + o for k in (8, 16, 24, 32) for o in range(8)]
    for _ in range(20):
        v = Viewport(
            bytes(rng.choice(codes) for _ in range(169)), bytes(rng.randrange(4) for _ in range(169))
        )
        assert Viewport.from_ascii(str(v)) == v
        assert hash(Viewport.from_ascii(str(v))) == hash(v)
    with pytest.raises(ValueError, match="13 rows"):
        Viewport.from_ascii(".............\n" * 12)
    with pytest.raises(ValueError, match=r"row 3 .* 12 cells"):
        Viewport.from_ascii("\n".join(["............."] * 3 + ["............"] + ["............."] * 9))
    with pytest.raises(ValueError, match="row 0, column 4: unknown cell 'Q1'"):
        Viewport.from_ascii("\n".join([". . . . Q1 . . . . . . . ."] + ["............."] * 12))
    with pytest.raises(ValueError, match="damage"):
        Viewport.from_ascii("\n".join(["#:4 . . . . . . . . . . . ."] + ["............."] * 12))
    with pytest.raises(ValueError, match="169 bytes"):
        Viewport(bytes(168))


def test_view_from_a_tick_message_splits_agents() -> None:
    cells = bytes([Cell.BLANK] * VIEW_CELLS) + bytes([Cell.CONDUCTOR] * VIEW_CELLS)
    damage = bytes(VIEW_CELLS) + bytes([2] * VIEW_CELLS)
    view = View.from_message(protocol.tick(9, 50, {"agents": [0, 3], "cells": cells, "damage": damage}))
    assert view.tick == 9 and view.agents == [0, 3] and view.budget_ms == 50 and len(view) == 2
    assert [i for i, _ in view] == [0, 3]
    assert view.viewports[1].ahead() == Cell.CONDUCTOR and view.viewports[1].damage_at(1) == 2
    assert view.viewport is view.viewports[0]
    assert 0 < view.time_left_ms() <= 50
    for bad in (
        {"tick": "9"},
        {"agents": [True]},
        {"cells": cells[:-1]},
        {"damage": "text"},
        {"budget_ms": None},
        {"budget_ms": True},
    ):
        message = {**protocol.tick(9, 50, {"agents": [0, 3], "cells": cells, "damage": damage}), **bad}
        with pytest.raises(ValueError, match="tick: field"):
            View.from_message(message)


def test_view_from_ascii_for_offline_tests() -> None:
    view = View.from_ascii(picture_with({(11, 6): "#"}), Viewport.from_cells(), tick=4)
    assert view.tick == 4 and view.agents == [0, 1] and view.viewport.ahead() == Cell.CONDUCTOR


def test_viewport_matches_the_engine_for_every_facing() -> None:
    """at(forward, right) is world[P + forward·F + right·R], checked on the real engine's requests."""
    from rezzo_boards import engine_from

    rng = random.Random(3)
    size = 27
    tokens = [".", "#", "@", "~", "B1", "G1", "F0", "F1"]
    damageable = ("#", "@", "~", "F0", "F1")

    def token() -> str:
        t = rng.choice(tokens)
        return f"{t}:{rng.randrange(1, 4)}" if t in damageable and rng.random() < 0.3 else t

    for facing in Facing:
        grid = [[token() for _ in range(size)] for _ in range(size)]
        grid[13][13] = "A0" + "^>v<"[facing]
        grid[0][0] = "A1"
        engine = engine_from("\n".join(" ".join(r) for r in grid), players=2)
        request = engine.pending()[0]
        v = View.from_message({"type": "tick", **request}).viewport
        world, dmg = engine.cells(), engine.damage()
        (fx, fy), (rx, ry) = FORWARD[facing], RIGHTWARD[facing]
        for f in range(13):
            for r in range(-6, 7):
                x, y = 13 + f * fx + r * rx, 13 + f * fy + r * ry
                assert v.at(f, r) == world[y, x], (facing, f, r)  # the viewer is seat 0: owners as-is
                assert v.damage_at(f, r) == dmg[y, x]


# ======================================================================================== Tracker
@pytest.mark.parametrize(("map_name", "seat"), [("duel", 0), ("duel", 1), ("quad", 1)])
def test_tracker_keeps_in_step_with_the_engine(map_name: str, seat: int) -> None:
    """Random moves on a real map: the tracker's pose stays the agent's true pose, in its own frame."""
    from cellarena.server.games.rezzo.engine import RezzoEngine

    engine = RezzoEngine.new({"map": map_name})
    start = next(a for a in engine.agents() if a.player == seat)
    tracker = Tracker()
    rng = random.Random(11)
    turns = int(start.facing)
    for _ in range(300):
        request = engine.pending()[seat]
        tracker.observe(View.from_message({"type": "tick", **request}).viewport)
        agent = next(a for a in engine.agents() if a.player == seat)
        # The tracker's frame is the world turned so that the start facing is north.
        dx, dy = agent.x - start.x, agent.y - start.y
        for _ in range(turns):
            dx, dy = dy, -dx
        assert tracker.pos == (dx, dy)
        assert (tracker.heading + turns) % 4 == agent.facing
        ahead = tracker.known(*tracker.world(1))
        assert ahead == request["cells"][11 * 13 + 6]
        move = rng.choice([Move.ADVANCE] * 4 + [Move.BUILD, Move.LEFT, Move.RIGHT, Move.HIT])
        others = {s: [int(rng.choice(list(Move)))] for s in engine.pending() if s != seat}
        engine.apply({seat: [tracker.commit(move)], **others})


def test_tracker_notices_an_advance_that_did_not_happen() -> None:
    tracker = Tracker()
    scene = Viewport.from_cells({(3, 2): Cell.GEYSER + 1, (5, -1): Cell.BASE + 1, (2, 0): Cell.CONDUCTOR})
    tracker.observe(scene)
    tracker.commit(Move.ADVANCE)
    tracker.observe(
        Viewport.from_cells(
            {(3, 2): Cell.GEYSER + 1, (5, -1): Cell.BASE + 1, (2, 0): Cell.CONDUCTOR, (1, 0): Cell.AGENT + 1}
        )
    )
    assert tracker.pos == (0, 0)  # the same scene from the same place: the advance failed
    tracker.commit(Move.ADVANCE)
    tracker.observe(
        Viewport.from_cells({(2, 2): Cell.GEYSER + 1, (4, -1): Cell.BASE + 1, (1, 0): Cell.CONDUCTOR})
    )
    assert tracker.pos == (0, -1)


def test_tracker_paths_and_turns() -> None:
    tracker = Tracker()
    tracker.observe(Viewport.from_cells({(1, 0): Cell.CONDUCTOR, (2, 0): Cell.FLAG + 1}))
    # The target (2 ahead) sits behind wire: the walk goes round it, starting with a turn.
    path = tracker.path_to({(0, -2)}, unknown=False)
    assert path is not None and len(path) == 4 and path[-1] == (0, -2)
    assert tracker.step_to({(0, -2)}) in (Move.LEFT, Move.RIGHT)
    assert tracker.turn_toward(0, -1) is None
    assert tracker.turn_toward(1, 0) == Move.RIGHT and tracker.turn_toward(-1, 0) == Move.LEFT
    assert tracker.turn_toward(0, 1) == Move.LEFT  # behind: turn either way, twice
    with pytest.raises(ValueError, match="not next to"):
        tracker.turn_toward(2, 2)
    assert tracker.step_to({(0, 0)}) is None  # already there
    assert Tracker().step_to({(0, -5)}) == Move.ADVANCE  # unknown cells count as walkable
    assert Tracker().path_to({(0, -5)}, unknown=False) is None


# ======================================================================================== moves_for
@pytest.mark.parametrize(
    ("answer", "agents", "codes"),
    [
        (Move.ADVANCE, 1, [1]),
        (4, 1, [4]),
        ([Move.LEFT, 5], 2, [2, 5]),
        ((0, 1, 2), 3, [0, 1, 2]),
        ([], 0, []),
    ],
)
def test_moves_for_accepts_moves_and_lists(answer: object, agents: int, codes: list[int]) -> None:
    assert moves_for(answer, agents) == codes


@pytest.mark.parametrize(
    ("answer", "agents", "message"),
    [
        (None, 1, "returned NoneType"),
        ("1", 1, "returned str"),
        (1.0, 1, "returned float"),
        ({0: 1}, 1, "returned dict"),
        (Move.ADVANCE, 2, "single move, but this seat has 2 agents"),
        ([1, 1], 1, "2 moves for 1 agent"),
        ([1], 2, "1 moves for 2 agents"),
        ([9], 1, "9 for agent #0, which is not a Move"),
        ([True], 1, "True for agent #0"),
        ([-1], 1, "not a Move"),
    ],
)
def test_moves_for_rejects_everything_else(answer: object, agents: int, message: str) -> None:
    with pytest.raises(MovesError, match=message.replace("(", r"\(")):
        moves_for(answer, agents)


def test_moves_for_takes_numpy_moves() -> None:
    np = pytest.importorskip("numpy")
    assert moves_for(np.array([1, 2], np.uint8), 2) == [1, 2]
    assert moves_for(np.int64(3), 1) == [3]


# ======================================================================================== fake server
WELCOME = protocol.welcome(
    seat=1,
    game="rezzo",
    match=3,
    players=2,
    names=["random", "me"],
    tick_rate=15.0,
    budget_ms=1000,
    config={
        "map": "duel",
        "width": 32,
        "height": 32,
        "agents_per_player": 1,
        "view_size": 13,
        "max_ticks": 3000,
        "torus": False,
        "own_base_counts": True,
    },
)
END = protocol.end(
    ticks=3, result="win", rank=1, ranks=[2, 1], winner=1, reason="last player standing", illegal=2
)


def tick(n: int, agents: int = 1, ahead: int = Cell.BLANK) -> protocol.Tick:
    v = Viewport.from_cells({(1, 0): ahead})
    observation = {"agents": list(range(agents)), "cells": v.cells * agents, "damage": v.damage * agents}
    return protocol.tick(n, 1000, observation)


def scripted(script: list[Any]) -> FakeServer:
    """A fake server that plays ``script``: messages to send, in order. After each tick it waits for
    one answer. A list of messages is sent in one piece (a burst), then one answer is awaited. The
    item "close" closes the connection at once."""

    def play_script(conn: Conn) -> None:
        for item in script:
            if item == "close":
                return
            burst = item if isinstance(item, list) else [item]
            conn.send(*burst)
            if any(m["type"] == "tick" for m in burst):
                answer = conn.recv()
                if answer is None:
                    return  # the bot hung up; the test checks what it sent before
                conn.session.answers.append(answer)

    return FakeServer(play_script)


class Recorder(Bot):
    """Plays ADVANCE and records what the loop gave it."""

    def __init__(self) -> None:
        self.ticks: list[int] = []
        self.started: MatchInfo | None = None
        self.result: MatchResult | None = None

    def on_start(self, info: MatchInfo) -> None:
        self.started = info

    def on_tick(self, view: View) -> list[int] | int | Move:
        self.ticks.append(view.tick)
        return Move.ADVANCE

    def on_end(self, result: MatchResult) -> None:
        self.result = result


def play_against(server: FakeServer, bot: Bot) -> MatchResult:
    with connect("127.0.0.1", server.port, name="me", game="rezzo") as client:
        result = play(bot, client, name="me", quiet=True)
    server.join()
    return result


def test_bot_answers_every_tick_with_its_number() -> None:
    server = scripted([WELCOME, tick(1), tick(2), tick(7), END])
    bot = Recorder()
    result = play_against(server, bot)
    assert server.session.hello == protocol.hello("me", "rezzo")
    assert [a["tick"] for a in server.session.answers] == [1, 2, 7]
    assert all(a == protocol.moves(a["tick"], [1]) for a in server.session.answers)
    assert bot.ticks == [1, 2, 7]
    assert bot.started is not None and bot.started.seat == 1 and bot.started.name == "me"
    assert bot.started.map == "duel" and bot.started.width == 32 and bot.started.max_ticks == 3000
    assert bot.started.tick_rate == 15.0 and not bot.started.fast and bot.started.config["torus"] is False
    assert bot.info is bot.started
    assert result == bot.result and result.won and result.ranks == (2, 1) and result.illegal == 2


def test_a_raising_on_tick_answers_invalid_and_stays_connected(capfd: pytest.CaptureFixture[str]) -> None:
    class Flaky(Recorder):
        def on_tick(self, view: View) -> list[int] | int | Move:
            super().on_tick(view)
            if view.tick == 2:
                raise RuntimeError("boom at two")
            return Move.BUILD

    server = scripted([WELCOME, tick(1), tick(2), tick(3), END])
    bot = Flaky()
    play_against(server, bot)
    # Tick 2's answer has no `moves` field: invalid in every game (a nil `moves` passes in drop2df).
    assert [a.get("moves", "missing") for a in server.session.answers] == [[4], "missing", [4]]
    assert [a["tick"] for a in server.session.answers] == [1, 2, 3]
    err = capfd.readouterr().err
    assert "me: tick 2: on_tick raised RuntimeError: boom at two; this tick counts as invalid" in err
    assert "Traceback (most recent call last)" in err and "RuntimeError: boom at two" in err
    assert "tick 1:" not in err and "tick 3:" not in err


@pytest.mark.parametrize(
    ("answer", "warning"),
    [
        (None, "on_tick returned NoneType None; return a Move (or int), or a list with one move per agent"),
        ("advance", "on_tick returned str 'advance'"),
        ([1, 1], "on_tick returned 2 moves for 1 agent; return one per entry of view.agents"),
        (17, "on_tick returned 17 for agent #0, which is not a Move (0..5)"),
    ],
)
def test_wrong_answers_are_sent_invalid_with_a_warning(
    answer: object, warning: str, capfd: pytest.CaptureFixture[str]
) -> None:
    class Wrong(Bot):
        def on_tick(self, view: View) -> Any:
            return answer if view.tick == 1 else [Move.LEFT]

    server = scripted([WELCOME, tick(1), tick(2), END])
    play_against(server, Wrong())
    assert [a.get("moves", "missing") for a in server.session.answers] == ["missing", [2]]
    err = capfd.readouterr().err
    assert f"me: tick 1: {warning}" in err and "this tick counts as invalid" in err


def test_several_agents_need_a_list(capfd: pytest.CaptureFixture[str]) -> None:
    class Two(Bot):
        def on_tick(self, view: View) -> Any:
            return Move.ADVANCE if view.tick == 1 else [Move.LEFT, Move.HIT]

    server = scripted([WELCOME, tick(1, agents=2), tick(2, agents=2), END])
    play_against(server, Two())
    assert [a.get("moves", "missing") for a in server.session.answers] == ["missing", [2, 5]]
    assert "single move, but this seat has 2 agents" in capfd.readouterr().err


def test_default_bot_plays_noops() -> None:
    server = scripted([WELCOME, tick(1, agents=3), END])
    play_against(server, Bot())
    assert server.session.answers[0]["moves"] == [0, 0, 0]


def test_hook_exceptions_are_reported_and_play_goes_on(capfd: pytest.CaptureFixture[str]) -> None:
    class Grumpy(Recorder):
        def on_start(self, info: MatchInfo) -> None:
            raise ValueError("no start")

        def on_end(self, result: MatchResult) -> None:
            raise ValueError("no end")

    server = scripted([WELCOME, tick(1), END])
    play_against(server, Grumpy())
    assert server.session.answers[0]["moves"] == [1]
    err = capfd.readouterr().err
    assert "on_start raised" in err and "ValueError: no start" in err and "on_end raised" in err


def test_a_bot_that_fell_behind_answers_only_the_newest_tick(capfd: pytest.CaptureFixture[str]) -> None:
    server = scripted([[WELCOME, tick(1), tick(2), tick(3)], tick(4), END])
    bot = Recorder()
    play_against(server, bot)
    # One burst normally arrives in one piece (then the bot answers 3); if TCP splits it, the bot
    # answers an earlier tick and skips the rest when tick 4 comes. It never answers all four.
    assert (
        [a["tick"] for a in server.session.answers] == bot.ticks and len(bot.ticks) == 2 and bot.ticks[1] == 4
    )
    assert "fell behind" in capfd.readouterr().err


def test_no_answer_once_the_match_has_ended() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(b"".join(encode(m) for m in [WELCOME, tick(1), END]))
        theirs.close()  # as the server does after `end`
        bot = Recorder()
        result = play(bot, Client(ours, "test", 0), quiet=True)
    assert bot.ticks == [] and result.won


def test_match_info_reads_the_games_settings_and_names_no_game() -> None:
    info = MatchInfo.from_welcome(WELCOME)
    assert isinstance(info.settings, RezzoSettings) and info.settings.map == "duel"
    # The settings' fields read as fields of the MatchInfo, as they always have.
    assert (info.map, info.width, info.agents_per_player, info.own_base_counts) == ("duel", 32, 1, True)
    with pytest.raises(AttributeError, match=r"'nope'.*rezzo settings"):
        _ = info.nope
    assert not hasattr(info, "nope")
    assert copy.copy(info) == info and pickle.loads(pickle.dumps(info)) == info
    # Entries of the wrong type keep their defaults, as before; a MatchInfo built by hand has them all.
    odd = MatchInfo.from_welcome({**WELCOME, "config": {"map": 7, "width": True, "torus": True}})
    assert (odd.map, odd.width, odd.torus, odd.view_size) == ("", 0, True, 13)
    bare = MatchInfo(seat=0, players=2, names=("a", "b"), game="rezzo")
    assert bare.own_base_counts is True and bare.max_ticks == 0
    # A game whose SDK module reads no settings: config only.
    cata = MatchInfo.from_welcome({**WELCOME, "game": "cata", "config": {"size": 64}})
    assert cata.settings is None and cata.config == {"size": 64}
    with pytest.raises(AttributeError, match="'map'"):
        _ = cata.map
    # The bot loop's code names no game (its docstrings may show Rezzo as the example).
    tree = ast.parse((ROOT / "sdk" / "bot.py").read_text(encoding="utf-8"))
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not strings & set(GAMES) and not {f"cellarena.sdk.games.{g}" for g in GAMES} & modules


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ({**WELCOME, "players": True}, "players"),
        ({**WELCOME, "names": ["a", 2]}, "names"),
        ({**WELCOME, "tick_rate": "fast"}, "tick_rate"),
        ({k: v for k, v in WELCOME.items() if k != "seat"}, "seat"),
        ({**END, "winner": False}, "winner"),
        ({**END, "result": "victory"}, "result"),
        ({k: v for k, v in END.items() if k != "late"}, "late"),
    ],
)
def test_welcome_and_end_go_through_the_protocols_checks(message: dict[str, Any], field: str) -> None:
    read = MatchInfo.from_welcome if message["type"] == "welcome" else MatchResult.from_end
    with pytest.raises(ProtocolError) as info:
        read(message)
    assert info.value.code == protocol.BAD_MESSAGE
    assert info.value.message.startswith(f"{message['type']}: the field '{field}' ")


def test_the_start_line_names_the_games_settings(capfd: pytest.CaptureFixture[str]) -> None:
    server = scripted([WELCOME, END])
    with connect("127.0.0.1", server.port, name="me", game="rezzo") as client:
        play(Recorder(), client, name="me")
    server.join()
    assert "me: seat 1 of 2 in match 3 (rezzo, map duel)" in capfd.readouterr().err


@pytest.mark.parametrize("game", GAMES)
def test_the_default_on_tick_does_nothing_in_every_game(game: str) -> None:
    from cellarena.server.games import get_engine

    engine = get_engine(game).new({}, 0)
    request = next(iter(engine.pending().values()))
    message = dict(protocol.tick(engine.tick, 100, request))
    game_module = adapter(game)

    class Idle(Bot):
        pass

    Idle.game = game
    answer = Idle().on_tick(game_module.make_view(message))
    assert game_module.encode_answer(answer, message) == game_module.noop_answer(message)


FLAKY_BOT = """
from __future__ import annotations

import json
from pathlib import Path

from cellarena.sdk import MatchResult, run
from cellarena.sdk.games.{game} import {bot_class}, View, Answer


class Flaky({bot_class}):
    \"\"\"Plays the game's idle answer, but raises on every third tick it is asked.\"\"\"

    def __init__(self) -> None:
        self.asked = 0
        self.raised = 0

    def on_tick(self, view: View) -> Answer:
        self.asked += 1
        if self.asked % 3 == 0:
            self.raised += 1
            raise RuntimeError(f"flaky on purpose at tick {{view.tick}}")
        return super().on_tick(view)

    def on_end(self, result: MatchResult) -> None:
        seen = {{"invalid": result.invalid, "late": result.late, "raised": self.raised}}
        Path({out!r}).write_text(json.dumps(seen))


if __name__ == "__main__":
    raise SystemExit(run(Flaky))
"""


@pytest.mark.parametrize(
    ("game", "bot_class", "opponent", "length"),
    [
        ("rezzo", "RezzoBot", "rezzo/random_walker.py", ["--max-ticks", "40", "--budget-ms", "3000"]),
        # drop2df takes a nil `moves` as a pass: only a missing field is invalid there.
        ("drop2df", "Drop2dfBot", "drop2df/passer.py", ["--turns", "20", "--budget-ms", "3000"]),
    ],
)
def test_on_tick_exceptions_count_as_invalid_on_a_real_server(
    game: str, bot_class: str, opponent: str, length: list[str], tmp_path: Path
) -> None:
    """docs/sdk.md: a tick whose on_tick raised is counted invalid, by the server and so in the bot's
    own MatchResult; a real `cellarena match`, over TCP."""
    seen = tmp_path / "seen.json"
    bot = tmp_path / "flaky.py"
    bot.write_text(FLAKY_BOT.format(game=game, bot_class=bot_class, out=str(seen)))
    proc = cellarena(
        "match",
        game,
        "--bot",
        f"flaky={sys.executable} {bot}",
        "--bot",
        f"other={sys.executable} {ROOT / 'example_bots' / opponent}",
        "--fast",
        *length,
        "--log-dir",
        str(tmp_path / "logs"),
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    server = json.loads(proc.stdout)
    mine = json.loads(seen.read_text())
    assert mine["raised"] >= 5 and mine["late"] == 0 == server["late"]["flaky"], (mine, server)
    assert mine["invalid"] == mine["raised"] == server["invalid"]["flaky"], (mine, server)
    assert server["invalid"]["other"] == 0
    log = (tmp_path / "logs" / "flaky.log").read_text()
    # The traceback once, then a count (issue 27: not one traceback per tick), and the total at the end.
    assert log.count("this tick counts as invalid") == 1 and log.count("Traceback (most recent call") == 1
    assert f"{mine['raised']} invalid answers of its own" in log
    assert log.count("\n") < 20, log


def test_unknown_server_messages_are_logged_once_and_ignored(capfd: pytest.CaptureFixture[str]) -> None:
    # docs/protocol.md: later servers may add message types; a client logs them and plays on.
    server = scripted([WELCOME, {"type": "party", "x": 1}, tick(1), {"type": "party"}, tick(2), END])
    bot = Recorder()
    result = play_against(server, bot)
    assert result.result == "win" and bot.ticks == [1, 2]
    assert capfd.readouterr().err.count("ignoring the server's 'party' messages") == 1


def test_tick_before_welcome_and_malformed_messages_are_protocol_errors() -> None:
    for script, code in (
        ([tick(1)], protocol.BAD_MESSAGE),
        ([{**WELCOME, "seat": "1"}], protocol.BAD_MESSAGE),
    ):
        server = scripted([*script, "close"])
        with (
            pytest.raises(ProtocolError) as info,
            connect("127.0.0.1", server.port, name="me", game="rezzo") as client,
        ):
            play(Recorder(), client, quiet=True)
        server.join()
        assert info.value.code == code


# ======================================================================================== run()
@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for key in (
        "CELLARENA_HOST", "CELLARENA_PORT", "CELLARENA_TOKEN", "CELLARENA_TOKEN_FD", "CELLARENA_SOCKET_FD",
        "CELLARENA_NAME",
    ):  # fmt: skip
        monkeypatch.delenv(key, raising=False)
    return monkeypatch


class MyDemoBot(Recorder):
    pass


def test_run_reads_the_environment(no_env: pytest.MonkeyPatch) -> None:
    server = scripted([WELCOME, tick(1), END])
    no_env.setenv("CELLARENA_HOST", "127.0.0.1")
    no_env.setenv("CELLARENA_PORT", str(server.port))
    no_env.setenv("CELLARENA_TOKEN", "seat-token")
    no_env.setenv("CELLARENA_NAME", "envname")
    assert run(MyDemoBot, ["--quiet"]) == 0
    server.join()
    assert server.session.hello == protocol.hello(
        "envname", "rezzo", token="seat-token", accepts=protocol.ACCEPTS
    )
    assert [a["tick"] for a in server.session.answers] == [1]


def test_run_plays_on_the_connection_it_was_handed(
    no_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cellarena match` hands its bots an open connection that owns the seat (CELLARENA_SOCKET_FD):
    the SDK plays the match on it and sends no token, and leaves the token pipe unread; with two
    matches, the second connects to CELLARENA_HOST/_PORT."""
    import socket

    handed_server = scripted([WELCOME, tick(1), END])
    second_server = scripted([WELCOME, tick(1), END])
    handed = socket.create_connection(("127.0.0.1", handed_server.port))
    read_end, write_end = os.pipe()
    os.write(write_end, b"pipe-token\n")
    os.close(write_end)
    no_env.setenv("CELLARENA_SOCKET_FD", str(handed.detach()))
    no_env.setenv("CELLARENA_TOKEN_FD", str(read_end))
    no_env.setenv("CELLARENA_HOST", "127.0.0.1")
    no_env.setenv("CELLARENA_PORT", str(second_server.port))
    assert run(MyDemoBot, ["--quiet", "--matches", "2"]) == 0, capsys.readouterr().err
    handed_server.join()
    second_server.join()
    assert handed_server.session.hello == protocol.hello("mydemobot", "rezzo", accepts=protocol.ACCEPTS)
    assert second_server.session.hello == protocol.hello("mydemobot", "rezzo", accepts=protocol.ACCEPTS)
    assert os.read(read_end, 100) == b"pipe-token\n"  # the seat needed no token: none was read
    os.close(read_end)


def test_run_says_when_the_handed_connection_is_not_a_socket(
    no_env: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    read_end, write_end = os.pipe()
    try:
        no_env.setenv("CELLARENA_SOCKET_FD", str(read_end))
        with pytest.raises(SystemExit) as exited:
            run(MyDemoBot, ["--quiet"])
        assert exited.value.code == 2
        assert f"CELLARENA_SOCKET_FD: descriptor {read_end} is not an open socket" in capfd.readouterr().err
    finally:
        os.close(read_end)
        os.close(write_end)


def test_flags_win_over_the_environment(no_env: pytest.MonkeyPatch) -> None:
    server = scripted([WELCOME, tick(1), END])
    no_env.setenv("CELLARENA_HOST", "host.invalid")
    no_env.setenv("CELLARENA_PORT", "1")
    no_env.setenv("CELLARENA_TOKEN", "env-token")
    no_env.setenv("CELLARENA_NAME", "envname")
    argv = ["--host", "127.0.0.1", "--port", str(server.port), "--token", "flag-token", "--name", "flagname"]
    assert run(MyDemoBot, argv) == 0
    server.join()
    assert server.session.hello == protocol.hello(
        "flagname", "rezzo", token="flag-token", accepts=protocol.ACCEPTS
    )


def test_default_name_is_the_class_name_and_no_token(no_env: pytest.MonkeyPatch) -> None:
    server = scripted([WELCOME, END])
    bot = MyDemoBot()
    assert run(bot, ["--port", str(server.port), "-q"]) == 0  # an instance works too
    server.join()
    assert server.session.hello == protocol.hello("mydemobot", "rezzo", accepts=protocol.ACCEPTS)
    assert bot.result is not None


def test_refused_connection_is_one_clear_line(
    no_env: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], free_port: int
) -> None:
    assert run(MyDemoBot, ["--port", str(free_port)]) == 1
    err = capfd.readouterr().err
    assert err.count("\n") == 1
    assert f"could not connect to 127.0.0.1:{free_port}: connection refused" in err
    assert "cellarena serve rezzo" in err and "--port" in err


def test_connect_errors_name_the_address(free_port: int) -> None:
    with pytest.raises(ConnectError, match=r"could not connect to 127\.0\.0\.1:"):
        connect("127.0.0.1", free_port, name="me", game="rezzo")
    with pytest.raises(ConnectError, match="unknown host"):
        connect("host.invalid", 7777, name="me", game="rezzo")


def test_server_error_is_reported(no_env: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    server = scripted([protocol.error(protocol.BAD_HELLO, "no such token"), "close"])
    assert run(MyDemoBot, ["--port", str(server.port)]) == 1
    server.join()
    err = capfd.readouterr().err
    assert err.count("\n") == 1
    assert "the server sent error 'bad_hello': no such token" in err


def test_server_error_mid_match_is_raised() -> None:
    server = scripted(
        [WELCOME, tick(1), protocol.error(protocol.FLOOD, "more than 8 messages in one tick"), "close"]
    )
    with (
        pytest.raises(ServerError) as info,
        connect("127.0.0.1", server.port, name="me", game="rezzo") as client,
    ):
        play(Recorder(), client, quiet=True)
    server.join()
    assert info.value.code == "flood" and "8 messages" in info.value.message


def test_closed_connection_is_reported(no_env: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    server = scripted([WELCOME, tick(1), "close"])
    assert run(MyDemoBot, ["--port", str(server.port)]) == 1
    server.join()
    err = capfd.readouterr().err
    assert "closed the connection before the match ended" in err
    assert err.strip().splitlines()[-1].startswith("mydemobot: error:")


def test_bad_environment_port_is_a_usage_error(
    no_env: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    no_env.setenv("CELLARENA_PORT", "seventy")
    with pytest.raises(SystemExit) as info:
        run(MyDemoBot, [])
    assert info.value.code == 2
    assert "CELLARENA_PORT must be a port number" in capfd.readouterr().err


def test_client_refuses_to_send_an_oversized_frame() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        client = Client(ours, "test", 0)
        with pytest.raises(ValueError, match="at most"):
            client.send(protocol.moves(1, [0] * MAX_CLIENT_FRAME))


def test_connection_closed_error_is_a_client_error() -> None:
    ours, theirs = socket.socketpair()
    theirs.close()
    with pytest.raises(ConnectionClosedError, match="before the match ended"):
        Client(ours, "test", 0).recv()


# ======================================================================================== packaging
def test_the_sdk_imports_without_numpy_or_trio() -> None:
    code = (
        "import sys\n"
        "sys.modules['numpy'] = None\n"
        "sys.modules['trio'] = None\n"
        "import cellarena.sdk as sdk\n"
        "from cellarena.sdk import Viewport, Cell\n"
        "assert Viewport.from_cells({(1, 0): Cell.FLAG + 1}).is_theirs(Cell.FLAG + 1)\n"
        "for path in sys.argv[1:]:\n"
        "    import runpy; runpy.run_path(path)\n"
        "print('ok')\n"
    )
    bots = sorted(str(p) for p in (ROOT / "example_bots" / "rezzo").glob("*.py"))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    proc = subprocess.run(
        [sys.executable, "-c", code, *bots], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_the_tutorial_bot_and_its_tests_work(tmp_path: Path) -> None:
    """docs/sdk.md's two Python blocks, as a reader would save them: the bot, and its pytest file."""
    import re

    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "sdk.md").read_text(), re.S)
    assert len(blocks) == 2
    (tmp_path / "my_bot.py").write_text(blocks[0])
    (tmp_path / "test_my_bot.py").write_text(blocks[1])
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_my_bot.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout
