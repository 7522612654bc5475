"""Submitting a bot to a real `ladder web --signup open` (issue 41): uploads by the API with the
bot's token, by the owner's page (multipart with its CSRF token) and by `ladder submit`; the
versions, their states and logs, "make live" and a roll back; and each refusal with its status and
reason (a wrong token, another bot's token, another media type, an archive too large, a hostile
archive, the daily quotas of uploads and of build minutes). One server for the whole file."""

from __future__ import annotations

import io
import json
import re
import tarfile
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cellarena_cli import invoke
from ladder_pages import Answer, Browser, Pages, ladder_pages

from cellarena.arena.cli.ladder.submit import pack
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.arena.ladder.submissions.archives import ArchiveStore

PASSWORD = "correct horse battery"
BOT_TOML = b'command = "python bot.py"\n'
TOKEN = re.compile(r"<code id=token class=token>([^<]+)</code>")


def tar_gz(*entries: tuple[str, bytes], link: str | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if link is not None:
            info = tarfile.TarInfo("escape")
            info.type, info.linkname = tarfile.SYMTYPE, link
            tar.addfile(info)
    return buffer.getvalue()


def a_bot(text: str = "print('hi')") -> bytes:
    return tar_gz(("bot.toml", BOT_TOML), ("bot.py", text.encode()))


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pages]:
    with ladder_pages(
        tmp_path_factory.mktemp("ladder"),
        "--signup",
        "open",
        "--uploads-per-day",
        "3",
        "--build-minutes-per-day",
        "5",
        "--signups-per-hour",
        "20",  # more owners sign up here than the default 5
    ) as served:
        yield served


def store_of(pages: Pages) -> LadderStore:
    return LadderStore(pages.folder / "ladder.sqlite", create=False)


def host_bot(pages: Pages) -> tuple[str, str]:
    """A new bot of the host's (no owner), and its token."""
    name = f"h{uuid.uuid4().hex[:8]}"
    with store_of(pages) as store:
        _, token = store.add_bot(name, "rezzo")
    return name, token.secret


def api(
    pages: Pages, path: str, data: bytes | None, token: str | None, kind: str = "application/gzip"
) -> Answer:
    headers = {"content-type": kind}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return Browser(pages).request(path, data, headers)


def validate(pages: Pages, bot: str, number: int) -> None:
    """What the ladder's builder does to a version that builds and passes its validation match."""
    with store_of(pages) as store:
        version = store.versions.version(bot, number)
        assert version is not None
        store.versions.mark(version.id, "building")
        store.versions.mark(version.id, "validating", log_text=f"built version {number}")
        store.versions.mark(version.id, "validated", log_text="validation match: 200 ticks, no fault")


def test_an_upload_with_the_bots_token_is_a_new_version_kept_by_its_hash(pages: Pages) -> None:
    name, token = host_bot(pages)
    data = a_bot()
    first = api(pages, f"/api/bots/{name}/submissions", data, token)
    assert first.status == 201, first.body
    made = json.loads(first.body)
    assert (made["bot"], made["version"], made["state"], made["size"]) == (name, 1, "received", len(data))
    kept = ArchiveStore(pages.folder / "archives").path(made["sha256"], "tar.gz")
    assert kept.read_bytes() == data
    again = json.loads(api(pages, f"/api/bots/{name}/submissions", data, token).body)
    assert again["version"] == 2 and again["sha256"] == made["sha256"]
    assert [p.name for p in kept.parent.iterdir()] == [kept.name]  # the same bytes: one file
    zipped = io.BytesIO()
    with __import__("zipfile").ZipFile(zipped, "w") as z:
        z.writestr("bot.toml", BOT_TOML)
    third = api(pages, f"/api/bots/{name}/submissions", zipped.getvalue(), token, "application/zip")
    assert third.status == 201 and json.loads(third.body)["kind"] == "zip"
    listed = json.loads(api(pages, f"/api/bots/{name}/submissions", None, token).body)
    assert [v["version"] for v in listed["versions"]] == [3, 2, 1] and listed["live"] is None
    assert listed["versions"][0]["build_log"] is None and listed["uploads_left"] == 0


