"""Mail on a community ladder, in Chromium (issue 42): `ladder web --smtp-host` sends through a real local
SMTP server (aiosmtpd, `smtp_server.py`). An owner signs up with an address and makes bots only once
its link is followed; "forgot password" mails a link that sets a new password once (the old password
then fails, the link used again and an expired one are refused); a challenge of their bot is mailed
to them, until they turn the notices off on their account page. One SMTP server, one `ladder web`
and one browser for the module."""

from __future__ import annotations

import email
import email.policy
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from certificates import pem_files
from game_servers import wait_for
from ladder_pages import Pages, ladder_pages
from smtp_server import SmtpServer

from cellarena.arena.ladder.accounts.mail_links import MailLinks
from cellarena.arena.ladder.accounts.owner_mail import OwnerMail
from cellarena.arena.ladder.accounts.owners import Accounts
from cellarena.arena.ladder.store.ladder_store import LadderStore

PASSWORD = "correct horse battery"
NEW_PASSWORD = "a brand new passphrase"
LINK = re.compile(r"https://\S+")


@dataclass
class Site:
    pages: Pages
    smtp: SmtpServer
    folder: Path

    def next_mail(self, address: str, count: int) -> email.message.EmailMessage:
        """The ``count``-th mail to ``address``, waited for."""
        wait_for(lambda: len(self.smtp.mails_to(address)) >= count, f"mail {count} to {address}", timeout=60)
        return self.smtp.mails_to(address)[count - 1]

    def log(self) -> str:
        """What `ladder web` has logged so far (its stderr)."""
        return self.pages.stderr()

    def store(self) -> LadderStore:
        return LadderStore(self.folder / "ladder.sqlite", create=False)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("mail-ladder")
    certs = folder / "smtp-certs"
    certs.mkdir()
    _, chain, key = pem_files(certs, "localhost")
    smtp = SmtpServer(folder / "mail", chain, key)
    try:
        args = ("--signup", "open", "--verify-email", "--smtp-host", "127.0.0.1")
        with ladder_pages(
            folder, *args, "--smtp-port", str(smtp.ports["plain"]), "--smtp-tls", "none"
        ) as pages:
            yield Site(pages, smtp, folder)
    finally:
        smtp.stop()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(ignore_https_errors=True)
    try:
        yield context.new_page()
    finally:
        context.close()


def _sign_up(page: Any, site: Site, name: str, address: str) -> None:
    page.goto(site.pages.url + "/signup")
    page.fill("input[name=name]", name)
    page.fill("input[name=email]", address)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/account")


def _link(message: email.message.EmailMessage) -> str:
    body = message.get_body(("plain",))
    assert body is not None
    found = LINK.search(body.get_content())
    assert found, body.get_content()
    return found.group(0)


def _log_in(page: Any, site: Site, name: str, password: str) -> None:
    page.goto(site.pages.url + "/login")
    page.fill("input[name=name]", name)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")


def test_an_owner_makes_bots_once_their_address_is_verified(site: Site, page: Any) -> None:
    _sign_up(page, site, "vera", "vera@example.org")
    assert "not verified yet" in page.inner_text("#mail")
    page.fill("#new-bot input[name=name]", "verabot")
    page.click("#new-bot button")
    assert "whose address is verified" in page.inner_text(".refused")

    mail = site.next_mail("vera@example.org", 1)
    assert mail["Subject"] == "[rezzo ladder] Confirm your address"
    page.goto(_link(mail))
    assert "your address is verified" in page.inner_text("main")
    page.goto(site.pages.url + "/account")
    assert "(verified)" in page.inner_text("#mail")
    page.fill("#new-bot input[name=name]", "verabot")
    page.click("#new-bot button")
    assert page.inner_text("#token").startswith("cla_")


def test_forgot_password_mails_a_link_that_works_once(site: Site, page: Any) -> None:
    _sign_up(page, site, "rosa", "rosa@example.org")
    page.click("#logout button")
    page.goto(site.pages.url + "/login")
    page.click("#forgot-link")
    page.fill("input[name=email]", "ROSA@example.org")
    page.click("button[type=submit]")
    said = page.inner_text("main")
    assert "If an account on this ladder has that address" in said

    page.goto(site.pages.url + "/forgot")  # an address nobody has: the same answer, no mail
    page.fill("input[name=email]", "nobody@example.org")
    page.click("button[type=submit]")
    assert page.inner_text("main") == said and not site.smtp.mails_to("nobody@example.org")

    mail = site.next_mail("rosa@example.org", 2)  # the first confirms the address
    assert mail["Subject"] == "[rezzo ladder] Set a new password"
    link = _link(mail)
    page.goto(link)
    assert "a new password for rosa" in page.inner_text("h2").lower()  # CSS capitalises headings
    page.fill("input[name=password]", NEW_PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/login")

    _log_in(page, site, "rosa", PASSWORD)
    assert "wrong name or password" in page.inner_text(".refused")
    _log_in(page, site, "rosa", NEW_PASSWORD)
    page.wait_for_url("**/account")

    answer = page.goto(link)  # used once already
    assert answer.status == 400 and "used already" in page.inner_text("main")
    token = link.partition("?t=")[2]
    wait_for(lambda: "rosa set a new password with a mailed link" in site.log(), "the log line", timeout=30)
    assert "mail: sent a password link for rosa to rosa@example.org" in site.log() and token not in site.log()
    with site.store() as store:
        owner = Accounts(store).owner("rosa")
        assert owner is not None
        mail_accounts = OwnerMail(
            Accounts(store), MailLinks(bytes.fromhex((site.folder / "session.key").read_text()))
        )
        (old,) = mail_accounts.reset_links("rosa@example.org", datetime.now(UTC) - timedelta(hours=2))
    answer = page.goto(f"{site.pages.url}/reset/mail?t={old.token}")
    assert answer.status == 400 and "this link expired" in page.inner_text("main")


def test_a_challenge_is_mailed_until_the_owner_opts_out(site: Site, page: Any) -> None:
    _sign_up(page, site, "chad", "chad@example.org")
    page.goto(_link(site.next_mail("chad@example.org", 1)))
    page.goto(site.pages.url + "/account")
    page.fill("#new-bot input[name=name]", "chadbot")
    page.click("#new-bot button")
    with site.store() as store:
        store.add_bot("rival", "rezzo")
        store.challenge("rival", "chadbot", actor="host")
    mail = site.next_mail("chad@example.org", 2)
    assert mail["Subject"] == "[rezzo ladder] chadbot was challenged"
    assert "Your bot chadbot was challenged: rival challenged chadbot" in mail.get_content()

    page.goto(site.pages.url + "/account")
    page.click("#notify button")
    assert "off" in page.inner_text("#notify b")
    with site.store() as store:
        store.add_bot("rival2", "rezzo")
        store.challenge("rival2", "chadbot", actor="host")
        wait_for(
            lambda: store.notices.outcomes("chadbot")[-1] == ("challenged", "opted out"),
            "the sender to see the opt-out",
            timeout=60,
        )
    assert len(site.smtp.mails_to("chad@example.org")) == 2
