"""Replays: a match's header, every tick's moves and state hash, and its result, in one file.

`docs/replays.md` is the format's spec. In short, a replay is a sequence of **records**, each framed
like a wire-protocol frame (a 4-byte big-endian length, then one msgpack map): one ``header``, one
``tick`` per decision point, and a ``result`` once the match has ended. A reader may get the file
gzip-compressed; it is recognised by its magic bytes.

Everything here goes through the engine interface and the registry (`cellarena.server.games`), so
one writer and one verifier serve every game. Re-simulation is the check: the engine is rebuilt from
the header's config and seed, fed each tick's recorded moves, and must reproduce each recorded hash.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import operator
import os
import struct
import zlib
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any, Self

import msgpack

from cellarena.sdk.protocol import debug as debug_layer
from cellarena.sdk.protocol import is_int, is_number
from cellarena.server.games import ConfigError, Engine, Result, game_names, get_engine, is_game
from cellarena.server.games.base import (
    config_mapping,
    event_kinds_since,
    events_version,
    hash_version,
    older_hash_scheme,
    rules_changes,
    rules_version,
)

FORMAT = "cellarena-replay"
#: The version this cellarena writes. 2 added the game's events to tick records and each seat's
#: cause to the result, and made every later addition an optional section: a reader of version 2
#: ignores fields and record types it does not know, so a new section (the debug layer's per-seat,
#: per-tick annotations) needs no version step. docs/replays.md has both versions.
VERSION = 2
#: The versions this cellarena reads.
READS = (1, 2)
LENGTH = struct.Struct(">I")
#: Largest record a reader accepts. The header carries the map text (up to 32 MiB for a 4096x4096
#: map), so this matches the server's largest frame rather than a tick record's few hundred bytes.
MAX_RECORD = 64 * 1024 * 1024
GZIP_MAGIC = b"\x1f\x8b"


class ReplayError(Exception):
    """A replay that cannot be read or replayed. ``str()`` starts with the file's path."""


class TickError(ReplayError):
    """A sound replay without the decision point asked for (`rebuild_at`): the tick is at fault."""


# ---------------------------------------------------------------------------------------- reading
@dataclass
class TickRecord:
    """One decision point: the moves ``apply()`` got at ``tick`` and the state hash right after."""

    tick: int
    moves: dict[int, Any]
    hash: str
    late: dict[int, int] = field(default_factory=dict)
    invalid: dict[int, int] = field(default_factory=dict)
    #: The game's events of this ``apply()`` (`Events.log`); None in version 1 files, which kept none.
    events: list[dict[str, Any]] | None = None
    #: What each seat drew this tick (docs/protocol.md#debug), board cells; empty when none did.
    debug: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: Ms of time bank each seat drew this tick; empty when none did.
    bank: dict[int, int] = field(default_factory=dict)


@dataclass
class Replay:
    """A replay as read from ``path``. ``result`` is the raw result record, None if the file lacks one."""

    path: str
    header: dict[str, Any]
    ticks: list[TickRecord]
    result: dict[str, Any] | None
    #: Why the file ends early (cut inside a record), or None. Set only when ``result`` is None.
    truncated: str | None = None

    @property
    def game(self) -> str:
        return self.header["game"]

    @property
    def sections(self) -> list[str]:
        """The optional sections the writer kept for every tick (version 2: ``events``)."""
        sections = self.header.get("sections")
        return [x for x in sections if isinstance(x, str)] if isinstance(sections, list) else []

    @property
    def version(self) -> int:
        """The file's format version (1: no events nor causes)."""
        version: int = self.header["version"]
        return version

    def events(self) -> list[dict[str, Any]]:
        """Every recorded game event, in order (empty for a version 1 file)."""
        return [e for t in self.ticks for e in (t.events or ())]

    def causes(self) -> dict[int, dict[str, Any]]:
        """Each seat's cause as the match ended (forfeits included); empty if the file has none."""
        raw = (self.result or {}).get("causes") or {}
        return {int(k): v for k, v in raw.items()}

    @property
    def config(self) -> dict[str, Any]:
        return self.header["config"]

    @property
    def seed(self) -> int:
        return self.header["seed"]

    @property
    def players(self) -> int:
        return self.header["players"]

    @property
    def names(self) -> list[str]:
        return self.header["names"]

    @property
    def rules(self) -> int:
        """The version of the game's rules the match was played under (1 in files from before
        versions were recorded)."""
        rules: int = self.header.get("rules", 1)
        return rules

    @property
    def hashes(self) -> int:
        """The scheme of the file's state hashes (an engine's `HASH_VERSION`; 1 in files from before
        schemes were recorded)."""
        hashes: int = self.header.get("hashes", 1)
        return hashes

    @property
    def event_kinds(self) -> int:
        """Which of the game's event kinds the file's events include (an engine's `EVENTS_VERSION`;
        1 in files from before it was recorded): `verify` leaves later kinds out of its comparison."""
        version: int = self.header.get("events_version", 1)
        return version

    @property
    def start_tick(self) -> int:
        return self.header["start_tick"]

    @property
    def complete(self) -> bool:
        """Whether the file holds the match's result record, i.e. the writer saw the match end, and
        nothing of it is cut off."""
        return self.result is not None and self.truncated is None

    def incomplete_reason(self) -> str:
        """Why the replay has no result, for messages; empty when it is complete."""
        if self.complete:
            return ""
        if self.truncated:
            return self.truncated
        return "the file ends without a result record (the match did not finish, or its writer stopped)"


