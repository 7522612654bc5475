"""Mail in the ladder's database (schema version 13, issue 42), on SQLite and PostgreSQL (`ladder_db`):
owners' addresses and their verification, reset links that are signed, expire and work once (the
time given, no clock), and the notices that `ladder serve`'s events leave for `ladder web`'s sender."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from cellarena.arena.ladder.accounts.mail_links import LinkError, MailLinks, fingerprint
from cellarena.arena.ladder.accounts.owner_mail import OwnerMail, check_address
from cellarena.arena.ladder.accounts.owners import AccountError, Accounts, Owner, hash_password
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.arena.ladder.store.notices import LEASE, Notice, stale
from cellarena.arena.ladder.store.schema import MIGRATIONS

GAME = "rezzo"
PASSWORD = "correct horse battery"
KEY = b"k" * 32
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
#: Version 13 as written, frozen.
V13 = (
    "ALTER TABLE owners ADD COLUMN email TEXT",
    "ALTER TABLE owners ADD COLUMN email_verified TEXT",
    "ALTER TABLE owners ADD COLUMN notify BOOLEAN NOT NULL DEFAULT TRUE",
    "CREATE TABLE notices ( id {id},"
    " kind TEXT NOT NULL CHECK (kind IN ('paused', 'version_failed', 'challenged')),"
    " bot_id BIGINT NOT NULL REFERENCES bots (id), detail TEXT NOT NULL, created TEXT NOT NULL,"
    " done TEXT, outcome TEXT)",
    "CREATE INDEX notices_pending ON notices (done, id)",
)


def test_version_13_is_frozen() -> None:
    assert [" ".join(s.split()) for s in MIGRATIONS[12].statements] == [" ".join(s.split()) for s in V13]


@pytest.fixture
def store(ladder_db: str) -> Iterator[LadderStore]:
    with LadderStore(ladder_db) as s:
        yield s


def _owner(store: LadderStore, name: str = "alice", email: str | None = "Alice@Example.org") -> Owner:
    with store.database.writing("add an owner") as db:
        db.execute(
            "INSERT INTO owners (name, name_key, password_hash, status, created)"
            " VALUES (?, ?, ?, 'active', ?)",
            (name, name, hash_password(PASSWORD), datetime.now(UTC).isoformat()),
        )
    owner = Accounts(store).owner(name)
    assert owner is not None
    if email is not None:
        OwnerMail(Accounts(store), MailLinks(KEY)).set_address(owner, email)
    return owner


# -- links (pure) --------------------------------------------------------------------------------------
def test_a_link_is_signed_for_its_purpose_and_expires() -> None:
    links = MailLinks(KEY)
    token = links.make("reset", 7, "f" * 32, T0)
    assert links.read("reset", token, T0 + timedelta(minutes=59)) == (7, "f" * 32)
    with pytest.raises(LinkError, match=r"link expired \(it works for 1 hours\): ask for a new"):
        links.read("reset", token, T0 + timedelta(hours=1))
    with pytest.raises(LinkError, match="not for this page"):
        links.read("verify", token, T0)
    with pytest.raises(LinkError, match="not one the ladder made"):
        links.read("reset", token[:-2] + ("AA" if not token.endswith("AA") else "BB"), T0)
    with pytest.raises(LinkError, match="not one the ladder made"):
        MailLinks(b"another key" * 3).read("reset", token, T0)
    with pytest.raises(LinkError, match="incomplete"):
        links.read("reset", "x" * 1000, T0)


def test_addresses_are_checked() -> None:
    assert check_address("  a.b+ladder@mail.example.org ") == "a.b+ladder@mail.example.org"
    for bad in ("", "alice", "a@b@c", "a b@c.d", "a@b.c\r\nBcc: x@y.z", "é@x.org", "a@" + "b" * 260):
        with pytest.raises(AccountError, match="is not one the ladder can mail"):
            check_address(bad)


# -- addresses and their verification ------------------------------------------------------------------
def test_an_address_is_verified_by_its_link_and_only_while_it_is_the_owners(store: LadderStore) -> None:
    mail = OwnerMail(Accounts(store), MailLinks(KEY))
    alice = _owner(store)
    assert mail.status(alice).email == "Alice@Example.org" and not mail.status(alice).verified
    link = mail.verify_link(alice, T0)
    assert link is not None and link.email == "Alice@Example.org" and link.owner == "alice"
    with pytest.raises(AccountError, match="expired"):
        mail.verify(link.token, T0 + timedelta(days=2))
    assert mail.verify(link.token, T0 + timedelta(days=1)).name == "alice"
    assert mail.status(alice).verified and mail.verify_link(alice, T0) is None
    mail.set_address(alice, "Alice@Example.org")  # the same address: still verified
    assert mail.status(alice).verified
    mail.set_address(alice, "new@example.org")
    assert not mail.status(alice).verified
    with pytest.raises(AccountError, match="no longer the account's"):
        mail.verify(link.token, T0)  # the old address's link


def test_bots_wait_for_a_verified_address_when_the_host_asks(store: LadderStore) -> None:
    accounts = Accounts(store, verified_for_bots=True)
    mail = OwnerMail(accounts, MailLinks(KEY))
    alice = _owner(store)
    with pytest.raises(AccountError, match="makes bots for owners whose address is verified"):
        accounts.create_bot(alice, "alicebot", GAME, max_bots=5)
    link = mail.verify_link(alice, T0)
    assert link is not None
    mail.verify(link.token, T0)
    assert accounts.create_bot(alice, "alicebot", GAME, max_bots=5)[0].name == "alicebot"


# -- reset by mail -------------------------------------------------------------------------------------
def test_a_reset_link_sets_a_password_once(store: LadderStore) -> None:
    accounts = Accounts(store)
    mail = OwnerMail(accounts, MailLinks(KEY))
    alice = _owner(store)
    _owner(store, "bob", None)
    session = accounts.new_session(alice)
    assert mail.reset_links("nobody@example.org", T0) == [] and mail.reset_links("not an address", T0) == []
    (link,) = mail.reset_links("alice@EXAMPLE.org", T0)  # the address's case does not matter
    assert (link.owner, link.email) == ("alice", "Alice@Example.org")
    assert mail.reset_owner(link.token, T0).name == "alice"
    with pytest.raises(AccountError, match="give 10 to 256"):
        mail.reset_password(link.token, "short", T0)
    with pytest.raises(AccountError, match="expired"):
        mail.reset_password(link.token, "a new long password", T0 + timedelta(hours=1, seconds=1))
    mail.reset_password(link.token, "a new long password", T0 + timedelta(minutes=5))
    assert accounts.check_password("alice", "a new long password").name == "alice"
    with pytest.raises(AccountError, match="wrong name or password"):
        accounts.check_password("alice", PASSWORD)
    assert accounts.session_owner(session) is None  # logged out everywhere
    assert mail.status(alice).verified  # the link reached the address
    for use in (mail.reset_owner, lambda t, n: mail.reset_password(t, "yet another password", n)):
        with pytest.raises(AccountError, match="used already"):
            use(link.token, T0)
    (newer,) = mail.reset_links("alice@example.org", T0)
    mail.set_address(alice, "moved@example.org")
    with pytest.raises(AccountError, match=r"used already .*or the password or address changed"):
        mail.reset_owner(newer.token, T0)  # sent to the old address


def test_a_links_fingerprint_is_of_what_it_may_change() -> None:
    assert fingerprint("hash", "a@b.c") != fingerprint("hash", "a@b.d") != fingerprint("hash2", "a@b.c")
    assert fingerprint("ab", "c") != fingerprint("a", "bc")


# -- notices -------------------------------------------------------------------------------------------
def test_events_leave_notices_for_owners_only(store: LadderStore) -> None:
    accounts = Accounts(store)
    mail = OwnerMail(accounts, MailLinks(KEY))
    alice = _owner(store)
    bob = _owner(store, "bob", None)
    accounts.create_bot(alice, "alicebot", GAME, max_bots=5)
    accounts.create_bot(bob, "bobbot", GAME, max_bots=5)
    store.add_bot("house", GAME)
    store.pause("alicebot", "too many late answers", actor="host")
    store.resume("alicebot", actor="host")
    store.pause("alicebot", "paused by its owner", actor="alice (owner)")  # her own doing: no mail
    store.pause("house", "the host's bot")  # no owner: nobody to tell
    store.resume("alicebot", actor="alice (owner)")
    store.challenge("bobbot", "alicebot", actor="bob (owner)")
    version = store.add_version("alicebot", "ab" * 32, 10, "tar.gz")
    store.versions.mark(version.id, "failed", reason="the build failed (exit status 2)")

    now = datetime.now(UTC)
    pending = store.notices.pending(now)
    assert [(n.kind, n.bot, n.detail, n.owner, n.email, n.verified, n.notify) for n in pending] == [
        ("paused", "alicebot", "too many late answers", "alice", "Alice@Example.org", False, True),
        ("challenged", "alicebot", "bobbot challenged alicebot", "alice", "Alice@Example.org", False, True),
        ("version_failed", "alicebot", "alicebot version 1: the build failed (exit status 2)", "alice",
         "Alice@Example.org", False, True),
    ]  # fmt: skip
    mail.set_notify(alice, False)
    assert not store.notices.pending(now)[0].notify and not mail.status(alice).notify
    claim = store.notices.claim(pending[0].id, now)
    assert claim is not None and store.notices.claim(pending[0].id, now) is None
    assert store.notices.finish(pending[0].id, "mailed", claim)
    assert [n.id for n in store.notices.pending(now)] == [n.id for n in pending[1:]]
    assert store.notices.outcomes("alicebot") == [
        ("paused", "mailed"),
        ("challenged", None),
        ("version_failed", None),
    ]


def test_a_notice_goes_stale_after_a_day() -> None:
    notice = Notice(1, "paused", "b", "d", T0, "o", "o@x.org", True, True)
    assert not stale(notice, T0 + timedelta(hours=23)) and stale(notice, T0 + timedelta(hours=25))


def test_a_notice_is_claimed_with_a_lease_and_done_once_sent(store: LadderStore) -> None:
    """At least once: a claim holds for its lease, renewed before each try; a claim whose lease ran out
    (its sender died unsent) is another sender's to take; a notice done is never pending again."""
    accounts = Accounts(store)
    accounts.create_bot(_owner(store), "alicebot", GAME, max_bots=5)
    store.pause("alicebot", "too many late answers", actor="host")
    notices = store.notices
    (notice,) = notices.pending(T0)
    first = notices.claim(notice.id, T0)
    assert first is not None
    later = T0 + LEASE - timedelta(seconds=1)
    assert notices.pending(later) == [] and notices.claim(notice.id, later) is None  # the lease holds
    renewed = notices.renew(notice.id, first, later)
    assert renewed is not None and notices.claim(notice.id, T0 + LEASE + timedelta(seconds=1)) is None
    after = later + LEASE + timedelta(seconds=1)  # the renewed lease ran out: the sender died
    assert [n.id for n in notices.pending(after)] == [notice.id]
    second = notices.claim(notice.id, after)
    assert second is not None and second != renewed
    assert notices.renew(notice.id, renewed, after) is None  # the first sender's claim is gone
    assert not notices.finish(notice.id, "mailed", renewed)
    assert notices.finish(notice.id, "mailed", second)
    assert not notices.finish(notice.id, "mailed", second)
    far = after + 10 * LEASE
    assert notices.pending(far) == [] and notices.claim(notice.id, far) is None
    assert notices.outcomes("alicebot") == [("paused", "mailed")]
