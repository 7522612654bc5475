"""Limits and uniqueness held inside the write (issue 39, item 2): requests released together, each on
a connection of its own (as the processes of `ladder web` are), make at most an owner's limit of bots,
and of two look-alike names exactly one; the losers are told "limit" or "taken" (an `AccountError`,
which the pages answer 400/409), never a database fault (503). On SQLite and PostgreSQL (`ladder_db`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack

import pytest

from cellarena.arena.ladder.accounts.owners import AccountError, Accounts
from cellarena.arena.ladder.store.ladder_store import LadderStore, LadderStoreError

GAME = "rezzo"
PASSWORD = "correct horse battery"
#: Seconds a thread may wait at the barrier or for its call: far above what a loaded 2-core machine needs.
DEADLINE = 60.0


@pytest.fixture
def connections(ladder_db: str) -> Iterator[Callable[[int], list[Accounts]]]:
    """``n`` -> n `Accounts`, each on a store (a connection) of its own, all on one database."""
    with ExitStack() as stack:

        def open_(n: int) -> list[Accounts]:
            return [Accounts(stack.enter_context(LadderStore(ladder_db))) for _ in range(n)]

        yield open_


def together(calls: list[Callable[[], object]]) -> list[object]:
    """Run ``calls`` in threads released at once by a barrier; each one's result or exception."""
    barrier = threading.Barrier(len(calls), timeout=DEADLINE)
    results: list[object] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = calls[i]()
        except Exception as exc:  # the test sorts what each call answered
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE)
        assert not thread.is_alive(), "a call did not end"
    return results


def refusals(results: list[object]) -> list[BaseException]:
    refused = [r for r in results if isinstance(r, BaseException)]
    # A database fault would be a 503 on the pages; a refusal must be the AccountError they answer 400/409.
    assert all(isinstance(r, AccountError) for r in refused), [f"{type(r).__name__}: {r}" for r in refused]
    return refused


def test_twelve_bots_made_at_once_stop_at_the_owners_limit(
    connections: Callable[[int], list[Accounts]],
) -> None:
    limit, tries = 5, 12
    each = connections(tries)
    ann = each[0].sign_up("ann", PASSWORD, policy="open")
    results = together(
        [lambda a=a, i=i: a.create_bot(ann, f"bot{i}", GAME, max_bots=limit) for i, a in enumerate(each)]
    )
    refused = refusals(results)
    made = [b for b in each[0].bots(ann) if b.active]
    assert len(made) == limit == tries - len(refused)
    assert all("this ladder's limit (--max-bots-per-owner 5)" in str(r) for r in refused)


def test_of_two_look_alike_bot_names_made_at_once_exactly_one_is_taken(
    connections: Callable[[int], list[Accounts]],
) -> None:
    for round_, (one, other) in enumerate([("alice", "ALICE"), ("paypal", "paypa1"), ("Zoë", "ZOË")]):
        a, b = connections(2)
        ann = a.sign_up(f"ann{round_}", PASSWORD, policy="open")
        ben = b.sign_up(f"ben{round_}", PASSWORD, policy="open")
        results = together(
            [
                lambda a=a, ann=ann, one=one: a.create_bot(ann, one, GAME, max_bots=5),
                lambda b=b, ben=ben, other=other: b.create_bot(ben, other, GAME, max_bots=5),
            ]
        )
        (refused,) = refusals(results)
        assert "is taken" in str(refused)
        names = [bot.name for bot in a.store.list_bots()]
        assert len([n for n in names if n in (one, other)]) == 1, names


def test_a_host_bot_and_an_owners_look_alike_made_at_once(
    connections: Callable[[int], list[Accounts]],
) -> None:
    """The host's `ladder bot add` and an owner's page race for two look-alike names: one wins; the
    host's loss is the store's "already a bot named" (exit status 1), the owner's an AccountError."""
    a, b = connections(2)
    ann = a.sign_up("ann", PASSWORD, policy="open")
    results = together(
        [lambda: a.create_bot(ann, "paypal", GAME, max_bots=5), lambda: b.store.add_bot("PAYPA1", GAME)]
    )
    refused = [r for r in results if isinstance(r, BaseException)]
    assert len(refused) == 1 and isinstance(refused[0], LadderStoreError), results
    assert "is taken" in str(refused[0]) or "already a bot named" in str(refused[0])
    assert len(a.store.list_bots()) == 1