def _type_name(value: Any) -> str:
    return "nil" if value is None else type(value).__name__


class _Checker:
    """Field checks for one record, raising ReplayError that names the file and the record."""

    def __init__(self, path: str, where: str, record: dict[Any, Any]) -> None:
        self.path, self.where, self.record = path, where, record

    def fail(self, what: str) -> ReplayError:
        return ReplayError(f"{self.path}: {self.where}: {what}")

    def get(self, key: str, kind: str, *, optional: bool = False) -> Any:
        if key not in self.record:
            if optional:
                return None
            raise self.fail(f"missing field {key!r}")
        value = self.record[key]
        ok = {
            "int": is_int(value),
            "str": isinstance(value, str),
            "map": isinstance(value, dict),
            "list": isinstance(value, list),
            "int or nil": value is None or is_int(value),
        }[kind]
        if not ok:
            raise self.fail(f"field {key!r} must be {kind}, got {_type_name(value)} {value!r:.80}")
        return value

    def int_map(self, key: str, *, values: str = "int", optional: bool = False) -> dict[int, Any]:
        """A map from seat numbers to ``values`` (int, number or any)."""
        raw = self.get(key, "map", optional=optional)
        if raw is None:
            return {}
        for k, v in raw.items():
            if not is_int(k):
                raise self.fail(f"field {key!r} must map seat numbers (int), got key {k!r:.40}")
            bad = (values == "int" and not is_int(v)) or (values == "number" and not is_number(v))
            if bad:
                raise self.fail(
                    f"field {key!r}: seat {k} must map to {values}, got {_type_name(v)} {v!r:.40}"
                )
        return raw


