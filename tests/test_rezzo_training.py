"""Training Rezzo in the vector environment: opponents in the seats the learner does not play, partial
resets, a pool of maps with a seed per world, randomised starts, replays of any world and rgb frames.

Each is checked against separate `RezzoEngine`s played side by side, or against the replay verifier.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from bot_files import load_example_bot
from cellarena_cli import here, run_here

from cellarena.sdk.bot import MatchInfo
from cellarena.sdk.games.rezzo import Cell, Move, View
from cellarena.sdk.opponents.rezzo import RandomRezzo
from cellarena.server.games.rezzo.engine import RezzoEngine
from cellarena.server.games.rezzo.maps import parse_map, read_map
from cellarena.server.games.rezzo.starts import random_start
from cellarena.server.replay import read_replay, verify
from cellarena.server.training.rezzo.opponents import (
    BotOpponent,
    OpponentMix,
    OpponentSeats,
    policy_opponent,
    snapshot,
)
from cellarena.server.training.rezzo.vector_env import RezzoVectorEnv


def views(engine: RezzoEngine, seat: int) -> np.ndarray:
    """Seat's agents' observations as its bot receives them."""
    request = engine.pending()[seat]
    n = len(request["agents"])
    cells = np.frombuffer(request["cells"], np.uint8).reshape(n, 13, 13)
    damage = np.frombuffer(request["damage"], np.uint8).reshape(n, 13, 13)
    return np.stack([cells, damage], axis=1)


# ======================================================================================== opponents
def test_the_learner_plays_one_seat_and_a_bot_the_other_as_in_a_match() -> None:
    """With the SDK's random bot as opponent, each world plays what a match of the learner's moves
    against that bot plays: the learner sees its own seat only, alternating seats across worlds."""
    worlds, config = 4, {"map": "duel", "max_ticks": 40}
    env = RezzoVectorEnv(worlds, config, opponent=BotOpponent(RandomRezzo))
    assert env.num_envs == worlds and list(env.learner_seats) == [0, 1, 0, 1]
    obs, _ = env.reset(seed=3)
    engines = [RezzoEngine.new(config) for _ in range(worlds)]
    bots = []
    for b in range(worlds):
        bot = RandomRezzo()
        bot.info = MatchInfo(seat=1 - b % 2, players=2, names=("x", "y"), game="rezzo")
        bots.append(bot)
    rng = np.random.default_rng(0)
    for _ in range(39):
        actions = rng.integers(0, 6, worlds)
        for b, engine in enumerate(engines):
            me = b % 2
            assert np.array_equal(obs[b], views(engine, me)[0])
            theirs = View.from_message(engine.pending()[1 - me])
            engine.apply({me: [int(actions[b])], 1 - me: bots[b].on_tick(theirs)})
        obs, _, terminated, truncated, _ = env.step(actions)
    assert not (terminated | truncated).any()
    obs, _, _, truncated, infos = env.step(rng.integers(0, 6, worlds))
    assert truncated.all() and infos["_final_obs"].all()


def test_the_example_bots_play_as_opponents_and_builder_wins_its_seats() -> None:
    """builder, loaded from its file, in the opponent seat of an idle learner: it wins on duel (its
    trap), as it does against an idle bot in a match; the learner's reward says so."""
    builder = load_example_bot("rezzo", "builder").Builder
    env = RezzoVectorEnv(2, {"map": "duel", "max_ticks": 400}, opponent=BotOpponent(builder))
    env.reset(seed=0)
    ended = np.zeros(2, bool)
    got = np.zeros(2)
    for _ in range(400):
        _, rewards, terminated, truncated, _ = env.step(np.zeros(2, np.int64))
        fresh = (terminated | truncated) & ~ended
        got[fresh] = rewards[fresh]
        ended |= terminated | truncated
        if ended.all():
            break
    assert list(got) == [-1.0, -1.0]


