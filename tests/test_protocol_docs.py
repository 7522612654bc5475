"""docs/protocol.md and the message definitions in `cellarena.sdk.protocol` cannot drift apart.

Every field table of the page (``| field | type | meaning |``) is held to its TypedDict: the same
field names, the same wire type (as `fields.rule_for` names it), and "optional" in the meaning
exactly where the field is NotRequired. The error code table is held to ERROR_CODES, and the JSON
examples of each message must pass its check. The per-game tick tables under "Games" are held to
each game's TypedDict in the same way, and the engines' real requests and frames to those.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from cellarena.sdk import protocol
from cellarena.sdk.games.cata import CataTick
from cellarena.sdk.games.cloth import ClothTick
from cellarena.sdk.games.colorblocks import ColorblocksTick
from cellarena.sdk.games.drop2df import Drop2dfTick
from cellarena.sdk.games.rezzo import RezzoFrame, RezzoTick, parse_config
from cellarena.sdk.protocol.fields import MessageSpec, spec_of
from cellarena.server.games import get_engine

DOC = Path(__file__).resolve().parent.parent / "docs" / "protocol.md"
COMMON_TICK = {f.name for f in protocol.SPECS["tick"].fields}

#: Heading of a section -> (the TypedDict its table describes, fields the table leaves out).
SECTIONS: dict[str, tuple[type, set[str]]] = {
    "`hello` (client to server)": (protocol.Hello, set()),
    "`welcome` (server to client)": (protocol.Welcome, set()),
    "`tick` (server to client)": (RezzoTick, set()),
    "`moves` (client to server)": (protocol.Moves, set()),
    "`end` (server to client)": (protocol.End, set()),
    "`error` (server to client)": (protocol.Error, set()),
    "`redirect` (server to client)": (protocol.Redirect, set()),
    "`frame` (server to spectators)": (RezzoFrame, set()),
    # The game sections list the game's own fields: the common ones are said once, above.
    "C.A.T.A.": (CataTick, COMMON_TICK),
    "Cloth of Gold (`cloth`)": (ClothTick, COMMON_TICK),
    "drop2df": (Drop2dfTick, COMMON_TICK),
    "Colorblocks": (ColorblocksTick, COMMON_TICK),
}


def sections() -> dict[str, str]:
    """Each ``##``/``###`` heading of the page -> the text up to the next such heading."""
    out: dict[str, str] = {}
    parts = re.split(r"^#{2,3} (.+)$", DOC.read_text(encoding="utf-8"), flags=re.MULTILINE)
    for heading, body in zip(parts[1::2], parts[2::2], strict=True):
        out[heading.strip()] = body
    return out


def tables(body: str) -> list[list[list[str]]]:
    """The markdown tables of a section, each as rows of cells (header and rule rows left out)."""
    found: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    for line in body.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if current is None:
                current = [cells]  # the header
            elif not set(line) <= set("|-: "):
                current.append(cells)
        elif current is not None:
            found.append(current)
            current = None
    if current is not None:
        found.append(current)
    return found


def field_table(body: str) -> dict[str, tuple[str, str]]:
    """The ``| field | type | meaning |`` table of a section: field -> (type, meaning). A row may
    name several fields ("`width`, `height`")."""
    for table in tables(body):
        if table[0] == ["field", "type", "meaning"]:
            out = {}
            for names, wire, meaning in table[1:]:
                for name in re.findall(r"`([a-z_]+)`", names):
                    out[name] = (wire, meaning)
            return out
    raise AssertionError("no | field | type | meaning | table in this section")


@pytest.mark.parametrize("heading", sorted(SECTIONS))
def test_a_field_table_matches_its_definition(heading: str) -> None:
    body = sections()[heading]
    message_type, left_out = SECTIONS[heading]
    spec = spec_of(message_type, protocol.BAD_MESSAGE)
    documented = field_table(body)
    defined = {f.name: f for f in spec.fields if f.name not in left_out}
    assert sorted(documented) == sorted(defined), f"{heading}: the table's fields differ from {message_type}"
    for name, f in defined.items():
        wire, meaning = documented[name]
        assert wire == f.rule.wire, f"{heading}: {name!r} is {wire!r} in the docs, {f.rule.wire!r} in code"
        assert meaning.startswith("optional") == (not f.required), (
            f"{heading}: field {name!r} is {'required' if f.required else 'optional'} in code; "
            "the docs' meaning starts with 'optional' exactly for optional fields"
        )
    if "type" in defined:
        assert documented["type"][1] == f'`"{spec.kind}"`'


def test_every_message_has_its_section() -> None:
    documented = {h.split("`")[1] for h in SECTIONS if h.startswith("`")}
    assert documented == set(protocol.SPECS)
    assert set(protocol.CLIENT_TYPES) | set(protocol.SERVER_TYPES) == set(protocol.SPECS)


def test_the_error_code_table_lists_every_code() -> None:
    body = sections()["`error` (server to client)"]
    codes = next(t for t in tables(body) if t[0] == ["code", "cause"])
    assert [row[0].strip("`") for row in codes[1:]] == list(protocol.ERROR_CODES)