def test_uploads_are_refused_with_their_reason(pages: Pages) -> None:
    name, token = host_bot(pages)
    other, other_token = host_bot(pages)
    path = f"/api/bots/{name}/submissions"
    cases = [
        (api(pages, path, a_bot(), None), 401, "Authorization: Bearer"),
        (api(pages, path, a_bot(), "cla_" + "x" * 43), 401, "no active bot's"),
        (api(pages, path, a_bot(), other_token), 403, f"that token is {other}'s, not {name}'s"),
        (api(pages, path, a_bot(), token, "text/plain"), 415, "application/gzip"),
        (api(pages, path, b"\x1f\x8b" + b"\0" * (16 * 1024 * 1024), token), 413, "over 16384 KB"),
        (api(pages, path, a_bot() + b"", token, "application/zip"), 400, "not a sound .zip"),
        (api(pages, path, tar_gz(("bot.py", b"")), token), 400, "no bot.toml"),
        (
            api(pages, path, tar_gz(("bot.toml", BOT_TOML), link="/etc"), token),
            400,
            "'escape': a symbolic link",
        ),
        (api(pages, path, tar_gz(("bot.toml", BOT_TOML), ("../../evil", b"x")), token), 400, "climb out"),
    ]
    for answer, status, words in cases:
        assert answer.status == status and words in json.loads(answer.body)["error"], (status, answer.body)
    assert not (pages.folder.parent / "evil").exists() and not (pages.folder / "evil").exists()
    # Each upload was checked in a scratch folder beside the archives, and none is left.
    assert all(re.fullmatch("[0-9a-f]{2}", p.name) for p in (pages.folder / "archives").iterdir())
    with store_of(pages) as store:
        assert store.versions_of(name) == []  # nothing refused was recorded


def test_an_owners_daily_quota_is_a_429_saying_when(pages: Pages) -> None:
    name, token = host_bot(pages)
    for n in range(1, 4):  # ladder web --uploads-per-day 3
        assert json.loads(api(pages, "/api/submissions", a_bot(str(n)), token).body)["version"] == n
    refused = api(pages, f"/api/bots/{name}/submissions", a_bot(), token)
    assert refused.status == 429
    assert "uploaded 3 version(s) in the last 24 hours, this ladder's quota of 3" in refused.body
    assert (
        86_000 < int({k.lower(): v for k, v in refused.headers.items()}["retry-after"]) <= 86_400
    )  # the first upload, a day later


def test_a_validated_version_goes_live_and_its_owner_rolls_back_by_the_api(pages: Pages) -> None:
    name, token = host_bot(pages)
    for n in (1, 2):
        api(pages, f"/api/bots/{name}/submissions", a_bot(f"v{n}"), token)
    early = api(pages, f"/api/bots/{name}/submissions/2/live", b"", token)
    assert early.status == 409 and "is received: it cannot become live" in early.body
    validate(pages, name, 1)
    validate(pages, name, 2)
    listed = json.loads(api(pages, f"/api/bots/{name}/submissions", None, token).body)
    assert listed["live"] == 2 and [v["state"] for v in listed["versions"]] == ["live", "retired"]
    assert listed["versions"][0]["validation_log"] == "validation match: 200 ticks, no fault"
    back = api(pages, f"/api/bots/{name}/submissions/1/live", b"", token)
    assert back.status == 200 and json.loads(back.body)["state"] == "live"
    assert api(pages, f"/api/bots/{name}/submissions/9/live", b"", token).status == 404


def multipart(fields: dict[str, str], filename: str, data: bytes) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
        for k, v in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="archive"; filename="{filename}"\r\n'
        f"Content-Type: application/octet-stream\r\n\r\n".encode()
        + data
        + b"\r\n"
    )
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def form_upload(browser: Browser, bot: str, filename: str, data: bytes, csrf: str | None) -> Answer:
    body, kind = multipart({} if csrf is None else {"csrf": csrf}, filename, data)
    return browser.request(
        f"/account/bots/{bot}/versions", body, {"content-type": kind, "origin": browser.pages.url}
    )


