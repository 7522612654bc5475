"""What every turn-based game's environment tests check alike: the rewards a finished match gives,
and that `render()` draws what `cellarena match --watch` draws."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pettingzoo.test import render_test
from rich.text import Text

from cellarena.server.games.base import Result


def assert_rewards_follow_the_result(result: Result, totals: dict[str, float]) -> None:
    """+1 to the winner and -1 to the loser (``player_0``, ``player_1``), 0 to both in a draw."""
    if result.winner is None:
        assert set(totals.values()) == {0.0}
    else:
        assert totals[f"player_{result.winner}"] == 1.0 and totals[f"player_{1 - result.winner}"] == -1.0


def assert_render_is_the_watch_picture(make: Callable[..., Any], picture: Callable[[Any], Text]) -> None:
    """PettingZoo's render test, then the "ansi" picture of a reset env equals ``picture(engine)``."""
    render_test(make)
    env = make(render_mode="ansi")
    env.reset(seed=1)
    drawn = env.render()
    assert isinstance(drawn, str) and Text.from_ansi(drawn).plain == picture(env.engine).plain
