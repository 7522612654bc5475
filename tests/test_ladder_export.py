"""`cellarena ladder export` and the owners' opt-out (issue 45, point 3): the ladder's finished matches
as the dataset, with the database's bots, versions and ratings, leaving out whole every match of a
bot whose owner keeps it out of datasets; the opt-out's migration and its read and write on SQLite
and PostgreSQL (`ladder_db`), and its toggle on the owner's bot page (in-process, CSRF as the form)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pyarrow.dataset as ds
import pytest
from asgi_calls import Answer, call
from cellarena_cli import here
from web_apps import ladder

from cellarena.arena.ladder.records import SeatResult
from cellarena.arena.ladder.scoring.settlement import settle
from cellarena.arena.ladder.store.ladder_store import LadderStore, UnknownBotError
from cellarena.arena.ladder.store.schema import MIGRATIONS
from cellarena.server.dataset.fields import partitioning
from cellarena.server.replay import read_replay

#: The cheapest replay to re-simulate: four ticks of cloth, two seats.
REPLAY = Path(__file__).parent / "fixtures" / "replays_v1" / "cloth.replay"
TICKS = len(read_replay(REPLAY).ticks)
PARTITIONING = partitioning()
OPT_OUT = ("ALTER TABLE bots ADD COLUMN keep_out_of_datasets BOOLEAN NOT NULL DEFAULT FALSE",)


def where(ladder_db: str, tmp_path: Path) -> tuple[list[str], str]:
    """The `ladder` group's options for this database, and what LadderStore opens."""
    if ladder_db.startswith("postgresql"):
        return ["--dir", str(tmp_path / "ladder"), "--db", ladder_db], ladder_db
    return ["--dir", str(tmp_path / "ladder")], str(tmp_path / "ladder" / "ladder.sqlite")


def load(out: Path) -> Any:
    return ds.dataset(out, format="parquet", partitioning=PARTITIONING, ignore_prefixes=["README"])


def export(options: list[str], out: Path) -> tuple[int, dict[str, Any]]:
    ran = here("ladder", *options, "export", "--out", str(out), "--json")
    return ran.exit_code, json.loads(ran.output.splitlines()[-1])


def test_the_opt_out_is_one_migration_off_by_default_and_audited(ladder_db: str) -> None:
    assert [m.statements for m in MIGRATIONS if "keep_out_of_datasets" in " ".join(m.statements)] == [OPT_OUT]
    with LadderStore(ladder_db) as store:
        ann, _ = store.add_bot("ann", "cloth")
        store.add_bot("ben", "cloth")
        assert store.kept_out_of_datasets() == set()
        store.keep_out_of_datasets("ann", True, actor="ann (owner)")
        assert store.kept_out_of_datasets() == {ann.id}
        entry = store.audit_log()[0]
        assert (entry.actor, entry.action, entry.bot) == ("ann (owner)", "keep out of datasets", "ann")
        store.keep_out_of_datasets("ann", False)
        assert store.kept_out_of_datasets() == set()
        with pytest.raises(UnknownBotError, match="nobody"):
            store.keep_out_of_datasets("nobody", True)


def play(store: LadderStore, folder: Path, names: list[str], *, replay: bool = True) -> int:
    bots = [store.bot(n) for n in names]
    ids = [b.id for b in bots if b is not None]
    match_id = store.begin_match("cloth", None, 7, ids, versions=[f"{n}-v2" for n in names])
    path = folder / f"ladder-{match_id:06d}.replay"
    if replay:
        shutil.copy(REPLAY, path)
    store.finish_match(
        match_id, [SeatResult(1), SeatResult(2)], reason="r", ticks=TICKS, replay=str(path), settle=settle
    )
    return match_id


