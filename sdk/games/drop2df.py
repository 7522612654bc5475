"""2dFDCAL (``drop2df``): cell codes, the CA step, edit rules, and the bot-side view and answers.

The rules are in `docs/games/drop2df.md`. This module holds the one implementation of the step and
of what an edit or a token does, so that the server's engine and a lookahead bot agree by
construction: the engine imports them from here. Everything but `step_many` is plain Python;
`step_many` (the vectorised step over many rows at once) imports numpy when first called.

A row is a ``bytes`` of cell codes. Cell 0 and the last cell are the holes; cell 1 starts as ``@``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

from cellarena.sdk.bot import GameBot
from cellarena.sdk.games import MovesError, bank_ms_of
from cellarena.sdk.protocol import Tick, as_int

# ---------------------------------------------------------------------------------------- codes
EMPTY = 0  #: ``[ ]``
PLUS = 1  #: ``[+]`` a positive charge
MINUS = 2  #: ``[-]`` a negative charge
BLOCK = 3  #: ``[#]`` a blocking space
RABBIT = 4  #: ``[@]`` the r@bbit wave
HOLE = 5  #: ``[0]`` a hole (only the two ends)
CODES = 6

#: Code -> the character the rules write inside ``[ ]``.
CHARS = " +-#@0"
#: Token faces (4dF): a ``+``, a ``-`` or a blank face, written with the cell codes they look like.
FACES = (EMPTY, PLUS, MINUS)
#: Most ops one answer may hold; more is malformed as a whole.
MAX_OPS = 8
MOVERS = frozenset({PLUS, MINUS, RABBIT})
_OPPOSITE = {PLUS: MINUS, MINUS: PLUS}


def rule(left: int, centre: int, right: int) -> int:
    """The next code of a cell from its window: the canonical table (mirror-symmetric, total).

    ``#`` stays; ``@`` never stays (it spreads); a charge next to the opposite charge becomes ``#``,
    otherwise it vanishes; an empty cell takes the one mover beside it, becomes ``#`` between
    ``+`` and ``-``, and otherwise stays empty. Holes are never the centre of a step.
    """
    if centre == BLOCK:
        return BLOCK
    if centre == RABBIT:
        return EMPTY
    if centre in _OPPOSITE:
        return BLOCK if _OPPOSITE[centre] in (left, right) else EMPTY
    if centre == HOLE:
        return HOLE  # only ever evaluated by table builders; the step keeps holes fixed
    lm, rm = left in MOVERS, right in MOVERS
    if lm != rm:
        return left if lm else right
    if lm and _OPPOSITE.get(left) == right:
        return BLOCK
    return EMPTY


#: ``RULE_TABLE[left * 36 + centre * 6 + right]`` is `rule(left, centre, right)`: 216 bytes.
RULE_TABLE = bytes(rule(a, b, c) for a in range(CODES) for b in range(CODES) for c in range(CODES))


def step(row: bytes | Sequence[int]) -> bytes:
    """One generation of one row (plain Python): the holes at both ends stay, every other cell is
    recomputed from the old row."""
    r = bytes(row)
    t = RULE_TABLE
    inner = bytes(t[r[i - 1] * 36 + r[i] * 6 + r[i + 1]] for i in range(1, len(r) - 1))
    return r[:1] + inner + r[-1:]


def step_many(rows: Any, out: Any = None, scratch: Any = None) -> Any:
    """One generation of every row of ``rows`` (a (k, n) uint8 numpy array) at once, into ``out``.

    ``out`` (same shape and dtype, not ``rows`` itself) and ``scratch`` (a (k, n - 2) uint8 array)
    may be passed in so that a caller stepping many times allocates nothing per step.
    """
    import numpy as np

    if out is None:
        out = np.empty_like(rows)
    if scratch is None:
        scratch = np.empty((rows.shape[0], rows.shape[1] - 2), np.uint8)
    # The window index (left * 6 + centre) * 6 + right is at most 215: it fits the uint8 scratch.
    np.multiply(rows[:, :-2], 6, out=scratch)
    scratch += rows[:, 1:-1]
    scratch *= 6
    scratch += rows[:, 2:]
    np.take(_np_table(), scratch, out=out[:, 1:-1])
    out[:, 0] = rows[:, 0]
    out[:, -1] = rows[:, -1]
    return out


_TABLE_CACHE: list[Any] = []


def _np_table() -> Any:
    if not _TABLE_CACHE:
        import numpy as np

        _TABLE_CACHE.append(np.frombuffer(RULE_TABLE, np.uint8).copy())
    return _TABLE_CACHE[0]


def text(row: bytes | Sequence[int]) -> str:
    """A row the way the rules print it: ``[0][@][ ][ ][-][ ][ ][+][ ][ ][0]``."""
    return "".join(f"[{CHARS[c]}]" for c in bytes(row))


def parse(picture: str) -> bytes:
    """The row of a picture such as ``[0][@][ ][#][0]`` (or the bare characters ``0@ #0``)."""
    bare = picture.replace("][", "")
    if bare.startswith("[") and bare.endswith("]"):
        bare = bare[1:-1]
    try:
        return bytes(CHARS.index(ch) for ch in bare)
    except ValueError:
        bad = next(ch for ch in bare if ch not in CHARS)
        raise ValueError(f"{bad!r} is not a cell; cells are {CHARS!r}") from None


def rabbit_scores(row: bytes | Sequence[int]) -> bool:
    """Whether this row, once stepped, sends an ``@`` into the right hole (scores 1)."""
    return len(row) >= 3 and row[-2] == RABBIT


# ---------------------------------------------------------------------------------------- edits
_TOGGLE = {EMPTY: BLOCK, BLOCK: EMPTY, PLUS: MINUS, MINUS: PLUS}
#: Token face -> {cell code before: cell code after}.
_TOKEN = {
    PLUS: {PLUS: EMPTY, MINUS: PLUS},
    MINUS: {MINUS: EMPTY, PLUS: MINUS},
    EMPTY: {BLOCK: EMPTY, EMPTY: BLOCK},
}


def edit_error(row: bytes | Sequence[int], cell: int) -> str | None:
    """Why the edit of ``cell`` is not allowed on ``row``, or None if it is."""
    n = len(row)
    if cell in (0, n - 1):
        return f"cell {cell} is a hole, which cannot be edited"
    if not 1 <= cell <= n - 2:
        return f"cell {cell} is out of range: edits go to cells 1..{n - 2}"
    code = row[cell]
    if code not in _TOGGLE:
        return f"cell {cell} holds [{CHARS[code]}], which cannot be edited"
    return None


def edited(row: bytes, cell: int) -> bytes:
    """``row`` after the (legal) edit of ``cell``: ``[ ]``<->``[#]``, ``[+]``<->``[-]``."""
    return row[:cell] + bytes((_TOGGLE[row[cell]],)) + row[cell + 1 :]


def legal_edits(row: bytes | Sequence[int]) -> list[int]:
    """The cells an edit may change on ``row``, ascending."""
    return [i for i in range(1, len(row) - 1) if row[i] in _TOGGLE]


def token_error(row: bytes | Sequence[int], face: int, cell: int, tokens: Sequence[int]) -> str | None:
    """Why spending the token ``face`` on ``cell`` is not allowed, or None if it is."""
    if face not in _TOKEN:
        return f"{face} is not a token face: faces are 0 (blank), 1 (+) and 2 (-)"
    if face not in tokens:
        return f"no [{CHARS[face]}] token left"
    n = len(row)
    if cell in (0, n - 1):
        return f"cell {cell} is a hole, which a token cannot change"
    if not 1 <= cell <= n - 2:
        return f"cell {cell} is out of range: tokens go to cells 1..{n - 2}"
    if row[cell] not in _TOKEN[face]:
        return f"a [{CHARS[face]}] token cannot change [{CHARS[row[cell]]}] (cell {cell})"
    return None


def spent(row: bytes, face: int, cell: int) -> bytes:
    """``row`` after spending the (legal) token ``face`` on ``cell``."""
    return row[:cell] + bytes((_TOKEN[face][row[cell]],)) + row[cell + 1 :]


@dataclass(frozen=True)
class Outcome:
    """What one turn's ops did to a row: the row to step, the tokens left and the refusals."""

    row: bytes
    tokens: tuple[int, ...]
    refused: tuple[str, ...]


def play_ops(row: bytes, ops: Iterable[int | Sequence[int]], tokens: Sequence[int] = ()) -> Outcome:
    """Carry out one turn's ops in order: an int edits that cell, ``[face, cell]`` spends a token.

    At most one edit and one token of a turn act; every refused op is a no-op and its reason is
    listed. A refused op uses up nothing: a valid edit after a refused edit still acts (the rules
    say the other ops of the answer still act). ``ops`` must be well formed (see `decode_ops`).
    """
    left = list(tokens)
    refused: list[str] = []
    edited_once = spent_once = False
    for op in ops:
        if isinstance(op, int):
            why = "a second edit in one turn" if edited_once else edit_error(row, op)
            if why is None:
                row = edited(row, op)
                edited_once = True
        else:
            face, cell = op
            why = "a second token in one turn" if spent_once else token_error(row, face, cell, left)
            if why is None:
                row = spent(row, face, cell)
                left.remove(face)
                spent_once = True
        if why is not None:
            refused.append(why)
    return Outcome(row, tuple(sorted(left)), tuple(refused))


def decode_ops(answer: Any) -> list[int | list[int]] | None:
    """The ops of a ``moves`` field, normalised, or None if it is malformed as a whole.

    nil and ``[]`` pass. Otherwise a list of at most `MAX_OPS` ops, each an int (edit that cell) or
    a list of two ints ``[face, cell]`` (spend a token). Whether an op is allowed is not checked here.
    """
    if answer is None:
        return []
    if not isinstance(answer, (list, tuple)) or len(answer) > MAX_OPS:
        return None
    ops: list[int | list[int]] = []
    for op in answer:
        cell = as_int(op)
        if cell is not None:
            ops.append(cell)
            continue
        if not isinstance(op, (list, tuple)) or len(op) != 2:
            return None
        face, at = as_int(op[0]), as_int(op[1])
        if face is None or at is None:
            return None
        ops.append([face, at])
    return ops


# ---------------------------------------------------------------------------------------- the message
class Drop2dfTick(Tick):
    """drop2df's ``tick``, to every seat each turn (`View` reads it)."""

    turn: int
    turns: int
    row: bytes
    score: int
    tokens: list[int]
    refused: list[str]


# ---------------------------------------------------------------------------------------- the view
@dataclass(frozen=True)
class View:
    """What ``on_tick`` gets each turn: your board, the turn, your score and tokens.

    ``turn`` counts from 1 to ``turns``; this turn's ops act on ``row`` before it steps.
    ``refused`` lists why ops of your previous turn were refused (empty if none were).
    """

    tick: int
    turn: int
    turns: int
    row: bytes
    score: int
    tokens: tuple[int, ...] = ()
    refused: tuple[str, ...] = ()
    budget_ms: int = 0
    #: What is left of your time bank, in ms (docs/protocol.md#the-time-bank); None when the match
    #: has none. An answer after ``budget_ms`` is still taken while this lasts.
    bank_ms: int | None = None

    @property
    def turns_left(self) -> int:
        """Turns still to play, this one included."""
        return self.turns - self.turn + 1

    def text(self) -> str:
        return text(self.row)

    def legal_edits(self) -> list[int]:
        return legal_edits(self.row)

    @classmethod
    def from_message(cls, message: Mapping[str, Any]) -> View:
        """The view of a ``tick`` message; ValueError says which field is wrong."""
        row = message.get("row")
        if not isinstance(row, (bytes, bytearray)) or len(row) < 3 or any(c >= CODES for c in row):
            raise ValueError(f"drop2df tick: 'row' must be bytes of cell codes 0..5, got {row!r:.60}")
        fields: dict[str, int] = {}
        for key in ("tick", "turn", "turns", "score"):
            value = message.get(key)
            number = as_int(value)
            if number is None:
                raise ValueError(f"drop2df tick: {key!r} must be an int, got {value!r:.40}")
            fields[key] = number
        tokens = message.get("tokens", [])
        refused = message.get("refused", [])
        if not isinstance(tokens, list) or any(as_int(t) not in FACES for t in tokens):
            raise ValueError(f"drop2df tick: 'tokens' must be a list of faces 0..2, got {tokens!r:.60}")
        if not isinstance(refused, list) or not all(isinstance(r, str) for r in refused):
            raise ValueError(f"drop2df tick: 'refused' must be a list of str, got {refused!r:.60}")
        budget = message.get("budget_ms", 0)
        return cls(
            row=bytes(row),
            tokens=tuple(int(t) for t in tokens),
            refused=tuple(refused),
            budget_ms=budget if as_int(budget) is not None else 0,
            bank_ms=bank_ms_of(message),
            **fields,
        )


# ---------------------------------------------------------------------------------------- for learning
def observation(view: View) -> bytes:
    """The view as the training environment's observation (there ``numpy.frombuffer(..., uint8)``):
    the row's cell codes, then how many blank, ``+`` and ``-`` tokens you have left. Here, in the SDK,
    so that a trained bot decodes its requests with the very code the environment
    (`cellarena.server.env.games.drop2df`) trained it on."""
    return view.row + bytes(view.tokens.count(face) for face in FACES)


class ActionCodes:
    """The training environment's actions for rows of ``cells`` cells: one number for every turn's ops.

    ``a < cells`` is the turn of the first version: 0 passes, any other ``a`` edits cell ``a``. Above,
    ``a - cells = ((order * 3 + face) * cells + token_cell) * cells + edit`` spends the token ``face``
    on ``token_cell`` and edits cell ``edit`` (none for 0), the edit first for order 0, the token first
    for order 1 (the order matters: each acts on the row the other left).
    """

    def __init__(self, cells: int) -> None:
        self.cells = cells
        self.size = cells + 2 * len(FACES) * cells * cells

    def ops(self, action: int) -> list[int | list[int]]:
        """The ``moves`` field of ``action``."""
        if action < self.cells:
            return [action] if action else []
        rest, edit = divmod(action - self.cells, self.cells)
        rest, token_cell = divmod(rest, self.cells)
        order, face = divmod(rest, len(FACES))
        token: list[int] = [face, token_cell]
        edits: list[int | list[int]] = [edit] if edit else []
        return [*edits, token] if order == 0 else [token, *edits]

    def action(
        self, edit: int, face: int | None = None, token_cell: int = 0, token_first: bool = False
    ) -> int:
        """The number of a turn: edit ``edit`` (0: none), and spend ``face`` on ``token_cell`` if given."""
        if face is None:
            return edit
        order = 1 if token_first and edit else 0
        return self.cells + ((order * len(FACES) + face) * self.cells + token_cell) * self.cells + edit

    def mask(self, view: View) -> bytearray:
        """One byte per action: 1 if every op of the action acts on ``view`` (none is refused)."""
        out = bytearray(self.size)
        row, inner = view.row, range(1, self.cells - 1)
        edits = [0, *legal_edits(row)]
        for edit in edits:
            out[edit] = 1
        for face in sorted(set(view.tokens)):
            for edit in edits:
                after = edited(row, edit) if edit else row
                for cell in inner:
                    if token_error(after, face, cell, view.tokens) is None:
                        out[self.action(edit, face, cell)] = 1
                    first = edit and token_error(row, face, cell, view.tokens) is None
                    if first and edit_error(spent(row, face, cell), edit) is None:
                        out[self.action(edit, face, cell, token_first=True)] = 1
        return out


@dataclass(frozen=True)
class Token:
    """An op that spends the token ``face`` (`PLUS`, `MINUS` or `EMPTY` for blank) on ``cell``."""

    face: int
    cell: int


def moves_for(answer: object) -> list[int | list[int]]:
    """The ``moves`` field for what ``on_tick`` returned, or `MovesError` saying what is wrong.

    None passes; an int edits that cell; a `Token` spends a token; a list of those sends several ops
    (only the first edit and the first token of a turn act).
    """
    if answer is None:
        return []
    value = answer.tolist() if hasattr(answer, "tolist") else answer
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    wire = [[op.face, op.cell] if isinstance(op, Token) else op for op in items]
    ops = decode_ops(wire)
    if ops is None:
        raise MovesError(
            f"on_tick returned {answer!r:.60}; return None (pass), a cell index (edit), "
            f"a Token(face, cell), or a list of at most {MAX_OPS} of those"
        )
    return ops


def make_view(message: dict[str, Any]) -> View:
    """The `View` of a ``tick`` message (see `cellarena.sdk.games.GameAdapter`)."""
    return View.from_message(message)


def encode_answer(answer: object, message: dict[str, Any]) -> list[int | list[int]]:
    """The ops to send for what ``on_tick`` returned."""
    return moves_for(answer)


def noop_answer(message: dict[str, Any]) -> list[int | list[int]]:
    """A pass."""
    return []


def idle_answer(view: View) -> list[int]:
    """A pass."""
    return []


# ---------------------------------------------------------------------------------------- the bot class
#: What a drop2df bot's ``on_tick`` returns: None (pass), a cell index (edit), a `Token`, or a list of
#: at most `MAX_OPS` of those.
Answer: TypeAlias = int | Token | Sequence[int | Token] | None


class Drop2dfBot(GameBot[View, Answer]):
    """Subclass this for a drop2df bot and override ``on_tick(self, view: View) -> Answer``: this
    turn's ops on your row (None passes)."""

    game: ClassVar[str] = "drop2df"


if TYPE_CHECKING:
    # mypy checks this module against the bot loop's protocol, with its own view and answer types.
    from cellarena.sdk.games import GameAdapter
    from cellarena.sdk.games import drop2df as _this

    _ADAPTER: GameAdapter[View, Answer] = _this
