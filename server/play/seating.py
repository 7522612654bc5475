"""How a lobby seats bots into matches: one small class per way of seating, over the lobby's core.

The lobby (`lobby`) accepts connections, reads each hello and checks what every server checks
(protocol version, name, game, role); then it hands each bot to its `Seating`, which decides where
the bot waits and when a match starts. Two modes exist today:

- `FirstComeSeating` (`cellarena serve`): whoever says hello plays, in the order the hellos
  arrived, as soon as there are enough bots for a match.
- `ReservedSeating` (`cellarena match` and tournaments, which launch the bots themselves): each
  seat has a secret token; a bot sits in the seat its token names, and the match starts when every
  seat is taken, or when the bots missing have ended or run out of time.

A ladder's matchmaking queue is a third mode over the same core: it admits bots, keeps them in a
`WaitingRoom`, and calls `MatchHost.start_match` with the bots it pairs, each match's replay writer
and its ladder match id as arguments.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, Unpack

import trio

from cellarena.sdk import protocol
from cellarena.sdk.protocol import State
from cellarena.server.games import causes
from cellarena.server.net.connection import Connection

if TYPE_CHECKING:
    from cellarena.server.play.match import ExplainGone, Match, RecorderFactory, TickSettings

log = logging.getLogger("cellarena.server")


class WaitingRoom:
    """Connections waiting for a match. Their owner until a match takes them: before it starts a
    bot has nothing to say, and one that leaves is no longer waited for."""

    def __init__(
        self, on_leave: Callable[[Connection], None] | None = None, *, state: State = State.WAITING
    ) -> None:
        self.conns: list[Connection] = []
        self._on_leave = on_leave
        #: Where its connections are in the protocol (`State.WATCHING_SOON` for spectators).
        self.state = state

    def add(self, conn: Connection, *, order: Callable[[Connection], float] | None = None) -> bool:
        """Take ``conn`` (in ``order`` if given, else last); False if it had closed meanwhile."""
        if not conn.attach(self):
            return False
        if order is None:
            self.conns.append(conn)
        else:
            bisect.insort(self.conns, conn, key=order)
        return True

    def take(self, count: int | None = None) -> list[Connection]:
        """The first ``count`` connections (all if None), out of the room; they stay its to own until
        a match attaches them, so one that closes in between is still noticed."""
        taken, self.conns = self.conns[:count], self.conns[len(self.conns) if count is None else count :]
        return taken

    def __len__(self) -> int:
        return len(self.conns)

    def on_message(self, conn: Connection, message: dict[str, Any], arrival: float) -> None:
        refusal = protocol.client_refusal(self.state, message["type"])
        assert refusal is not None  # nothing is in order before the welcome
        conn.fail(*refusal)

    def on_closed(self, conn: Connection) -> None:
        if conn in self.conns:
            self.conns.remove(conn)
        if self._on_leave is not None:
            self._on_leave(conn)


#: A match's seats in order: each its bot's connection, or None for a seat whose bot never came.
Seats = Sequence[Connection | None]


class MatchOptions(TypedDict, total=False):
    """What a seating may say of a match it starts (`MatchHost.start_match`), each left out or None
    for the host's default."""

    #: The engine's config and seed (default: the host's config, its seed plus the number less one);
    #: a seating that draws maps from a pool gives its own.
    engine_config: dict[str, Any] | None
    seed: int | None
    #: This match's replay writer's maker instead of the config's (a ladder names each replay for
    #: its own match id).
    recorder: RecorderFactory | None
    #: What the match is to its seating, in the log line of its start (its ladder match id).
    meta: Mapping[str, Any] | None
    #: The match's number, when another process numbers them (a worker's front).
    number: int | None
    #: What says, at the match's end, why a seat's connection went, instead of the config's (a
    #: ladder knows which of a match's bots it started: its house bots).
    explain_gone: ExplainGone | None


class MatchHost(Protocol):
    """Where matches start: the lobby that plays them (`lobby.Lobby`) or the front that hands them to
    worker processes (`workers.WorkerLobby`), both of which declare it. What a seating needs: the match
    size and pacing, the matches it runs, a way to start a match, and the processes that play them.
    A protocol, so that seating depends on no lobby and can be tested over a host of its own."""

    #: Seats per match.
    players: int

    @property
    def settings(self) -> TickSettings:
        """The matches' pacing."""
        ...

    @property
    def matches_started(self) -> int: ...

    @property
    def running(self) -> list[Match]:
        """The matches under way, oldest first."""
        ...

    def start_match(
        self, conns: Seats, names: list[str] | None = None, **options: Unpack[MatchOptions]
    ) -> Match | None:
        """Start a match with ``conns`` in seat order (None: a seat whose bot never came), its seats
        named ``names`` (default: what each bot said), as ``options`` say. The match, or None when it
        is not in this process."""
        ...

    def worker_pids(self) -> list[int]:
        """The processes other than this one that play its matches (none when it plays them)."""
        ...


