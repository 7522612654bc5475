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

DAgger needs the teacher's program at hand. To learn from matches alone (an exported dataset of a
tournament or a ladder, any bot as the teacher), use `cellarena train rezzo`, whose network fitting
(`cellarena.server.training.imitation.fit`) and in-process matches this script shares.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from policy import CROP, EXTRA, MOVES, Policy, legal, observe, one_hot

from cellarena.sdk import MatchInfo, Move, Tracker, View, Viewport
from cellarena.sdk.opponents.rezzo import RandomRezzo
from cellarena.server.training.bot_folder import load_module
from cellarena.server.training.imitation import Samples, fit
from cellarena.server.training.rezzo.imitation import IMITATION
from cellarena.server.training.rezzo.opponents import BotOpponent, OpponentMix
from cellarena.server.training.rezzo.vector_env import RezzoVectorEnv
from cellarena.server.training.trainer import opponent_class

BOTS = Path(__file__).resolve().parent.parent


def example_bot(name: str) -> ModuleType:
    """example_bots/rezzo/NAME.py as a module (the bot folders are not packages)."""
    return load_module(BOTS / f"{name}.py")


class Learner:
    """Per world: each learner agent's Tracker and last move, and the teacher (a builder) beside it."""

    def __init__(self, seat: int, config: dict[str, Any]) -> None:
        self.trackers: dict[int, Tracker] = {}
        self.last: dict[int, int] = {}
        self.teacher = example_bot("builder").Builder()
        self.teacher.info = MatchInfo(
            seat=seat, players=2, names=("learner", "opponent"), game="rezzo", config=config
        )
        self.teacher.on_start(self.teacher.info)


def rollout(
    env: RezzoVectorEnv, policy: Policy | None, beta: float, steps: int, rng: np.random.Generator
) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], list[int], dict[str, int]]:
    """Play ``steps`` steps: the teacher's move with probability ``beta``, else the policy's; record
    the inputs, legal moves and the teacher's move of every live learner agent."""
    cells: list[np.ndarray] = []
    extras: list[np.ndarray] = []
    masks: list[np.ndarray] = []
    labels: list[int] = []
    k = env.agents_per_player
    obs, _ = env.reset(seed=int(rng.integers(1 << 30)))
    learners = [Learner(int(env.learner_seats[b]), env._episode_config(b)) for b in range(env.batch)]
    outcome = {"won": 0, "lost": 0, "drawn": 0}
    for _ in range(steps):
        actions = np.zeros(env.num_envs, np.int64)
        rows: list[tuple[int, int, int]] = []  # (world, agent, sample index) of this step's samples
        for b, learner in enumerate(learners):
            seat = int(env.learner_seats[b])
            live = [i for i in range(k) if env.worlds.alive[b, seat * k + i]]
            if not live:
                continue
            ports = [Viewport(obs[b * k + i, 0].tobytes(), obs[b * k + i, 1].tobytes()) for i in live]
            tick = int(env.worlds.tick[b])
            teacher = learner.teacher.on_tick(View(tick, live, ports))
            for i, port, label in zip(live, ports, teacher, strict=True):
                tracker = learner.trackers.setdefault(i, Tracker())
                tracker.observe(port)
                c, e = observe(tracker, port, learner.last.get(i, Move.NOOP), tick)
                m = legal(port)
                m[int(label)] = True
                rows.append((b, i, len(labels)))
                cells.append(c)
                extras.append(e)
                masks.append(m)
                labels.append(int(label))
        if not rows:
            obs, *_ = env.step(actions)
            continue
        at = [j for _, _, j in rows]
        chosen = np.array([labels[j] for j in at])
        if policy is not None:
            mine = policy.act(
                np.array([cells[j] for j in at]),
                np.array([extras[j] for j in at]),
                np.array([masks[j] for j in at]),
            )
            teach = rng.random(len(at)) < beta
            chosen = np.where(teach, chosen, mine)
        for (b, i, _), move in zip(rows, chosen.tolist(), strict=True):
            learner = learners[b]
            learner.trackers[i].commit(move)
            learner.teacher.agents[i].tracker.commit(move)  # the teacher follows what was played
            learner.last[i] = move
            actions[b * k + i] = move
        obs, rewards, terminated, truncated, _ = env.step(actions)
        for b in np.flatnonzero((terminated | truncated).reshape(env.batch, k).any(axis=1)).tolist():
            r = float(rewards[b * k])
            outcome["won" if r > 0 else "lost" if r < 0 else "drawn"] += 1
            learners[b] = Learner(int(env.learner_seats[b]), env._episode_config(b))
    return cells, extras, masks, labels, outcome