def test_policy_opponents_snapshots_and_mixes() -> None:
    class Always:
        def __init__(self, move: int) -> None:
            self.move = move

        def __call__(self, obs: np.ndarray) -> np.ndarray:
            return np.full(len(obs), self.move)

    learner = Always(int(Move.LEFT))
    frozen = snapshot(learner)
    learner.move = int(Move.RIGHT)  # training goes on; the snapshot keeps what it was
    seats = OpponentSeats(*(np.zeros(3, np.int64) for _ in range(3)), np.ones(3, bool), np.ones(3, np.int64),
                          np.ones(3, bool), 2, [{}])  # fmt: skip
    assert list(frozen(np.zeros((3, 2, 13, 13), np.uint8), seats)) == [Move.LEFT] * 3
    assert list(policy_opponent(learner)(np.zeros((3, 2, 13, 13), np.uint8), seats)) == [Move.RIGHT] * 3

    mix = OpponentMix([policy_opponent(Always(1)), policy_opponent(Always(2))], seed=1)
    env = RezzoVectorEnv(16, {"map": "duel"}, opponent=mix)
    env.reset(seed=0)
    env.step(np.zeros(16, np.int64))
    picked = [mix.choice[b] for b in range(16)]
    assert set(picked) == {0, 1}  # both drawn, one per world
    assert all(env._moves[b, 1 - b % 2] == picked[b] + 1 for b in range(16))
    mix.add(frozen)
    assert len(mix.opponents) == 3


def test_an_opponent_with_the_wrong_number_of_moves_is_refused() -> None:
    env = RezzoVectorEnv(2, {"map": "duel"}, opponent=lambda obs, seats: np.zeros(5, np.int64))
    env.reset()
    with pytest.raises(ValueError, match=r"answered \(5,\) moves for 2 agents"):
        env.step(np.zeros(2, np.int64))
    with pytest.raises(ValueError, match=r"seats are 0\.\.1"):
        RezzoVectorEnv(2, {"map": "duel"}, opponent=BotOpponent(RandomRezzo), learner_seat=2)


# ================================================================================ resets, maps, starts
def test_a_partial_reset_starts_only_the_worlds_it_marks() -> None:
    env = RezzoVectorEnv(3, {"map": "duel"})
    first, _ = env.reset(seed=0)
    for _ in range(5):
        obs, *_ = env.step(np.full(6, int(Move.ADVANCE)))
    moved = obs.copy()
    mask = np.array([False, False, True, True, False, False])
    again, infos = env.reset(options={"reset_mask": mask})
    assert np.array_equal(again[2:4], first[2:4])
    assert np.array_equal(again[[0, 1, 4, 5]], moved[[0, 1, 4, 5]])
    assert list(infos["_map"]) == list(mask) and infos["map"][2] == "duel" and infos["map"][0] is None
    assert env.worlds.tick[1] == 1 and env.worlds.tick[0] == 6
    with pytest.raises(ValueError, match="splits world 1"):
        env.reset(options={"reset_mask": np.array([False, False, True, False, False, False])})
    with pytest.raises(ValueError, match="bool numpy array of shape"):
        env.reset(options={"reset_mask": [True] * 6})


def test_random_starts_are_valid_symmetric_maps_and_follow_the_seed() -> None:
    text = read_map("duel")[0]
    rng = np.random.default_rng(5)
    starts = {random_start(text, rng, 3) for _ in range(60)}
    assert len(starts) > 20
    for start in starts:
        m = parse_map(start)  # strict: point symmetry, counts, geyser distances
        a, b = sorted(m.agents, key=lambda agent: agent.player)
        assert max(abs(a.x - 16), abs(a.y - 26)) <= 3 and (a.facing - b.facing) % 4 == 2
    assert random_start(text, np.random.default_rng(1), 0) == text
    quad = read_map("quad")[0]
    parse_map(random_start(quad, np.random.default_rng(2), 2))

    def maps_and_starts(seed: int) -> list[str]:
        env = RezzoVectorEnv(4, {"map": "duel", "max_ticks": 3}, maps=["duel", "duel"], random_start=3)
        env.reset(seed=seed)
        out = [c["map_text"] for c in env._configs]
        for _ in range(4):
            env.step(np.zeros(8, np.int64))
            out += [c["map_text"] for c in env._configs]
        return out

    assert maps_and_starts(7) == maps_and_starts(7) != maps_and_starts(8)