class Seating:
    """A way of seating bots. The lobby calls `bind` once, then `check` and `admit` per bot hello."""

    lobby: MatchHost

    def bind(self, lobby: MatchHost) -> None:
        """Join ``lobby``; called once, before it serves."""
        self.lobby = lobby

    def connected(self, conn: Connection) -> None:
        """A connection was accepted (before its hello): a mode that knows connections by who made
        them looks at it here, where its peer address cannot have changed hands yet."""

    def check(self, conn: Connection, hello: dict[str, Any]) -> tuple[str, str] | None:
        """What this mode refuses in a bot's hello that the lobby accepted: (code, message), or None."""
        return None

    def refused(self, conn: Connection, hello: dict[str, Any], code: str, message: str) -> None:
        """A bot's hello was refused with ``code``: note it where the mode cares (the lobby fails it)."""

    def returning(self, hello: dict[str, Any]) -> bool:
        """Whether ``hello`` (accepted by `check`) is a bot coming back to a match under way, which a
        lobby that has started all its matches still admits."""
        return False

    def admit(self, conn: Connection, hello: dict[str, Any]) -> None:
        """Take a bot whose hello was accepted: make it wait, or start a match with it."""
        raise NotImplementedError

    def waiting(self) -> list[Connection]:
        """The bots waiting for a match now."""
        return []

    def spectate(self, conn: Connection, hello: dict[str, Any]) -> bool:
        """A spectator's accepted hello: True if this mode sees to it (a ladder whose matches are
        played in worker processes relays them); False, the default, leaves it to the lobby."""
        return False

    async def run(self) -> None:
        """A background task of the mode, in the lobby's nursery (default: none needed)."""


class FirstComeSeating(Seating):
    """Bots play in the order their hellos arrived (kernel stamps, whatever order they were read in),
    a match as soon as enough of them wait."""

    def __init__(self) -> None:
        self.room = WaitingRoom()

    def admit(self, conn: Connection, hello: dict[str, Any]) -> None:
        log.info("%s (%s) is waiting for a match", conn.name, conn.peer)
        if not self.room.add(conn, order=lambda c: c.joined):
            return
        players = self.lobby.players
        if len(self.room) >= players:
            self.lobby.start_match(self.room.take(players))

    def waiting(self) -> list[Connection]:
        return list(self.room.conns)


@dataclass(frozen=True)
class Refusal:
    """A hello refused from the bot of a reserved seat: the error it was sent, and the game it asked for."""

    code: str
    message: str
    game: Any


