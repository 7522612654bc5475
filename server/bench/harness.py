"""What every `cellarena bench GAME` command shares: the timer, the common options and the report.

Benchmarks print ratios of two contenders timed side by side in one run, because on a shared,
noisy machine absolute figures drift while a ratio of best-of-batches timings holds.
"""

from __future__ import annotations

import json
import resource
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import click

from cellarena.server.cli.params import FiniteFloatRange, ranged_option

#: A click command's callback, which an option decorator hands back unchanged.
F = TypeVar("F", bound=Callable[..., Any])

#: A batch grows until it takes this long, so the timer's own cost is negligible against it.
MIN_BATCH_S = 0.02


def raise_file_limit() -> None:
    """Let this process (and the load processes it starts, which inherit it) open as many sockets as
    the hard limit allows: a load benchmark holds one per bot on each side."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def calls_per_second(fn: Callable[[], object], budget_s: float) -> float:
    """How often ``fn`` runs per second: the best of timed batches over ``budget_s`` seconds.

    The best batch is the least disturbed one: other processes only ever make a batch slower.
    The first call is untimed (it warms caches and lazy set-up).
    """
    fn()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        took = time.perf_counter() - t0
        if took > MIN_BATCH_S or n >= 1 << 20:
            break
        n *= 2
    best = took
    deadline = time.perf_counter() + budget_s
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, time.perf_counter() - t0)
    return n / best


def int_list(what: str, example: str, low: int, high: int) -> Callable[[Any, Any, str], list[int]]:
    """A click callback that reads a comma-separated list of ``what`` (``example``), each in
    ``low``..``high``: the bench commands' --sizes, --batches and --slots."""

    def parse(_ctx: Any, _param: Any, value: str) -> list[int]:
        try:
            numbers = [int(s) for s in value.split(",") if s.strip()]
        except ValueError:
            raise click.BadParameter(
                f"{value!r} is not a comma-separated list of {what}, e.g. {example}"
            ) from None
        if not numbers or any(not low <= n <= high for n in numbers):
            raise click.BadParameter(f"{what} must be {low}..{high}, got {value!r}")
        return numbers

    return parse


def int_list_option(
    flag: str, default: str, what: str, bounds: tuple[int, int], help: str
) -> Callable[[F], F]:
    """``flag`` taking a comma-separated list of ``what`` within ``bounds``, as a list of ints (the
    default's first two stand as the example an error gives)."""
    example = ",".join(default.split(",")[:2])
    return click.option(
        flag, default=default, show_default=True, callback=int_list(what, example, *bounds), help=help
    )


def sizes_option(default: str, help: str = "Comma-separated board sizes (square).") -> Callable[[F], F]:
    """``--sizes 64,256``: the square board sizes to time, as a list of ints."""
    return int_list_option("--sizes", default, "sizes", (3, 8192), help)


def seconds_option(help: str = "Timing budget per size and contender.") -> Callable[[F], F]:
    """``--seconds``: how long each contender is timed."""
    return ranged_option("--seconds", 1.0, FiniteFloatRange(0.05, 60), help)


json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")


def sized_command(
    name: str,
    sizes: str,
    run: Callable[..., dict[str, Any]],
    *,
    sizes_help: str = "Comma-separated board sizes (square).",
    seconds_help: str = "Timing budget per size and contender.",
) -> Callable[[Callable[[dict[str, Any]], None]], click.Command]:
    """A game's ``bench NAME`` over board sizes: ``run(sizes, budget_s=seconds)``, printed as one JSON
    object with ``--json``, else by the function decorated, whose docstring is the command's help."""

    def make(show: Callable[[dict[str, Any]], None]) -> click.Command:
        @click.command(name, help=show.__doc__)
        @sizes_option(sizes, sizes_help)
        @seconds_option(seconds_help)
        @json_option
        def command(sizes: list[int], seconds: float, as_json: bool) -> None:
            result = run(sizes, budget_s=seconds)
            if as_json:
                click.echo(json.dumps(result))
            else:
                show(result)

        return command

    return make


def report(
    title: str,
    columns: Sequence[str],
    rows: Iterable[Sequence[str]],
    goals: Iterable[tuple[str, bool]] = (),
    notes: Iterable[str] = (),
) -> None:
    """Print a benchmark's table, then each goal as met or missed, then any notes."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for col in columns:
        table.add_column(col, justify="right")
    for row in rows:
        table.add_row(*row)
    console = Console()
    console.print(table)
    for text, ok in goals:
        console.print(f"goal: {text}: {'[green]met[/]' if ok else '[red]missed[/]'}")
    for note in notes:
        console.print(note)


#: The closing line of the benchmarks that compare two contenders.
STEADY_RATIO = "Figures are the best of repeated batches; on a shared machine the ratio is the steady one."
