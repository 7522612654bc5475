"""Drop2df's PettingZoo AEC environment: PettingZoo's API and render tests, episodes against the engine
(tokens included), and a number for every turn the game allows."""

from __future__ import annotations

import numpy as np
from env_checks import assert_render_is_the_watch_picture
from pettingzoo.test import api_test

from cellarena.sdk.games.drop2df import ActionCodes, View, play_ops
from cellarena.sdk.protocol.messages import tick
from cellarena.server.env.games.drop2df import Drop2dfAECEnv
from cellarena.server.games.drop2df.engine import Drop2dfEngine
from cellarena.server.games.drop2df.render import render


def test_api() -> None:
    api_test(Drop2dfAECEnv({"turns": 12}), num_cycles=100)
    api_test(Drop2dfAECEnv({"turns": 12, "tokens": True}), num_cycles=100)


def test_render_shows_the_watch_picture() -> None:
    assert_render_is_the_watch_picture(
        lambda render_mode=None: Drop2dfAECEnv({"turns": 12}, render_mode=render_mode), render
    )


def test_rewards_add_up_to_the_engines_scores() -> None:
    """Masked random turns, tokens spent too; the engine refuses none of them."""
    config = {"turns": 30, "tokens": True}
    env = Drop2dfAECEnv(config)
    env.reset(seed=4)
    twin = Drop2dfEngine.new(config, 4)
    rng = np.random.default_rng(1)
    totals = dict.fromkeys(env.possible_agents, 0.0)
    chosen: dict[int, list] = {}
    spent = 0
    for agent in env.agent_iter():
        obs, reward, term, trunc, info = env.last()
        totals[agent] += reward
        seat = int(agent.split("_")[1])
        if term or trunc:
            env.step(None)
            continue
        request = twin.pending()[seat]
        assert obs[: env.cells].tobytes() == request["row"]
        assert list(obs[env.cells :]) == [request["tokens"].count(face) for face in (0, 1, 2)]
        assert request["refused"] == []
        legal = np.flatnonzero(info["action_mask"])
        tokens = legal[legal >= env.cells]
        action = int(rng.choice(tokens if len(tokens) and rng.random() < 0.3 else legal))
        spent += action >= env.cells
        chosen[seat] = env.codes.ops(action)
        if len(chosen) == 2:
            twin.apply(chosen)
            chosen = {}
        env.step(action)
    assert twin.result() is not None and spent > 0
    assert [totals[f"player_{s}"] for s in (0, 1)] == [float(s) for s in twin.frame()["scores"]]


def test_every_turn_has_one_number_and_the_mask_is_what_the_rules_allow() -> None:
    """For positions of a match with tokens: the mask is 1 exactly where no op of the action is
    refused, and each distinct turn (its ops) has one number."""
    engine = Drop2dfEngine.new({"turns": 8, "tokens": True}, 7)
    codes = ActionCodes(len(engine.public_config()["start"]))
    rng = np.random.default_rng(2)
    while engine.result() is None:
        answers = {}
        for seat, request in engine.pending().items():
            view = View.from_message(dict(tick(engine.tick, 0, request)))
            mask = codes.mask(view)
            turns: dict[str, int] = {}
            for action in range(codes.size):
                ops = codes.ops(action)
                ok = play_ops(view.row, ops, view.tokens).refused == ()
                assert mask[action] == (ok and repr(ops) not in turns), (action, ops)
                if ok:
                    turns.setdefault(repr(ops), action)
            assert {repr(codes.ops(a)) for a in range(codes.size) if mask[a]} == set(turns)
            answers[seat] = codes.ops(int(rng.choice(np.flatnonzero(np.frombuffer(mask, np.uint8)))))
        engine.apply(answers)