class ReservedSeating(Seating):
    """One match whose seats are reserved for bots we launched: each seat by the connection the
    launcher made for it (`expect`), or by a secret token (token -> seat).

    A connection made by the launcher and handed to the bot carries no secret: the seat is the
    connection's, from its source port, which no other socket can hold while it is open. A token is
    what bots written before that use; ``owner`` (seat, connection) -> bool, when given, then says
    whether the connection belongs to that seat's own processes, so that a token read by another
    process (an unread pipe in /proc/PID/fd) seats nobody.

    ``names`` are the seats' names in results, whatever name each bot says in its hello. With a
    ``timeout`` the match starts that many seconds after the lobby opens even if some bots never
    connected (they forfeit); `seat_gone` says a seat's bot will never come (its process ended).
    A seat given up at the timeout is in `abandoned` with its cause, and a launcher's connection
    still open without a hello is closed then with `timeout`: its bot is told, and nothing waits on it.
    """

    def __init__(
        self,
        tokens: dict[str, int],
        names: list[str],
        *,
        timeout: float | None = None,
        owner: Callable[[int, Connection], bool] | None = None,
    ) -> None:
        self.tokens = tokens
        self.names = names
        self.timeout = timeout
        self.owner = owner
        #: Source ports of the connections the launcher made, by seat, until the lobby accepts them.
        self._expected: dict[int, int] = {}
        #: Accepted connections that the launcher made: each is its seat's, whatever its hello says.
        self._handed: dict[Connection, int] = {}
        #: Connections whose token is a seat's but which that seat's processes do not hold.
        self._foreign: set[Connection] = set()
        #: Reserved seats whose bot's hello was refused, so the launcher can say why.
        self.refusals: dict[int, Refusal] = {}
        self.seated: dict[int, Connection] = {}
        #: Seats whose bot has played: their token seats nobody else, even after the match started.
        self._played: set[int] = set()
        self._gone: set[int] = set()
        #: Seats given up at the timeout (their bot had not said hello, and its process had not
        #: ended): a `causes.NEVER_CONNECTED` map each, whose ``detail`` says whether it connected.
        self.abandoned: dict[int, dict[str, Any]] = {}
        self._room = WaitingRoom(on_leave=self._unseat)

    def expect(self, source_port: int, seat: int) -> None:
        """The launcher is about to connect from loopback port ``source_port`` for ``seat`` (its
        socket is bound there already, so no other socket can connect from that port meanwhile)."""
        self._expected[source_port] = seat

    def connected(self, conn: Connection) -> None:
        port = conn.peer_port
        if port is not None and port in self._expected:
            self._handed[conn] = self._expected.pop(port)  # once: a later socket on that port gets nothing

    def _reserved_seat(self, conn: Connection, hello: dict[str, Any]) -> int | None:
        if conn in self._handed:
            return self._handed[conn]
        token = hello.get("token")
        if isinstance(token, str) and token in self.tokens and conn not in self._foreign:
            return self.tokens[token]
        return None

    def check(self, conn: Connection, hello: dict[str, Any]) -> tuple[str, str] | None:
        seat = self._reserved_seat(conn, hello)
        if seat is None:
            return protocol.BAD_HELLO, "this server reserves its seats: send the 'token' you were given"
        if conn not in self._handed and self.owner is not None and not self.owner(seat, conn):
            self._foreign.add(conn)
            log.warning("%s came with seat %d's token from another process: refused", conn.peer, seat)
            return (
                protocol.BAD_HELLO,
                "that token is another bot's: a seat's token seats only a connection of that bot's own "
                "processes (docs/security.md)",
            )
        if seat in self.seated or seat in self._played:
            return protocol.SEAT_TAKEN, "that token's seat already has its bot; a token seats one connection"
        return None

    def refused(self, conn: Connection, hello: dict[str, Any], code: str, message: str) -> None:
        """Blame a refused hello on its reserved seat when it came from that seat's bot."""
        seat = self._reserved_seat(conn, hello)
        if seat is None:
            return  # no seat's, or another process holding a seat's token: the seat itself is fine
        if seat in self.seated or self.lobby.matches_started:
            return  # a second connection for a seat that is taken: the seat itself is fine
        conn.name = self.names[seat]  # the log line then names the bot
        self.refusals[seat] = Refusal(code, message, hello.get("game"))

    def admit(self, conn: Connection, hello: dict[str, Any]) -> None:
        log.info("%s (%s) is waiting for a match", conn.name, conn.peer)
        seat = self._reserved_seat(conn, hello)
        assert seat is not None  # `check` accepted it
        if self._room.add(conn):
            self.seated[seat] = conn
            self._start_if_ready()

    def waiting(self) -> list[Connection]:
        return list(self.seated.values())

    def seat_gone(self, seat: int) -> None:
        """Seat ``seat``'s bot will never connect (its process ended): do not wait for it."""
        self._gone.add(seat)
        self._start_if_ready()

    async def run(self) -> None:
        """With a timeout: start after it even if some bots never connected."""
        if self.timeout is None:
            return
        await trio.sleep(self.timeout)
        if not self.lobby.matches_started:
            missing = [i for i in range(self.lobby.players) if i not in self.seated]
            log.warning("seats %s did not connect within %g s; they forfeit", missing, self.timeout)
            self._abandon(missing, self.timeout)
            self._start()

    def _abandon(self, missing: list[int], timeout: float) -> None:
        """Give up ``missing`` seats at the timeout: each one's cause, and its launcher-made
        connection, if still open without a hello, closed (its bot would wait for a welcome forever)."""
        silent = {seat: conn for conn, seat in self._handed.items() if not conn.closed}
        for seat in missing:
            if seat in self._gone or seat in self.refusals:
                continue  # its process ended, or it was refused: its launcher says which
            conn = silent.get(seat)
            if conn is not None and seat not in self.seated:
                detail = f"its connection was open, but no hello came within {timeout:g} s"
                conn.fail(protocol.TIMEOUT, f"no hello within {timeout:g} s: the match starts without you")
            else:
                detail = f"it had no connection open and no hello came within {timeout:g} s"
            self.abandoned[seat] = causes.cause(causes.NEVER_CONNECTED, detail=detail)

    def _unseat(self, conn: Connection) -> None:
        for seat, c in list(self.seated.items()):
            if c is conn:
                del self.seated[seat]

    def _start_if_ready(self) -> None:
        accounted = len(self.seated) + len(self._gone - set(self.seated))
        if not self.lobby.matches_started and accounted >= self.lobby.players:
            self._start()

    def _start(self) -> None:
        conns = [self.seated.get(i) for i in range(self.lobby.players)]
        self._played.update(self.seated)
        self._room.take()
        self.seated = {}
        self.lobby.start_match(conns, list(self.names))