def _json_examples(body: str) -> list[dict[str, Any]]:
    blocks = re.findall(r"```json\n(.*?)```", body, flags=re.DOTALL)
    return [json.loads(line) for block in blocks for line in _values(block)]


def _values(block: str) -> list[str]:
    """A block holds one JSON value, or one per line."""
    try:
        json.loads(block)
        return [block]
    except json.JSONDecodeError:
        return [line for line in block.splitlines() if line.strip()]


def _with_bytes(message: dict[str, Any], spec: MessageSpec) -> dict[str, Any]:
    """The docs write bin fields as "<169 bytes>": bytes of that length stand in for them."""
    out = dict(message)
    for f in spec.fields:
        value = out.get(f.name)
        if f.rule.wire == "bin" and isinstance(value, str):
            count = re.fullmatch(r"<(\d+) bytes>", value)
            out[f.name] = bytes(int(count.group(1)) if count else 1)
    return out


@pytest.mark.parametrize("heading", sorted(SECTIONS))
def test_the_json_examples_are_valid_messages(heading: str) -> None:
    message_type, _ = SECTIONS[heading]
    spec = spec_of(message_type, protocol.BAD_MESSAGE)
    examples = _json_examples(sections()[heading])
    assert examples, f"{heading}: no JSON example"
    for example in examples:
        if example["type"] == spec.kind:
            spec.check(_with_bytes(example, spec))
        else:  # a game's section shows its moves too
            protocol.validate(example)


# ------------------------------------------------------------------ the definitions match the wire
GAME_TICKS = {"rezzo": RezzoTick, "cata": CataTick, "cloth": ClothTick, "drop2df": Drop2dfTick}
GAME_TICKS["colorblocks"] = ColorblocksTick


@pytest.mark.parametrize("game", sorted(GAME_TICKS))
def test_every_engine_request_is_a_tick_as_defined(game: str) -> None:
    """What each engine really sends, over the first decision points of a match, passes the game's
    tick definition: the docs above describe the real wire."""
    spec = spec_of(GAME_TICKS[game], protocol.BAD_MESSAGE)
    engine = get_engine(game).new({}, 1)
    for _ in range(6):
        pending = engine.pending()
        if not pending:
            break
        for request in pending.values():
            spec.check(protocol.tick(engine.tick, 100, request))
        engine.apply({})


def test_rezzo_frames_and_welcome_config_are_as_defined() -> None:
    engine = get_engine("rezzo").new({"map": "duel"}, 0)
    spec = spec_of(RezzoFrame, protocol.BAD_MESSAGE)
    spec.check(protocol.frame(engine.frame(), final=False))
    config = engine.public_config()
    settings = parse_config(config)
    # Every entry was read, none fell back to its default.
    assert {k: getattr(settings, k) for k in config} == config


def test_the_other_games_frame_table_lists_each_engines_frame() -> None:
    """Each row of "Frames of the other games" names exactly the fields the engine's frame has."""
    (table,) = tables(sections()["Frames of the other games"])
    assert table[0] == ["game", "fields"]
    rows = {game.strip("`"): cell for game, cell in table[1:]}
    assert sorted(rows) == sorted(g for g in GAME_TICKS if g != "rezzo")
    for game, cell in rows.items():
        documented = set(re.findall(r"`([a-z_]+)`", cell.split(" (per round")[0]))
        engine = get_engine(game).new({}, 1)
        frame = protocol.frame(engine.frame(), final=False)
        protocol.SPECS["frame"].check(frame)
        assert documented == set(frame) - {"type", "tick", "final"}, game


def test_the_figures_the_page_quotes_are_the_codes() -> None:
    """Default budget and margin, the send buffer, the default port: the numbers in the text."""
    from cellarena.sdk.bot import DEFAULT_HOST, DEFAULT_PORT
    from cellarena.server.net.connection import DEFAULT_MAX_BACKLOG
    from cellarena.server.play.match import SERVER_MARGIN_MS, TickSettings

    text = " ".join(DOC.read_text(encoding="utf-8").split())
    assert f"less **{SERVER_MARGIN_MS} ms** that the server keeps" in text
    assert f"**{TickSettings(tick_rate=15.0).tick_budget_ms} ms at 15 ticks per second**" in text
    assert f"{TickSettings(tick_rate=30.0).tick_budget_ms} ms at 30" in text
    assert f'"budget_ms": {TickSettings().tick_budget_ms},' in text
    assert TickSettings(budget_ms=50.5).tick_budget_ms == 51 and "(`50.5` gives 51 ms" in text
    mib = DEFAULT_MAX_BACKLOG // (1 << 20)
    assert f"**{mib} MiB** ({DEFAULT_MAX_BACKLOG:,} bytes)" in text
    assert f"({mib} MiB beyond the kernel's socket buffer)" in text
    assert (
        f"**{DEFAULT_HOST}:{DEFAULT_PORT}** by default" in text
        and f"else to {DEFAULT_HOST}:{DEFAULT_PORT}" in text
    )
    from cellarena.server.cli.serve import _serve_command

    options = {p.name: p for p in _serve_command("rezzo").params}
    assert (options["host"].default, options["port"].default) == (DEFAULT_HOST, DEFAULT_PORT)
