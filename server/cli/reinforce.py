"""`cellarena train GAME --reinforce`: the options of reinforcement and the run, for the game whose
`GameImitation` offers it (its ``reinforce``; Rezzo's reward terms today). Every other game's
``--reinforce`` says it has no reward terms and that imitation works (docs/training.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cellarena.server.cli.params import ranged_param

if TYPE_CHECKING:
    from cellarena.server.training.trainer import GameImitation


def _rewards(values: tuple[str, ...]) -> dict[str, float]:
    """``--reward TERM=WEIGHT``, each given once."""
    out: dict[str, float] = {}
    for value in values:
        term, sep, weight = value.partition("=")
        try:
            out[term.strip()] = float(weight)
        except ValueError:
            sep = ""
        if not sep or not term.strip():
            raise click.BadParameter(
                f"{value!r}: give TERM=WEIGHT, e.g. enemy_flag_distance=0.05", param_hint="--reward"
            )
    return out


def reinforce_options() -> list[click.Parameter]:
    return [
        click.Option(
            ["--reinforce"],
            is_flag=True,
            help="Fine-tune the bot folder's network by reinforcement with the game's reward terms, "
            "instead of imitation (Rezzo).",
        ),
        click.Option(
            ["--opponent", "opponents"],
            multiple=True,
            metavar="NAME",
            help="--reinforce: whom to play, repeated: an example bot of --bots-dir, random, or a "
            "trained bot folder [default: random_walker, raider, random].",
        ),
        click.Option(
            ["--from-weights"],
            type=click.Path(dir_okay=False, path_type=Path),
            help="--reinforce: the weights to start from [default: a fresh network of --seed].",
        ),
        ranged_param("--steps", 2000, click.IntRange(1, 10_000_000), "--reinforce: steps of every world."),
        click.Option(
            ["--seconds"],
            type=click.FloatRange(min=0, min_open=True),
            help="--reinforce: stop after this long (then only --steps is reproducible).",
        ),
        ranged_param("--worlds", 16, click.IntRange(1, 4096), "--reinforce: worlds played at once."),
        click.Option(
            ["--reward", "rewards"],
            multiple=True,
            metavar="TERM=WEIGHT",
            help="--reinforce: a reward term's weight, repeated (docs/training.md lists the terms).",
        ),
    ]


def run_reinforce(spec: GameImitation, kw: dict[str, Any]) -> None:
    """`train GAME --reinforce`, after the options are read; then the evaluation as imitation's."""
    from cellarena.server.training.imitation import ImitationError
    from cellarena.server.training.trainer import ReinforceRequest, evaluate

    game = spec.game
    if spec.reinforce is None:
        raise click.ClickException(
            f"`cellarena train {game} --reinforce`: {game} has no reward terms to reinforce with "
            f"(Rezzo has); imitation works: `cellarena train {game} --dataset DIR --imitate BOT "
            "--bot-dir FOLDER --out WEIGHTS.npz` (docs/training.md)"
        )
    if kw["dataset"] is not None or kw["imitate"] is not None:
        raise click.UsageError(
            "--reinforce learns from its own play, not a dataset: leave out --dataset and --imitate (to "
            "start from imitated weights, train them first, then give them as --from-weights)"
        )
    folder = kw["bot_dir"]
    if folder is None or not folder.is_dir():
        named = "Missing option '--bot-dir'" if folder is None else f"--bot-dir {folder}: no such folder"
        raise click.UsageError(
            f"{named}: the bot folder whose network to reinforce (`cellarena new-bot {game} NAME --template "
            "trained` writes one)"
        )
    out, matches, quiet = kw["out"], kw["matches"], kw["as_json"]
    config = {key: kw[key] for key in spec.match_options}
    request = ReinforceRequest(
        bot_dir=kw["bot_dir"],
        out=out,
        from_weights=kw["from_weights"],
        opponents=kw["opponents"],
        bots_dir=kw["bots_dir"],
        steps=kw["steps"],
        seconds=kw["seconds"],
        seed=kw["seed"],
        worlds=kw["worlds"],
        rewards=_rewards(kw["rewards"]),
        config=config,
        say=lambda line: None if quiet else click.echo(line, err=True),
    )
    try:
        done = spec.reinforce(request)
        if not quiet:
            e = done["episodes"]
            click.echo(
                f"reinforced from {done['from']} for {done['steps']} steps ({done['agent_steps']} "
                f"agent-steps, {done['updates']} updates) in {done['seconds']:.1f} s: training episodes "
                f"won/lost/drawn {e['won']}/{e['lost']}/{e['drawn']}; wrote {out}"
            )
        opponents = [o for o in kw["against"].split(",") if o] if matches else []
        results = evaluate(spec, kw["bot_dir"], out, kw["bots_dir"], opponents, matches, config)
    except ImitationError as exc:
        raise click.ClickException(str(exc)) from None
    if quiet:
        click.echo(json.dumps({"ok": True, "out": str(out), **done, "matches": results}))
        return
    for opponent, r in results.items():
        click.echo(f"against {opponent}: won {r['wins']} of {matches}, drew {r['draws']}, lost {r['losses']}")
