"""A replay as the dataset's rows: one per seat and tick record, rebuilt by re-simulation.

A replay keeps each tick's moves and state hash, not what the seats were sent; so the match is played
again through its engine (as `cellarena.server.replay.verify` does, checking every hash on the way),
and each seat's observation is the engine's ``pending()`` request, the very map the match server
sends in its ``tick`` message. Debug drawings and bots' log lines are never read, so never exported.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from cellarena.sdk.protocol import outcome_of
from cellarena.server.dataset.views import fixed_view
from cellarena.server.games.registry import plugin
from cellarena.server.replay import Replay, ReplayError, _hasher, _rebuild

#: Outcome rewards, as the training environments give them at a match's end.
REWARDS = {"win": 1.0, "loss": -1.0, "draw": 0.0}


@dataclass(frozen=True)
class MatchInfo:
    """What a replay alone does not hold: the match's name in the dataset and, from a ladder, each
    seat's bot, version and rating before the match (None: the replay's names, unknown)."""

    match: str
    bots: Sequence[str] | None = None
    versions: Sequence[str | None] | None = None
    ratings: Sequence[tuple[float, float] | None] | None = None


def _fail(replay: Replay, where: str) -> ReplayError:
    return ReplayError(
        f"{replay.path}: does not re-simulate ({where}); nothing of it is exported. "
        "`cellarena replay verify` says more"
    )


def _outcomes(replay: Replay) -> list[tuple[int | None, str | None, str | None]]:
    """Each seat's (rank, outcome, cause kind); all None for a replay without its result."""
    if not replay.complete or replay.result is None:
        return [(None, None, None)] * replay.players
    ranks = {int(k): int(v) for k, v in replay.result["ranks"].items()}
    order = [ranks.get(s, replay.players) for s in range(replay.players)]
    causes = replay.causes()
    return [
        (order[s], outcome_of(order[s], order), causes.get(s, {}).get("cause")) for s in range(replay.players)
    ]


def _pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def _match_columns(replay: Replay, info: MatchInfo) -> dict[str, list[Any]]:
    """The columns that are the match's or the seat's, the same in every row: one entry per seat."""
    n = replay.players
    bots = list(info.bots) if info.bots is not None else replay.names
    versions = list(info.versions) if info.versions is not None else [None] * n
    ratings = list(info.ratings) if info.ratings is not None else [None] * n
    if not len(bots) == len(versions) == len(ratings) == n:
        raise ReplayError(f"{replay.path}: {n} seats, but the match's record names {len(bots)} bots")
    map_name = replay.config.get("map")
    outcomes = _outcomes(replay)
    return {
        "bot": bots,
        "version": versions,
        "rating_mu": [None if r is None else float(r[0]) for r in ratings],
        "rating_sigma": [None if r is None else float(r[1]) for r in ratings],
        "map": [map_name if isinstance(map_name, str) else None] * n,
        "seed": [replay.seed] * n,
        "players": [n] * n,
        "rules": [replay.rules] * n,
        "rank": [o[0] for o in outcomes],
        "outcome": [o[1] for o in outcomes],
        "cause": [o[2] for o in outcomes],
    }


def match_rows(replay: Replay, info: MatchInfo) -> dict[str, list[Any]]:
    """The dataset's columns for ``replay`` (every field of `fields.FIELDS`), rows by tick, then seat.
    A replay that does not re-simulate is a ReplayError, and nothing of it is kept."""
    engine = _rebuild(replay)
    state_hash = _hasher(engine, replay)
    if engine.tick != replay.start_tick or state_hash() != replay.header["start_hash"]:
        raise _fail(replay, "its starting state differs")
    per_seat = _match_columns(replay, info)
    terms = plugin(replay.game).reward_terms_of(engine)  # the game's own, if it has any (Rezzo)
    players = range(replay.players)
    cols: dict[str, list[Any]] = {
        k: []
        for k in (
            "tick", "seat", "observation", "action", "late", "invalid", "events", "reward_terms",
            "view", "view_shape", "agents",
        )
    }  # fmt: skip
    for rec in replay.ticks:
        if engine.result() is not None or engine.tick != rec.tick:
            raise _fail(replay, f"tick {rec.tick} is not a decision point of the match")
        requests = engine.pending()
        try:
            log = engine.apply(rec.moves).log
        except Exception as exc:  # a replay is untrusted input: say so, never crash
            raise _fail(replay, f"tick {rec.tick}'s moves: {type(exc).__name__}: {exc}") from None
        if state_hash() != rec.hash:
            raise _fail(replay, f"the state hash differs at tick {rec.tick}")
        seat_terms = terms.after(engine, log) if terms is not None else [None] * replay.players
        events = json.dumps(log, separators=(",", ":"), default=repr)
        for s in players:
            cols["tick"].append(rec.tick)
            cols["seat"].append(s)
            cols["observation"].append(_pack(requests[s]) if s in requests else None)
            cols["action"].append(_pack(rec.moves[s]) if s in rec.moves else None)
            cols["late"].append(rec.late.get(s, 0))
            cols["invalid"].append(rec.invalid.get(s, 0))
            cols["events"].append(events)
            cols["reward_terms"].append(seat_terms[s])
            _add_view(cols, replay, rec.tick, requests.get(s))
    return _with_outcome(cols, per_seat, len(replay.ticks), replay.players)


def _add_view(cols: dict[str, list[Any]], replay: Replay, tick: int, request: Any) -> None:
    """The ``view``, ``view_shape`` and ``agents`` of one row: the request as numbers (fields.py)."""
    try:
        # The server adds the tick to the engine's request; the SDK's View wants it.
        fixed = None if request is None else fixed_view(replay.game, {"tick": tick, **request})
    except ValueError as exc:  # the engine made it, so only a changed engine gets here
        raise _fail(replay, f"tick {tick}'s request does not decode: {exc}") from None
    cols["view"].append(None if fixed is None else fixed.cells.reshape(-1))
    cols["view_shape"].append(None if fixed is None else list(fixed.cells.shape))
    cols["agents"].append(None if fixed is None else fixed.agents)


def _with_outcome(
    cols: dict[str, list[Any]], per_seat: dict[str, list[Any]], ticks: int, players: int
) -> dict[str, list[Any]]:
    """Add the per-seat columns to every row, and the outcome reward and ``done`` to each seat's last."""
    for name, values in per_seat.items():
        cols[name] = values * ticks
    last = (ticks - 1) * players
    done = [False] * (ticks * players)
    reward = [0.0] * (ticks * players)
    for s, outcome in enumerate(per_seat["outcome"]):
        if outcome is not None and ticks:
            done[last + s] = True
            reward[last + s] = REWARDS[outcome]
    cols["done"], cols["reward"] = done, reward
    return cols
