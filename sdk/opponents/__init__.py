"""Random opponents for every game, shipped with the SDK so that a bot's tests need no checkout.

`cellarena new-bot` writes a test that plays the new bot against one of these, and a pip-installed
cellarena has no ``example_bots/`` folder: the opponent has to come with the package. Run one as

    python -m cellarena.sdk.opponents GAME        (cellarena match sets the connection up)

Each plays random legal moves, seeded from its seat and the tick, so the same position always gets
the same answer, as tournaments need. A game's opponent is the module named after it in this
package, with one subclass of that game's bot class (`CataBot`, ...); modules load only when asked
for (some need numpy).
"""

from __future__ import annotations

import pkgutil
from importlib import import_module

from cellarena.sdk.bot import AnyBot, GameBot

#: Mixed into every seed, so these opponents do not play in step with a bot seeded the same way.
SEED = 20240601


def games() -> list[str]:
    """The games with a random opponent here, sorted."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def random_bot(game: str) -> type[AnyBot]:
    """The random opponent's class for ``game``; KeyError naming the games there are."""
    if game not in games():
        raise KeyError(f"no random opponent for {game!r}; games: {', '.join(games())}")
    module = import_module(f"{__name__}.{game}")
    found = [
        v
        for v in vars(module).values()
        if isinstance(v, type)
        and issubclass(v, GameBot)
        and v.__module__ == module.__name__
        and v.game == game
    ]
    if len(found) != 1:
        raise KeyError(f"{module.__name__} must hold one bot class for {game!r}, holds {len(found)}")
    return found[0]
