"""The dataset card: the README.md beside the Parquet files, stating the schema the files hold."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from cellarena.server.dataset.fields import FIELDS, PARTITIONS, SCHEMA_VERSION, Field

LOADER = """\
```python
import pyarrow as pa
import pyarrow.dataset as ds

# Folders game=G/match=M, both strings; README.md (the card) is no Parquet file.
folders = ds.partitioning(pa.schema([("game", pa.string()), ("match", pa.string())]), flavor="hive")
data = ds.dataset("DATASET", format="parquet", partitioning=folders, ignore_prefixes=[".", "_", "README"])
table = data.to_table(filter=ds.field("game") == "rezzo")
print(table.num_rows, table.schema.metadata[b"cellarena.dataset.schema_version"])
```"""


def _rows(fields: Sequence[Field]) -> list[str]:
    return [f"| `{f.name}` | `{f.type}` | {'yes' if f.nullable else 'no'} | {f.meaning} |" for f in fields]


def _version() -> str:
    from cellarena.server.replay import _package_version

    return _package_version()


def card_text(matches: int, rows: int, games: Sequence[str], command: str, notes: Sequence[str] = ()) -> str:
    """The card of a dataset of ``matches`` matches of ``games``, ``rows`` rows, made by ``command``;
    ``notes`` are lines for "How it was made"."""
    made = datetime.now(UTC).isoformat(timespec="seconds")
    played = ", ".join(sorted(games)) or "none"
    lines = [
        "# cellarena matches",
        "",
        f"Schema version: {SCHEMA_VERSION}",
        "",
        f"{matches} matches of {played}, {rows} rows: one row per seat and tick of each match.",
        f"Made by `{command}` (cellarena {_version()}) on {made}.",
        "",
        "## How it was made",
        "",
        "Each match's replay was played again through its game's engine, every state hash checked, "
        "and each seat's observation taken from the engine as the match server sends it. The "
        "bots' debug drawings and log lines (exceptions) are not in it.",
        *notes,
        "",
        "## Layout",
        "",
        "`game=GAME/match=MATCH/part-0.parquet`: hive partitioning, one Parquet file per match. The "
        "folder names are two more fields, read back as columns by a reader that asks for hive "
        "partitioning. Each file's metadata holds `cellarena.dataset.schema_version`.",
        "",
        "## Fields",
        "",
        "| field | type | nullable | meaning |",
        "|---|---|---|---|",
        *_rows(PARTITIONS),
        *_rows(FIELDS),
        "",
        "Observations and actions are msgpack (`msgpack.unpackb(value)`); the game's SDK module decodes "
        "an observation as a bot does (`cellarena.sdk.games.GAME.View`, docs/training.md). `view` is "
        "that decoding done, as numbers: "
        "`numpy.asarray(row['view'], numpy.uint8).reshape(row['view_shape'])`.",
        "",
        "Schema 1.1 added `view`, `view_shape` and `agents` at the end; a reader of schema 1 that takes "
        "its columns by name reads this dataset as before.",
        "",
        "## Loading it",
        "",
        LOADER,
        "",
        "## Licence",
        "",
        "The host who published this dataset states its licence and terms of use here.",
        "",
    ]
    return "\n".join(lines)
