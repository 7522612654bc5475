"""`cellarena bench ratings`: every rating system on the same simulated ladders, side by side.

Per population (seeded): ``bots`` bots of strength ~ N(0, 1) play, in passes of the ladder's matchmaker
(pairing by the default system's mu), a quarter of the passes with four seats, until they average 50
matches; every system rates the same results. Then one bot's new version jumps from the lower third
to the top tenth (each system applies its own `new_version`), and another returns from 180 idle days
just as much stronger (`idle`); play goes on until each system shows them within ``n // 20`` places
(at least 1) of their true place, or ``CAP`` of their matches (counted as ``CAP``).

Measured per system: Kendall's tau between the shown order and the true order at 10, 20 and 50 matches
per bot; the log-loss of the expected score it predicted for each pair of seats before each match
(a draw scores 0.5; a match of k seats counts as its k(k-1)/2 pairs, averaged, so each match weighs
the same); and the two recoveries. Means over populations, with their standard deviation, and a paired
comparison of the default with the best anchor on each figure.
"""

from __future__ import annotations

import json
from typing import Any

import click
import numpy as np

from cellarena.arena.ratings.measures import kendall_tau, ranks_of, score_log_loss
from cellarena.arena.ratings.rating import Rating, RatingSystem
from cellarena.arena.ratings.simulation import Outcomes, SimulatedQueue
from cellarena.arena.ratings.systems import SYSTEMS

CHECKPOINTS = (10, 20, 50)
#: Draws between two equal bots: the rate of a quick Rezzo tournament of the example bots, 6 of 18
#: matches (docs/tournaments.md#ratings).
DRAW_RATE = 1.0 / 3.0
FOUR_SEAT_SHARE = 0.25
IDLE_DAYS = 180.0
CAP = 50
DEFAULT = "cellarena"