class _Source:
    """Exact-size reads from the file or its gzip stream, noting whether a gzip stream was cut off."""

    def __init__(self, f: io.BufferedIOBase, path: str) -> None:
        self.f, self.path = f, path
        self.gzip_cut = False

    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes; fewer only at the end of the data."""
        chunks, got = [], 0
        while got < n:
            try:
                chunk = self.f.read(n - got)
            except EOFError:  # a gzip stream that ends before its end marker: treat as the end
                self.gzip_cut = True
                break
            except (OSError, zlib.error) as exc:
                raise ReplayError(f"{self.path}: corrupt gzip data ({exc})") from None
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def cut_note(self) -> str:
        return " (the gzip stream is cut off)" if self.gzip_cut else ""


def _raw_records(src: _Source) -> Iterator[tuple[int, int, dict[Any, Any] | str]]:
    """(record number from 1, byte offset, record map), or a final (.., .., reason) if the data is cut.

    Record 1 must be a plausible header, so that a file of any other kind is called "not a replay"
    instead of "corrupt". Offsets count bytes of the (decompressed) record stream.
    """
    path = src.path
    not_replay = f"{path}: not a cellarena replay"
    number, offset = 0, 0
    while True:
        number += 1
        prefix = src.read(LENGTH.size)
        if not prefix:
            if number > 1:
                if src.gzip_cut:  # cut between records, or in the gzip trailer: the check sum is lost too
                    cut = f"the gzip stream is cut off after record {number - 1} (byte {offset})"
                    yield number, offset, cut
                return
            if src.gzip_cut:
                raise ReplayError(f"{not_replay}, or one whose gzip stream is cut off before any record")
            raise ReplayError(f"{path}: empty file; not a cellarena replay")
        if len(prefix) < LENGTH.size:
            if number == 1:
                raise ReplayError(f"{not_replay} (only {len(prefix)} bytes long){src.cut_note()}")
            cut = f"truncated in record {number} at byte {offset}: its length prefix is cut off"
            yield number, offset, cut + src.cut_note()
            return
        (size,) = LENGTH.unpack(prefix)
        if size > MAX_RECORD:
            if number == 1:
                raise ReplayError(f"{not_replay} (it does not start with a replay header)")
            raise ReplayError(
                f"{path}: record {number} at byte {offset} claims {size} bytes, over the limit of "
                f"{MAX_RECORD}; the file is corrupt"
            )
        body = src.read(size)
        if len(body) < size:
            if number == 1:
                raise ReplayError(
                    f"{not_replay}, or one cut off inside its header (the first record needs {size} bytes, "
                    f"only {len(body)} follow){src.cut_note()}"
                )
            cut = f"truncated in record {number} at byte {offset}: it needs {size} bytes, {len(body)} follow"
            yield number, offset, cut + src.cut_note()
            return
        yield number, offset, _record_map(path, body, number, offset)
        offset += LENGTH.size + size


def _record_map(path: str, body: bytes, number: int, offset: int) -> dict[Any, Any]:
    """Record ``number``'s map, decoded from ``body``; anything else is not a replay (the first
    record) or a corrupt one."""
    not_replay = f"{path}: not a cellarena replay"
    try:
        record = msgpack.unpackb(body, raw=False, strict_map_key=False)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        if number == 1:
            raise ReplayError(f"{not_replay} (the first record is not msgpack: {exc})") from None
        raise ReplayError(
            f"{path}: record {number} at byte {offset} is not valid msgpack ({exc}); the file is corrupt"
        ) from None
    if not isinstance(record, dict):
        if number == 1:
            raise ReplayError(f"{not_replay} (the first record is a {_type_name(record)}, not a map)")
        raise ReplayError(
            f"{path}: record {number} at byte {offset} is a {_type_name(record)}, not a map; "
            "the file is corrupt"
        )
    return record


def _check_header(path: str, record: dict[Any, Any]) -> dict[str, Any]:
    if record.get("type") != "header" or record.get("format") != FORMAT:
        raise ReplayError(
            f"{path}: not a cellarena replay (the first record is not a header of format {FORMAT!r})"
        )
    c = _Checker(path, "header", record)
    version = c.get("version", "int")
    if version not in READS:
        by = record.get("cellarena")
        raise ReplayError(
            f"{path}: replay format version {version} is not supported; this cellarena reads versions "
            f"{', '.join(map(str, READS))}"
            + (f" (the file was written by cellarena {by})" if isinstance(by, str) else "")
            + "; read it with a newer cellarena"
        )
    game = c.get("game", "str")
    if not is_game(game):
        raise ReplayError(f"{path}: unknown game {game!r}; known games: {', '.join(game_names())}")
    config = c.get("config", "map")
    if any(not isinstance(k, str) for k in config):
        raise c.fail("field 'config' must have string keys")
    c.get("seed", "int")
    players = c.get("players", "int")
    if players < 1:
        raise c.fail(f"field 'players' must be at least 1, got {players}")
    names = c.get("names", "list")
    if len(names) != players or not all(isinstance(n, str) for n in names):
        raise c.fail(f"field 'names' must list {players} strings (one per seat), got {names!r:.120}")
    c.get("start_tick", "int")
    c.get("start_hash", "str")
    c.get("cellarena", "str")
    c.get("protocol", "int")
    c.get("created", "str")
    c.get("extra", "map", optional=True)
    rules = c.get("rules", "int", optional=True)
    if rules is not None and rules < 1:
        raise c.fail(f"field 'rules' must be 1 or more, got {rules}")
    hashes = c.get("hashes", "int", optional=True)
    if hashes is not None and hashes < 1:
        raise c.fail(f"field 'hashes' must be 1 or more, got {hashes}")
    events_version = c.get("events_version", "int", optional=True)
    if events_version is not None and events_version < 1:
        raise c.fail(f"field 'events_version' must be 1 or more, got {events_version}")
    c.get("sections", "list", optional=True)
    if "forked_from" in record:
        _check_origin(_Checker(path, "header, forked_from", c.get("forked_from", "map")))
    return record


def _check_origin(c: _Checker) -> None:
    """A fork's ``forked_from``: the origin's tick and every move from the fresh engine up to it."""
    tick = c.get("tick", "int")
    if tick < 0:
        raise c.fail(f"field 'tick' must be 0 or more, got {tick}")
    c.get("replay", "str", optional=True)
    c.get("sha256", "str", optional=True)
    for i, step in enumerate(c.get("moves", "list")):
        if not isinstance(step, dict):
            raise c.fail(f"moves[{i}] must be a map with 'tick' and 'moves', got {_type_name(step)}")
        inner = _Checker(c.path, f"{c.where}, moves[{i}]", step)
        inner.get("tick", "int")
        inner.int_map("moves", values="any")


def _check_events(c: _Checker) -> list[dict[str, Any]]:
    events = c.get("events", "list", optional=True)
    if events is None:
        return []
    for i, e in enumerate(events):
        if not isinstance(e, dict) or not isinstance(e.get("kind"), str) or not is_int(e.get("tick")):
            raise c.fail(f"event {i} must be a map with a string 'kind' and an int 'tick', got {e!r:.80}")
    return events


def _check_causes(c: _Checker) -> None:
    for seat, cause in c.int_map("causes", values="any", optional=True).items():
        if not isinstance(cause, dict) or not isinstance(cause.get("cause"), str):
            raise c.fail(
                f"field 'causes': seat {seat} must map to a map with a string 'cause', got {cause!r:.80}"
            )


def _check_debug(c: _Checker) -> dict[int, dict[str, Any]]:
    """Each seat's debug drawing, cleaned as the server cleans a bot's (a replay is untrusted input
    that the web player draws): what is malformed is left out, never an error."""
    out: dict[int, dict[str, Any]] = {}
    for seat, drawn in c.int_map("debug", values="any", optional=True).items():
        kept = debug_layer.clean(drawn).kept
        if kept is not None:
            out[seat] = kept
    return out


def _check_tick(c: _Checker, events: bool) -> TickRecord:
    return TickRecord(
        tick=c.get("tick", "int"),
        moves=c.int_map("moves", values="any"),
        hash=c.get("hash", "str"),
        late=c.int_map("late", optional=True),
        invalid=c.int_map("invalid", optional=True),
        events=_check_events(c) if events else None,
        debug=_check_debug(c) if "debug" in c.record else {},
        bank=c.int_map("bank", optional=True),
    )


def _check_outcome(c: _Checker) -> None:
    """The fields of a Result, in a result record or its ``engine_result``."""
    c.get("ticks", "int")
    c.int_map("ranks")
    c.get("winner", "int or nil")
    c.get("reason", "str")
    c.int_map("scores", values="number", optional=True)
    _check_causes(c)


def _check_result(c: _Checker) -> dict[str, Any]:
    _check_outcome(c)
    if "engine_result" not in c.record:
        raise c.fail("missing field 'engine_result'")
    inner = c.record["engine_result"]
    if inner is not None:
        if not isinstance(inner, dict):
            raise c.fail(f"field 'engine_result' must be map or nil, got {_type_name(inner)}")
        _check_outcome(_Checker(c.path, f"{c.where}, engine_result", inner))
    c.int_map("late", optional=True)
    c.int_map("invalid", optional=True)
    c.get("extra", "map", optional=True)
    return c.record


def _open_data(raw: io.BufferedReader) -> io.BufferedIOBase:
    """The file itself, or a decompressing reader if it starts with the gzip magic."""
    # peek, not read and seek: a pipe or FIFO cannot seek.
    if raw.peek(len(GZIP_MAGIC))[: len(GZIP_MAGIC)] == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=raw, mode="rb")
    return raw


def read_replay(path: str | os.PathLike[str]) -> Replay:
    """Read and check a replay file; every problem is a ReplayError naming the file and what is wrong.

    A file cut inside a record (a writer that crashed) is not an error: it reads as an incomplete
    replay whose ``truncated`` says where it was cut.
    """
    name = os.fspath(path)
    try:
        raw = open(name, "rb")  # noqa: SIM115 -- closed by the with-block below
    except OSError as exc:
        raise ReplayError(f"{name}: cannot open: {exc.strerror or exc}") from None
    with raw:
        data = _open_data(raw)
        header: dict[str, Any] | None = None
        ticks: list[TickRecord] = []
        result: dict[str, Any] | None = None
        truncated: str | None = None
        for number, offset, record in _raw_records(_Source(data, name)):
            if isinstance(record, str):
                truncated = record
                break
            if header is None:
                header = _check_header(name, record)
                continue
            where = f"record {number} at byte {offset}"
            if result is not None:
                raise ReplayError(f"{name}: {where} follows the result record; the file is corrupt")
            c = _Checker(name, where, record)
            kind = record.get("type")
            if kind == "tick":
                sections = header.get("sections")
                tick = _check_tick(c, isinstance(sections, list) and "events" in sections)
                last = ticks[-1].tick if ticks else None
                if last is not None and tick.tick <= last:
                    raise c.fail(f"tick {tick.tick} does not come after tick {last}")
                ticks.append(tick)
            elif kind == "result":
                result = _check_result(c)
            elif header["version"] >= 2 and isinstance(kind, str):
                continue  # a later section (version 2 readers skip what they do not know)
            else:
                raise c.fail(f"unknown record type {kind!r:.40}; expected 'tick' or 'result'")
    assert header is not None  # _raw_records raises rather than end before the header
    return Replay(name, header, ticks, result, truncated)


def without_errors(drawn: dict[Any, Any]) -> dict[Any, Any]:
    """One tick's debug by seat without the exceptions the bots raised (each map's ``error``): what a
    ladder that publishes drawings (`ladder web --public-debug`) shows, the exceptions staying their
    owners'. A seat that drew nothing else goes."""
    kept = {s: {k: v for k, v in d.items() if k != "error"} for s, d in drawn.items() if isinstance(d, dict)}
    return {s: d for s, d in kept.items() if d}


