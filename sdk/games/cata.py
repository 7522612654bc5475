"""C.A.T.A.: public codes, the automaton's step, the reaction phase, and bot-side helpers.

The server's engine imports `Automaton` and `react` from here, so a lookahead bot simulates a
reaction phase with the very code that decides the match. Unlike the rest of the SDK this module
needs numpy (a dependency of cellarena anyway): the step is vectorised.

Seats and colours: seat 0 plays **black** (cell value 0) and owns rule entries 0-15; seat 1 plays
**white** (cell value 1) and owns entries 16-31. A seat's colour is its seat number.
`docs/games/cata.md` has the rules; `docs/protocol.md` the wire format.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, TypeAlias

import numpy as np

from cellarena.sdk.bot import GameBot
from cellarena.sdk.games import MovesError, bank_ms_of
from cellarena.sdk.protocol import Length, Tick, is_int

BLACK = 0
WHITE = 1
#: Rule entries: index = 16*C + 8*U + 4*R + 2*D + L.
RULE_SIZE = 32
HALF = 16
#: Seats in the order of a turn's four single moves: seat 1 (white) moves first.
MOVE_ORDER = (1, 0, 1, 0)
MOVES_PER_TURN = len(MOVE_ORDER)
START_HP = 64
#: Health thresholds in health points; crossing 48 or 16 resets the board, 32 the board and the rule.
THRESHOLDS = (48, 32, 16)
RULE_RESET_THRESHOLD = 32


class Act(IntEnum):
    """The kind of a move: the first element of the ``moves`` array."""

    PASS = 0
    STRIKE = 1
    BLOCK = 2
    MEDITATE = 3


# ---------------------------------------------------------------------------------------- rule helpers
def rule_index(c: int, u: int, r: int, d: int, left: int) -> int:
    """The rule entry for a cell with centre ``c`` and neighbours up, right, down, left (0 or 1 each)."""
    return 16 * c + 8 * u + 4 * r + 2 * d + left


def neighbourhood(index: int) -> tuple[int, int, int, int, int]:
    """(C, U, R, D, L) of a rule entry: the inverse of `rule_index`."""
    if not 0 <= index < RULE_SIZE:
        raise ValueError(f"rule index must be 0..31, got {index}")
    return (index >> 4) & 1, (index >> 3) & 1, (index >> 2) & 1, (index >> 1) & 1, index & 1


def owner(index: int) -> int:
    """The seat owning rule entry ``index``: the C bit (entries 0-15 seat 0, 16-31 seat 1)."""
    return index >> 4


def half(seat: int) -> range:
    """The rule entries seat ``seat`` owns."""
    return range(HALF * seat, HALF * seat + HALF)


def identity_rule() -> list[int]:
    """Every entry in its owner's colour: each cell keeps its value, so any board stays still."""
    return [BLACK] * HALF + [WHITE] * HALF


def quadrants(size: int) -> np.ndarray:
    """The start board: top-left and bottom-right quadrants white (1), the other two black (0)."""
    if size < 2 or size % 2:
        raise ValueError(f"the board size must be an even number of at least 2, got {size}")
    h = size // 2
    board = np.zeros((size, size), np.uint8)
    board[:h, :h] = WHITE
    board[h:, h:] = WHITE
    return board


def pack_board(board: np.ndarray) -> bytes:
    """The board as the protocol sends it: ``numpy.packbits`` of the row-major cells (first cell in
    the most significant bit of byte 0), zero-padded to whole bytes."""
    return np.packbits(np.asarray(board, np.uint8), axis=None).tobytes()


def unpack_board(data: bytes, size: int) -> np.ndarray:
    """The (size, size) uint8 board of `pack_board`'s bytes; ValueError if the length is wrong."""
    need = (size * size + 7) // 8
    if len(data) != need:
        raise ValueError(f"a {size}x{size} board takes {need} bytes, got {len(data)}")
    bits = np.unpackbits(np.frombuffer(data, np.uint8), count=size * size)
    return bits.reshape(size, size)


def white_count(board: np.ndarray) -> int:
    """The number of white cells (the black ones are the rest)."""
    return int(np.count_nonzero(board))


