"""`ladder web`'s mail sender (issue 42): a bounded queue that never blocks a page, tries again with a
back-off (in virtual time), gives up on a permanent refusal, logs a mail it could not send without its
link; and the owners' notices it claims from the store and mails to those who want them, at least
once: a sender that dies between claim and send leaves the notice to the next, and a sent one is
never sent again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from pathlib import Path

import pytest
import trio
import trio.testing

from cellarena.arena.ladder.accounts.mail_links import MailLinks
from cellarena.arena.ladder.accounts.mailer import Mailer, Outgoing
from cellarena.arena.ladder.accounts.owner_mail import OwnerMail
from cellarena.arena.ladder.accounts.owners import Accounts
from cellarena.arena.ladder.accounts.smtp import SmtpError, SmtpSettings
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.arena.ladder.store.notices import LEASE

SETTINGS = SmtpSettings("mail.example.org", 587, "ladder@example.org")
SECRET_LINK = "https://ladder.example.org/reset/mail?t=reset.1.99.SECRET"


class Server:
    """A stand-in for `smtp.send_mail` that refuses as told, noting when each try came."""

    def __init__(self, refusals: list[Exception]) -> None:
        self.refusals = refusals
        self.tries: list[float] = []
        self.sent: list[EmailMessage] = []

    async def send(self, settings: SmtpSettings, message: EmailMessage, to: list[str]) -> None:
        self.tries.append(trio.current_time())
        if self.refusals:
            raise self.refusals.pop(0)
        self.sent.append(message)


def _refusal(permanent: bool = False) -> SmtpError:
    code = "550 no" if permanent else "451 try later"
    return SmtpError(SETTINGS.server, "RCPT TO <a@b.c>", f"refused: {code}", permanent=permanent)


MAIL = Outgoing("owner@example.org", "Set a new password", f"Open {SECRET_LINK}\n", "a password link for ann")


async def test_a_refused_mail_is_tried_again_after_a_growing_wait(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    server = Server([_refusal(), _refusal()])
    mailer = Mailer(SETTINGS, send=server.send, first_backoff=5, max_backoff=8)
    start = trio.current_time()
    assert await mailer.deliver(MAIL)
    assert [t - start for t in server.tries] == [0, 5, 13]  # 5, then 10 capped at 8
    (message,) = server.sent
    assert (message["To"], message["From"], message["Subject"]) == (
        "owner@example.org",
        "ladder@example.org",
        "[ladder] Set a new password",
    )
    assert SECRET_LINK in message.get_content() and mailer.stats.sent == 1
    assert "trying again in 5 s" in caplog.text and SECRET_LINK not in caplog.text


async def test_a_mail_that_cannot_go_is_logged_without_its_link(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    server = Server([_refusal()] * 3)
    mailer = Mailer(SETTINGS, send=server.send, tries=3, first_backoff=1)
    assert not await mailer.deliver(MAIL)
    assert len(server.tries) == 3 and mailer.stats.failed == 1
    assert "a password link for ann to owner@example.org not sent after 3 tries" in caplog.text
    assert "SECRET" not in caplog.text

    permanent = Server([_refusal(permanent=True)])
    mailer = Mailer(SETTINGS, send=permanent.send, tries=5)
    assert not await mailer.deliver(MAIL)
    assert len(permanent.tries) == 1  # a 5xx is not tried again

    broken = Server([RuntimeError("a bug")])
    mailer = Mailer(SETTINGS, send=broken.send, tries=5)
    assert not await mailer.deliver(MAIL)  # logged; the pages beside it go on
    assert len(broken.tries) == 1 and "unexpected error" in caplog.text


async def test_a_full_queue_drops_the_mail_and_never_blocks(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    server = Server([])
    mailer = Mailer(SETTINGS, send=server.send, queue_size=2)
    assert mailer.submit(MAIL) and mailer.submit(MAIL)
    assert not mailer.submit(MAIL) and mailer.stats.dropped == 1
    assert "the queue is full" in caplog.text and "SECRET" not in caplog.text
    async with trio.open_nursery() as nursery:
        nursery.start_soon(mailer.run)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert len(server.sent) == 2


async def test_notices_are_mailed_to_owners_who_want_them(tmp_path: Path) -> None:
    with LadderStore(tmp_path / "ladder.sqlite") as store:
        accounts = Accounts(store)
        mail = OwnerMail(accounts, MailLinks(b"k" * 32))
        owners = {}
        for name, email in (("ann", "ann@example.org"), ("ben", "ben@example.org"), ("cy", None)):
            owners[name] = accounts.sign_up(name, "correct horse battery", policy="open")
            if email is not None:
                mail.set_address(owners[name], email)
            accounts.create_bot(owners[name], f"{name}bot", "rezzo", max_bots=5)
        link = mail.verify_link(owners["ann"], datetime.now(UTC))
        assert link is not None
        mail.verify(link.token, datetime.now(UTC))  # ben's address is never verified
        for name in owners:
            store.pause(f"{name}bot", "failed 5 matches in a row", actor="ladder")

        server = Server([])
        mailer = Mailer(SETTINGS, store=store, send=server.send, ladder_name="rezzo ladder")
        assert await mailer.queue_notices(datetime.now(UTC)) == 1
        assert await mailer.queue_notices(datetime.now(UTC)) == 0  # claimed: never twice
        assert store.notices.outcomes("annbot") == [("paused", None)]  # not done until sent
        assert await mailer.deliver(mailer._out.receive_nowait())
        (message,) = server.sent
        assert message["To"] == "ann@example.org" and message["Subject"] == "[rezzo ladder] annbot was paused"
        assert "Your bot annbot was paused on the ladder: failed 5 matches in a row" in message.get_content()
        assert [store.notices.outcomes(f"{n}bot") for n in owners] == [
            [("paused", "mailed")],
            [("paused", "address not verified")],
            [("paused", "no address")],
        ]

        mail.set_notify(owners["ann"], False)
        store.resume("annbot", actor="host")
        store.pause("annbot", "the host's reasons", actor="host")
        store.resume("annbot", actor="host")
        store.pause("annbot", "again", actor="host")
        assert await mailer.queue_notices(datetime.now(UTC) + timedelta(days=2)) == 0
        assert store.notices.outcomes("annbot")[1:] == [("paused", "opted out"), ("paused", "opted out")]


def _paused_notice(store: LadderStore) -> None:
    """ann, with a verified address, whose bot the ladder paused: one notice to mail."""
    accounts = Accounts(store)
    mail = OwnerMail(accounts, MailLinks(b"k" * 32))
    with store.database.writing("add an owner") as db:  # no password: argon2 takes a second
        db.execute(
            "INSERT INTO owners (name, name_key, password_hash, status, created)"
            " VALUES ('ann', 'ann', 'none', 'active', ?)",
            (datetime.now(UTC).isoformat(),),
        )
    ann = accounts.owner("ann")
    assert ann is not None
    mail.set_address(ann, "ann@example.org")
    link = mail.verify_link(ann, datetime.now(UTC))
    assert link is not None
    mail.verify(link.token, datetime.now(UTC))
    accounts.create_bot(ann, "annbot", "rezzo", max_bots=5)
    store.pause("annbot", "failed 5 matches in a row", actor="ladder")


class Hangs(Server):
    """A server that takes the connection and never answers: its sender is stopped mid-send."""

    def __init__(self) -> None:
        super().__init__([])
        self.reached = trio.Event()

    async def send(self, settings: SmtpSettings, message: EmailMessage, to: list[str]) -> None:
        self.reached.set()
        await trio.sleep_forever()


async def test_a_notice_claimed_by_a_sender_that_died_is_sent_by_the_next(tmp_path: Path) -> None:
    with LadderStore(tmp_path / "ladder.sqlite") as store:
        _paused_notice(store)
        hangs = Hangs()
        first = Mailer(SETTINGS, store=store, send=hangs.send, poll_every=3600)
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(first.run)
                await hangs.reached.wait()  # claimed, and its mail under way
                nursery.cancel_scope.cancel()  # the sender dies before the server took it
        assert store.notices.outcomes("annbot") == [("paused", None)]
        start = datetime.now(UTC)
        after = start + LEASE + timedelta(seconds=1)
        server = Server([])
        clock = [start]
        second = Mailer(SETTINGS, store=store, send=server.send, clock=lambda: clock[0])
        assert await second.queue_notices(start) == 0  # the dead sender's lease still holds
        clock[0] = after
        assert await second.queue_notices(after) == 1  # its lease ran out: the next sender takes it
        assert await second.deliver(second._out.receive_nowait())
        assert [m["To"] for m in server.sent] == ["ann@example.org"]
        assert store.notices.outcomes("annbot") == [("paused", "mailed")]
        for later in (after + LEASE * 2, after + LEASE * 10):
            assert await second.queue_notices(later) == 0  # sent: never again
        assert len(server.sent) == 1


async def test_a_notice_not_sent_for_now_is_tried_again_and_a_refused_one_is_not(tmp_path: Path) -> None:
    with LadderStore(tmp_path / "ladder.sqlite") as store:
        _paused_notice(store)
        start = datetime.now(UTC)
        clock = [start]
        server = Server([_refusal(), _refusal()])  # the connection dropped, twice
        mailer = Mailer(
            SETTINGS, store=store, send=server.send, tries=2, first_backoff=0.01, clock=lambda: clock[0]
        )
        assert await mailer.queue_notices(start) == 1
        assert not await mailer.deliver(mailer._out.receive_nowait())
        assert store.notices.outcomes("annbot") == [("paused", None)]  # kept for another try
        assert await mailer.queue_notices(start + LEASE / 2) == 0
        clock[0] = start + LEASE * 2
        assert await mailer.queue_notices(clock[0]) == 1
        assert await mailer.deliver(mailer._out.receive_nowait()) and len(server.sent) == 1
        assert store.notices.outcomes("annbot") == [("paused", "mailed")]

        store.resume("annbot", actor="host")
        store.pause("annbot", "the host's reasons", actor="host")
        server.refusals = [_refusal(permanent=True)]
        assert await mailer.queue_notices(clock[0]) == 1
        assert not await mailer.deliver(mailer._out.receive_nowait())
        (_, outcome) = store.notices.outcomes("annbot")[1]
        assert outcome is not None and outcome.startswith("refused: SMTP server mail.example.org:587")
        assert await mailer.queue_notices(clock[0] + LEASE * 3) == 0  # refused for good: not again