def test_the_owners_page_uploads_lists_versions_and_makes_one_live(pages: Pages) -> None:
    browser = Browser(pages)
    browser.get("/signup")
    assert browser.post("/signup", {"name": "ann", "password": PASSWORD}).status == 303
    browser.get("/account")
    made = browser.post("/account/bots", {"name": "annbot"})
    token = TOKEN.search(made.body).group(1)  # type: ignore[union-attr]
    page = browser.get("/account/bots/annbot")
    assert "Submitted versions" in page.body and 'enctype="multipart/form-data"' in page.body
    assert "3 of 3 uploads left" in page.body and "no versions yet" in page.body
    csrf = browser.csrf
    assert form_upload(browser, "annbot", "annbot.tar.gz", a_bot(), None).status == 403
    done = form_upload(browser, "annbot", "annbot.tar.gz", a_bot(), csrf)
    assert done.status == 303 and done.headers["location"] == "/account/bots/annbot#versions"
    refused = form_upload(browser, "annbot", "annbot.tar.gz", tar_gz(("bot.toml", BOT_TOML), link="/"), csrf)
    assert (
        refused.status == 400 and "archive refused: entry &#39;escape&#39;: a symbolic link" in refused.body
    )
    assert form_upload(browser, "annbot", "annbot.rar", b"x", csrf).status == 415
    # The API with the bot's token counts against the same owner's quota.
    assert api(pages, "/api/submissions", a_bot("2"), token).status == 201
    page = browser.get("/account/bots/annbot")
    assert "1 of 3 uploads left" in page.body
    states = re.findall(r'<tr data-version="(\d+)"><td>\d+</td><td class=state>(\w+)</td>', page.body)
    assert states == [("2", "received"), ("1", "received")]
    refused = browser.post("/account/bots/annbot/versions/2/live", {"back": "bot"})
    assert refused.status == 409 and "annbot version 2 is received: it cannot become live" in refused.body
    validate(pages, "annbot", 1)
    validate(pages, "annbot", 2)
    page = browser.get("/account/bots/annbot")
    assert "<summary>build log</summary><pre>built version 2</pre>" in page.body
    assert "Roll back to version 1" in page.body
    assert browser.post("/account/bots/annbot/versions/1/live", {"back": "bot"}).status == 303
    page = browser.get("/account/bots/annbot")
    states = re.findall(r'<tr data-version="(\d+)"><td>\d+</td><td class=state>(\w+)</td>', page.body)
    assert states == [("2", "retired"), ("1", "live")]
    # The API with the owner's login: the session cookie, this site's Origin, the page's CSRF header.
    headers = {"content-type": "application/gzip", "origin": pages.url}
    assert browser.request("/api/bots/annbot/submissions", a_bot("3"), headers).status == 403
    by_login = browser.request("/api/bots/annbot/submissions", a_bot("3"), {**headers, "x-csrf-token": csrf})
    assert by_login.status == 201 and json.loads(by_login.body)["version"] == 3
    over = form_upload(browser, "annbot", "annbot.tar.gz", a_bot("4"), csrf)  # ladder web --uploads-per-day 3
    assert over.status == 429 and "this ladder&#39;s quota of 3 (--uploads-per-day)" in over.body, over.body
    assert "the next is possible after" in over.body
    # Another owner's page has no hold on annbot.
    other = Browser(pages)
    other.get("/signup")
    other.post("/signup", {"name": "bea", "password": PASSWORD})
    other.get("/account")
    assert form_upload(other, "annbot", "x.tar.gz", a_bot(), other.csrf).status == 400
    with store_of(pages) as store:
        assert len(store.versions_of("annbot")) == 3
        assert [e.actor for e in store.audit_log(50) if e.action == "upload" and e.bot == "annbot"] == [
            "ann (owner)",
            "annbot (api)",
            "ann (owner)",
        ]


