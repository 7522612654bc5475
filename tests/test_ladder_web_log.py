"""`ladder web`'s log (issue 42, point 5): one line in `serve`'s format for each thing owners and admins
do on the pages (sign-ups, logins and failed ones, resets, bots made, tokens renewed, challenges,
revokes, admin actions), without -v; and never a password, token or reset code in it."""

from __future__ import annotations

import re
from pathlib import Path

from ladder_pages import Browser, ladder_pages

from cellarena.arena.ladder.accounts.owners import Accounts
from cellarena.arena.ladder.store.ladder_store import LadderStore

PASSWORD = "correct horse battery"
NEW_PASSWORD = "a brand new passphrase"
TOKEN = re.compile(r"<code id=token class=token>([^<]+)</code>")
#: `configure_logging`'s format, `ladder serve`'s.
LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING) ladder web: ")


def test_owners_and_admins_actions_are_logged_without_a_secret(tmp_path: Path) -> None:
    secrets = [PASSWORD, NEW_PASSWORD, "wrong password!"]
    with ladder_pages(tmp_path, "--signup", "open") as pages:
        with LadderStore(tmp_path / "ladder.sqlite", create=False) as store:
            store.add_bot("rival", "rezzo")
        ann = Browser(pages)
        ann.get("/signup")
        assert ann.post("/signup", {"name": "ann", "password": PASSWORD}).status == 303
        ann.get("/account")
        made = ann.post("/account/bots", {"name": "annbot"})
        secrets += TOKEN.findall(made.body)
        ann.get("/account")
        renewed = ann.post("/account/bots/annbot/rotate", {})
        secrets += TOKEN.findall(renewed.body)
        ann.get("/account")
        assert ann.post("/account/bots/annbot/challenge", {"opponent": "rival"}).status == 303
        assert ann.post("/account/bots/annbot/challenges", {"refuse": "1"}).status == 303

        intruder = Browser(pages)
        intruder.get("/login")
        assert intruder.post("/login", {"name": "ann", "password": "wrong password!"}).status == 401
        with LadderStore(tmp_path / "ladder.sqlite", create=False) as store:
            code = Accounts(store).make_reset_code("ann")  # as `ladder owner reset` makes it
        secrets.append(code)
        again = Browser(pages)
        again.get("/reset")
        fields = {"name": "ann", "code": code, "password": NEW_PASSWORD}
        assert again.post("/reset", fields).status == 303
        again.get("/login")
        assert again.post("/login", {"name": "ann", "password": NEW_PASSWORD}).status == 303
        with LadderStore(tmp_path / "ladder.sqlite", create=False) as store:
            Accounts(store).set_admin("ann", True, actor="host (cli)")
        again.get("/admin")
        assert again.post("/admin/pause", {"name": "rival", "reason": "leaks memory"}).status == 303
        again.get("/account")
        assert again.post("/account/bots/annbot/revoke", {"confirm": "yes"}).status == 303

        with LadderStore(tmp_path / "ladder.sqlite", create=False) as store:  # the bot is told who renewed
            renewals = [(e.actor, e.bot) for e in store.audit_log() if e.action == "rotate"]
            assert renewals == [("ann (owner)", "annbot")]
        pages.proc.terminate()
        pages.proc.wait(timeout=30)
        err = pages.stderr()
    assert len(secrets) == 6 and all(secrets), secrets  # two tokens and the code were found
    for secret in secrets:
        assert secret not in err, f"a secret in the log:\n{err}"
    lines = [line for line in err.splitlines() if "ladder web: " in line]
    assert all(LINE.match(line) for line in lines), lines
    said = [LINE.sub("", line).split(" (from ")[0] for line in lines]
    assert said == [
        "ann signed up (active)",
        "ann made bot annbot (rezzo)",
        "ann renewed the token of bot annbot",
        "ann challenged 'rival' with bot annbot",
        "ann set bot annbot: refuses challenges",
        "'ann' logging in refused: wrong name or password",
        "ann set a new password with the host's reset code",
        "ann logged in",
        "ann (admin) pause bot rival (leaks memory)",
        "ann revoked bot annbot",
    ], lines
    assert all(line.endswith("(from 127.0.0.1)") for line in lines), lines