def strip_debug_bytes(
    data: bytes, path: str = "<replay>", *, keep: Collection[int] = (), drawings: bool = False
) -> tuple[bytes, int]:
    """A replay's records (plain, or gzip as it came) without the bots' debug drawings, but those of
    the seats in ``keep`` (a ladder bot's owner gets their own), and how many tick records lost one.
    With ``drawings`` every seat's drawings stay and only the others' exceptions go (`without_errors`).
    Every other record keeps its exact bytes, so the copy verifies as the original does. For the
    ladder's downloads as for `strip_debug`; ``path`` names the file in a ReplayError."""
    gz = data[: len(GZIP_MAGIC)] == GZIP_MAGIC
    if gz:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise ReplayError(f"{path}: corrupt gzip data ({exc})") from None
    out, stripped, at = bytearray(), 0, 0
    while at + LENGTH.size <= len(data):
        (size,) = LENGTH.unpack_from(data, at)
        end = at + LENGTH.size + size
        if size > MAX_RECORD or end > len(data):
            break  # a cut record: the copy is cut where the original is
        body = data[at + LENGTH.size : end]
        if b"debug" in body:  # most records cannot hold a drawing: only those are decoded
            try:
                record = msgpack.unpackb(body, raw=False, strict_map_key=False)
            except (ValueError, TypeError, msgpack.UnpackException) as exc:
                raise ReplayError(f"{path}: a record at byte {at} is not valid msgpack ({exc})") from None
            if isinstance(record, dict) and record.get("type") == "tick" and "debug" in record:
                drawn = record.pop("debug")
                mine = {s: d for s, d in drawn.items() if s in keep} if isinstance(drawn, dict) else {}
                if drawings and isinstance(drawn, dict):
                    mine = {**without_errors(drawn), **mine}
                if mine:
                    record["debug"] = mine
                if mine != drawn:
                    body = msgpack.packb(record, use_bin_type=True)
                    stripped += 1
        out += LENGTH.pack(len(body)) + body
        at = end
    out += data[at:]
    result = bytes(out)
    return (gzip.compress(result, mtime=0) if gz else result), stripped


