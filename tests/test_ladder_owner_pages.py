"""An owner's side of a community ladder on the pages of a real `ladder web --signup` (issue 29): a
paused bot with its reason and the failed matches behind it, Resume (and a ban that only the host
lifts), the challenge form with its quota, the refuse-challenges toggle; and the community API
taken with the owner's session (cookie, CSRF header, Origin) for their own bots only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cellarena_cli import run_here
from ladder_pages import Browser, Pages, ladder_pages

from cellarena.arena.ladder.policy import CommunityPolicy
from cellarena.arena.ladder.records import BotRecord, SeatResult
from cellarena.arena.ladder.scoring.settlement import settle
from cellarena.arena.ladder.store.ladder_store import LadderStore

PASSWORD = "correct horse battery"
WON = {"cause": "last_player_standing", "tick": 3}


def signed_up(pages: Pages, name: str, bot: str) -> Browser:
    browser = Browser(pages)
    browser.get("/signup")
    assert browser.post("/signup", {"name": name, "password": PASSWORD}).status == 303
    browser.get("/account")
    assert browser.post("/account/bots", {"name": bot}).status == 200
    browser.get("/account")
    return browser


def store_of(pages: Pages) -> LadderStore:
    return LadderStore(pages.folder / "ladder.sqlite", create=False)


def crash(store: LadderStore, me: BotRecord, other: BotRecord, tick: int) -> int:
    """A match that ``me`` lost by crashing at ``tick``: a failure."""
    match_id = store.begin_match("rezzo", "arena", tick, [me.id, other.id])
    cause = {"cause": "exited", "tick": tick, "text": f"{me.name} exited with status 3 at tick {tick}"}
    store.finish_match(
        match_id, [SeatResult(2, cause=cause), SeatResult(1, cause=WON)], reason="r", ticks=20, settle=settle
    )
    return match_id


def bot(store: LadderStore, name: str) -> BotRecord:
    found = store.bot(name)
    assert found is not None
    return found


def test_a_paused_bot_shows_why_and_its_owner_resumes_it_but_not_a_ban(tmp_path: Path) -> None:
    with ladder_pages(tmp_path, "--signup", "open") as pages:
        browser = signed_up(pages, "ann", "annbot")
        with store_of(pages) as store:
            rival, _ = store.add_bot("rival", "rezzo")
            crashed = [crash(store, bot(store, "annbot"), rival, t) for t in range(1, 6)]
            assert bot(store, "annbot").paused == "5 failed matches in a row, the last one exited"
        page = browser.get("/account")
        assert "<strong>Paused</strong>: 5 failed matches in a row, the last one exited" in page.body
        assert "The failed matches behind the pause (5)" in page.body
        for tick, match_id in enumerate(crashed, 1):
            assert f'href="/matches/{match_id}"' in page.body
            assert f"annbot exited with status 3 at tick {tick}" in page.body
        assert 'href="/bots/annbot/stats#head-to-head"' in page.body
        assert 'href="/bots/annbot/stats#versions"' in page.body
        stats = browser.get("/bots/annbot/stats")
        assert 'id="head-to-head"' in stats.body and 'id="versions"' in stats.body

        assert browser.post("/account/bots/annbot/resume", {}, csrf=None).status == 403
        assert browser.post("/account/bots/annbot/resume", {}, origin="https://evil.example").status == 403
        with store_of(pages) as store:
            assert bot(store, "annbot").paused is not None
        done = browser.post("/account/bots/annbot/resume", {"back": "bot"})
        assert done.status == 303 and done.headers["location"] == "/account/bots/annbot"
        with store_of(pages) as store:
            resumed = bot(store, "annbot")
            assert resumed.paused is None and resumed.failures == 0
            entry = store.audit_log()[0]
            assert (entry.actor, entry.action, entry.bot) == ("ann (owner)", "resume", "annbot")
            store.ban("annbot", "plays a copy of another bot", actor="host (cli)")
        own = browser.get("/account/bots/annbot")
        assert (
            own.status == 200
            and "<strong>Banned</strong> by the ladder's host: plays a copy of another bot" in own.body
        )
        assert "Only the host lifts a ban" in own.body and "Resume annbot" not in own.body
        refused = browser.post("/account/bots/annbot/resume", {"back": "bot"})
        assert refused.status == 409 and "banned by the ladder&#39;s host" in refused.body
        # Another owner's bot is not theirs to resume.
        with store_of(pages) as store:
            store.pause("rival", "by hand")
        assert browser.get("/account").status == 200
        other = browser.post("/account/bots/rival/resume", {})
        assert other.status == 400 and "you have no bot named &#39;rival&#39;" in other.body
        with store_of(pages) as store:
            assert bot(store, "rival").paused == "by hand"


def test_the_challenge_form_its_quota_and_refusing_challenges(tmp_path: Path) -> None:
    with ladder_pages(tmp_path, "--signup", "open") as pages:
        with store_of(pages) as store:
            store.set_policy(CommunityPolicy(challenges_per_day=2, challenges_rated=True))
            store.add_bot("rival", "rezzo")
            store.add_bot("third", "rezzo")
        browser = signed_up(pages, "ann", "annbot")
        page = browser.get("/account")
        assert "2 of 2 challenges left in the last 24 hours" in page.body
        assert "challenges are rated on this ladder" in page.body
        assert '<option value="rival">' in page.body and '<option value="annbot">' not in page.body
        made = browser.post("/account/bots/annbot/challenge", {"opponent": "rival"})
        assert made.status == 303 and made.headers["location"] == "/account"
        page = browser.get("/account")
        assert "1 of 2 challenges left" in page.body
        assert "<td>annbot</td><td>rival</td><td>yes</td><td>pending</td>" in page.body
        unknown = browser.post("/account/bots/annbot/challenge", {"opponent": "nobody"})
        assert unknown.status == 409 and "there is no bot named &#39;nobody&#39;" in unknown.body
        empty = browser.post("/account/bots/annbot/challenge", {"opponent": " "})
        assert empty.status == 400 and "give the opponent" in empty.body
        assert browser.post("/account/bots/annbot/challenge", {"opponent": "third"}).status == 303
        browser.get("/account/bots/annbot")
        over = browser.post("/account/bots/annbot/challenge", {"opponent": "rival", "back": "bot"})
        assert over.status == 429 and "--challenges-per-day 2" in over.body and "0 of 2" in over.body

        assert "annbot accepts challenges" in browser.get("/account").body
        off = browser.post("/account/bots/annbot/challenges", {"refuse": "1"})
        assert off.status == 303
        page = browser.get("/account")
        assert "annbot refuses challenges" in page.body and "Accept challenges" in page.body
        with store_of(pages) as store:
            assert bot(store, "annbot").refuses_challenges
            actions = [(e.actor, e.action) for e in store.audit_log()[:2]]
            assert actions == [("ann (owner)", "refuse challenges"), ("ann (owner)", "challenge")]
        assert browser.post("/account/bots/annbot/challenges", {"refuse": "0"}).status == 303
        with store_of(pages) as store:
            assert not bot(store, "annbot").refuses_challenges


def api(browser: Browser, path: str, body: dict[str, Any], **headers: str | None) -> tuple[int, dict]:
    sent = {"content-type": "application/json", "origin": browser.pages.url, "x-csrf-token": browser.csrf}
    for k, v in headers.items():
        key = k.replace("_", "-")
        if v is None:
            sent.pop(key, None)
        else:
            sent[key] = v
    answer = browser.request(path, json.dumps(body).encode(), sent)
    return answer.status, json.loads(answer.body)


def test_the_api_takes_an_owners_session_for_their_own_bots_only(tmp_path: Path) -> None:
    with ladder_pages(tmp_path, "--signup", "open") as pages:
        ann = signed_up(pages, "ann", "annbot")
        ben = signed_up(pages, "ben", "benbot")
        with store_of(pages) as store:
            store.pause("annbot", "by hand")
        ann.get("/account")
        status, body = api(ann, "/api/bots/annbot/resume", {})
        assert status == 200 and body == {"bot": "annbot", "paused": None, "resumed": True}, body
        status, body = api(ann, "/api/challenges", {"bot": "annbot", "opponent": "benbot"})
        assert status == 201 and body["challenger"] == "annbot", body
        with store_of(pages) as store:
            store.pause("benbot", "by hand")
        status, body = api(ann, "/api/bots/benbot/resume", {})
        assert status == 403 and "'benbot' is not one of ann's bots" in body["error"]
        status, body = api(ann, "/api/challenges", {"bot": "benbot", "opponent": "annbot"})
        assert status == 403 and "own bots only" in body["error"]
        status, body = api(ann, "/api/challenges", {"opponent": "benbot"})
        assert status == 400 and '{"bot": "NAME"' in body["error"]
        status, body = api(ann, "/api/bots/benbot/challenges", {"refuse": True})
        assert status == 403
        status, body = api(ann, "/api/bots/annbot/challenges", {"refuse": True})
        assert status == 200 and body["refuses_challenges"] is True
        # The cookie alone is not enough: the CSRF header and this site's origin go with it.
        status, body = api(ann, "/api/bots/annbot/challenges", {"refuse": False}, x_csrf_token=None)
        assert status == 403 and "X-CSRF-Token" in body["error"]
        status, body = api(ann, "/api/bots/annbot/challenges", {"refuse": False}, x_csrf_token=ben.csrf)
        assert status == 403
        status, body = api(
            ann, "/api/bots/annbot/challenges", {"refuse": False}, origin="https://evil.example"
        )
        assert status == 403 and "another site" in body["error"]
        stranger = Browser(pages)
        status, body = api(stranger, "/api/bots/annbot/resume", {})
        assert status == 401 and "Authorization: Bearer" in body["error"]
        with store_of(pages) as store:
            assert bot(store, "benbot").paused == "by hand" and bot(store, "annbot").refuses_challenges
            assert [(e.actor, e.action) for e in store.audit_log()[:3]] == [
                ("ann (owner)", "refuse challenges"),
                ("ann (owner)", "challenge"),
                ("ann (owner)", "resume"),
            ]
        # A logged-out session is no session, with or without its CSRF token.
        csrf = ann.csrf
        ann.post("/logout", {})
        ann.csrf = csrf
        status, body = api(ann, "/api/bots/annbot/challenges", {"refuse": False})
        assert status == 401


def test_an_admin_the_host_names_approves_owners_pauses_bans_and_reads_the_audit_log(
    tmp_path: Path,
) -> None:
    where = ("ladder", "--dir", str(tmp_path))
    with ladder_pages(tmp_path, "--signup", "approval") as pages:
        for name in ("ann", "cy"):
            browser = Browser(pages)
            browser.get("/signup")
            assert browser.post("/signup", {"name": name, "password": PASSWORD}).status == 200
        assert run_here(*where, "owner", "approve", "ann").returncode == 0
        ann = Browser(pages)
        ann.get("/login")
        assert ann.post("/login", {"name": "ann", "password": PASSWORD}).status == 303
        refused = ann.get("/admin")
        assert refused.status == 403 and "cellarena ladder owner admin NAME" in refused.body
        with store_of(pages) as store:
            store.add_bot("rival", "rezzo")
        made = run_here(*where, "owner", "admin", "ann")
        assert made.returncode == 0 and "ann is now an admin" in made.stdout
        assert 'href="/admin"' in ann.get("/account").body
        page = ann.get("/admin")
        assert page.status == 200 and "Approve cy" in page.body

        assert ann.post("/admin/approve", {"name": "cy"}, csrf=None).status == 403
        assert ann.post("/admin/approve", {"name": "cy"}).status == 303
        assert ann.post("/admin/ban", {"name": "rival", "reason": ""}).status == 400
        assert ann.post("/admin/ban", {"name": "rival", "reason": "copies another bot"}).status == 303
        assert ann.post("/admin/pause", {"name": "nobody", "reason": "x"}).status == 400
        page = ann.get("/admin")
        assert "Unban rival" in page.body and "copies another bot" in page.body
        assert ann.post("/admin/unban", {"name": "rival"}).status == 303
        assert ann.post("/admin/pause", {"name": "rival", "reason": "leaks memory"}).status == 303
        assert ann.post("/admin/resume", {"name": "rival"}).status == 303
        with store_of(pages) as store:
            rival = bot(store, "rival")
            assert rival.paused is None and rival.banned is None
            log = [(e.actor, e.action, e.bot, e.detail) for e in store.audit_log()]
        assert log[:6] == [
            ("ann (admin)", "resume", "rival", None),
            ("ann (admin)", "pause", "rival", "leaks memory"),
            ("ann (admin)", "unban", "rival", None),
            ("ann (admin)", "ban", "rival", "copies another bot"),
            ("ann (admin)", "approve owner", None, "cy"),
            (log[5][0], "make admin", None, "ann"),
        ]
        assert log[5][0].endswith("(cli)") and log[6][1:] == ("approve owner", None, "ann")
        audit = ann.get("/admin").body
        assert "ann (admin)" in audit and "leaks memory" in audit

        # No longer an admin: the pages refuse at once.
        removed = run_here(*where, "owner", "admin", "ann", "--remove", "--json")
        assert removed.returncode == 0 and json.loads(removed.stdout) == {"name": "ann", "admin": False}
        assert ann.get("/admin").status == 403
        assert ann.post("/admin/pause", {"name": "rival", "reason": "x"}).status == 403


def test_an_owner_pauses_and_resumes_their_bot_its_pages_say_paused_and_a_void_says_why(
    tmp_path: Path,
) -> None:
    """Issue 42: owners could not pause their own bot; a paused bot's header still said active; a
    match voided by a restart showed an empty "why it ended"."""
    from cellarena.arena.ladder.store.match_tables import VOID_ON_START

    with ladder_pages(tmp_path, "--signup", "open") as pages:
        browser = signed_up(pages, "ann", "annbot")
        with store_of(pages) as store:
            rival, _ = store.add_bot("rival", "rezzo")
            voided = store.begin_match("rezzo", "arena", 7, [bot(store, "annbot").id, rival.id])
            store.void_match(voided, VOID_ON_START)
        page = browser.get("/account")
        assert "<span class=bot-status>active</span>" in page.body
        assert f"void: {VOID_ON_START}" in page.body

        browser.get("/account/bots/annbot")
        paused = browser.post("/account/bots/annbot/pause", {"back": "bot"})
        assert paused.status == 303 and paused.headers["location"] == "/account/bots/annbot"
        with store_of(pages) as store:
            assert bot(store, "annbot").paused == "paused by its owner"
            assert (store.audit_log()[0].actor, store.audit_log()[0].action) == ("ann (owner)", "pause")
        page = browser.get("/account/bots/annbot")
        assert "<span class=bot-status>paused</span>" in page.body
        assert "<strong>Paused</strong>: paused by its owner" in page.body and "Resume annbot" in page.body
        assert ">Pause</button>" not in page.body
        assert "paused: paused by its owner" in browser.get("/bots/annbot").body  # its public page

        assert browser.post("/account/bots/annbot/resume", {"back": "bot"}).status == 303
        page = browser.get("/account/bots/annbot")
        assert "<span class=bot-status>active</span>" in page.body and ">Pause</button>" in page.body
        with store_of(pages) as store:
            assert bot(store, "annbot").paused is None
