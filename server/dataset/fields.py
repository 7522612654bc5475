"""The dataset's one schema: each field, its Arrow type and what it means. The Parquet files and the
dataset card (`card`) are both made from `FIELDS`, so that the card states the files' schema.

The version is MAJOR.MINOR. A change of a field's type or meaning, or a field taken out, is a new
major version; a field added at the end is a new minor one, which a reader of the same major version
still reads (it takes the columns it knows by name; `readable`). 1.1 added ``view``, ``view_shape``
and ``agents``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

SCHEMA_VERSION = "1.1"
#: The key of the schema version in each Parquet file's metadata.
METADATA_KEY = b"cellarena.dataset.schema_version"


@dataclass(frozen=True)
class Field:
    name: str
    #: The Arrow type as pyarrow prints it (``str(pa.int64())`` is ``int64``).
    type: str
    nullable: bool
    meaning: str


#: The folders' names (hive partitioning: ``game=G/match=M``); a reader that asks for hive
#: partitioning gets them back as columns.
PARTITIONS = (
    Field("game", "string", False, "the game (`cellarena match --game`'s names)"),
    Field(
        "match",
        "string",
        False,
        "the match: the replay file's name without `.replay` (`replay export`; a tournament's "
        "`match.replay`: its folder's name), `ladder-` and the "
        "ladder's match id in six digits (`ladder export`)",
    ),
)

FIELDS = (
    Field("tick", "int64", False, "the decision point: the tick the seat's request was for"),
    Field("seat", "int32", False, "the seat, from 0"),
    Field("bot", "string", False, "the name of the bot in the seat"),
    Field("version", "string", True, "the version the bot said in its hello (ladder); null: unknown"),
    Field("rating_mu", "double", True, "the bot's rating before the match, its mean (ladder); null: none"),
    Field("rating_sigma", "double", True, "the bot's rating before the match, its uncertainty (ladder)"),
    Field("map", "string", True, "the map's name, for games played on one; null for the others"),
    Field("seed", "int64", False, "the match's seed"),
    Field("players", "int32", False, "the number of seats"),
    Field("rules", "int32", False, "the version of the game's rules the match was played under"),
    Field(
        "observation",
        "binary",
        True,
        "the request the server sent the seat this tick (the `tick` message's game fields, "
        "docs/protocol.md), as msgpack; null: the seat was not asked this tick (turn-based games)",
    ),
    Field(
        "action",
        "binary",
        True,
        "the seat's move as the game applied it (the replay's move: a late, missing or malformed "
        "answer is the game's no-op), as msgpack; null: the seat had no move this tick",
    ),
    Field("late", "int32", False, "1 when the seat's answer came after its budget this tick, else 0"),
    Field("invalid", "int32", False, "1 when the seat's answer was malformed this tick, else 0"),
    Field("events", "string", False, "the game's events of this tick (docs/replays.md), a JSON list"),
    Field(
        "reward",
        "double",
        False,
        "the outcome reward: +1 win, -1 loss, 0 draw on the seat's last row, 0 on the others (and "
        "on every row of a match without a result)",
    ),
    Field(
        "reward_terms",
        "map<string, double>",
        True,
        "Rezzo only (null for the others): this tick's shaping terms for the seat, as docs/training.md "
        "defines them: own_flags, enemy_flags, flag_formed, own_flag_destroyed, enemy_flag_destroyed",
    ),
    Field("done", "bool", False, "true on the seat's last row of a match that has its result"),
    Field("rank", "int32", True, "the seat's final rank (1 first; ties share it); null: no result"),
    Field("outcome", "string", True, "win, loss or draw for the seat; null: the match has no result"),
    Field(
        "cause",
        "string",
        True,
        "why the match ended so for the seat (docs/replays.md's causes: its kind only, never a log line)",
    ),
    Field(
        "view",
        "list<uint8>",
        True,
        "since 1.1: the observation as fixed-shape numbers, flattened (`view_shape` gives the shape), as "
        "the game's SDK module decodes it: rezzo (agents, 2, 13, 13), each agent's viewport's cell codes "
        "then its damage; cata (size, size), the board; cloth (2, H, W) and colorblocks (4, H, W), their "
        "training observation; drop2df (cells + 3,); null when `observation` is",
    ),
    Field("view_shape", "list<int32>", True, "since 1.1: the shape of `view`; null when `view` is"),
    Field(
        "agents",
        "list<int32>",
        True,
        "since 1.1, Rezzo only: the indices of the agents whose viewports `view` holds, in its order "
        "(the keys of `action`); null for the other games and when `observation` is",
    ),
)


def arrow_type(name: str) -> pa.DataType:
    import pyarrow as pa

    types = {
        "int32": pa.int32(),
        "int64": pa.int64(),
        "double": pa.float64(),
        "bool": pa.bool_(),
        "string": pa.string(),
        "binary": pa.binary(),
        "map<string, double>": pa.map_(pa.string(), pa.float64()),
        "list<uint8>": pa.list_(pa.uint8()),
        "list<int32>": pa.list_(pa.int32()),
    }
    return types[name]


def readable(version: bytes | None) -> bool:
    """Whether a file of schema ``version`` (its metadata's value) is one this cellarena reads: the
    same major version (1.0 was written as ``1``)."""
    if version is None:
        return False
    return version.decode(errors="replace").split(".")[0] == SCHEMA_VERSION.split(".", maxsplit=1)[0]


def arrow_schema() -> pa.Schema:
    """The schema of every Parquet file (the partition fields are the folders, not columns)."""
    import pyarrow as pa

    fields = [pa.field(f.name, arrow_type(f.type), nullable=f.nullable) for f in FIELDS]
    return pa.schema(fields, metadata={METADATA_KEY: SCHEMA_VERSION.encode()})


def partitioning() -> Any:
    """pyarrow's reading of the folders: hive-style, both fields strings (a match named ``7`` is not
    the number 7)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    return ds.partitioning(pa.schema([(f.name, arrow_type(f.type)) for f in PARTITIONS]), flavor="hive")