def strip_debug(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> int:
    """Copy replay ``src`` to ``dst`` without the bots' debug drawings (`cellarena replay
    strip-debug`); the number of ticks that had one. ``src`` is checked as `read_replay` does first."""
    read_replay(src)
    name = os.fspath(src)
    with open(name, "rb") as f:
        data, stripped = strip_debug_bytes(f.read(), name)
    tmp = f"{os.fspath(dst)}.part"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, dst)  # never a half-written copy under the name asked for
    return stripped


# ---------------------------------------------------------------------------------------- writing
def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cellarena")
    except PackageNotFoundError:
        return "unknown"


def _seat_counts(counts: Mapping[int, int] | Sequence[int] | None) -> dict[int, int]:
    """Per-seat counts (a seat map, or a list by seat) as a sorted seat map without the zeros."""
    pairs = counts.items() if isinstance(counts, Mapping) else enumerate(counts or ())
    return {operator.index(k): operator.index(v) for k, v in sorted(pairs) if v}


def _outcome(result: Result) -> dict[str, Any]:
    """A Result's fields as stored (and compared): seat maps sorted by seat."""
    return {
        "ticks": result.ticks,
        "ranks": dict(sorted(result.ranks.items())),
        "winner": result.winner,
        "reason": result.reason,
        "scores": dict(sorted(result.scores.items())),
        "causes": dict(sorted(result.causes.items())),
    }


@dataclass(frozen=True)
class ReplayFolder:
    """`cellarena serve --replay-dir`'s replay writers: ``match-NNNNN.replay`` per match, with events.
    Plain data, so that a worker process gets it pickled and names each replay as one process would."""

    folder: str

    def __call__(self, number: int, engine: Engine, names: list[str], seed: int) -> ReplayWriter:
        path = os.path.join(self.folder, f"match-{number:05d}.replay")
        return ReplayWriter(path, engine, seed=seed, names=names, events=True)


