"""`reset(options={"replay": PATH, "tick": N})`: every game's environment, and the Rezzo vector
environment per world, start at the replay's state at tick N and show each seat what it was shown
then. The replays are made in-process (`replay_fork_play`), so this runs without a clock or sockets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from replay_fork_play import ENVS, Seen, play

from cellarena.server.replay import read_replay, verify
from cellarena.server.training.rezzo.vector_env import RezzoVectorEnv


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Seen]]:
    folder = tmp_path_factory.mktemp("reset-replays")
    out = {}
    for game in ENVS:
        path = folder / f"{game}.replay"
        out[game] = (path, play(game, path))
        assert verify(read_replay(path)).ok
    return out


def with_wrong_hash(path: Path, index: int) -> bytes:
    """The replay's bytes with tick record ``index``'s hash changed (same length, so still readable)."""
    right = read_replay(path).ticks[index].hash
    wrong = ("0" if right[0] != "0" else "1") * len(right)
    return path.read_bytes().replace(right.encode(), wrong.encode(), 1)


def middle(seen: Seen) -> int:
    ticks = sorted(seen)
    return ticks[len(ticks) // 2]


@pytest.mark.parametrize("game", sorted(ENVS))
def test_reset_at_a_tick_gives_what_each_seat_was_shown_then(
    game: str, recorded: dict[str, tuple[Path, Seen]]
) -> None:
    path, seen = recorded[game]
    cls, config = ENVS[game]
    for tick in (min(seen), middle(seen), max(seen)):
        env = cls(config)
        if game == "rezzo":
            obs, _ = env.reset(options={"replay": str(path), "tick": tick})
            assert sorted(env.agents) == sorted(seen[tick])
            for agent, (want, _mask) in seen[tick].items():
                assert np.array_equal(obs[agent], want), (tick, agent)
            continue
        env.reset(options={"replay": path, "tick": tick})
        assert env.engine.tick == tick
        for agent, (want, mask) in seen[tick].items():
            assert np.array_equal(env.observe(agent), want), (tick, agent)
            assert np.array_equal(env.infos[agent]["action_mask"], mask), (tick, agent)
        assert env.agent_selection in seen[tick]


def test_a_reset_from_a_replay_plays_on_and_a_plain_reset_starts_afresh(
    recorded: dict[str, tuple[Path, Seen]],
) -> None:
    path, seen = recorded["drop2df"]
    cls, config = ENVS["drop2df"]
    env = cls(config)
    env.reset(options={"replay": path, "tick": middle(seen)})
    while env.agents:
        env.step(None if env.terminations[env.agent_selection] else 0)
    assert env.engine.result() is not None
    env.reset(seed=5)
    assert env.engine.tick == 0


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"tick": 3}, "options['tick'] needs options['replay']"),
        ({"replay": "{path}", "tick": -1}, "options['tick'] must be"),
        ({"replay": "{path}", "tick": "3"}, "options['tick'] must be"),
        ({"replay": "{path}"}, "options['tick'] must be"),
        ({"replay": "{path}", "tick": 999}, "options['tick']: {path}: tick 999 is past the end"),
        ({"replay": "{path}", "tick": 12}, "options['tick']: {path}: the match is over at tick 12"),
        ({"replay": "{other}", "tick": 1}, "options['replay']: {other} is a cata replay"),
        ({"replay": "{missing}", "tick": 1}, "options['replay']: {missing}: cannot open"),
        ({"replay": "{bad}", "tick": 5}, "options['replay']: {bad}: does not re-simulate"),
    ],
)
def test_bad_reset_options_name_the_option(
    options: dict[str, object], says: str, recorded: dict[str, tuple[Path, Seen]], tmp_path: Path
) -> None:
    path = recorded["drop2df"][0]
    bad = tmp_path / "bad.replay"
    bad.write_bytes(with_wrong_hash(path, 2))
    names = {"path": path, "other": recorded["cata"][0], "missing": tmp_path / "none.replay", "bad": bad}
    given = {k: v.format(**names) if isinstance(v, str) else v for k, v in options.items()}
    cls, config = ENVS["drop2df"]
    with pytest.raises(ValueError) as caught:
        cls(config).reset(options=given)
    assert says.format(**names) in str(caught.value)


def test_a_replay_of_another_config_is_refused_with_the_fix(recorded: dict[str, tuple[Path, Seen]]) -> None:
    path, seen = recorded["cata"]
    cls, _ = ENVS["cata"]
    fix = r"options\['replay'\].*make the environment with the replay's config"
    with pytest.raises(ValueError, match=fix):
        cls({"size": 24, "max_turns": 6}).reset(options={"replay": path, "tick": middle(seen)})


def test_the_vector_env_starts_the_masked_worlds_at_the_replays_tick(
    recorded: dict[str, tuple[Path, Seen]],
) -> None:
    path, seen = recorded["rezzo"]
    tick = middle(seen)
    env = RezzoVectorEnv(3, ENVS["rezzo"][1], backend="numpy")
    before, _ = env.reset(seed=1)
    n = env.num_envs // 3  # sub-environments per world: b * n + p * k + i
    mask = np.zeros(env.num_envs, bool)
    mask[n : 2 * n] = True
    obs, infos = env.reset(options={"replay": str(path), "tick": tick, "reset_mask": mask})
    k = env.agents_per_player
    for p in range(env.players):
        for i in range(k):
            want = seen[tick][f"player_{p}_agent_{i}"][0]
            assert np.array_equal(obs[n + p * k + i], want), (p, i)
    assert np.array_equal(obs[:n], before[:n]) and np.array_equal(obs[2 * n :], before[2 * n :])
    assert list(infos["map"][mask]) == [path.name] * n
    assert int(env.worlds.tick[1]) == tick
    env.step(np.zeros(env.num_envs, np.int64))
    assert int(env.worlds.tick[1]) == tick + 1
    everywhere, _ = env.reset(options={"replay": str(path), "tick": tick})
    assert all(np.array_equal(everywhere[b * n : (b + 1) * n], everywhere[:n]) for b in range(3))


def test_the_vector_env_names_a_bad_replay_option(recorded: dict[str, tuple[Path, Seen]]) -> None:
    env = RezzoVectorEnv(1, ENVS["rezzo"][1], backend="numpy")
    with pytest.raises(ValueError, match=r"options\['tick'\]: .* past the end"):
        env.reset(options={"replay": str(recorded["rezzo"][0]), "tick": 10_000})
    with pytest.raises(ValueError, match=r"options\['replay'\]: .* is a cata replay"):
        env.reset(options={"replay": str(recorded["cata"][0]), "tick": 1})