# ---------------------------------------------------------------------------------------- the step
class Automaton:
    """Steps one size of board in place: no array is allocated per generation.

    ``board`` is the current (size, size) uint8 state, C-contiguous, and is overwritten by `step`.
    Cells outside the board read as black (0), or wrap around with ``torus``.
    """

    def __init__(self, size: int, torus: bool = False) -> None:
        if size < 1:
            raise ValueError(f"size must be positive, got {size}")
        self.size = size
        self.torus = torus
        self.board = np.zeros((size, size), np.uint8)
        # The padded copy gives every neighbour a plain slice; its frame stays 0 unless torus.
        self._pad = np.zeros((size + 2, size + 2), np.uint8)
        self._idx = np.empty((size, size), np.uint8)
        self._lut = np.zeros(RULE_SIZE, np.uint8)

    def load(self, board: np.ndarray) -> None:
        self.board[...] = board

    def step(self, rule: Sequence[int] | np.ndarray) -> None:
        """One generation: each cell becomes ``rule[16C + 8U + 4R + 2D + L]``."""
        lut = self._lut
        lut[...] = rule
        b, p, idx = self.board, self._pad, self._idx
        p[1:-1, 1:-1] = b
        if self.torus:
            p[0, 1:-1] = b[-1]
            p[-1, 1:-1] = b[0]
            p[1:-1, 0] = b[:, -1]
            p[1:-1, -1] = b[:, 0]
        # Horner's scheme on the index, in place: ((((C*2+U)*2+R)*2+D)*2+L). Doubling by addition:
        # numpy's uint8 add is vectorised, its shift is not.
        np.add(b, b, out=idx)
        idx |= p[:-2, 1:-1]
        idx += idx
        idx |= p[1:-1, 2:]
        idx += idx
        idx |= p[2:, 1:-1]
        idx += idx
        idx |= p[1:-1, :-2]
        np.take(lut, idx, out=b, mode="clip")


def step(board: np.ndarray, rule: Sequence[int] | np.ndarray, torus: bool = False) -> np.ndarray:
    """One generation of ``board`` under ``rule``, as a new array (convenient; `Automaton` is faster)."""
    board = np.asarray(board, np.uint8)
    ca = Automaton(board.shape[0], torus)
    if board.shape != (ca.size, ca.size):
        raise ValueError(f"the board must be square, got shape {board.shape}")
    ca.load(board)
    ca.step(rule)
    return ca.board.copy()


# ---------------------------------------------------------------------------------------- the reaction phase
@dataclass(frozen=True)
class Reaction:
    """How a reaction phase's run of the automaton ended.

    ``ended`` is "static" (a generation equal to the one before), "cycle" (a state seen before) or
    "cap" (``max_generations`` run). ``period`` is the cycle's length (1 when static, 0 at the cap).
    ``picked`` is the generation the board was frozen at.
    """

    ended: str
    generations: int
    period: int
    picked: int

    def to_mapping(self) -> dict[str, Any]:
        return {
            "ended": self.ended,
            "generations": self.generations,
            "period": self.period,
            "picked": self.picked,
        }


def react(
    ca: Automaton,
    rule: Sequence[int] | np.ndarray,
    *,
    loser: int | None,
    max_generations: int = 512,
    pick_window: int = 64,
) -> Reaction:
    """Run ``ca.board`` under ``rule`` until it is static, cycles, or ``max_generations`` pass.

    After a cycle or the cap, the board is frozen at the state the losing colour ``loser`` would
    pick: among the cycle's states (or the last ``pick_window`` ones at the cap) the one with the
    most cells of that colour, the earliest on ties. With no loser (equal health) it stays as it is
    at detection. States are compared exactly (their packed bytes), never by a lossy hash.
    """
    first = pack_board(ca.board)
    seen = {first: 0}
    history = [first]
    for g in range(1, max_generations + 1):
        ca.step(rule)
        key = pack_board(ca.board)
        if key == history[-1]:
            return Reaction("static", g, 1, g)
        j = seen.get(key)
        if j is not None:
            picked = _pick(ca, history, j, loser)
            return Reaction("cycle", g, g - j, g if picked is None else picked)
        seen[key] = g
        history.append(key)
    start = max(0, len(history) - pick_window)
    picked = _pick(ca, history, start, loser)
    return Reaction("cap", max_generations, 0, max_generations if picked is None else picked)


def _pick(ca: Automaton, history: list[bytes], start: int, loser: int | None) -> int | None:
    """Load the state in ``history[start:]`` with the most ``loser`` cells; its generation."""
    if loser is None:
        return None
    whites = [int(np.bitwise_count(np.frombuffer(s, np.uint8)).sum()) for s in history[start:]]
    scores = [-w for w in whites] if loser == BLACK else whites  # most black = fewest white
    best = start + max(range(len(scores)), key=lambda i: (scores[i], -i))
    ca.load(unpack_board(history[best], ca.size))
    return best