class ReplayWriter:
    """Writes one match's replay as it is played.

    Make it right after ``Engine.new()`` (it records the starting hash), call `record()` after every
    ``apply()``, and `finish()` with the result. Every record is flushed to the OS as it is written,
    so a crashed server loses at most the tick it was writing, and the file reads as incomplete.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        engine: Engine,
        *,
        seed: int,
        names: Sequence[str],
        extra: Mapping[str, Any] | None = None,
        exclusive: bool = False,
        events: bool = False,
        forked_from: Mapping[str, Any] | None = None,
    ) -> None:
        """``events``: every `record` call will give the tick's game events (`Events.log`): the header
        then lists the ``events`` section, and `verify` checks them (a tick without any has none).
        Off by default, so that a writer that never gives them does not promise them.
        ``forked_from``: the header's field of a fork (`fork_origin`), whose engine starts mid-match."""
        game = type(engine).name
        if not is_game(game):
            raise ValueError(
                f"{type(engine).__name__} is not a registered game ({game!r}); readers could not replay it"
            )
        if len(names) != engine.players:
            raise ValueError(f"names lists {len(names)} bots for {engine.players} seats")
        from cellarena.sdk.protocol import PROTOCOL_VERSION

        header: dict[str, Any] = {
            "type": "header",
            "format": FORMAT,
            "version": VERSION,
            "game": game,
            "config": config_mapping(engine),
            "seed": operator.index(seed),
            "players": engine.players,
            "names": [str(n) for n in names],
            "start_tick": engine.tick,
            "start_hash": engine.state_hash(),
            "rules": rules_version(engine),
            "hashes": hash_version(engine),
            "cellarena": _package_version(),
            "protocol": PROTOCOL_VERSION,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        if events:
            header["sections"] = ["events"]
            header["events_version"] = events_version(engine)
        if extra:
            header["extra"] = dict(extra)
        if forked_from is not None:
            header["forked_from"] = dict(forked_from)
        self.path = os.fspath(path)
        self._engine = engine  # finish() stores its own result() beside the match's
        self._packer = msgpack.Packer(use_bin_type=True)
        body = self._pack(header, "the header")  # before opening, so a bad header leaves no file
        # exclusive: a file already there is FileExistsError, never overwritten (a ladder's replays).
        mode = "xb" if exclusive else "wb"
        self._file: IO[bytes] | None = open(self.path, mode)  # noqa: SIM115 -- kept open across ticks
        self._finished = False
        self._write(body)

    def _pack(self, record: dict[str, Any], what: str) -> bytes:
        try:
            return self._packer.pack(record)
        except (TypeError, ValueError, OverflowError) as exc:
            raise TypeError(f"{what} cannot be stored in a replay (msgpack: {exc})") from None

    def _write(self, body: bytes) -> None:
        if self._file is None:
            raise ValueError(f"replay {self.path} is already closed")
        # One write of prefix and body, then a flush: a crash cuts at most this record.
        self._file.write(LENGTH.pack(len(body)) + body)
        self._file.flush()

    def record(
        self,
        tick: int,
        moves: Mapping[int, Any],
        engine: Engine,
        *,
        late: Mapping[int, int] | None = None,
        invalid: Mapping[int, int] | None = None,
        events: Sequence[Mapping[str, Any]] | None = None,
        debug: Mapping[int, Mapping[str, Any]] | None = None,
        bank: Mapping[int, int] | None = None,
    ) -> None:
        """Append decision point ``tick``: ``moves`` exactly as ``apply()`` got them, after that call.

        ``late`` and ``invalid`` are the match server's per-seat counts for this tick (zeros are
        dropped); they are kept for the record and are not re-simulated. ``events`` are the game's
        events that ``apply()`` reported (`Events.log`), which `verify` checks against re-simulation;
        the field is left out when there are none. ``debug`` is what each seat drew this tick, as
        the match kept it (board cells, within the caps); left out when no seat drew. It is an optional
        field of version 2: older readers skip it, and `verify` does not look at it. ``bank``: the
        ms of time bank each seat drew this tick (an optional field too, zeros left out).
        """
        if self._finished:
            raise ValueError(f"replay {self.path} already has its result")
        self._engine = engine
        # Sorted seats make equal moves give equal bytes whatever order the answers arrived in.
        record: dict[str, Any] = {
            "type": "tick",
            "tick": operator.index(tick),
            "moves": {operator.index(s): m for s, m in sorted(moves.items())},
            "hash": engine.state_hash(),
        }
        if late_counts := _seat_counts(late):
            record["late"] = late_counts
        if invalid_counts := _seat_counts(invalid):
            record["invalid"] = invalid_counts
        if events:
            record["events"] = [dict(e) for e in events]
        if bank_drawn := _seat_counts(bank):
            record["bank"] = bank_drawn
        if debug:
            record["debug"] = {operator.index(s): dict(d) for s, d in sorted(debug.items())}
        self._write(self._pack(record, f"the moves of tick {tick}"))

    def finish(
        self,
        result: Result,
        extra: Mapping[str, Any] | None = None,
        *,
        late: Mapping[int, int] | Sequence[int] | None = None,
        invalid: Mapping[int, int] | Sequence[int] | None = None,
    ) -> None:
        """Write the result record and close the file.

        ``result`` is the match's final result as the seats were told it; the match server may have
        changed the engine's (forfeits), or ended a match the engine had not. So the engine's own
        ``result()`` is stored beside it, and that is what verification checks. ``late`` and
        ``invalid`` are per-seat totals (a seat map or a list by seat); if not given they are taken
        from ``extra``, whose other entries are kept under ``extra``.
        """
        if self._finished:
            raise ValueError(f"replay {self.path} already has its result")
        if not isinstance(result, Result):
            raise TypeError(
                f"finish() needs the match's Result, got {result!r}; close() ends a match without one"
            )
        rest = dict(extra or {})
        late = rest.pop("late", None) if late is None else late
        invalid = rest.pop("invalid", None) if invalid is None else invalid
        game = self._engine.result()
        record: dict[str, Any] = {
            "type": "result",
            **_outcome(result),
            "engine_result": None if game is None else _outcome(game),
            "late": _seat_counts(late),
            "invalid": _seat_counts(invalid),
        }
        if rest:
            record["extra"] = rest
        self._write(self._pack(record, "the result"))
        self._finished = True
        assert self._file is not None
        os.fsync(self._file.fileno())  # once per match: the finished file should survive a power cut
        self.close()

    def close(self) -> None:
        """Close without a result (an aborted match); the file stays readable as incomplete."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------------------- re-simulating
@dataclass(frozen=True)
class Mismatch:
    """The first place where re-simulation disagrees with the file. ``tick`` is None for the config."""

    tick: int | None
    what: str
    expected: Any
    got: Any

    def __str__(self) -> str:
        where = "header" if self.tick is None else f"tick {self.tick}"
        return f"{where}: {self.what}: the replay says {self.expected!r}, re-simulation gives {self.got!r}"


@dataclass
class VerifyReport:
    """What `verify` found. ``ok``: everything in the file re-simulates; ``complete``: it has a result."""

    path: str
    #: Ticks counted as the match's result counts them (`cellarena match` prints the same number):
    #: a game that ends in a tick before that tick's moves (Rezzo's losses come first) counts that
    #: tick too, so it can be one more than ``moves_verified``.
    ticks_verified: int
    complete: bool
    mismatch: Mismatch | None = None
    incomplete_reason: str = ""
    #: Why a mismatch may be no fault of the file: the game's rules changed since it was recorded.
    rules_note: str = ""
    #: Tick records (one tick's moves each) re-simulated; None: as many as ``ticks_verified``.
    moves_verified: int | None = None

    @property
    def ok(self) -> bool:
        return self.mismatch is None

    def _counted(self) -> str:
        moves = self.ticks_verified if self.moves_verified is None else self.moves_verified
        if moves == self.ticks_verified:
            return f"{self.ticks_verified} ticks verified"
        return (
            f"{self.ticks_verified} ticks verified, {moves} with moves "
            "(the game ended before the last one's moves)"
        )

    def summary(self) -> str:
        if self.mismatch is not None:
            note = f"; {self.rules_note}" if self.rules_note else ""
            return f"mismatch at {self.mismatch} ({self.ticks_verified} ticks verified before it){note}"
        if not self.complete:
            return f"incomplete: {self._counted()}; {self.incomplete_reason}"
        return f"ok: {self._counted()}"


def _hasher(engine: Engine, replay: Replay) -> Callable[[], str]:
    """The state hash in the scheme the file was written in (older files verify as they were)."""
    now = hash_version(engine)
    if replay.hashes == now:
        return engine.state_hash
    older = older_hash_scheme(engine)
    if older is None or replay.hashes > now:
        raise ReplayError(
            f"{replay.path}: its state hashes are in {replay.game} hash scheme {replay.hashes}, which "
            f"this cellarena cannot compute (it knows up to {now}); "
            "verify it with the cellarena that wrote it"
        )
    return functools.partial(older, replay.hashes)


def _known_events(engine: Engine, replay: Replay) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    """The re-simulated events as the file's writer reported them: kinds added since left out."""
    later = {kind for kind, version in event_kinds_since(engine).items() if version > replay.event_kinds}
    if not later:
        return lambda log: log
    return lambda log: [e for e in log if e.get("kind") not in later]


def _rules_note(replay: Replay, engine: Engine) -> str:
    """For a replay that does not re-simulate: the rule changes since it was recorded, if any."""
    now = rules_version(engine)
    if replay.rules >= now:
        return ""
    changes = rules_changes(engine)
    said = "; ".join(f"v{v}: {changes[v]}" for v in range(replay.rules + 1, now + 1) if v in changes)
    return (
        f"the match was played under {replay.game} rules v{replay.rules} and this cellarena plays v{now}"
        + (f" ({said})" if said else "")
        + ", so a match those changes touch re-simulates differently; the file itself may be sound"
    )


def _rebuild(replay: Replay) -> Engine:
    try:
        return get_engine(replay.game).new(replay.config, replay.seed)
    except ConfigError as exc:
        raise ReplayError(
            f"{replay.path}: the {replay.game} engine rejects the replay's config: {exc}"
        ) from None


_OUTCOME_FIELDS = ("ticks", "ranks", "winner", "reason", "scores")
#: Version 2 results also carry each seat's cause.
_OUTCOME_FIELDS_2 = (*_OUTCOME_FIELDS, "causes")


#: One decision point as ``apply()`` got it, (tick, moves): what rebuilds a state from the fresh engine.
Step = tuple[int, dict[int, Any]]


def _to_origin(replay: Replay, engine: Engine, applied: list[Step] | None) -> Mismatch | None:
    """A fork's replay starts where its origin stood (`forked_from`): its origin's moves first."""
    origin = replay.header.get("forked_from")
    if not isinstance(origin, dict):
        return None
    for step in origin["moves"]:
        tick, moves = step["tick"], step["moves"]
        if engine.result() is not None or engine.tick != tick:
            return Mismatch(tick, "origin's decision point", tick, engine.tick)
        try:
            engine.apply(moves)
        except Exception as exc:  # untrusted input: report, never crash
            return Mismatch(
                tick, "apply (origin's moves)", "the moves to apply", f"{type(exc).__name__}: {exc}"
            )
        if applied is not None:
            applied.append((tick, moves))
    return None


def _run(
    replay: Replay, until: int | None, applied: list[Step] | None = None
) -> tuple[Engine, int, Mismatch | None]:
    """Re-simulate, checking hashes, until the engine reaches tick ``until`` (None: the whole file).

    Returns the engine, how many tick records were applied and the first mismatch (where it stopped).
    ``applied`` gets every (tick, moves) given to the engine, a fork's origin's first.
    """
    engine = _rebuild(replay)
    state_hash = _hasher(engine, replay)
    known = _known_events(engine, replay)
    if (wrong := _to_origin(replay, engine, applied)) is not None:
        return engine, 0, wrong
    if engine.tick != replay.start_tick:
        return engine, 0, Mismatch(replay.start_tick, "starting tick", replay.start_tick, engine.tick)
    if (got := state_hash()) != replay.header["start_hash"]:
        return engine, 0, Mismatch(replay.start_tick, "starting state hash", replay.header["start_hash"], got)
    done = 0
    for rec in replay.ticks:
        if until is not None and engine.tick >= until:
            break
        ended = engine.result()
        if ended is not None:
            return (
                engine,
                done,
                Mismatch(rec.tick, "match state", "still running", f"ended at tick {ended.ticks}"),
            )
        if engine.tick != rec.tick:
            return engine, done, Mismatch(rec.tick, "decision point", rec.tick, engine.tick)
        try:
            events = engine.apply(rec.moves)
        except Exception as exc:  # a replay file is untrusted input: report, never crash
            return (
                engine,
                done,
                Mismatch(rec.tick, "apply", "the moves to apply", f"{type(exc).__name__}: {exc}"),
            )
        got = state_hash()
        if got != rec.hash:
            return engine, done, Mismatch(rec.tick, "state hash", rec.hash, got)
        if rec.events is not None:
            log = known(events.log)
            if log != rec.events:
                return engine, done, Mismatch(rec.tick, "events", rec.events, log)
        if applied is not None:
            applied.append((rec.tick, rec.moves))
        done += 1
    return engine, done, None


def verify(replay: Replay) -> VerifyReport:
    """Rebuild the match from the header, apply every tick's moves and check every hash and the result.

    A config the engine rejects raises ReplayError; any disagreement is the report's ``mismatch``.
    """
    engine, done, mismatch = _run(replay, None)
    report = VerifyReport(replay.path, done, replay.complete, mismatch, replay.incomplete_reason())
    if mismatch is None and replay.result is not None:
        got = engine.result()
        want = replay.result["engine_result"]
        fields = _OUTCOME_FIELDS_2 if replay.version >= 2 else _OUTCOME_FIELDS
        if want is not None:
            want = {k: want.get(k, {} if k in ("scores", "causes") else None) for k in fields}
        got_fields = None if got is None else {k: v for k, v in _outcome(got).items() if k in fields}
        if want != got_fields:
            last = replay.ticks[-1].tick if replay.ticks else replay.start_tick
            report.mismatch = Mismatch(last, "engine result", want, got_fields)
    if report.mismatch is not None:
        report.rules_note = _rules_note(replay, engine)
    elif (ended := engine.result()) is not None and ended.ticks > done:
        # Count as the result does, so that `verify` and `match` give one number for one match.
        report.moves_verified = done
        report.ticks_verified = ended.ticks
    return report


@dataclass
class Rebuilt:
    """A match's state at a decision point (`rebuild_at`), and every move that led there from its
    fresh engine: what a fork's replay carries to verify on its own."""

    engine: Engine
    moves: list[Step]


def rebuild_at(replay: Replay, tick: int | None = None) -> Rebuilt:
    """The match as it stood at decision point ``tick`` (default: after the last recorded tick).

    The one way to rebuild a state from a replay (`replay show`, `replay fork`, the environments'
    ``reset(options={"replay", "tick"})``): the engine is made from the header's config and seed and
    fed the recorded moves, each hash checked, so a state never comes from a replay that does not
    reproduce. At the tick cap, where the last ``apply()`` does not advance the tick, ``tick`` gives
    the state before that last agent phase and the default gives the one after.
    """
    if tick is not None and tick < replay.start_tick:
        raise TickError(
            f"{replay.path}: tick {tick} is before the start; the replay starts at tick {replay.start_tick}"
        )
    applied: list[Step] = []
    engine, _done, mismatch = _run(replay, tick, applied)
    if mismatch is not None:
        note = _rules_note(replay, engine)
        raise ReplayError(
            f"{replay.path}: does not re-simulate (at {mismatch}"
            + (f"; {note}" if note else "")
            + "); `cellarena replay verify` says more"
        )
    if tick is not None and engine.tick != tick:
        if engine.tick < tick:
            raise TickError(f"{replay.path}: tick {tick} is past the end; the last tick is {engine.tick}")
        raise TickError(f"{replay.path}: no decision point at tick {tick} (the match went to {engine.tick})")
    return Rebuilt(engine, applied)


def board_at(replay: Replay, tick: int | None = None) -> Engine:
    """The match as it stood at decision point ``tick`` (`rebuild_at`'s engine)."""
    return rebuild_at(replay, tick).engine


def file_digest(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's bytes, hex: how a fork names the replay it came from."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(functools.partial(f.read, 1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fork_origin(replay: Replay, rebuilt: Rebuilt) -> dict[str, Any]:
    """The ``forked_from`` header field of a match forked from ``replay`` at ``rebuilt``'s tick:
    the origin's file name and digest, the tick, and every move from the fresh engine to it, so the
    fork verifies without its origin (docs/replays.md)."""
    return {
        "replay": os.path.basename(replay.path),
        "sha256": file_digest(replay.path),
        "tick": rebuilt.engine.tick,
        "moves": [{"tick": t, "moves": m} for t, m in rebuilt.moves],
    }


#: The environments' reset options that `replay_start` reads.
START_OPTIONS = ("replay", "tick")


def replay_start(options: Mapping[str, Any] | None, game: str) -> Engine | None:
    """The engine at ``options["tick"]`` of the ``game`` replay ``options["replay"]``, or None when
    the options name no replay. ValueError naming the option at fault: a replay that cannot be read,
    is of another game or does not re-simulate (``replay``), a tick it does not have or at which its
    match is over (``tick``)."""
    if not options or options.get("replay") is None:
        if options and "tick" in options:
            raise ValueError("options['tick'] needs options['replay'], the replay file to start from")
        return None
    path, tick = options["replay"], options.get("tick")
    if not isinstance(path, str | os.PathLike):
        raise ValueError(f"options['replay'] must be a replay file's path, got {type(path).__name__}")
    if not is_int(tick) or tick < 0:
        raise ValueError(
            f"options['tick'] must be a tick of the replay (an int, 0 or more), got {tick!r:.40}"
        )
    try:
        replay = read_replay(path)
        if replay.game != game:
            raise ValueError(
                f"options['replay']: {os.fspath(path)} is a {replay.game} replay; "
                f"this environment plays {game}"
            )
        engine = rebuild_at(replay, tick).engine
    except TickError as exc:
        raise ValueError(f"options['tick']: {exc}") from None
    except ReplayError as exc:
        raise ValueError(f"options['replay']: {exc}") from None
    if (ended := engine.result()) is not None:
        raise ValueError(
            f"options['tick']: {os.fspath(path)}: the match is over at tick {tick} (it ended at tick "
            f"{ended.ticks}); start at an earlier tick"
        )
    return engine
