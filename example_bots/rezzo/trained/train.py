"""Train the Rezzo policy by imitation: builder's moves, with DAgger, in the vector environment.

Random moves almost never end a Rezzo match, so a reward at the end teaches nothing at first. What
wins is known: `builder.py` lays a trap of wire that drives the enemy's flags into a base. So the
policy learns to play as builder would from where it stands (behaviour cloning), and then from where
its *own* play takes it (DAgger: Ross, Gordon and Bagnell, 2011): in each round the learner plays
(in the first round builder plays), builder says what it would do in every state the learner met,
and the network is fitted to everything gathered so far. Builder is only the teacher; the bot plays
the network alone.

The worlds are `RezzoVectorEnv`'s: duels (by default) with randomised starts, the learner in seat 0
or 1 by turns, the other seat played by random_walker, raider or the SDK's random bot, a different
one per world and episode (`OpponentMix` of `BotOpponent`s). All dice are seeded: the same command
writes the same weights.

    python example_bots/rezzo/trained/train.py --out rezzo.npz

At the end it plays the greedy policy against random_walker and raider, both seats, as
`cellarena bench train` does over TCP.

The recipe is `cellarena.server.training.rezzo.dagger` (this file only reads the options and reports);
the network and its inputs are this folder's policy.py, loaded as `cellarena train` loads a bot
folder's. DAgger needs the teacher's program at hand. To learn from matches alone (an exported
dataset of a tournament or a ladder, any bot as the teacher), use `cellarena train rezzo --dataset`;
to fine-tune by reinforcement with the reward terms, `cellarena train rezzo --reinforce`
(docs/training.md).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from cellarena.sdk.opponents.rezzo import RandomRezzo
from cellarena.server.training.bot_folder import policy_module
from cellarena.server.training.rezzo.dagger import DaggerOptions, dagger
from cellarena.server.training.rezzo.imitation import IMITATION
from cellarena.server.training.rezzo.opponents import BotOpponent
from cellarena.server.training.trainer import evaluate, opponent_class

HERE = Path(__file__).resolve().parent
BOTS = HERE.parent


def main(argv: list[str] | None = None) -> int:
    d = DaggerOptions()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=HERE / "rezzo.npz")
    parser.add_argument("--map", default=d.map)
    parser.add_argument("--worlds", type=int, default=d.worlds, help="worlds from randomised starts")
    parser.add_argument(
        "--exact-worlds", type=int, default=d.exact_worlds, help="worlds from the map's own start"
    )
    parser.add_argument(
        "--rounds", type=int, default=d.rounds, help="DAgger rounds (the first is the teacher's)"
    )
    parser.add_argument("--steps", type=int, default=d.steps, help="steps per round")
    parser.add_argument("--epochs", type=int, default=d.epochs, help="passes over all data after each round")
    parser.add_argument(
        "--start-radius", type=int, default=d.start_radius, help="randomised starts: cells an agent may move"
    )
    parser.add_argument("--max-ticks", type=int, default=d.max_ticks, help="tick cap of the training worlds")
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument(
        "--eval", type=int, default=1, help="matches per seat and opponent at the end (0: none)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object at the end")
    args = parser.parse_args(argv)
    began = time.monotonic()
    options = DaggerOptions(
        args.map,
        args.worlds,
        args.exact_worlds,
        args.rounds,
        args.steps,
        args.epochs,
        args.start_radius,
        args.max_ticks,
        args.seed,
    )
    opponents = [
        BotOpponent(opponent_class(IMITATION, BOTS, "random_walker"), "random_walker"),
        BotOpponent(opponent_class(IMITATION, BOTS, "raider"), "raider"),
        BotOpponent(RandomRezzo, "random"),
    ]
    teacher = opponent_class(IMITATION, BOTS, "builder")
    done = dagger(
        policy_module(HERE, "rezzo"),
        teacher,
        opponents,
        args.out,
        options,
        say=lambda line: print(line, flush=True),
    )
    seconds = time.monotonic() - began
    print(
        f"wrote {args.out} after {done.agent_steps} agent-steps in {seconds:.1f} s "
        f"({time.process_time():.1f} s of CPU)"
    )
    report: dict[str, Any] = {
        "seconds": seconds,
        # On a busy machine wall time says little; CPU time is what a quiet one would need (about).
        "cpu_seconds": time.process_time(),
        "agent_steps": done.agent_steps,
        "steps_per_s": done.agent_steps / seconds,
        "wins": {},
    }
    against = ["random_walker", "raider"] if args.eval else []
    config = {"map": args.map, "max_ticks": 3000}
    for opponent, tally in evaluate(IMITATION, HERE, args.out, BOTS, against, 2 * args.eval, config).items():
        report["wins"][opponent] = tally["wins"]
        print(f"greedy policy against {opponent}: won {tally['wins']} of {2 * args.eval}")
    if args.json:
        print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
