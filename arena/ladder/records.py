"""What the ladder store hands out and takes in: plain frozen values, safe to log and to show.

No record holds a token or its digest, so printing one can never leak a secret.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from cellarena.arena.ladder.policy import CommunityPolicy
from cellarena.arena.ratings import Rating
from cellarena.arena.ratings import ladder as ladder_ratings
from cellarena.sdk.protocol import Outcome, outcome_of  # a seat's result: the protocol's (`end`)

#: ``submitted``: in standings and on pages only, an outside bot with a live version the ladder runs.
BotKind = Literal["outside", "house", "submitted"]
MatchStatus = Literal["running", "finished", "void"]
#: A seat's result from the ranks: the protocol's one rule, which the match server's `end` follows too.
outcome = outcome_of


def _time(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat()


def _rating(r: Rating | None) -> dict[str, float] | None:
    return None if r is None else {"mu": r.mu, "sigma": r.sigma, "rating": ladder_ratings.shown(r)}


@dataclass(frozen=True)
class BotRecord:
    id: int
    name: str
    game: str
    kind: BotKind
    #: For a house bot, the command the ladder runs to launch it; None for an outside bot.
    house_command: str | None
    #: How many matches the bot may play at the same time.
    max_matches: int
    created: datetime
    revoked: datetime | None
    #: Why the ladder paused it (failed matches in a row, or the host), or None: a paused bot is
    #: refused at hello with `paused` until it is resumed.
    paused: str | None = None
    paused_at: datetime | None = None
    #: Why the host banned it, or None; refused like a paused bot until unbanned.
    banned: str | None = None
    #: Its failed matches in a row (`failures.failure_of`): at the host's ``--pause-after`` it pauses.
    failures: int = 0
    #: Whether it refuses challenges from other bots.
    refuses_challenges: bool = False

    @property
    def active(self) -> bool:
        return self.revoked is None

    @property
    def stopped(self) -> str | None:
        """Why the bot may not play now though its token is good (banned or paused), or None."""
        if self.banned is not None:
            return f"the ladder's host banned {self.name}: {self.banned}; ask the host"
        if self.paused is not None:
            return (
                f"{self.name} is paused: {self.paused}; fix it, then resume it (its owner on their "
                "page /account or with POST /api/bots/NAME/resume, or the host with `cellarena ladder "
                "resume`)"
            )
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "game": self.game,
            "kind": self.kind,
            "house_command": self.house_command,
            "max_matches": self.max_matches,
            "created": _time(self.created),
            "revoked": _time(self.revoked),
            "paused": self.paused,
            "paused_at": _time(self.paused_at),
            "banned": self.banned,
            "failures": self.failures,
            "refuses_challenges": self.refuses_challenges,
        }


@dataclass(frozen=True)
class SeatResult:
    """How one seat did in a match, given to `LadderStore.finish_match` in seat order.

    ``rank`` is 1 for first place; seats that tie share a rank (1, 1 for a two-seat draw).
    """

    rank: int
    late: int = 0
    invalid: int = 0
    illegal: int = 0
    forfeit: bool = False
    #: Why the match ended so for this seat (`cellarena.server.games.causes`, sentence in ``text``).
    cause: dict[str, Any] | None = None
    #: Ms of time bank the seat drew (docs/protocol.md#the-time-bank); None when the match had none.
    bank_drawn_ms: int | None = None


@dataclass(frozen=True)
class SeatRecord:
    seat: int
    bot: str
    bot_id: int
    #: None while the match runs, and for a void match; the rest likewise.
    rank: int | None
    late: int | None
    invalid: int | None
    illegal: int | None
    forfeit: bool | None
    before: Rating | None
    after: Rating | None
    #: Why the match ended so for this seat; None while it runs, in a void match, and for matches
    #: finished before causes were kept (`cause_json` says "unknown" for those).
    cause: dict[str, Any] | None = None
    #: The version its bot's hello carried; None: none given (or from before versions were kept).
    version: str | None = None
    #: Ms of time bank drawn; None without a bank (and for matches from before it was kept).
    bank_drawn_ms: int | None = None

    def cause_json(self) -> dict[str, Any] | None:
        """The cause as the pages and the API show it: ``{"cause": "unknown"}`` for a finished match
        from before causes were kept; None while there is none to give (running, void)."""
        if self.cause is not None:
            return self.cause
        return None if self.rank is None else {"cause": "unknown"}

    def to_json(self) -> dict[str, Any]:
        return {
            "seat": self.seat,
            "bot": self.bot,
            "rank": self.rank,
            "late": self.late,
            "invalid": self.invalid,
            "illegal": self.illegal,
            "forfeit": self.forfeit,
            "before": _rating(self.before),
            "after": _rating(self.after),
            "cause": self.cause_json(),
            "version": self.version,
            "bank_drawn_ms": self.bank_drawn_ms,
        }


@dataclass(frozen=True)
class MatchRecord:
    id: int
    game: str
    map: str | None
    seed: int
    status: MatchStatus
    #: The order in which finished results were counted; None unless finished.
    seq: int | None
    #: The bot that placed first alone; None for a draw, or unless finished.
    winner: str | None
    reason: str | None
    ticks: int | None
    replay: str | None
    started: datetime
    ended: datetime | None
    seats: tuple[SeatRecord, ...]
    #: False for an unrated challenge: it changed no rating.
    rated: bool = True

    @property
    def bots(self) -> tuple[str, ...]:
        return tuple(s.bot for s in self.seats)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "game": self.game,
            "map": self.map,
            "seed": self.seed,
            "status": self.status,
            "winner": self.winner,
            "reason": self.reason,
            "ticks": self.ticks,
            "replay": self.replay,
            "started": _time(self.started),
            "ended": _time(self.ended),
            "seats": [s.to_json() for s in self.seats],
            "rated": self.rated,
        }


@dataclass(frozen=True)
class BotMatch:
    """One match from one bot's point of view (its page's list of recent matches)."""

    match: MatchRecord
    seat: int

    @property
    def me(self) -> SeatRecord:
        return self.match.seats[self.seat]

    @property
    def opponents(self) -> tuple[str, ...]:
        return tuple(s.bot for s in self.match.seats if s.seat != self.seat)

    @property
    def outcome(self) -> Outcome | None:
        """None unless the match finished."""
        if self.match.status != "finished" or self.me.rank is None:
            return None
        return outcome(self.me.rank, [s.rank for s in self.match.seats if s.rank is not None])

    @property
    def rating_after(self) -> Rating | None:
        return self.me.after


@dataclass(frozen=True)
class RatingPoint:
    """A bot's rating after one of its finished matches: a point of its rating-over-matches chart."""

    match_id: int
    ended: datetime
    rating: Rating