def test_a_map_pool_of_different_shapes_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"map 'field' is 64x64 .* the maps of one vector environment share"):
        RezzoVectorEnv(2, maps=["duel", "field"])


def test_a_randomised_world_plays_as_an_engine_of_its_start() -> None:
    env = RezzoVectorEnv(2, {"map": "duel", "max_ticks": 30}, random_start=4)
    obs, _ = env.reset(seed=11)
    engines = [RezzoEngine.new(c) for c in env._configs]
    rng = np.random.default_rng(1)
    for _ in range(29):
        for b, engine in enumerate(engines):
            for p in (0, 1):
                assert np.array_equal(obs[2 * b + p], views(engine, p)[0])
        actions = rng.integers(0, 6, 4)
        for b, engine in enumerate(engines):
            engine.apply({p: [int(actions[2 * b + p])] for p in (0, 1)})
        obs, *_ = env.step(actions)


# ======================================================================================== watching
def test_a_recorded_world_verifies_and_plays_in_the_replay_commands(tmp_path: Path) -> None:
    """The replay of a world with a randomised start and a bot opponent: complete, verified by
    re-simulation (`replay verify`), and shown at a tick by `replay show`."""
    env = RezzoVectorEnv(
        3, {"map": "duel", "max_ticks": 60}, random_start=3, opponent=BotOpponent(RandomRezzo, "random")
    )
    path = tmp_path / "world1.replay"
    env.record(1, path, names=["random", "learner"])
    env.reset(seed=4)
    rng = np.random.default_rng(0)
    for _ in range(60):
        env.step(rng.integers(0, 6, 3))
    replay = read_replay(path)
    assert replay.complete and replay.names == ["random", "learner"]
    assert "randomised start" in replay.config["map_text"]
    assert replay.header["extra"]["vector_env"]["world"] == 1
    report = verify(replay)
    assert report.ok, report.summary()
    out = run_here("replay", "verify", str(path))
    assert out.returncode == 0, out.stdout + out.stderr
    shown = run_here("replay", "show", str(path), "--tick", "30")
    assert shown.returncode == 0, shown.stderr


def test_rgb_frames_in_the_viewer_colours() -> None:
    env = RezzoVectorEnv(3, {"map": "duel"}, render_mode="rgb_array", render_worlds=(0, 2), render_scale=2)
    env.reset()
    frames = env.render()
    assert frames is not None and len(frames) == 2
    frame = frames[0]
    assert frame.shape == (64, 64, 3) and frame.dtype == np.uint8
    cells = env.worlds.cells(0)
    y, x = (int(v) for v in np.argwhere(cells == Cell.BASE)[0])
    assert tuple(frame[2 * y, 2 * x]) == (0x73, 0x50, 0x00)  # seat 0's orange, half way to black
    assert RezzoVectorEnv(1, {"map": "duel"}).render() is None
    with pytest.raises(ValueError, match="render_mode 'human' is not offered"):
        RezzoVectorEnv(1, render_mode="human")


# ======================================================================================== rewards
def test_flag_shaping_pays_for_enemy_flags_and_unknown_terms_are_refused() -> None:
    """builder grows the idle learner's flags into a base: with enemy_flags for the opponent's view and
    own_flags for the learner's, the learner is charged for every flag of its own that forms."""
    builder = load_example_bot("rezzo", "builder").Builder
    weights = {"own_flags": -0.1, "outcome": 2.0}
    env = RezzoVectorEnv(
        1, {"map": "duel"}, opponent=BotOpponent(builder), learner_seat=1, reward_weights=weights
    )
    env.reset()
    total, final = 0.0, 0.0
    for _ in range(400):
        _, rewards, terminated, truncated, _ = env.step(np.zeros(1, np.int64))
        total += float(rewards[0])
        if terminated[0] or truncated[0]:
            final = float(rewards[0])
            break
    # The loss at twice the weight; the loss turns the learner's flags into wire, which gives back
    # what they cost, so the flags formed before the end were charged on the steps they formed.
    assert -2.0 < final < -1.5
    assert total < final - 0.05
    with pytest.raises(ValueError, match="unknown reward term 'wire'"):
        RezzoVectorEnv(1, reward_weights={"wire": 1.0})