def test_the_export_leaves_out_the_matches_of_opted_out_bots(ladder_db: str, tmp_path: Path) -> None:
    options, target = where(ladder_db, tmp_path)
    replays = tmp_path / "ladder" / "replays"
    replays.mkdir(parents=True)
    with LadderStore(target) as store:
        for name in ("ann", "ben", "cy"):
            store.add_bot(name, "cloth")
        kept = [play(store, replays, ["ann", "ben"]), play(store, replays, ["ben", "ann"])]
        with_cy = [play(store, replays, ["ann", "cy"]), play(store, replays, ["cy", "ben"])]
        play(store, replays, ["ben", "ann"], replay=False)
        store.begin_match("cloth", None, 8, [b.id for b in store.list_bots("cloth")[:2]])  # running
        store.keep_out_of_datasets("cy", True)
        seats = {m: store.match(m).seats for m in kept}  # type: ignore[union-attr]
    code, said = export(options, tmp_path / "out")
    assert code == 0, said
    assert said["matches"] == 2 and said["rows"] == 2 * 2 * TICKS
    assert said["left_out"] == {"opted_out": 2, "no_replay": 1, "unreadable": 0}
    rows = load(tmp_path / "out").to_table().to_pylist()
    assert {r["match"] for r in rows} == {f"ladder-{m:06d}" for m in kept}
    assert "cy" not in {r["bot"] for r in rows}
    for r in rows:
        seat = seats[int(r["match"].removeprefix("ladder-"))][r["seat"]]
        assert r["bot"] == seat.bot and r["version"] == f"{seat.bot}-v2"
        assert seat.before is not None and (r["rating_mu"], r["rating_sigma"]) == (
            seat.before.mu,
            seat.before.sigma,
        )
    card = (tmp_path / "out" / "README.md").read_text()
    assert "Left out: 2 matches with a bot whose owner keeps its matches out of datasets" in card
    assert "Made by `cellarena ladder export`" in card
    # Let back in: every match with a replay is exported.
    with LadderStore(target) as store:
        store.keep_out_of_datasets("cy", False)
    code, said = export(options, tmp_path / "again")
    assert code == 0 and said["matches"] == 4 and said["left_out"]["opted_out"] == 0
    again = load(tmp_path / "again").to_table(columns=["match"]).to_pylist()
    assert {r["match"] for r in again} == {f"ladder-{m:06d}" for m in kept + with_cy}
    # An out folder with files in it is refused, and left as it was.
    code, said = export(options, tmp_path / "out")
    assert code == 1 and "out: exists and is not empty" in said["error"]


def test_export_of_a_ladder_that_is_not_there_says_so(tmp_path: Path) -> None:
    ran = here("ladder", "--dir", str(tmp_path / "none"), "export", "--out", str(tmp_path / "o"))
    assert ran.exit_code == 1 and "ladder.sqlite: no ladder database there" in ran.output
    assert not (tmp_path / "o").exists()
    ran = here("ladder", "--dir", str(tmp_path), "export", "--out", "o", "--game", "nope")
    assert ran.exit_code == 2 and "Invalid value for --game: unknown game 'nope'" in ran.output


CSRF = re.compile(r'name=csrf value="([^"]+)"')


class Owner:
    """An owner's browser in this process: its cookies and the last page's CSRF field."""

    def __init__(self, app: Any) -> None:
        self.app, self.cookies, self.csrf = app, {}, ""

    async def go(
        self, method: str, path: str, fields: dict[str, str] | None = None, csrf: bool = True
    ) -> Answer:
        headers = [(b"cookie", "; ".join(f"{k}={v}" for k, v in self.cookies.items()).encode())]
        body = b""
        if fields is not None:
            body = urlencode({**fields, **({"csrf": self.csrf} if csrf else {})}).encode()
            headers += [
                (b"content-type", b"application/x-www-form-urlencoded"),
                (b"origin", b"http://127.0.0.1:8080"),
            ]
        answer = await call(self.app, method, path, headers=headers, body=body)
        if "set-cookie" in answer.headers:
            name, _, rest = answer.headers["set-cookie"].partition("=")
            self.cookies[name] = rest.split(";")[0]
        if found := CSRF.search(answer.text):
            self.csrf = found.group(1)
        return answer


async def test_the_owner_keeps_their_bot_out_of_datasets_on_its_page(tmp_path: Path) -> None:
    site = ladder(tmp_path)
    ann = Owner(site.app)
    await ann.go("GET", "/signup")
    assert (
        await ann.go("POST", "/signup", {"name": "ann", "password": "correct horse battery"})
    ).status == 303
    await ann.go("GET", "/account")
    assert (await ann.go("POST", "/account/bots", {"name": "annbot", "game": "cloth"})).status == 200
    page = await ann.go("GET", "/account/bots/annbot")
    assert "annbot's matches may be in the datasets" in page.text and "Keep out of datasets" in page.text
    forged = await ann.go(
        "POST", "/account/bots/annbot/datasets", {"keep_out": "1", "back": "bot"}, csrf=False
    )
    assert forged.status == 403 and site.store.kept_out_of_datasets() == set()
    done = await ann.go("POST", "/account/bots/annbot/datasets", {"keep_out": "1", "back": "bot"})
    assert done.status == 303 and done.headers["location"] == "/account/bots/annbot"
    annbot = site.store.bot("annbot")
    assert annbot is not None and site.store.kept_out_of_datasets() == {annbot.id}
    page = await ann.go("GET", "/account/bots/annbot")
    assert "annbot's matches are kept out of the datasets" in page.text and "Let them in" in page.text
    assert (await ann.go("POST", "/account/bots/annbot/datasets", {"keep_out": "0"})).status == 303
    assert site.store.kept_out_of_datasets() == set()
    # Only the owner's own bots: another bot's name is refused, and nothing changes.
    assert (await ann.go("POST", "/account/bots/alice/datasets", {"keep_out": "1"})).status in (400, 404)
    assert site.store.kept_out_of_datasets() == set()
    site.store.close()