@dataclass(frozen=True)
class Season:
    """A closed season of one game's ladder: its table is archived (`LadderStore.season_standings`)."""

    game: str
    number: int  # 1, 2, ... per game; the season being played is one more than the last closed
    name: str
    started: datetime  # when the season began: the previous one's close, or the game's first match
    closed: datetime
    start_next: str  # how the next season began: "reset" or "carry" (`ratings.seasons`)

    def to_json(self) -> dict[str, Any]:
        return {
            "game": self.game,
            "number": self.number,
            "name": self.name,
            "started": self.started.isoformat(),
            "closed": self.closed.isoformat(),
            "start_next": self.start_next,
        }


#: The columns of a ladder's standings table (`Standing.cells`).
#: ``rating`` is the system's shown value (mu); ``interval`` about 95% of its belief, mu +- 2 sigma;
#: ``kind`` how the bot plays (`Standing.pool`: connected, submitted, house).
STANDINGS_COLUMNS = (
    "rank", "bot", "kind", "rating", "sigma", "interval", "matches", "W", "D", "L", "late", "invalid",
    "bank ms",
)  # fmt: skip


@dataclass(frozen=True)
class Standing:
    rank: int
    bot: str
    kind: BotKind
    mu: float
    sigma: float
    matches: int
    wins: int
    draws: int
    losses: int
    #: Over its finished matches: answers that came too late, answers the game could not read
    #: (a bot's own failures, which ratings alone hide), and ms of time bank drawn.
    late: int = 0
    invalid: int = 0
    bank_drawn_ms: int = 0
    #: Too few rated matches to be ranked (`ratings.ladder.provisional`): listed after the ranked bots,
    #: its rating shown with a ``?`` (as Lichess shows one).
    provisional: bool = False

    @property
    def rating(self) -> float:
        """The value the table shows and sorts by (ranked bots first): the rating system's
        (`ratings.ladder.shown`: mu)."""
        return ladder_ratings.shown(Rating(self.mu, self.sigma))

    @property
    def interval(self) -> tuple[float, float]:
        """About 95% of the belief (mu +- 2 sigma): where the bot's strength may lie."""
        return ladder_ratings.SYSTEM.interval(Rating(self.mu, self.sigma))

    @property
    def pool(self) -> str:
        """How the bot plays, as the tables' ``kind`` column marks it (and its matchmaking pool, which
        ``ladder serve --pools separate`` keeps apart): ``connected`` (its owner's process connects),
        ``submitted`` (the ladder runs its live version) or ``house`` (the ladder's own)."""
        return "connected" if self.kind == "outside" else self.kind

    def cells(self) -> tuple[str, ...]:
        """The row as text, under `STANDINGS_COLUMNS`: `cellarena ladder standings` and the standings
        page both show exactly these cells."""
        return (
            str(self.rank),
            self.bot,
            self.pool,
            f"{self.rating:.2f}?" if self.provisional else f"{self.rating:.2f}",
            f"{self.sigma:.2f}",
            "{:.1f}..{:.1f}".format(*self.interval),
            str(self.matches),
            str(self.wins),
            str(self.draws),
            str(self.losses),
            str(self.late),
            str(self.invalid),
            str(self.bank_drawn_ms),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "bot": self.bot,
            "kind": self.kind,
            "pool": self.pool,  # "kind" says outside for a connected bot (as old clients read it)
            "rating": self.rating,
            "mu": self.mu,
            "sigma": self.sigma,
            "interval": list(self.interval),
            "matches": self.matches,
            "wins": self.wins,
            "draws": self.draws,
            "losses": self.losses,
            "late": self.late,
            "invalid": self.invalid,
            "bank_drawn_ms": self.bank_drawn_ms,
            "provisional": self.provisional,
        }


