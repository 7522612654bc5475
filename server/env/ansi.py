"""The training environments' ``render()``: the picture `cellarena match --watch` draws, as a string."""

from __future__ import annotations

import io
from collections.abc import Callable

from rich.console import Console
from rich.text import Text

#: The render modes every environment offers: "ansi" returns the picture with its colours as ANSI
#: escape codes (print it to a terminal), "human" prints it to stdout.
RENDER_MODES = ["ansi", "human"]


def check_mode(render_mode: str | None) -> str | None:
    """``render_mode`` if an environment offers it; ValueError naming the modes otherwise."""
    if render_mode is not None and render_mode not in RENDER_MODES:
        raise ValueError(f"render_mode {render_mode!r} is not offered; use one of {RENDER_MODES} or None")
    return render_mode


def ansi(text: Text) -> str:
    """A rich ``Text`` as a string with ANSI colour codes, never wrapped (boards are wider than 80)."""
    out = io.StringIO()
    Console(file=out, force_terminal=True, color_system="standard", width=10_000).print(text, end="")
    return out.getvalue()


def render(render_mode: str | None, draw: Callable[[], Text]) -> str | None:
    """What an environment's ``render()`` returns in ``render_mode``, ``draw`` making the picture: the
    picture as a string ("ansi"), or None after printing it ("human") or when no mode was chosen
    (PettingZoo's convention: rendering without a mode warns and does nothing)."""
    if render_mode is None:
        import gymnasium

        gymnasium.logger.warn("render() was called without a render_mode; pass render_mode='ansi'")
        return None
    picture = ansi(draw())
    if render_mode == "human":
        print(picture)
        return None
    return picture