def test_ladder_submit_packs_the_folder_as_new_bot_lays_it_out(
    pages: Pages, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, token = host_bot(pages)
    folder = tmp_path / "mybot"
    files = {"bot.toml": BOT_TOML.decode(), "bot.py": "print(1)\n", "lib/helpers.py": "X = 1\n"}
    left_out = (
        "lib/__pycache__/h.pyc",
        ".git/config",
        "node_modules/x/i.js",
        "target/release/bot",
        ".venv/bin/py",
    )
    files.update({rel: "left out" for rel in left_out})
    files["mybot.token"] = token
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    token_file = tmp_path / "bot.token"
    token_file.write_text(token + "\n")
    monkeypatch.setenv("SSL_CERT_FILE", str(pages.ca))
    code, out = invoke(
        "ladder", "submit", str(folder), "--url", pages.url, "--token-file", str(token_file), "--json"
    )
    assert code == 0, out
    answer = json.loads(out)
    assert (answer["ok"], answer["bot"], answer["version"], answer["state"]) == (True, name, 1, "received")
    data = ArchiveStore(pages.folder / "archives").read(answer["sha256"], "tar.gz")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        assert sorted(tar.getnames()) == ["bot.py", "bot.toml", "lib", "lib/helpers.py"]
    assert pack(folder) == data  # the same files, the same bytes
    code, out = invoke("ladder", "submit", str(folder), "--url", pages.url, "--token-file", str(token_file))
    assert code == 0 and out.startswith(f"{name} version 2: received (")
    (folder / "bot.toml").unlink()
    code, out = invoke("ladder", "submit", str(folder), "--url", pages.url, "--token-file", str(token_file))
    assert code == 1 and "has no bot.toml" in out
    (folder / "bot.toml").write_bytes(b"command = [")
    code, out = invoke("ladder", "submit", str(folder), "--url", pages.url, "--token-file", str(token_file))
    assert (
        code == 1
        and "(HTTP 400): /api/submissions: archive refused: bot.toml refused: bot.toml: not valid TOML" in out
    )
    assert token not in out
    (folder / "bot.toml").write_bytes(BOT_TOML)
    (folder / "link").symlink_to("/etc/passwd")
    code, out = invoke("ladder", "submit", str(folder), "--url", pages.url, "--token-file", str(token_file))
    assert code == 1 and "is a symbolic link: the ladder takes no links" in out


def test_build_minutes_used_up_refuse_uploads_on_the_api_the_page_and_ladder_submit(
    pages: Pages, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    browser = Browser(pages)
    browser.get("/signup")
    assert browser.post("/signup", {"name": "cyd", "password": PASSWORD}).status == 303
    browser.get("/account")
    token = TOKEN.search(browser.post("/account/bots", {"name": "cydbot"}).body).group(1)  # type: ignore[union-attr]
    assert (
        "5.0 of 5 build minutes" in browser.get("/account/bots/cydbot").body
    )  # ladder web --build-minutes-per-day 5
    assert api(pages, "/api/submissions", a_bot(), token).status == 201
    validate(pages, "cydbot", 1)  # built: its build is kept with its duration
    with store_of(pages) as store, store.database.writing("a build of 6 minutes, 2 hours ago") as db:
        ended = (datetime.now(UTC) - timedelta(hours=2)).isoformat(timespec="microseconds")
        version = "SELECT v.id FROM versions v JOIN bots b ON b.id = v.bot_id WHERE b.name = 'cydbot'"
        changed = db.execute(
            f"UPDATE builds SET seconds = 360, ended = ? WHERE version_id = ({version})", (ended,)
        )
        assert changed == 1
    assert json.loads(api(pages, "/api/bots/cydbot/submissions", None, token).body)["build_minutes_left"] == 0
    said = (
        "its owner has used 6.0 build minutes in the last 24 hours, this ladder's quota of 5 "
        "(--build-minutes-per-day); the next upload is possible after "
    )
    refused = api(pages, "/api/bots/cydbot/submissions", a_bot("2"), token)
    assert refused.status == 429 and said in json.loads(refused.body)["error"], refused.body
    wait = int({k.lower(): v for k, v in refused.headers.items()}["retry-after"])
    assert 22 * 3600 - 60 < wait <= 22 * 3600  # when that build leaves the window
    on_page = form_upload(browser, "cydbot", "cydbot.tar.gz", a_bot("2"), browser.csrf)
    assert on_page.status == 429 and "(--build-minutes-per-day)" in on_page.body, on_page.body
    assert "0.0 of 5 build minutes" in browser.get("/account/bots/cydbot").body
    folder = tmp_path / "cydbot"
    folder.mkdir()
    (folder / "bot.toml").write_bytes(BOT_TOML)
    token_file = tmp_path / "bot.token"
    token_file.write_text(token + "\n")
    monkeypatch.setenv("SSL_CERT_FILE", str(pages.ca))
    code, out = invoke("ladder", "submit", str(folder), "--url", pages.url, "--token-file", str(token_file))
    assert code == 1 and "the ladder refused (HTTP 429)" in out and said in " ".join(out.split()), out
    with store_of(pages) as store:
        assert [v.number for v in store.versions_of("cydbot")] == [1]


def test_the_upload_form_in_chromium(pages: Pages, tmp_path: Path, browser: Any) -> None:
    """The owner's page as a browser sends it: the file chosen, the form's CSRF token, the version listed."""
    from browser import Console

    archive = tmp_path / "webbot.tar.gz"
    archive.write_bytes(a_bot("print('from the browser')"))
    context = browser.new_context(ignore_https_errors=True)
    try:
        page = context.new_page()
        console = Console(page)
        page.goto(pages.url + "/signup")
        page.fill("input[name=name]", "cleo")
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url("**/account", timeout=30_000)
        page.fill("#new-bot input[name=name]", "webbot")
        page.click("#new-bot button")
        page.goto(pages.url + "/account/bots/webbot")
        page.set_input_files("form.upload input[name=archive]", str(archive))
        page.click("form.upload button")
        page.wait_for_url("**/account/bots/webbot#versions", timeout=30_000)
        row = page.locator('table.versions tr[data-version="1"]')
        assert row.locator("td.state").inner_text() == "received"
        assert "2 of 3 uploads left" in page.content()
        console.assert_clean()
    finally:
        context.close()
    with store_of(pages) as store:
        (version,) = store.versions_of("webbot")
    assert ArchiveStore(pages.folder / "archives").read(version.sha256, "tar.gz") == archive.read_bytes()


def test_a_bots_private_logs_are_its_owners_alone(pages: Pages) -> None:
    """Each match's private log, as `ladder serve` keeps it in the ladder's folder, is on its owner's
    bot page and by the API with the bot's token or the owner's login; another owner is refused it
    by both, and a match without a log is a 404."""
    owner = Browser(pages)
    owner.get("/signup")
    assert owner.post("/signup", {"name": "cal", "password": PASSWORD}).status == 303
    owner.get("/account")
    token = TOKEN.search(owner.post("/account/bots", {"name": "calbot"}).body).group(1)  # type: ignore[union-attr]
    kept = pages.folder / "private-logs" / "calbot" / "match-41.log"
    kept.parent.mkdir(parents=True)
    kept.write_text("calbot: my <secret> plan\n")
    page = owner.get("/account/bots/calbot")
    assert '<li data-match="41">' in page.body and "calbot: my &lt;secret&gt; plan" in page.body
    mine = api(pages, "/api/bots/calbot/logs/41", None, token)
    assert mine.status == 200 and mine.body == "calbot: my <secret> plan\n"
    assert api(pages, "/api/bots/calbot/logs/42", None, token).status == 404
    headers = {"origin": pages.url, "x-csrf-token": owner.csrf}
    assert owner.request("/api/bots/calbot/logs/41", None, headers).status == 200
    other = Browser(pages)
    other.get("/signup")
    other.post("/signup", {"name": "dee", "password": PASSWORD})
    other.get("/account")
    their = TOKEN.search(other.post("/account/bots", {"name": "deebot"}).body).group(1)  # type: ignore[union-attr]
    for refused in (
        api(pages, "/api/bots/calbot/logs/41", None, their),
        other.request("/api/bots/calbot/logs/41", None, {"origin": pages.url, "x-csrf-token": other.csrf}),
        other.get("/account/bots/calbot"),
    ):
        assert refused.status in (400, 403) and "secret" not in refused.body, (refused.status, refused.body)
