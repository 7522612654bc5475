"""Field rules: a message's fields are declared once, as a TypedDict, and one validator checks them all.

Each field's type hint is its wire type (``int``, ``str``, ``float``, ``bool``, ``bytes`` for bin,
``list[X]`` for an array, ``dict[str, Any]`` for a map, ``X | None``, a ``Literal`` of strings, or
``Any`` for game-specific). ``Annotated`` adds constraints: `Length`, `Printable`, and `Lenient`
(a malformed value is dropped rather than refused). `spec_of` reads the hints of a TypedDict once
into a `MessageSpec`; its `check` then reports any bad field in one form for every message:
``"hello: the field 'name' must be a printable string of 1 to 64 characters (got str '')"``.

`is_int` is the one spelling of "an int that is not a bool" for the whole code base: msgpack has
no bool-is-an-int rule, so ``True`` on the wire is never a number, while Python's ``isinstance``
says it is.
"""

from __future__ import annotations

import operator
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired, Required, TypeGuard, Union

from cellarena.sdk.protocol.codes import ProtocolError


# ------------------------------------------------------------------ the int that is not a bool
def is_int(value: object) -> TypeGuard[int]:
    """An int on the wire: a Python int that is not a bool (``True`` is an int to ``isinstance``)."""
    return type(value) is int or (isinstance(value, int) and not isinstance(value, bool))


def is_number(value: object) -> TypeGuard[int | float]:
    """An int (not a bool) or a float, as a field documented as float accepts."""
    return isinstance(value, float) or is_int(value)


def as_int(value: object) -> int | None:
    """``value`` as an int if it is one, bools aside: a bot's answer may hold numpy integers, which
    ``operator.index`` takes; None for anything else (floats, strings, bools, numpy bools)."""
    if type(value) is int:
        return value
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return None


# ------------------------------------------------------------------ constraints
@dataclass(frozen=True)
class Length:
    """A string of ``lo`` to ``hi`` characters, or an array of ``lo`` to ``hi`` entries."""

    lo: int
    hi: int

    def ok(self, value: Any) -> bool:
        return self.lo <= len(value) <= self.hi

    def describe(self, what: str, wire: str) -> tuple[str, str]:
        count = f"{self.lo}" if self.lo == self.hi else f"{self.lo} to {self.hi}"
        if wire == "str":
            return f"{what} of {count} characters", wire
        # "an array of int" -> "an array of 2 ints"; the docs write "array of 2 int".
        return what.replace("an array of ", f"an array of {count} ", 1), wire.replace(
            "array of ", f"array of {count} ", 1
        )


@dataclass(frozen=True)
class Printable:
    """A string of printable characters only (`str.isprintable`: no control characters)."""

    def ok(self, value: Any) -> bool:
        return isinstance(value, str) and value.isprintable()

    def describe(self, what: str, wire: str) -> tuple[str, str]:
        return what.replace("a string", "a printable string", 1), wire


@dataclass(frozen=True)
class Lenient:
    """A malformed value counts as absent: the validator leaves it out instead of refusing the message.

    For a field that a reader has always ignored when it was not what it should be, so that
    refusing it now would break clients that worked.
    """


Constraint = Length | Printable


# ------------------------------------------------------------------ rules, from type hints
@dataclass(frozen=True)
class Rule:
    """How one wire type is checked: ``check``, what to call it in an error, and its name in the docs."""

    check: Callable[[Any], bool]
    expected: str
    wire: str


_WIRE_NAMES: dict[type, str] = {
    type(None): "nil",
    bool: "bool",
    int: "int",
    float: "float",
    str: "str",
    bytes: "bin",
    bytearray: "bin",
    list: "array",
    tuple: "array",
    dict: "map",
}

_SCALARS: dict[Any, Rule] = {
    int: Rule(is_int, "an int", "int"),
    float: Rule(is_number, "a number", "float"),
    str: Rule(lambda v: isinstance(v, str), "a string", "str"),
    bool: Rule(lambda v: isinstance(v, bool), "a bool", "bool"),
    bytes: Rule(lambda v: isinstance(v, bytes), "bin (bytes)", "bin"),
    Any: Rule(lambda _v: True, "anything", "game-specific"),
    object: Rule(lambda _v: True, "anything", "game-specific"),
}


