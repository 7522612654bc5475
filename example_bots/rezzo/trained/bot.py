"""The trained Rezzo bot: the network `train.py` wrote, played greedily through the SDK.

Each agent keeps the SDK's `Tracker` (where it is, what it has seen); every tick the policy reads the
same inputs it was trained on (`policy.observe`, with the same Tracker) and its preferred legal move
is sent. Nothing else decides.

    python example_bots/rezzo/trained/bot.py --weights rezzo.npz      (plus the usual SDK flags)

``--weights`` defaults to $REZZO_WEIGHTS, else rezzo.npz next to this file (committed).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
from policy import Policy, legal, observe

from cellarena.sdk import Bot, MatchInfo, Move, Tracker, View, run


class Trained(Bot):
    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.trackers: dict[int, Tracker] = {}
        self.last: dict[int, int] = {}

    def on_start(self, info: MatchInfo) -> None:
        self.trackers.clear()
        self.last.clear()

    def on_tick(self, view: View) -> list[int]:
        if not view.agents:
            return []
        cells, extras, masks = [], [], []
        for index, viewport in view:
            tracker = self.trackers.setdefault(index, Tracker())
            tracker.observe(viewport)
            c, e = observe(tracker, viewport, self.last.get(index, Move.NOOP), view.tick)
            cells.append(c)
            extras.append(e)
            masks.append(legal(viewport))
        moves = self.policy.act(np.array(cells), np.array(extras), np.array(masks))
        out = []
        for index, move in zip(view.agents, moves.tolist(), strict=True):
            self.trackers[index].commit(move)
            self.last[index] = move
            out.append(move)
        return out


def main() -> int:
    default = os.environ.get("REZZO_WEIGHTS") or str(Path(__file__).with_name("rezzo.npz"))
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--weights", type=Path, default=Path(default))
    args, rest = parser.parse_known_args()
    try:
        policy = Policy.load(args.weights)
    except ValueError as exc:
        print(
            f"trained bot: {exc}; train one with: python {Path(__file__).with_name('train.py')} "
            f"--out {args.weights}",
            file=sys.stderr,
        )
        return 1
    return run(Trained(policy), rest)


if __name__ == "__main__":
    raise SystemExit(main())