class _Population:
    """One simulated ladder: bots of known strength, every system rating the same matches."""

    def __init__(self, bots: int, seed: int, systems: dict[str, RatingSystem], outcomes: Outcomes) -> None:
        self.bots, self.systems, self.outcomes = bots, systems, outcomes
        self.rng = np.random.default_rng(seed)
        self.true = self.rng.standard_normal(bots)
        self.queue = SimulatedQueue(bots, seed * 7919)
        self.state: dict[str, list[Rating]] = {name: [s.initial()] * bots for name, s in systems.items()}
        self.loss = dict.fromkeys(systems, 0.0)
        self.scoring = True  # the log-loss is over the first 50 matches a bot

    def play(self, group: tuple[int, ...]) -> None:
        ranks = self.outcomes.play(self.true[list(group)], self.rng)
        pairs = [(i, j) for i in range(len(group)) for j in range(i + 1, len(group))]
        for name, system in self.systems.items():
            now = self.state[name]
            before = [now[b] for b in group]
            if self.scoring:
                total = 0.0
                for i, j in pairs:
                    score = 1.0 if ranks[i] < ranks[j] else 0.5 if ranks[i] == ranks[j] else 0.0
                    total += score_log_loss(system.expected_score(before[i], before[j]), score)
                self.loss[name] += total / len(pairs)
            for b, r in zip(group, system.update(before, ranks), strict=True):
                now[b] = r

    def one_pass(self) -> list[tuple[int, ...]]:
        seats = 4 if self.rng.random() < FOUR_SEAT_SHARE else 2
        groups = self.queue.pass_([r.mu for r in self.state[DEFAULT]], seats)
        for g in groups:
            self.play(g)
        return groups

    def ranking(self) -> dict[str, dict[str, float]]:
        """Kendall's tau at each checkpoint of matches per bot, and the log-loss up to the last."""
        out: dict[str, dict[str, float]] = {name: {} for name in self.systems}
        matches = seats_played = 0
        marks = list(CHECKPOINTS)
        while marks:
            for g in self.one_pass():
                matches += 1
                seats_played += len(g)
            while marks and seats_played >= marks[0] * self.bots:
                for name, system in self.systems.items():
                    shown = [system.shown(r) for r in self.state[name]]
                    out[name][f"tau_{marks[0]}"] = kendall_tau(shown, self.true)
                marks.pop(0)
        self.scoring = False
        for name in self.systems:
            out[name]["log_loss"] = self.loss[name] / matches
        return out

    def recovery(self) -> dict[str, dict[str, float]]:
        """Matches until one bot's new version, and another bot back from idle, both now among the
        strongest, are shown within a tolerance of their true places."""
        true, bots = self.true, self.bots
        order = np.argsort(-true)
        changed, idle = int(order[bots * 2 // 3]), int(order[bots * 2 // 3 + 1])
        top = true[order[max(bots // 10 - 1, 0)]]
        true[changed] = top - 1e-6
        true[idle] = top - 2e-6
        for name, system in self.systems.items():
            self.state[name][changed] = system.new_version(self.state[name][changed])
            self.state[name][idle] = system.idle(self.state[name][idle], IDLE_DAYS)
        places = ranks_of(true)
        tolerance = max(1, bots // 20)
        played = {changed: 0, idle: 0}
        found: dict[tuple[str, int], int] = {}

        def check() -> None:
            for name, system in self.systems.items():
                shown = ranks_of([system.shown(r) for r in self.state[name]])
                for b, count in played.items():
                    if (name, b) not in found and abs(int(shown[b]) - int(places[b])) <= tolerance:
                        found[(name, b)] = count

        check()
        while len(found) < 2 * len(self.systems) and min(played.values()) < CAP:
            for g in self.one_pass():
                for b in played:
                    played[b] += b in g
            check()
        return {
            name: {
                "recovery_matches": found.get((name, changed), CAP),
                "idle_recovery_matches": found.get((name, idle), CAP),
            }
            for name in self.systems
        }


def _population(
    bots: int, seed: int, systems: dict[str, RatingSystem], outcomes: Outcomes
) -> dict[str, dict[str, float]]:
    population = _Population(bots, seed, systems, outcomes)
    out = population.ranking()
    for name, figures in population.recovery().items():
        out[name].update(figures)
    return out


def run(populations: int = 20, bots: int = 40, seed: int = 0, draw_rate: float = DRAW_RATE) -> dict[str, Any]:
    """The bench; the dict is the --json output."""
    outcomes = Outcomes(draw_rate)
    each = [_population(bots, seed * 100_003 + p, SYSTEMS, outcomes) for p in range(populations)]
    figures = list(each[0][DEFAULT])

    def stats(values: list[float]) -> tuple[float, float]:
        a = np.asarray(values, dtype=float)
        return float(a.mean()), float(a.std(ddof=1)) if len(a) > 1 else 0.0

    systems: dict[str, Any] = {}
    for name in SYSTEMS:
        per = {f: [pop[name][f] for pop in each] for f in figures}
        entry: dict[str, Any] = {"tau": {}, "tau_sd": {}}
        for cp in CHECKPOINTS:
            entry["tau"][str(cp)], entry["tau_sd"][str(cp)] = stats(per[f"tau_{cp}"])
        for f in ("log_loss", "recovery_matches", "idle_recovery_matches"):
            entry[f], entry[f + "_sd"] = stats(per[f])
        systems[name] = entry

    # Paired: the default minus the best anchor, population by population (higher tau is better,
    # lower log-loss and recovery are).
    anchors = [n for n in SYSTEMS if n != DEFAULT]
    paired: dict[str, Any] = {}
    for f, better in (("tau_20", max), ("log_loss", min), ("recovery_matches", min)):
        key = (lambda n: systems[n]["tau"]["20"]) if f == "tau_20" else (lambda n: systems[n][f])  # noqa: B023
        best = better(anchors, key=key)
        diffs = [pop[DEFAULT][f] - pop[best][f] for pop in each]
        mean, sd = stats(diffs)
        paired[f] = {"best_anchor": best, "mean_difference": mean, "sd": sd}
    return {
        "populations": populations,
        "bots": bots,
        "seed": seed,
        "draw_rate": draw_rate,
        "four_seat_share": FOUR_SEAT_SHARE,
        "idle_days": IDLE_DAYS,
        "cap": CAP,
        "systems": systems,
        "paired": paired,
    }


def _table(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    size = f"{result['populations']} populations of {result['bots']} bots"
    table = Table(title=f"{size} (mean ± sd), seed {result['seed']}")
    for heading in ("system", "tau@10", "tau@20", "tau@50", "log-loss", "recovery", "idle recovery"):
        table.add_column(heading, justify="left" if heading == "system" else "right")
    for name, s in result["systems"].items():
        table.add_row(
            name,
            *(f"{s['tau'][str(cp)]:.3f}±{s['tau_sd'][str(cp)]:.3f}" for cp in CHECKPOINTS),
            f"{s['log_loss']:.4f}±{s['log_loss_sd']:.4f}",
            f"{s['recovery_matches']:.1f}±{s['recovery_matches_sd']:.1f}",
            f"{s['idle_recovery_matches']:.1f}±{s['idle_recovery_matches_sd']:.1f}",
        )
    Console().print(table)
    for f, p in result["paired"].items():
        click.echo(f"{DEFAULT} - {p['best_anchor']} on {f}: {p['mean_difference']:+.4f} (sd {p['sd']:.4f})")


@click.command(
    "ratings",
    help="Rate simulated ladders with every rating system (the default, openskill, Elo, Glicko-2, "
    "TrueSkill) and measure how fast each finds the true order (docs/tournaments.md#ratings).",
)
@click.option("--populations", type=click.IntRange(2, 10_000), default=20, show_default=True)
@click.option("--bots", type=click.IntRange(8, 10_000), default=40, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as one JSON object.")
def command(populations: int, bots: int, seed: int, as_json: bool) -> None:
    result = run(populations, bots, seed)
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        _table(result)