def play(policy: Policy, opponent: str, seat: int, max_ticks: int, map_name: str = "duel") -> int | None:
    """One match in-process: this folder's bot (bot.py's class, playing ``policy``) in ``seat`` against
    an example bot; the winner's seat, or None for a draw."""
    cls = opponent_class(IMITATION, BOTS, opponent)
    bot = load_module(Path(__file__).resolve().with_name("bot.py"), {"policy": sys.modules["policy"]})
    return IMITATION.play(bot, policy, cls, seat, {"map": map_name, "max_ticks": max_ticks})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("rezzo.npz"))
    parser.add_argument("--map", default="duel")
    parser.add_argument("--worlds", type=int, default=16, help="worlds from randomised starts")
    parser.add_argument("--exact-worlds", type=int, default=8, help="worlds from the map's own start")
    parser.add_argument("--rounds", type=int, default=8, help="DAgger rounds (the first is the teacher's)")
    parser.add_argument("--steps", type=int, default=300, help="steps per round")
    parser.add_argument("--epochs", type=int, default=4, help="passes over all data after each round")
    parser.add_argument(
        "--start-radius", type=int, default=2, help="randomised starts: cells an agent may move"
    )
    parser.add_argument("--max-ticks", type=int, default=400, help="tick cap of the training worlds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--eval", type=int, default=1, help="matches per seat and opponent at the end (0: none)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object at the end")
    args = parser.parse_args(argv)
    began = time.monotonic()
    rng = np.random.default_rng(args.seed)
    walker, raider = example_bot("random_walker").RandomWalker, example_bot("raider").Raider
    mix = OpponentMix(
        [
            BotOpponent(walker, "random_walker"),
            BotOpponent(raider, "raider"),
            BotOpponent(RandomRezzo, "random"),
        ],
        seed=args.seed,
    )
    config = {"map": args.map, "max_ticks": args.max_ticks}
    # Worlds from randomised starts teach it to find its way; worlds from the map's own start teach the
    # openings a tournament plays.
    envs = [
        RezzoVectorEnv(args.worlds, config, opponent=mix, random_start=args.start_radius),
        RezzoVectorEnv(args.exact_worlds, config, opponent=mix),
    ]
    policy = Policy(seed=args.seed)
    data: list[list[Any]] = [[], [], [], []]
    steps = 0
    for r in range(args.rounds):
        beta = 1.0 if r == 0 else 0.5**r
        won = {"won": 0, "lost": 0, "drawn": 0}
        for env in envs:
            got = rollout(env, None if r == 0 else policy, beta, args.steps, rng)
            parts: tuple[list[Any], ...] = got[:4]
            for store, part in zip(data, parts, strict=True):
                store.extend(part)
            steps += args.steps * env.num_envs
            won = {key: won[key] + got[4][key] for key in won}
        arrays = Samples(
            np.array(data[0], np.uint8).reshape(-1, CROP),
            np.array(data[1], np.float32).reshape(-1, EXTRA),
            np.array(data[2], bool).reshape(-1, MOVES),
            np.array(data[3], np.int64),
        )
        acc = fit(policy, one_hot, arrays, args.epochs, rng)
        policy.save(args.out)  # after every round: a run cut short leaves its latest weights
        print(
            f"round {r + 1}/{args.rounds}  teacher share {beta:.2f}  samples {len(arrays.labels):6d}  "
            f"fit {acc:.1%}  episodes won/lost/drawn {won['won']}/{won['lost']}/{won['drawn']}  "
            f"{time.monotonic() - began:6.1f} s",
            flush=True,
        )
    policy.save(args.out)
    seconds = time.monotonic() - began
    print(
        f"wrote {args.out} after {steps} agent-steps in {seconds:.1f} s ({time.process_time():.1f} s of CPU)"
    )
    report: dict[str, Any] = {
        "seconds": seconds,
        # On a busy machine wall time says little; CPU time is what a quiet one would need (about).
        "cpu_seconds": time.process_time(),
        "agent_steps": steps,
        "steps_per_s": steps / seconds,
        "wins": {},
    }
    for opponent in ("random_walker", "raider") if args.eval else ():
        wins = sum(play(policy, opponent, seat, 3000) == seat for seat in (0, 1) for _ in range(args.eval))
        report["wins"][opponent] = wins
        print(f"greedy policy against {opponent}: won {wins} of {2 * args.eval}")
    if args.json:
        print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
