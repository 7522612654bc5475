"""The protocol's constants: its version, the frame size limits, and the codes of `error` messages.

`ProtocolError` lives here too, since every layer (framing, the field checks, the message rules)
raises it with one of these codes. `docs/protocol.md` explains each code.
"""

from __future__ import annotations

PROTOCOL_VERSION = 1
#: Largest frame a client may send (hello, moves). Anything bigger is refused before it is read.
MAX_CLIENT_FRAME = 64 * 1024
#: Largest frame the server sends (spectator frames of the biggest worlds).
MAX_SERVER_FRAME = 64 * 1024 * 1024
#: Longest bot name, in characters (Unicode code points), that a ``hello`` may carry.
MAX_NAME = 64
#: Longest ``version`` a ``hello`` may carry (characters).
MAX_VERSION = 64

# Error codes carried by an `error` message; docs/protocol.md explains each.
BAD_FRAME = "bad_frame"
TOO_LARGE = "too_large"
BAD_VERSION = "bad_version"
BAD_HELLO = "bad_hello"
#: A reserved seat whose bot is already connected (or has played): a second hello with its token.
SEAT_TAKEN = "seat_taken"
BAD_MESSAGE = "bad_message"
UNKNOWN_TYPE = "unknown_type"
TIMEOUT = "timeout"
SLOW_READER = "slow_reader"
FLOOD = "flood"
UNRESPONSIVE = "unresponsive"
SHUTDOWN = "shutdown"
INTERNAL = "internal"
# A ladder's refusals (docs/ladder.md): each says what to do, and whether waiting helps.
BUSY = "busy"
QUEUE_FULL = "queue_full"
TOO_MANY_CONNECTIONS = "too_many_connections"
LOCKED_OUT = "locked_out"
TLS_REQUIRED = "tls_required"
#: A ladder ended this connection: its bot was revoked, or its token was replaced (rotated). Not "not
#: now": the token this bot has will not work again.
REVOKED = "revoked"
#: A ladder paused this bot (failed matches in a row) or its host banned it: the message says why.
#: A stop, not "not now": coming back cannot help until its owner fixes it and resumes it (or the
#: host lifts the ban).
PAUSED = "paused"

#: Every error code, in the order docs/protocol.md lists them.
ERROR_CODES = (
    BAD_FRAME,
    TOO_LARGE,
    BAD_MESSAGE,
    BAD_VERSION,
    BAD_HELLO,
    SEAT_TAKEN,
    UNKNOWN_TYPE,
    TIMEOUT,
    FLOOD,
    UNRESPONSIVE,
    SLOW_READER,
    SHUTDOWN,
    INTERNAL,
    BUSY,
    QUEUE_FULL,
    TOO_MANY_CONNECTIONS,
    LOCKED_OUT,
    TLS_REQUIRED,
    REVOKED,
    PAUSED,
)
#: Refusals that say "not now": a ladder bot waits and comes back (`cellarena.sdk.run(ladder=True)`).
#: Any other error before a match starts means the bot or its token is wrong, and retrying cannot help.
#: A ladder whose database is unreachable says `shutdown`, which every SDK released so far retries.
RETRY_LATER = (SHUTDOWN, BUSY, QUEUE_FULL, TOO_MANY_CONNECTIONS, LOCKED_OUT)


class ProtocolError(Exception):
    """Bad input from the peer. ``code`` is one of the error codes above; the text says what and why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
