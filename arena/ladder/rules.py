"""The limits of a public ladder, which its services share (`services`: admission, the queue, `changes`)."""

from __future__ import annotations

from dataclasses import dataclass

#: Seconds between two polls of the change log: how soon a revoke or a rotation takes effect.
POLL_EVERY = 0.5


@dataclass(frozen=True)
class LadderRules:
    """The limits of a public ladder; the defaults suit one host on the internet."""

    #: Bots queued at most; more are refused with `queue_full`.
    max_queue: int = 1000
    #: Connections open at once from one address (a bot, its reconnections, a few spectators),
    #: counted from accept on (`LobbyConfig.max_connections_per_address`).
    max_connections_per_address: int = 16
    #: Of those, spectators.
    max_spectators_per_address: int = 4
    #: Wrong tokens from one address before it is locked out...
    failed_tokens: int = 5
    #: ...for this many seconds, doubled at each further lock-out, up to max_lockout.
    lockout: float = 60.0
    max_lockout: float = 3600.0
    #: Accept tokens over a plain (not TLS) connection from another machine. Off: a token must not
    #: cross a network in clear.
    insecure: bool = False
    #: How often the matchmaker looks at the queue (seconds).
    match_every: float = 0.1
    #: Seconds of waiting after which a bot meets the nearest free bots whatever their ratings
    #: (`matchmaker.Policy.starve_after`); a quiet ladder of few bots wants it shorter.
    starve_after: float = 30.0
    #: mu added to a bot's matchmaking window per unit of its own sigma
    #: (`matchmaker.Policy.uncertainty_window`): uncertain bots (newcomers above all)
    #: accept a wider range at once, so they wait less and play more, while settled bots keep their
    #: close matches. 0.5: a newcomer (sigma 8.3) accepts 6.2 mu at once, a settled bot (sigma 2) 3.
    uncertainty_window: float = 0.5
    #: ``separate``: connected and submitted bots meet only their own kind (`matchmaking.pools`).
    pools: str = "mixed"
    #: How often the server polls the database's change log (a revoke takes effect within this).
    poll_every: float = POLL_EVERY
