"""The trained C.A.T.A. bot: the policy `train.py` wrote, played greedily through the SDK.

It decodes each request with the SDK's `observation` and `action_mask`, the code the training
environment used, so it sees exactly what the policy was trained on.

    python example_bots/cata/trained/bot.py --weights /tmp/cata.npz     (plus the usual SDK flags)

``--weights`` defaults to $CATA_WEIGHTS, else cata.npz next to this file.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from policy import Policy

from cellarena.sdk import run
from cellarena.sdk.games.cata import CataBot, View, action_mask, action_move, observation


class Trained(CataBot):
    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def on_tick(self, view: View) -> tuple[int, int]:
        return action_move(self.policy.act(observation(view), action_mask(view)))


def main() -> int:
    default = os.environ.get("CATA_WEIGHTS") or str(Path(__file__).with_name("cata.npz"))
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
