"""Random opponents for every game, shipped with the SDK so that a bot's tests need no checkout.

`cellarena new-bot` writes a test that plays the new bot against one of these, and a pip-installed
cellarena has no ``example_bots/`` folder: the opponent has to come with the package. Run one as

    python -m cellarena.sdk.opponents rezzo        (cellarena match sets the connection up)

Each plays random legal moves, seeded from its seat and the tick, so the same position always gets
the same answer, as tournaments need. The example bots' random players are built on the same moves.
"""

from __future__ import annotations

from importlib import import_module

from cellarena.sdk.bot import Bot

#: Game -> "module:class" of its random opponent; modules load only when asked for (numpy for some).
RANDOM_BOTS = {
    "cata": "cellarena.sdk.opponents.cata:RandomCata",
    "cloth": "cellarena.sdk.opponents.cloth:RandomCloth",
    "colorblocks": "cellarena.sdk.opponents.colorblocks:RandomColorblocks",
    "drop2df": "cellarena.sdk.opponents.drop2df:RandomDrop2df",
    "rezzo": "cellarena.sdk.opponents.rezzo:RandomRezzo",
}

#: Mixed into every seed, so these opponents do not play in step with a bot seeded the same way.
SEED = 20240601


def random_bot(game: str) -> type[Bot]:
    """The random opponent's class for ``game``; KeyError naming the games there are."""
    try:
        target = RANDOM_BOTS[game]
    except KeyError:
        raise KeyError(f"no random opponent for {game!r}; games: {', '.join(sorted(RANDOM_BOTS))}") from None
    module, _, name = target.partition(":")
    found: type[Bot] = getattr(import_module(module), name)
    return found
