"""Imitation from an exported dataset (docs/datasets.md), for any game: one bot's rows, seat by seat.

A bot's decisions depend on what it saw before (Rezzo's bots remember the cells they walked past), so
rows are handed over as whole seats of whole matches, in tick order: a game's imitation code replays
each seat's observations and moves through the bot's own feature code, as the bot would have met
them. Only the dataset is read, never the imitated bot's program.

`fit` trains a one-hidden-layer network (weights ``w1, b1, w2, b2``, as the example policies have them)
by cross-entropy over the legal moves, with Adam; it is the game-independent half of the training.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import msgpack
import numpy as np

from cellarena.server.dataset.fields import METADATA_KEY, SCHEMA_VERSION


class ImitationError(Exception):
    """The dataset or the options cannot be trained on: the message says which and what to do."""


@dataclass
class SeatRows:
    """One seat of one match as the dataset has it: per decision point, the observation it was sent
    (decoded msgpack; None when it was not asked) and the move the game applied (None: no move)."""

    match: str
    seat: int
    map: str | None
    outcome: str | None
    ticks: list[int] = field(default_factory=list)
    observations: list[Any] = field(default_factory=list)
    actions: list[Any] = field(default_factory=list)


def _unpack(value: bytes | None) -> Any:
    return None if value is None else msgpack.unpackb(value, raw=False, strict_map_key=False)


def _table(dataset: Path, game: str) -> Any:
    """The game's rows of the dataset as one pyarrow table, its schema version checked."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ImitationError("reading a dataset needs pyarrow: pip install 'cellarena[data]'") from None

    if not dataset.is_dir():
        raise ImitationError(
            f"--dataset {dataset}: no such folder; make one with "
            f"`cellarena replay export REPLAYS --out {dataset}`"
        )
    folder = dataset / f"game={game}"
    parts = sorted(folder.glob("match=*/*.parquet")) if folder.is_dir() else []
    if not parts:
        raise ImitationError(
            f"--dataset {dataset}: no {game} matches in it (no {folder.name}/match=*/*.parquet); "
            "export a folder of this game's replays with `cellarena replay export`"
        )
    tables = []
    for part in parts:
        try:
            table = pq.read_table(part)
        except (OSError, pa.ArrowException) as exc:
            raise ImitationError(
                f"{part}: not a Parquet file of a dataset ({exc}); export it again"
            ) from None
        version = (table.schema.metadata or {}).get(METADATA_KEY)
        if version != str(SCHEMA_VERSION).encode():
            raise ImitationError(
                f"{part}: dataset schema version {version.decode() if version else 'missing'}, but this "
                f"cellarena reads version {SCHEMA_VERSION}; export the replays again with this cellarena"
            )
        match = part.parent.name.removeprefix("match=")
        tables.append(table.append_column("match", pa.array([match] * table.num_rows, pa.string())))
    return pa.concat_tables(tables)


def read_seats(dataset: Path, game: str, bot: str) -> list[SeatRows]:
    """Every seat ``bot`` played in the dataset's ``game`` matches, ordered by match and seat, each
    with its rows in tick order."""
    table = _table(dataset, game)
    bots = table.column("bot").to_pylist()
    if bot not in bots:
        names = ", ".join(sorted(set(bots)))
        raise ImitationError(f"--imitate {bot}: no {game} rows of that bot in the dataset; its bots: {names}")
    keep = [i for i, b in enumerate(bots) if b == bot]
    cols = {
        name: table.column(name).take(keep).to_pylist()
        for name in ("match", "seat", "tick", "map", "outcome", "observation", "action")
    }
    seats: dict[tuple[str, int], SeatRows] = {}
    order = sorted(range(len(keep)), key=lambda j: (cols["match"][j], cols["seat"][j], cols["tick"][j]))
    for j in order:
        key = (cols["match"][j], cols["seat"][j])
        rows = seats.get(key)
        if rows is None:
            rows = seats[key] = SeatRows(key[0], key[1], cols["map"][j], cols["outcome"][j])
        rows.ticks.append(cols["tick"][j])
        rows.observations.append(_unpack(cols["observation"][j]))
        rows.actions.append(_unpack(cols["action"][j]))
    return [seats[k] for k in sorted(seats)]


class Network(Protocol):
    """What `fit` trains: a one-hidden-layer network's weights and its forward pass."""

    params: dict[str, np.ndarray]

    def logits(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...


@dataclass
class Samples:
    """Training samples: the network's inputs in the policy's compact form, the legal moves, the labels."""

    cells: np.ndarray
    extras: np.ndarray
    masks: np.ndarray
    labels: np.ndarray

    @classmethod
    def join(cls, parts: Sequence[Samples]) -> Samples:
        return cls(
            *(np.concatenate([getattr(p, k) for p in parts]) for k in ("cells", "extras", "masks", "labels"))
        )


def class_weights(labels: np.ndarray, classes: int, power: float) -> np.ndarray:
    """Per-sample weights (mean 1): each move's weight is its frequency to the power ``-power`` (0: all
    equal, 1: every move counts as much in total), so rare moves such as a hit are not drowned out."""
    counts = np.bincount(labels, minlength=classes).astype(np.float64)
    per_class = np.where(counts > 0, np.maximum(counts, 1.0) ** -power, 0.0)
    w = per_class[labels]
    return (w / w.mean()).astype(np.float32)


def fit(
    policy: Network,
    encode: Callable[[np.ndarray, np.ndarray], np.ndarray],
    data: Samples,
    epochs: int,
    rng: np.random.Generator,
    lr: float = 2e-3,
    batch: int = 256,
    weights: np.ndarray | None = None,
) -> float:
    """Adam on the cross-entropy of the labels over the legal moves (each sample weighted by
    ``weights``, default 1); ``encode`` makes the network's input from (cells, extras). Returns the
    last epoch's accuracy."""
    p = policy.params
    state = {k: (np.zeros_like(v), np.zeros_like(v)) for k, v in p.items()}
    t = 0
    n = len(data.labels)
    acc = 0.0
    for _ in range(epochs):
        order = rng.permutation(n)
        right = 0
        for lo in range(0, n, batch):
            idx = order[lo : lo + batch]
            x = encode(data.cells[idx], data.extras[idx])
            z, h = policy.logits(x)
            z = np.where(data.masks[idx], z, -1e9)
            z -= z.max(axis=1, keepdims=True)
            prob = np.exp(z)
            prob /= prob.sum(axis=1, keepdims=True)
            y = data.labels[idx]
            right += int((prob.argmax(axis=1) == y).sum())
            g = prob
            g[np.arange(len(idx)), y] -= 1.0
            if weights is not None:
                g *= weights[idx, None]
            g /= len(idx)
            grads = {"w2": h.T @ g, "b2": g.sum(axis=0)}
            dh = (g @ p["w2"].T) * (h > 0)
            grads["w1"] = x.T @ dh
            grads["b1"] = dh.sum(axis=0)
            t += 1
            for key, grad in grads.items():
                m, v = state[key]
                m *= 0.9
                m += 0.1 * grad
                v *= 0.999
                v += 0.001 * grad * grad
                p[key] -= lr * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
        acc = right / n
    return acc
