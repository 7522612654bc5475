"""Imitation from an exported dataset (docs/datasets.md), for any game: one bot's rows, seat by seat.

A bot's decisions depend on what it saw before (Rezzo's bots remember the cells they walked past), so
rows are handed over as whole seats of whole matches, in tick order: a game's imitation code replays
each seat's observations and moves through the bot's own feature code, as the bot would have met
them. Only the dataset is read, never the imitated bot's program.

`fit` trains a one-hidden-layer network (weights ``w1, b1, w2, b2``, as the example policies have them)
by cross-entropy over the legal moves, with Adam; it is the game-independent half of the training.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import msgpack
import numpy as np

from cellarena.sdk import MatchInfo
from cellarena.server.dataset.fields import METADATA_KEY, SCHEMA_VERSION, readable
from cellarena.server.dataset.views import FixedView, fixed_view
from cellarena.server.games.base import Engine


class ImitationError(Exception):
    """The dataset or the options cannot be trained on: the message says which and what to do."""


@dataclass
class SeatRows:
    """One seat of one match as the dataset has it: per decision point, the observation it was sent as
    numbers (the ``view`` columns, `FixedView`; None when it was not asked), the observation's msgpack
    decoded (only when asked for with ``messages``), and the move the game applied (None: no move)."""

    match: str
    seat: int
    map: str | None
    outcome: str | None
    ticks: list[int] = field(default_factory=list)
    views: list[FixedView | None] = field(default_factory=list)
    observations: list[Any] = field(default_factory=list)
    actions: list[Any] = field(default_factory=list)

    def requests(self) -> Iterator[tuple[dict[str, Any], Any]]:
        """(the request as the SDK's ``make_view`` reads it, the move applied) of each row whose
        observation was decoded (``messages``) and not empty."""
        for tick, message, action in zip(self.ticks, self.observations, self.actions, strict=True):
            if message is not None:
                yield {"tick": tick, **message}, action

    @contextmanager
    def readable(self, *errors: type[Exception]) -> Iterator[None]:
        """Raises any of ``errors`` (a game's view of a request refusing it) as the ImitationError that
        names this seat."""
        try:
            yield
        except errors as exc:
            raise ImitationError(
                f"match {self.match}, seat {self.seat}: observation not readable ({exc})"
            ) from None


def _unpack(value: bytes | None) -> Any:
    return None if value is None else msgpack.unpackb(value, raw=False, strict_map_key=False)


#: The columns the training reads; the 1.1 ones (``VIEW_COLUMNS``) when the file has them.
COLUMNS = ("bot", "seat", "tick", "map", "outcome", "action")
VIEW_COLUMNS = ("view", "view_shape", "agents")


def _parts(dataset: Path, game: str) -> list[Path]:
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
    return parts


def _read_part(part: Path, bot: str, messages: bool) -> tuple[set[str], dict[str, Any]]:
    """One match's bots, and the columns of ``bot``'s rows as lists, its schema version checked: the
    ``view`` columns where the file has them (schema 1.1), else ``observation``, which `read_seats`
    turns into views."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
    except ImportError:
        raise ImitationError("reading a dataset needs pyarrow: pip install 'cellarena[data]'") from None
    try:
        schema = pq.read_schema(part)
        version = (schema.metadata or {}).get(METADATA_KEY)
        if not readable(version):
            raise ImitationError(
                f"{part}: dataset schema version {version.decode() if version else 'missing'}, but this "
                f"cellarena reads version {SCHEMA_VERSION}; export the replays again with this cellarena"
            )
        has_views = all(name in schema.names for name in VIEW_COLUMNS)
        wanted = [
            *COLUMNS,
            *(VIEW_COLUMNS if has_views else ()),
            *(() if has_views and not messages else ("observation",)),
        ]
        table = pq.read_table(part, columns=wanted)
        bots = set(pc.unique(table.column("bot")).to_pylist())
        table = table.filter(pc.equal(table.column("bot"), bot))
    except (OSError, pa.ArrowException) as exc:
        raise ImitationError(f"{part}: not a Parquet file of a dataset ({exc}); export it again") from None
    cols: dict[str, Any] = {name: table.column(name).to_pylist() for name in wanted if name != "view"}
    if has_views:  # one numpy array and its offsets: a list of Python ints per row would be slow
        view = table.column("view").combine_chunks()
        cols["view"] = (view.values.to_numpy(zero_copy_only=False), view.offsets.to_numpy(), view.is_null())
    return bots, cols


def _views(game: str, cols: dict[str, list[Any]], keep: list[int]) -> list[FixedView | None]:
    """The rows' views: from the ``view`` columns, or (a schema 1.0 file) decoded from the msgpack as
    the export decodes it."""
    if "view" in cols:
        flat, offsets, nulls = cols["view"]
        nulls = nulls.to_numpy(zero_copy_only=False)
        out: list[FixedView | None] = []
        for i in keep:
            cells = flat[offsets[i] : offsets[i + 1]].reshape(cols["view_shape"][i])
            out.append(None if nulls[i] else FixedView(cells, cols["agents"][i]))
        return out
    msgs = [_unpack(cols["observation"][i]) for i in keep]
    try:
        return [
            None if m is None else fixed_view(game, {"tick": cols["tick"][i], **m})
            for i, m in zip(keep, msgs, strict=True)
        ]
    except (ValueError, TypeError) as exc:
        raise ImitationError(
            f"an observation of the dataset is not readable ({exc}); export it again"
        ) from None


def read_seats(dataset: Path, game: str, bot: str, messages: bool = False) -> list[SeatRows]:
    """Every seat ``bot`` played in the dataset's ``game`` matches, ordered by match and seat, each
    with its rows in tick order; with ``messages``, each row's observation as the msgpack decoded."""
    seats: dict[tuple[str, int], SeatRows] = {}
    bots: set[str] = set()
    for part in _parts(dataset, game):
        names, cols = _read_part(part, bot, messages)
        bots |= names
        keep = sorted(range(len(cols["bot"])), key=lambda i: (cols["seat"][i], cols["tick"][i]))
        match = part.parent.name.removeprefix("match=")
        views = _views(game, cols, keep)
        for j, i in enumerate(keep):
            key = (match, cols["seat"][i])
            rows = seats.get(key)
            if rows is None:
                rows = seats[key] = SeatRows(match, key[1], cols["map"][i], cols["outcome"][i])
            rows.ticks.append(cols["tick"][i])
            rows.views.append(views[j])
            if messages:
                rows.observations.append(_unpack(cols["observation"][i]))
            rows.actions.append(_unpack(cols["action"][i]))
    if not seats:
        listed = ", ".join(sorted(bots))
        raise ImitationError(
            f"--imitate {bot}: no {game} rows of that bot in the dataset; its bots: {listed}"
        )
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

    @classmethod
    def from_rows(cls, net: ModuleType, rows: Sequence[tuple[Any, Any, Any, int]]) -> Samples:
        """The samples of ``rows`` (cells, extras, legal moves, label), one a sample; none: an empty set
        of the shapes of ``net``, the bot folder's policy module (its CROP, EXTRA and MOVES)."""
        if not rows:
            return cls(
                np.zeros((0, net.CROP), np.uint8), np.zeros((0, net.EXTRA), np.float32),
                np.zeros((0, net.MOVES), bool), np.zeros(0, np.int64),
            )  # fmt: skip
        cells, extras, masks, labels = zip(*rows, strict=True)
        return cls(np.array(cells, np.uint8), np.array(extras, np.float32), np.array(masks, bool),
                   np.array(labels, np.int64))  # fmt: skip


def request_samples(
    rows: SeatRows,
    net: ModuleType,
    make_view: Callable[[dict[str, Any]], Any],
    label_of: Callable[[Any], int | None],
) -> Samples:
    """A seat's samples for a game that asks for one move a request: each request read by the SDK's
    ``make_view``, the bot folder's ``net`` for the inputs and the legal moves, labelled with
    ``label_of`` the move the game applied (None: the network has no action for it, no sample)."""
    found: list[tuple[Any, Any, Any, int]] = []
    for request, move in rows.requests():
        label = label_of(move)
        if label is None:
            continue
        with rows.readable(ValueError):
            view = make_view(request)
            c, e = net.observe(view)
        m = net.legal(view)
        m[label] = True  # the move played is a choice even where the mask would not offer it
        found.append((c, e, m, label))
    return Samples.from_rows(net, found)


@dataclass(frozen=True)
class InProcessMatch:
    """`GameImitation.play` for a game of two seats: one match in-process, the bot folder's ``bot.py``
    (its ``Trained`` class, playing the policy) in a seat against an instance of the opponent's class;
    the winner's seat, or None for a draw."""

    game: str
    #: The engine of the evaluation's config (a copy, the caller's own to change).
    new_engine: Callable[[dict[str, Any]], Engine]
    #: What a bot answers to a request, as the engine takes it: (bot, tick, request) -> action.
    answer: Callable[[Any, int, dict[str, Any]], Any]

    def __call__(
        self, bot: ModuleType, policy: Any, opponent: type[Any], seat: int, config: Mapping[str, Any]
    ) -> int | None:
        mine = bot.Trained(policy)
        bots = [mine, opponent()] if seat == 0 else [opponent(), mine]
        engine = self.new_engine(dict(config))
        for s, b in enumerate(bots):
            b.info = MatchInfo(seat=s, players=2, names=("a", "b"), game=self.game)
            b.on_start(b.info)
        while engine.result() is None:
            engine.apply({s: self.answer(bots[s], engine.tick, req) for s, req in engine.pending().items()})
        result = engine.result()
        assert result is not None
        return result.winner


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