# ---------------------------------------------------------------------------------------- legality
def refusal(
    seat: int,
    kind: int,
    index: int,
    rule: Sequence[int],
    *,
    turn: int,
    blocked: bool,
    meditated: bool,
    health: Sequence[int],
) -> str | None:
    """Why ``seat`` may not play (kind, index) now, or None if it may. The server uses this too."""
    other = 1 - seat  # the opponent's seat, which is also its colour
    if turn == 1 and kind != Act.STRIKE:
        return "on turn 1 both of your moves must be strikes"
    if kind == Act.PASS:
        return None
    if kind == Act.STRIKE:
        if owner(index) == seat:
            return f"entry {index} is in your own half; strike an entry of the opponent's half"
        if rule[index] != other:
            return f"entry {index} is already your colour"
        return None
    if kind == Act.BLOCK:
        if owner(index) != seat:
            return f"entry {index} is in the opponent's half; block only entries of your own half"
        if blocked:
            return "you have already blocked this turn (one block per turn)"
        if rule[index] != other:
            return f"entry {index} is still your colour; there is nothing to restore"
        return None
    if kind == Act.MEDITATE:
        if meditated:
            return "you have already meditated this turn"
        if not health[seat] < health[other]:
            return "you may meditate only while your health is below the opponent's"
        return None
    return f"unknown move kind {kind}"


# ---------------------------------------------------------------------------------------- the message
class CataTick(Tick):
    """C.A.T.A.'s ``tick``, to the one seat whose single move it is (`View` reads it)."""

    seat: int
    size: int
    board: bytes  # the board as packed bits, numpy.packbits order
    rule: Annotated[list[int], Length(RULE_SIZE, RULE_SIZE)]
    health: Annotated[list[int], Length(2, 2)]
    cells_per_hp: int
    turn: int
    move: int
    moves_left: int
    blocked: bool
    meditated: bool
    opponent_meditated: bool
    refused: dict[str, Any] | None
    last_reaction: dict[str, Any] | None


# ---------------------------------------------------------------------------------------- the view
@dataclass(frozen=True)
class View:
    """What ``on_tick`` gets in C.A.T.A.: one request to make one move.

    ``board`` is a (size, size) uint8 numpy array (0 black, 1 white); ``rule`` the 32 entries;
    ``health`` both seats' health in cell units (``cells_per_hp`` cells make one health point).
    """

    tick: int
    seat: int
    size: int
    board: np.ndarray
    rule: tuple[int, ...]
    health: tuple[int, int]
    cells_per_hp: int
    turn: int
    move: int
    moves_left: int
    blocked: bool
    meditated: bool
    opponent_meditated: bool
    refused: dict[str, Any] | None = None
    last_reaction: dict[str, Any] | None = None
    budget_ms: int = 0
    #: What is left of your time bank, in ms (docs/protocol.md#the-time-bank); None when the match
    #: has none. An answer after ``budget_ms`` is still taken while this lasts.
    bank_ms: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def colour(self) -> int:
        return self.seat

    @property
    def opponent(self) -> int:
        return 1 - self.seat

    @property
    def my_health(self) -> int:
        return self.health[self.seat]

    @property
    def opponent_health(self) -> int:
        return self.health[1 - self.seat]

    def refusal(self, kind: int, index: int = 0) -> str | None:
        """Why the move (kind, index) would be refused now, or None if it is legal."""
        return refusal(
            self.seat,
            kind,
            index,
            self.rule,
            turn=self.turn,
            blocked=self.blocked,
            meditated=self.meditated,
            health=self.health,
        )

    def legal_moves(self) -> list[tuple[int, int]]:
        """Every legal move as (kind, index): strikes, blocks, meditate and pass (index 0)."""
        out: list[tuple[int, int]] = []
        for kind in (Act.STRIKE, Act.BLOCK):
            out += [(int(kind), i) for i in range(RULE_SIZE) if self.refusal(kind, i) is None]
        out += [(int(k), 0) for k in (Act.MEDITATE, Act.PASS) if self.refusal(k) is None]
        return out

    @classmethod
    def from_message(cls, message: dict[str, Any]) -> View:
        try:
            size = int(message["size"])
            seat = int(message["seat"])
            rule = tuple(int(v) for v in message["rule"])
            health = tuple(int(h) for h in message["health"])
            board = unpack_board(bytes(message["board"]), size)
            if len(rule) != RULE_SIZE or len(health) != 2 or seat not in (0, 1):
                raise ValueError("rule must have 32 entries, health 2, and seat be 0 or 1")
            return cls(
                tick=int(message["tick"]),
                seat=seat,
                size=size,
                board=board,
                rule=rule,
                health=(health[0], health[1]),
                cells_per_hp=int(message["cells_per_hp"]),
                turn=int(message["turn"]),
                move=int(message["move"]),
                moves_left=int(message["moves_left"]),
                blocked=bool(message["blocked"]),
                meditated=bool(message["meditated"]),
                opponent_meditated=bool(message["opponent_meditated"]),
                refused=message.get("refused"),
                last_reaction=message.get("last_reaction"),
                budget_ms=int(message.get("budget_ms") or 0),
                bank_ms=bank_ms_of(message),
                raw=message,
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"a cata tick message is missing or mistypes a field: {exc!r}") from None