# ======================================================================================== the worked example
TRAINED = Path(__file__).resolve().parent.parent / "example_bots" / "rezzo" / "trained"


def test_the_trained_bot_refuses_weights_it_cannot_read(tmp_path: Path) -> None:
    import subprocess
    import sys

    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not weights")
    proc = subprocess.run(
        [sys.executable, str(TRAINED / "bot.py"), "--weights", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1
    assert f"{bad} is not a weights file" in proc.stderr and "train.py" in proc.stderr


def test_bench_train_trains_then_plays_both_opponents_over_tcp(tmp_path: Path) -> None:
    """The worked example's pieces together, with a recipe of seconds (not the goal's): `cellarena
    bench train` runs example_bots/rezzo/trained/train.py (builder's teaching, two DAgger rounds in
    the vector environment, the fit), then plays its weights through bot.py, an SDK bot over TCP, in
    a tournament against each opponent. Its JSON has the training's time and rate and the win
    counts; the trained bot answered every tick validly and did not crash. Whether it wins is the
    benchmark's own question. Outside a checkout it says why it cannot run."""
    import json

    quick = "--rounds 2 --worlds 2 --exact-worlds 1 --steps 12 --epochs 1"
    args = ("--bots-dir", str(TRAINED.parent.parent), "--out", str(tmp_path / "b"), "--matches", "2")
    # In this process: the trainer and the tournaments are processes the bench starts itself.
    out = run_here("bench", "train", *args, "--max-ticks", "30", "--train-args", quick, "--json")
    assert out.returncode == 0, out.stderr
    assert "round 2/2" in out.stderr  # the trainer's progress, echoed
    result = json.loads(out.stdout)
    assert result["agent_steps"] == 2 * 12 * 3 and result["steps_per_s"] > 0
    assert 0 < result["weights_bytes"] < 1_000_000
    assert result["train_seconds"] > 0 and result["train_cpu_seconds"] > 0 and result["load_average"] >= 0
    for name in ("random_walker", "raider"):
        assert sum(result["matches"][name].values()) == 2, result
        folder = tmp_path / "b" / f"vs-{name}"
        report = json.loads(here("results", str(folder), "--json").output)
        trained = next(row for row in report["standings"] if row["bot"] == "trained")
        assert trained["invalid_rate"] == 0 and trained["crashes"] == 0, trained
        logs = list(folder.glob("matches/*/trained.log"))
        assert len(logs) == 2 and not any("Traceback" in log.read_text() for log in logs)
    missing = run_here("bench", "train", "--bots-dir", str(tmp_path), "--out", str(tmp_path / "c"))
    assert missing.returncode != 0
    assert "train.py not found: run this from the root of a cellarena checkout" in missing.stderr


def test_seats_seeds_and_starts_are_checked_with_what_to_change() -> None:
    env = RezzoVectorEnv(3, {"map": "duel"}, opponent=BotOpponent(RandomRezzo), learner_seat=[1, 1, 0])
    assert env.learner_seats.tolist() == [1, 1, 0]
    obs, _ = env.reset(seed=[5, 6, 7])
    engine = RezzoEngine.new({"map": "duel"})
    assert np.array_equal(obs[0], views(engine, 1)[0]) and np.array_equal(obs[2], views(engine, 0)[0])
    with pytest.raises(ValueError, match=r"one seed per world \(3\), got 2"):
        env.reset(seed=[1, 2])
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"seed": 1})
    board = RezzoEngine.new({"map": "duel"})
    with pytest.raises(ValueError, match="give either start or maps/random_start"):
        RezzoVectorEnv(1, start=board, random_start=2)
    with pytest.raises(ValueError, match="made from start= has no map to put in a replay"):
        RezzoVectorEnv(1, start=board).record(0, "x.replay")
    with pytest.raises(ValueError, match=r"world must be 0\.\.2, got 3"):
        env.record(3, "x.replay")
    with pytest.raises(ValueError, match="learner_seat must be a seat, 'alternate' or one seat per world"):
        RezzoVectorEnv(1, opponent=BotOpponent(RandomRezzo), learner_seat="first")
