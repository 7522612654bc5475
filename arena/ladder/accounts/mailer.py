"""The ladder's one mail sender: a bounded queue that pages fill without waiting, drained by one task in
`ladder web`'s nursery, which also mails the owners' notices the store keeps (`store.notices`).

A page calls `Mailer.submit` (never blocks: a full queue drops the mail and logs it, as the page's answer
must not wait on a mail server). The sender task sends each mail with `smtp.send_mail`, trying again
after a back-off that doubles (`first_backoff`, capped at `max_backoff`) up to `tries` times; a
permanent refusal (5xx) is not tried again. A mail that cannot go is logged with what it was (never its
link: the token is in the body only, and the body is never logged).

A notice is delivered at least once: it is claimed with a lease (`Notices.claim`), the lease renewed
before each try, and marked done only once the SMTP server took its mail. A sender that dies
between claim and send (killed, or its server stopped) leaves it to the next sender once the lease
runs out; a notice whose tries all failed for now is tried again the same way, until it is a day
old; a permanent refusal ends it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from email.utils import make_msgid

import trio

from cellarena.arena.ladder.accounts.smtp import SmtpError, SmtpSettings, send_mail
from cellarena.arena.ladder.errors import LadderStoreError
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.arena.ladder.store.notices import LEASE, Notice, stale

log = logging.getLogger("cellarena.ladder.web.mail")  # shown without -v, as the pages' actions

Send = Callable[[SmtpSettings, EmailMessage, list[str]], Awaitable[None]]

#: What each notice says, by kind: (subject, first line).
NOTICE_TEXT = {
    "paused": ("{bot} was paused", "Your bot {bot} was paused on the ladder: {detail}"),
    "version_failed": ("A version of {bot} failed", "A version of your bot {bot} failed: {detail}"),
    "challenged": ("{bot} was challenged", "Your bot {bot} was challenged: {detail}"),
}


@dataclass(frozen=True)
class Outgoing:
    """A mail to send; ``what`` names it in the log (never a link or token). A notice's mail carries
    its id and claim (`Notices.claim`), done once the mail is sent."""

    to: str
    subject: str
    body: str
    what: str
    notice: int | None = None
    claim: str | None = None


@dataclass
class MailStats:
    sent: int = 0
    failed: int = 0
    dropped: int = 0


class Mailer:
    """The queue and its sender, over ``settings``' SMTP server."""

    def __init__(
        self,
        settings: SmtpSettings,
        *,
        store: LadderStore | None = None,
        send: Send = send_mail,
        queue_size: int = 100,
        tries: int = 5,
        first_backoff: float = 5.0,
        max_backoff: float = 300.0,
        poll_every: float = 2.0,
        ladder_name: str = "ladder",
        lease: timedelta = LEASE,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.settings = settings
        self.store = store
        self.send = send
        self.tries = tries
        self.first_backoff = first_backoff
        self.max_backoff = max_backoff
        self.poll_every = poll_every
        self.ladder_name = ladder_name
        self.lease = lease
        self.clock = clock
        self.stats = MailStats()
        self._in, self._out = trio.open_memory_channel[Outgoing](queue_size)

    def submit(self, mail: Outgoing) -> bool:
        """Queue ``mail`` without waiting; False (and a log line) if the queue is full."""
        try:
            self._in.send_nowait(mail)
        except trio.WouldBlock:
            self.stats.dropped += 1
            log.error("mail: the queue is full (the mail server is slow or down): %s not sent", mail.what)
            return False
        return True

    def message(self, mail: Outgoing) -> EmailMessage:
        message = EmailMessage()
        message["From"] = self.settings.sender
        message["To"] = mail.to
        message["Subject"] = f"[{self.ladder_name}] {mail.subject}"
        message["Message-ID"] = make_msgid(domain=self.settings.sender.rpartition("@")[2] or None)
        message["Date"] = datetime.now(UTC)
        message.set_content(mail.body)
        return message

    async def run(self) -> None:
        """The sender task: sends what is queued, and (with a store) polls the notices; until cancelled."""
        async with trio.open_nursery() as nursery:
            if self.store is not None:
                nursery.start_soon(self.poll_notices)
            async for mail in self._out:
                await self.deliver(mail)

    async def deliver(self, mail: Outgoing) -> bool:
        """Send one mail, with tries and back-off; whether it went. A notice's claim is renewed before
        each try (none if it is no longer this sender's) and the notice done once its mail went, or
        once it was refused for good."""
        wait = self.first_backoff
        claim = mail.claim
        for attempt in range(1, self.tries + 1):
            if mail.notice is not None:
                claim = await self._notice_step(mail, "renew", claim)
                if claim is None:
                    return False
            try:
                await self.send(self.settings, self.message(mail), [mail.to])
            except Exception as exc:  # a mail that cannot go never ends the pages it runs beside
                if not isinstance(exc, SmtpError):
                    log.exception("mail: %s to %s: unexpected error", mail.what, mail.to)
                    exc = SmtpError(self.settings.server, "sending", repr(exc), permanent=True)
                if attempt == self.tries or exc.permanent:
                    self.stats.failed += 1
                    again = ""
                    if mail.notice is not None and exc.permanent:
                        await self._notice_step(mail, f"refused: {exc}", claim)
                    elif mail.notice is not None:
                        again = f"; tried again in {self.lease.total_seconds() / 60:g} minutes"
                    log.error(
                        "mail: %s to %s not sent after %d tries: %s%s",
                        mail.what,
                        mail.to,
                        attempt,
                        exc,
                        again,
                    )
                    return False
                log.warning("mail: %s to %s: %s; trying again in %g s", mail.what, mail.to, exc, wait)
                await trio.sleep(wait)
                wait = min(wait * 2, self.max_backoff)
            else:
                self.stats.sent += 1
                log.info("mail: sent %s to %s", mail.what, mail.to)
                if mail.notice is not None:
                    await self._notice_step(mail, "mailed", claim)
                return True
        return False

    async def _notice_step(self, mail: Outgoing, step: str, claim: str | None) -> str | None:
        """``renew`` the notice's claim (the new one, or None: not this sender's), or finish the notice
        with ``step`` as its outcome (the claim, or None)."""
        assert self.store is not None and mail.notice is not None and claim is not None
        notices, notice = self.store.notices, mail.notice
        try:
            if step == "renew":
                renewed = await trio.to_thread.run_sync(notices.renew, notice, claim, self.clock())
                if renewed is None:
                    log.info("mail: %s: another sender has it now", mail.what)
                return renewed
            with trio.CancelScope(shield=True):  # the mail went: note it, even as the pages stop
                done = await trio.to_thread.run_sync(notices.finish, notice, step, claim)
            return claim if done else None
        except LadderStoreError as exc:  # its lease runs out and the next poll takes it again
            log.warning("mail: %s: the notice cannot be updated (%s); it will be tried again", mail.what, exc)
            return None

    async def poll_notices(self) -> None:
        while True:
            try:
                await self.queue_notices(self.clock())
            except LadderStoreError as exc:
                log.warning("mail: cannot read the notices (%s); trying again in %g s", exc, self.poll_every)
            except Exception:  # never the end of the pages: logged, and tried again
                log.exception("mail: reading the notices failed; trying again in %g s", self.poll_every)
            await trio.sleep(self.poll_every)

    async def queue_notices(self, now: datetime) -> int:
        """Claim the pending notices (and those whose claim's lease ran out), finish those that need no
        mail with the reason, and queue a mail for each owner who wants it (waiting for room in the
        queue); how many were queued."""
        assert self.store is not None
        notices = self.store.notices
        queued = 0
        for notice in await trio.to_thread.run_sync(notices.pending, now, self.lease):
            claim = await trio.to_thread.run_sync(notices.claim, notice.id, now, self.lease)
            if claim is None:
                continue  # another sender has it
            outcome = _outcome(notice, now)
            if outcome != "queued" or notice.email is None:
                await trio.to_thread.run_sync(notices.finish, notice.id, outcome, claim)
                continue
            await self._in.send(notice_mail(notice, notice.email, claim))
            queued += 1
        return queued


def _outcome(notice: Notice, now: datetime) -> str:
    if notice.email is None:
        return "no address"
    if not notice.verified:
        return "address not verified"
    if not notice.notify:
        return "opted out"
    if stale(notice, now):
        return "too old"
    return "queued"


def notice_mail(notice: Notice, to: str, claim: str | None = None) -> Outgoing:
    subject, first = NOTICE_TEXT[notice.kind]
    fill = {"bot": notice.bot, "detail": notice.detail}
    body = (
        f"Hello {notice.owner},\n\n{first.format(**fill)}\n\n"
        "Your account page on the ladder's site (/account) shows your bots, and there you can turn "
        "these mails off.\n"
    )
    what = f"a {notice.kind} notice for {notice.owner}"
    return Outgoing(to, subject.format(**fill), body, what, notice.id, claim)
