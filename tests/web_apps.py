"""The web apps of cellarena, built as their commands build them, over small data made here: for the
tests that send them requests in this process (`asgi_calls.call`)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cellarena.arena.ladder.scoring.settlement import settle
from cellarena.arena.ladder.store.ladder_store import LadderStore, SeatResult
from cellarena.arena.ladder.web.app import ladder_app
from cellarena.arena.ladder.web.owner_guard import AccountSettings
from cellarena.arena.ladder.web.submission_pages import SubmissionSettings
from cellarena.server.net.trusted_proxies import TrustedProxies
from cellarena.server.web.hosts import AllowedHosts

FIXTURES = Path(__file__).parent / "fixtures" / "replays_v1"
#: A small replay (two seats, a few dozen ticks): quick to re-simulate.
REPLAY = FIXTURES / "cloth.replay"
GAME = "cloth"
#: What the commands allow on a loopback bind with no --allowed-host.
LOOPBACK, _ = AllowedHosts.for_server("127.0.0.1", ())


@dataclass
class Ladder:
    app: Any
    store: LadderStore
    tokens: dict[str, str]
    #: Match 1: finished, its replay a copy of `REPLAY` in the ladder's folder. Match 2: a damaged replay.
    replay: Path
    damaged: Path


def ladder(folder: Path, *, allowed: AllowedHosts | None = LOOPBACK, trusted: str | None = None) -> Ladder:
    """`ladder web cloth --signup open --live-port ...` over a database of two bots and two matches."""
    store = LadderStore(folder / "ladder.sqlite")
    bots = {name: store.add_bot(name, GAME) for name in ("alice", "bob")}
    ids = [b.id for b, _ in bots.values()]
    replay = folder / "replays" / "m1.replay"
    replay.parent.mkdir()
    shutil.copy(REPLAY, replay)
    damaged = folder / "replays" / "m2.replay"
    damaged.write_bytes(b'{"type": "header", "version": 1}\nnot json\n')
    for path in (replay, damaged):
        number = store.begin_match(GAME, None, 7, ids)
        store.finish_match(
            number, [SeatResult(1), SeatResult(2)], reason="test", ticks=30, replay=str(path), settle=settle
        )
    settings = AccountSettings(
        policy="open",
        key=b"k" * 32,
        trusted=TrustedProxies.parse([trusted] if trusted else []),
        allowed_hosts=allowed,
    )
    app, _ = ladder_app(
        store, [GAME], allowed_hosts=allowed, live=True, accounts=settings, trusted=settings.trusted,
        submissions=SubmissionSettings(folder / "archives"),
    )  # fmt: skip
    return Ladder(app, store, {n: t.secret for n, (_, t) in bots.items()}, replay, damaged)