def rule_for(hint: Any) -> Rule:
    """The rule of one type hint; TypeError for a hint that has no wire form."""
    if hint in _SCALARS:
        return _SCALARS[hint]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        rule = rule_for(args[0])
        for extra in args[1:]:
            if isinstance(extra, Lenient):
                continue  # a property of the field, read by `spec_of`
            rule = _constrained(rule, extra)
        return rule
    if origin is Literal:
        values = args
        kinds = {type(v) for v in values}
        if kinds - {str, int}:
            raise TypeError(f"only str and int literals have a wire form, got {hint!r}")

        def check(value: Any, values: tuple[Any, ...] = values) -> bool:
            return any(type(value) is type(v) and value == v for v in values)

        names = [repr(v) for v in values]
        expected = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
        return Rule(check, expected, "str" if kinds == {str} else "int")
    if origin is list:
        (item_hint,) = args or (Any,)
        if item_hint in (Any, object):
            return Rule(lambda v: isinstance(v, list), "an array", "array")
        item = rule_for(item_hint)
        item_check = item.check
        return Rule(
            lambda v: isinstance(v, list) and all(item_check(x) for x in v),
            f"an array of {item.wire}",
            f"array of {item.wire}",
        )
    if origin is dict or hint is dict:
        return Rule(lambda v: isinstance(v, dict), "a map", "map")
    if origin in (Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        nullable = len(options) < len(args)
        rules = [rule_for(a) for a in options]
        checks = tuple(r.check for r in rules)

        def either(value: Any, checks: tuple[Callable[[Any], bool], ...] = checks) -> bool:
            return (nullable and value is None) or any(c(value) for c in checks)

        expected = " or ".join(r.expected for r in rules) + (" or nil" if nullable else "")
        wire = " or ".join(r.wire for r in rules) + (" or nil" if nullable else "")
        return Rule(either, expected, wire)
    raise TypeError(f"no wire form for the type hint {hint!r}")


def _constrained(rule: Rule, constraint: Any) -> Rule:
    if not isinstance(constraint, Length | Printable):
        raise TypeError(f"unknown field constraint {constraint!r}")
    base, ok = rule.check, constraint.ok
    expected, wire = constraint.describe(rule.expected, rule.wire)
    return Rule(lambda v: base(v) and ok(v), expected, wire)


def conforms(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the wire type ``hint`` (see `rule_for`)."""
    return rule_for(hint).check(value)


def describe(value: Any) -> str:
    """A value as an error message shows it: its wire type, then its repr, cut short."""
    if value is None:
        return "nil"
    kind = _WIRE_NAMES.get(type(value), type(value).__name__)
    return f"{kind} {value!r:.60}"


# ------------------------------------------------------------------ messages
@dataclass(frozen=True)
class Field:
    """One field of a message: its name, whether it must be there, its rule, and whether it is lenient."""

    name: str
    required: bool
    rule: Rule
    lenient: bool = False


@dataclass(frozen=True)
class MessageSpec:
    """The fields of one message ``kind`` (its ``type``), in declaration order, and the error code
    a bad field is reported with."""

    kind: str
    fields: tuple[Field, ...]
    code: str

    def check(self, message: Mapping[str, Any]) -> Mapping[str, Any]:
        """``message`` if every field is well formed, else a ProtocolError naming the first bad one.

        Unknown fields are ignored (later versions may add some). The message itself comes back, not
        a copy, unless a `Lenient` field had to be left out of it.
        """
        out = message
        for f in self.fields:
            if f.name not in message:
                if f.required:
                    raise ProtocolError(self.code, f"{self.kind}: the field {f.name!r} is missing")
                continue
            value = message[f.name]
            if not f.rule.check(value):
                if f.lenient:
                    out = {k: v for k, v in out.items() if k != f.name}
                    continue
                raise ProtocolError(
                    self.code,
                    f"{self.kind}: the field {f.name!r} must be {f.rule.expected} (got {describe(value)})",
                )
        return out

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)


def spec_of(message_type: type, code: str) -> MessageSpec:
    """Read a TypedDict's fields into a `MessageSpec`. Its ``type`` field must be a one-string Literal."""
    hints = typing.get_type_hints(message_type, include_extras=True)
    # Read from the hints, not __required_keys__: under `from __future__ import annotations`,
    # Python 3.11 does not see NotRequired in a string annotation and calls every key required.
    required_keys: frozenset[str] = message_type.__required_keys__  # type: ignore[attr-defined]
    fields = []
    for name, hint in hints.items():
        lenient = False
        inner = hint
        required = name in required_keys
        while typing.get_origin(inner) in (Required, NotRequired):
            required = typing.get_origin(inner) is Required
            inner = typing.get_args(inner)[0]
        if typing.get_origin(inner) is Annotated:
            lenient = any(isinstance(x, Lenient) for x in typing.get_args(inner)[1:])
        fields.append(Field(name, required, rule_for(inner), lenient))
    kinds = typing.get_args(hints.get("type"))
    if len(kinds) != 1 or not isinstance(kinds[0], str):
        raise TypeError(f"{message_type.__name__}: the field 'type' must be a Literal of one string")
    return MessageSpec(kinds[0], tuple(fields), code)