# ---------------------------------------------------------------------------------------- for learning
#: Actions of the training environment (`cellarena.server.env.games.cata`): ``a`` is the move
#: ``(a // RULE_SIZE, a % RULE_SIZE)``, so every (kind, index) pair has one action.
ACTIONS = len(Act) * RULE_SIZE
#: The numbers after the board and the rule in `observation`: both healths in HP, then turn, move,
#: moves left, blocked, meditated, opponent meditated and seat.
OBSERVATION_EXTRA = 9


def observation(view: View) -> np.ndarray:
    """The view as the training environment's observation: the board's cells row by row, the 32 rule
    entries, then the `OBSERVATION_EXTRA` numbers (float32). Here, in the SDK, so that a trained bot
    decodes its requests with the very code the environment trained it on."""
    hp = [h / view.cells_per_hp for h in view.health]
    flags = [view.turn, view.move, view.moves_left, view.blocked, view.meditated, view.opponent_meditated]
    tail = np.asarray([*hp, *flags, view.seat], np.float32)
    cells = view.board.reshape(-1).astype(np.float32)
    return np.concatenate([cells, np.asarray(view.rule, np.float32), tail])


def action_mask(view: View) -> np.ndarray:
    """(ACTIONS,) int8: 1 for each action that is a legal move now (`View.legal_moves`)."""
    mask = np.zeros(ACTIONS, np.int8)
    for kind, index in view.legal_moves():
        mask[kind * RULE_SIZE + index] = 1
    return mask


def action_move(action: int) -> tuple[int, int]:
    """The move (kind, index) of a training environment's action."""
    return (int(action) // RULE_SIZE, int(action) % RULE_SIZE)


# ---------------------------------------------------------------------------------------- the bot loop
def strike(index: int) -> tuple[int, int]:
    return (int(Act.STRIKE), index)


def block(index: int) -> tuple[int, int]:
    return (int(Act.BLOCK), index)


PASS = (int(Act.PASS), 0)
MEDITATE = (int(Act.MEDITATE), 0)


def move_for(answer: object) -> list[int]:
    """The ``moves`` field for ``answer``: a (kind, index) pair, or a bare `Act` for pass/meditate."""
    value = answer.tolist() if hasattr(answer, "tolist") else answer
    if is_int(value):
        if value not in (Act.PASS, Act.MEDITATE):
            raise MovesError(f"on_tick returned {value!r}; strikes and blocks need an index: (kind, index)")
        return [int(value), 0]
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise MovesError(f"on_tick returned {answer!r:.60}; return (kind, index), e.g. strike(5) or PASS")
    kind, index = value
    ok = is_int(kind) and is_int(index)
    if not ok or kind not in Act._value2member_map_ or not 0 <= index < RULE_SIZE:
        raise MovesError(f"on_tick returned {answer!r:.60}; kind must be 0..3 and index 0..31")
    return [int(kind), int(index)]


def make_view(message: dict[str, Any]) -> View:
    """The `View` of a ``tick`` message (see `cellarena.sdk.games.GameAdapter`)."""
    return View.from_message(message)


def encode_answer(answer: object, message: dict[str, Any]) -> list[int]:
    return move_for(answer)


def noop_answer(message: dict[str, Any]) -> list[int]:
    return [int(Act.PASS), 0]


def idle_answer(view: View) -> tuple[int, int]:
    """A pass."""
    return PASS


# ---------------------------------------------------------------------------------------- the bot class
#: What a C.A.T.A. bot's ``on_tick`` returns: a (kind, index) pair such as ``strike(5)`` or `PASS`, or a
#: bare `Act` for a pass or a meditation.
Answer: TypeAlias = tuple[int, int] | Act


class CataBot(GameBot[View, Answer]):
    """Subclass this for a C.A.T.A. bot and override ``on_tick(self, view: View) -> Answer``: one
    move, (kind, index), each time it is your seat's single move (`View.legal_moves` lists them)."""

    game: ClassVar[str] = "cata"


if TYPE_CHECKING:
    # mypy checks this module against the bot loop's protocol, with its own view and answer types.
    from cellarena.sdk.games import GameAdapter
    from cellarena.sdk.games import cata as _this

    _ADAPTER: GameAdapter[View, Answer] = _this
