"""Train the C.A.T.A. policy of `policy.py` with REINFORCE against a random player, and save it.

Each episode is one match in the PettingZoo environment (`CataAECEnv`), our seat alternating; the
opponent plays a uniformly random legal move, as example_bots/cata/random_legal.py does. After a match
every one of our moves is pushed towards (a win, +1) or away from (a loss, -1) what it did, less a
running average of the results (the baseline). Everything is seeded: the same command gives the same
weights.

    python example_bots/cata/trained/train.py --out /tmp/cata.npz --episodes 300
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from policy import Policy, features

from cellarena.sdk.games.cata import ACTIONS
from cellarena.server.env.games.cata import CataAECEnv


def episode(
    env: CataAECEnv, policy: Policy, seat: int, seed: int, rng: np.random.Generator, greedy: bool
) -> tuple[float, list[tuple[np.ndarray, np.ndarray, int]]]:
    """Play one match; our result (+1, 0, -1) and our moves as (features, probabilities, action)."""
    env.reset(seed=seed)
    me = f"player_{seat}"
    result, moves = 0.0, []
    for agent in env.agent_iter():
        obs, reward, terminated, truncated, info = env.last()
        if agent == me:
            result += reward
        if terminated or truncated:
            env.step(None)
            continue
        mask = info["action_mask"]
        if agent != me:
            env.step(int(rng.choice(np.flatnonzero(mask))))
            continue
        x = features(obs)
        p = policy.probabilities(x, mask)
        action = int(np.argmax(p)) if greedy else int(rng.choice(ACTIONS, p=p))
        moves.append((x, p, action))
        env.step(action)
    return result, moves


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="where to write the weights (.npz)")
    parser.add_argument("--episodes", type=int, default=300, help="matches to train on (default 300)")
    parser.add_argument("--size", type=int, default=32, help="board side (default 32)")
    parser.add_argument("--max-turns", type=int, default=60, help="turn cap of a match (default 60)")
    parser.add_argument("--lr", type=float, default=1.0, help="learning rate (default 1.0)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the dice (default 0)")
    parser.add_argument("--eval", type=int, default=20, help="greedy test matches at the end (default 20)")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error("--episodes must be at least 1")
    env = CataAECEnv({"size": args.size, "max_turns": args.max_turns})
    rng = np.random.default_rng(args.seed)
    policy = Policy()
    baseline, recent = 0.0, []
    started = time.monotonic()
    for n in range(args.episodes):
        result, moves = episode(env, policy, n % 2, args.seed * 1_000_003 + n, rng, greedy=False)
        grad = np.zeros_like(policy.weights)
        for x, p, action in moves:
            push = -p
            push[action] += 1.0  # d log p(action) / d logits
            grad += np.outer(push, x)
        policy.weights += args.lr * (result - baseline) * grad / max(1, len(moves))
        baseline = 0.95 * baseline + 0.05 * result
        recent.append(result)
        if (n + 1) % 50 == 0 or n + 1 == args.episodes:
            wins = sum(r > 0 for r in recent) / len(recent)
            took = time.monotonic() - started
            print(f"episode {n + 1:5d}  won {wins:4.0%} of the last {len(recent)}  {took:5.1f} s", flush=True)
            recent = []
    policy.save(args.out)
    print(f"wrote {args.out} after {args.episodes} episodes in {time.monotonic() - started:.1f} s")
    if args.eval:
        results = [episode(env, policy, k % 2, 10**9 + k, rng, greedy=True)[0] for k in range(args.eval)]
        won, lost = sum(r > 0 for r in results), sum(r < 0 for r in results)
        print(f"greedy policy against random moves: won {won} of {args.eval}, lost {lost}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