#: What a row of the ``changes`` table says happened (`LadderStore.changes_since`).
ChangeKind = Literal[
    "bot_added",
    "bot_revoked",
    "token_rotated",
    "bot_changed",
    # The community ladder (schema version 5): each ends or frees the bot's sessions, or (a
    # challenge) has the queue read the pending challenges again.
    "bot_paused",
    "bot_resumed",
    "bot_banned",
    "bot_unbanned",
    "challenge",
    # A season closed (schema version 10): the server reads the ratings afresh.
    "season_closed",
]


@dataclass(frozen=True)
class Change:
    """One change a running ladder server acts on, as the ladder's commands and pages wrote it."""

    id: int
    kind: ChangeKind
    #: The bot it is about (None for a change about the ladder as a whole).
    bot: str | None


ChallengeStatus = Literal["pending", "played", "cancelled"]


@dataclass(frozen=True)
class Challenge:
    """A bot's request for a match against a named bot (`LadderStore.challenge`)."""

    id: int
    challenger: str
    opponent: str
    rated: bool
    status: ChallengeStatus
    created: datetime
    #: The ladder match that played it, once played.
    match_id: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "challenger": self.challenger,
            "opponent": self.opponent,
            "rated": self.rated,
            "status": self.status,
            "created": _time(self.created),
            "match": self.match_id,
        }


@dataclass(frozen=True)
class AuditEntry:
    """One admin action: who did what to which bot, and when (`cellarena ladder audit`)."""

    id: int
    at: datetime
    actor: str
    action: str
    bot: str | None
    detail: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": _time(self.at),
            "actor": self.actor,
            "action": self.action,
            "bot": self.bot,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class SeatBot:
    """A seat's bot as the store keeps it when its match ends: what a settlement starts from."""

    seat: int
    bot_id: int
    name: str
    #: Its current rating; None before its first rated match.
    rating: Rating | None
    #: The version its hello carried in this match, and in its last finished match (None: none).
    version: str | None
    last_version: str | None
    #: Failures in a row so far, and why it is paused (None: it is not).
    failures: int
    paused: str | None
    #: Whole days from its last rated match to this match's end (0: none): its sigma widens by them.
    idle_days: int = 0


@dataclass(frozen=True)
class MatchState:
    """A running match's seats and the host's policy, read in the transaction that records its end."""

    rated: bool
    policy: CommunityPolicy
    seats: tuple[SeatBot, ...]


@dataclass(frozen=True)
class FailureCount:
    """A bot's failures in a row after one more match or launch, and the pause they bring (or None)."""

    failures: int
    pause: str | None


@dataclass(frozen=True)
class SeatChange:
    """What a match's end changes for one seat's bot."""

    seat: int
    bot_id: int
    name: str
    before: Rating
    after: Rating
    outcome: Outcome
    count: FailureCount


@dataclass(frozen=True)
class Settlement:
    """What a match's end changes, as `scoring.settlement.settle` decides it; the store writes it."""

    rated: bool
    winner: int | None
    seats: tuple[SeatChange, ...]
