"""One validator for every game's config: each option declared once, with its type, default, limits
and a line of help, and checked the same way for every game.

A game's config is a frozen dataclass that subclasses `GameConfig` and declares each option with
`option`; its type comes from the annotation (``int``, ``bool``, ``float``, ``str``, or one of them
``| None``). `GameConfig.from_mapping` refuses unknown keys, wrong types and values out of range
with a `ConfigError` that names the game, the key and what is allowed; `check` adds the rules
that tie options together. ``to_mapping`` is its inverse: replays store it, and ``from_mapping`` of
it gives back an equal config, so a replay rebuilds the very same match.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Self

from cellarena.sdk.protocol import is_int, is_number
from cellarena.server.games.base import ConfigError

_META = "cellarena.option"

#: What each type must be, as an error says it.
_NOUNS = {int: "a whole number", bool: "true or false", float: "a number", str: "a string"}


@dataclass(frozen=True)
class Limits:
    """An option's help and what values it allows beyond its type."""

    help: str
    min: float | None = None
    max: float | None = None
    choices: tuple[Any, ...] | None = None

    def requirement(self) -> str | None:
        """What the allowed values are, as an error says it ("between 1 and 8"), or None if any is."""
        if self.choices is not None:
            return "one of " + ", ".join(str(c) for c in self.choices)
        if self.min is not None and self.max is not None:
            return f"between {_number(self.min)} and {_number(self.max)}"
        if self.min is not None:
            return f"at least {_number(self.min)}"
        if self.max is not None:
            return f"at most {_number(self.max)}"
        return None

    def allows(self, value: Any) -> bool:
        if self.choices is not None and value not in self.choices:
            return False
        # "not >=" rather than "<", so that nan, which compares false with everything, is refused.
        too_low = self.min is not None and not value >= self.min
        too_high = self.max is not None and not value <= self.max
        return not (too_low or too_high)


def _number(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def option(
    default: Any,
    help: str,
    *,
    min: float | None = None,
    max: float | None = None,
    choices: tuple[Any, ...] | None = None,
) -> Any:
    """Declare one config option: its default, a line of help, and the values it allows."""
    return field(default=default, metadata={_META: Limits(help, min, max, choices)})


class GameConfig:
    """Base of a game's config dataclass (see the module docstring)."""

    #: The game's name, as errors say it.
    game: ClassVar[str]

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any]) -> Self:
        """The config from a mapping of option values; missing options take their defaults."""
        spec = _options(cls)
        unknown = sorted(set(config) - set(spec))
        if unknown:
            raise ConfigError(f"unknown {cls.game} option(s) {', '.join(unknown)}; known: {', '.join(spec)}")
        values = {key: _checked(cls.game, key, value, *spec[key]) for key, value in config.items()}
        made = cls(**values)
        made.check()
        return made

    def to_mapping(self) -> dict[str, Any]:
        """The options as a plain dict (msgpack- and JSON-ready), the inverse of `from_mapping`."""
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]

    def check(self) -> None:
        """Rules between options, beyond each option's own limits; raise ConfigError to refuse."""

    def max_decisions(self) -> int:
        """The most decision points a match with this config can last, from its caps (its horizon)."""
        raise NotImplementedError


def _checked(game: str, key: str, value: Any, kind: type, optional: bool, limits: Limits) -> Any:
    """``value`` as the option's type, or a ConfigError saying what the option allows."""
    if value is None and optional:
        return None
    # The wire's one notion of a number (a bool is never one), as every message is checked.
    fits = is_int(value) if kind is int else isinstance(value, kind)
    if kind is float and is_number(value):
        value, fits = float(value), True
    if not fits:
        noun = _NOUNS[kind] + (" or none" if optional else "")
        raise ConfigError(f"{game} option {key} must be {noun}, got {value!r}{_help(key, limits)}")
    if not limits.allows(value):
        raise ConfigError(
            f"{game} option {key} must be {limits.requirement()}, got {value!r}{_help(key, limits)}"
        )
    return value


def _help(key: str, limits: Limits) -> str:
    return f" ({key}: {limits.help})" if limits.help else ""


_SPECS: dict[type, dict[str, tuple[type, bool, Limits]]] = {}


def _options(cls: type[GameConfig]) -> dict[str, tuple[type, bool, Limits]]:
    """Per option, in declaration order: (type, whether None is allowed, limits). Cached per class."""
    spec = _SPECS.get(cls)
    if spec is None:
        hints = typing.get_type_hints(cls)
        spec = {}
        for f in fields(cls):  # type: ignore[arg-type]
            kind, optional = _kind(hints[f.name])
            if kind not in _NOUNS:
                raise TypeError(f"{cls.__name__}.{f.name}: a config option is int, bool, float or str")
            spec[f.name] = (kind, optional, f.metadata.get(_META) or Limits(""))
        _SPECS[cls] = spec
    return spec


def _kind(hint: Any) -> tuple[Any, bool]:
    """(the type, whether None is allowed) of an annotation such as ``int`` or ``str | None``."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return hint, False
