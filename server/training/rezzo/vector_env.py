"""Rezzo as a Gymnasium vector environment on `BatchedRezzo`: B worlds stepped at once.

**Each learner agent is a sub-environment.** Without an opponent every agent of every world is one
(self-play with one policy): a world of N agents (a duel: 2) gives N sub-environments, so
``num_envs = B * N`` and sub-environment ``b * N + p * K + k`` is world b's agent k of player p (K
agents per player). With an ``opponent`` the learner plays one seat per world and the opponent all
the others: ``num_envs = B * K`` and sub-environment ``b * K + k`` is the learner's agent k in world
b, whose seat is ``learner_seats[b]`` (``learner_seat="alternate"``: seat b mod players, so the
learner plays every side). An opponent is any callable over batched observations (`opponents`:
SDK bots, a trained policy, frozen snapshots of the learner, a mix of them). Either way one policy
maps a (num_envs, 2, 13, 13) batch to num_envs moves, as every standard Gymnasium learner does.

- Observation (`single_observation_space`): Box(0, 255, (2, 13, 13), uint8), what that agent's bot
  receives over the wire: the viewport's cell codes with owners relative to the viewer (0 is always
  the viewer's own player), then its damage. The same layout as the PettingZoo environment's.
- Action (`single_action_space`): Discrete(6), the move codes of `cellarena.sdk.games.rezzo.Move`.
- Reward: 0 until the agent's world ends; then +1 for the sole winner's agents, -1 for every other
  agent of that world, and 0 for all in a draw (``reward_weights["outcome"]``, 1 by default, scales
  it). Shaping terms, off by default, each paying its weight per unit of what it counts (`rewards`
  lists them): flags on the board (``own_flags``, ``enemy_flags``), flags formed and destroyed
  (``flag_formed``, ``own_flag_destroyed``, ``enemy_flag_destroyed``, from the game's events, which
  the batch then makes whether or not ``events`` asks for them in ``infos``), flags' distance to a
  base that counts against them (``own_flag_distance``, ``enemy_flag_distance``) and wire built
  (``wire_built``).
- Termination: the world ended by losses (at most one player left). Truncation: the world reached
  its tick cap (`max_ticks`) with two or more players in. Both apply to every agent of that world.
- Autoreset: ``metadata["autoreset_mode"]`` is `AutoresetMode.SAME_STEP`. A world that ends starts
  its next episode within the same `step`: the observations returned for its agents are the new
  episode's first, and the last ones of the episode that ended are in ``infos["final_obs"]`` (an
  object array with an observation where ``infos["_final_obs"]`` is True, as Gymnasium's
  `SyncVectorEnv` gives them in this mode). The next step's actions play the new episode.
- Events: with ``events=True``, ``infos["events"]``, when a step had any, maps a world's index to the
  game events of its step (`Events.log`, exactly as `RezzoEngine.apply` reports them: flags formed,
  destroyed and beside a base, players out, cells blanked by hits, agents blocked), for rewards
  shaped on them. Off by default: making them halves the numba step's rate in a busy duel.
- Partial reset: ``reset(options={"reset_mask": mask})``, a (num_envs,) bool array as Gymnasium's
  vector API has it, starts the worlds whose agents are True again (all the agents of a world, or
  none of them, since they share it); the other worlds' observations come back as they were.
- From a replay: ``reset(options={"replay": PATH, "tick": N})`` starts the worlds (all, or those of
  ``reset_mask``) at the replay's state at tick N (`env.replay_start`, as `replay fork` rebuilds
  it); their episodes play on from there, and their next ones start as the map and pool say.
- Maps and starts: each world has a seed (``reset(seed=s)`` gives world b the seed s + b, or pass a
  list of one seed per world) from which it draws every episode's map from ``maps`` (a pool of map
  names or paths, all of one size and player and agent count, since the worlds share one batch)
  and, with ``random_start`` > 0, a randomised start of it (`starts`: agents moved up to that many
  cells and turned, keeping the map's symmetry). ``infos["map"]`` names each world's map on reset.
- In maps of more than two players, the agents of a player who lost while the others play on keep
  their last observation, get reward 0 and have their actions ignored until their world resets.
- ``render_mode="rgb_array"``: `render` returns one RGB picture per world in ``render_worlds``
  (`picture.rgb_frame`). `record` writes a world's next episode as a replay file that `cellarena
  replay verify` and `replay view` play (`server/replay.py`'s writer, as the match server's).
- ``threads``: with numba, the worlds are stepped on this many threads at once (`BatchedRezzo`'s
  ``threads``: split into runs, the same results bit for bit); "all" is every thread numba has (its
  NUMBA_NUM_THREADS, the cores by default). "auto", the default, is "all" from `THREADS_FROM` worlds
  up and 1 below, where starting the threads costs more than they save. On a machine whose cores are
  busy with other work, a step on two threads waits for the slower one, and ran up to 25 times
  slower than on one: pass 1 there (`cellarena bench env` measures both side by side;
  docs/architecture.md has the figures).

Needs the ``[rl]`` extra (gymnasium).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from cellarena.sdk.games.rezzo import VIEW_SIZE, Move
from cellarena.server.games.base import config_mapping
from cellarena.server.games.rezzo.batch.batched import BatchedRezzo
from cellarena.server.games.rezzo.engine import RezzoConfig, RezzoEngine
from cellarena.server.games.rezzo.maps import read_map
from cellarena.server.games.rezzo.starts import random_start
from cellarena.server.replay import START_OPTIONS, ReplayWriter, replay_start
from cellarena.server.training.rezzo.opponents import Opponent, OpponentSeats
from cellarena.server.training.rezzo.picture import rgb_frame
from cellarena.server.training.rezzo.recording import Recordings
from cellarena.server.training.rezzo.rewards import EVENT_TERMS, SHAPING_TERMS, RewardShaper

#: From this many worlds up, threads="auto" steps them on all of numba's threads: a step of 512 duels
#: takes about 1 ms on one thread, against some tens of microseconds to start the others.
THREADS_FROM = 512
#: One agent's observation: cell codes, then damage, each 13x13 (the PettingZoo environment's layout).
OBS_SHAPE = (2, VIEW_SIZE, VIEW_SIZE)
#: The reward terms `reward_weights` may weigh: the outcome, and the shaping terms of `rewards`.
REWARD_TERMS = ("outcome", *SHAPING_TERMS)
#: Distinct starts whose one-world template batch is kept (random starts of a duel: about 200).
START_CACHE = 512


def map_pool(config: dict[str, Any], maps: Sequence[str] | None) -> list[tuple[str, dict[str, Any]]]:
    """(name, config) per map of ``maps`` (default: the config's map), each config with its map's text."""
    names = list(maps) if maps is not None else [str(config.get("map", RezzoConfig.map))]
    if not names:
        raise ValueError("maps must name at least one map")
    pool = []
    for name in names:
        text = read_map(name)[0] if "map_text" not in config or maps is not None else config["map_text"]
        pool.append((name, {**config, "map": name, "map_text": text}))
    return pool


def _check_shapes(pool: list[tuple[str, dict[str, Any]]], engines: list[RezzoEngine]) -> None:
    """The maps of one vector environment share one batch: the same size and seats."""
    first = engines[0]
    shape = (first.height, first.width, first.players, first.agents_per_player)
    for (name, _), other in zip(pool[1:], engines[1:], strict=True):
        got = (other.height, other.width, other.players, other.agents_per_player)
        if got != shape:
            raise ValueError(
                f"map {name!r} is {got[1]}x{got[0]} with {got[2]} players of {got[3]} agent(s), but "
                f"{pool[0][0]!r} is {shape[1]}x{shape[0]} with {shape[2]} of {shape[3]}: the maps of "
                "one vector environment share one batch, so they need the same size and seats"
            )


def final_observations(views: np.ndarray, done: np.ndarray, columns: np.ndarray, envs: int) -> dict[str, Any]:
    """``infos["final_obs"]`` and its mask ``"_final_obs"``: the last observations of the learner agents
    (``columns`` per world) of the worlds ``done``, from those worlds' ``views``."""
    per_world = columns.shape[1]
    final = views[np.arange(len(done))[:, None], columns[done]].reshape(-1, *OBS_SHAPE)
    final_obs = np.full(envs, None, dtype=object)
    agents = (done[:, None] * per_world + np.arange(per_world)).reshape(-1)
    for i, agent in enumerate(agents.tolist()):
        final_obs[agent] = final[i]
    mask = np.zeros(envs, bool)
    mask[agents] = True
    return {"final_obs": final_obs, "_final_obs": mask}


def thread_count(threads: int | str, worlds: int) -> int:
    """``threads`` as a count for ``worlds`` worlds (see the module's docstring)."""
    if threads == "auto":
        threads = "all" if worlds >= THREADS_FROM else 1
    if threads == "all":
        try:
            from cellarena.server.games.rezzo.batch.batched_parallel import threads_available
        except ImportError:
            return 1  # no numba: the numpy backend has one thread
        return threads_available()
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a count of 1 or more, 'all' or 'auto', got {threads!r}")
    return threads


def check_weights(weights: Mapping[str, float] | None) -> dict[str, float]:
    """The weight of each reward term: ``weights`` over the outcome's 1."""
    out = {"outcome": 1.0}
    for key, value in (weights or {}).items():
        if key not in REWARD_TERMS:
            raise ValueError(
                f"unknown reward term {key!r} in reward_weights; the terms are {', '.join(REWARD_TERMS)}"
            )
        out[key] = float(value)
    return out


def learner_seats(learner_seat: int | str | Sequence[int], b: int, p: int) -> np.ndarray:
    """The seat the learner plays in each of ``b`` worlds of ``p`` players."""
    if learner_seat == "alternate":
        return np.arange(b) % p
    if isinstance(learner_seat, str):
        raise ValueError(
            f"learner_seat must be a seat, 'alternate' or one seat per world, got {learner_seat!r}"
        )
    seats = np.broadcast_to(np.asarray(learner_seat, np.intp), (b,)).copy()
    if seats.min() < 0 or seats.max() >= p:
        raise ValueError(f"learner_seat: seats are 0..{p - 1} on this map, got {learner_seat!r}")
    return seats


def worlds_of(mask: Any, batch: int, per_world: int) -> np.ndarray:
    """The worlds a ``reset_mask`` names; ValueError if it splits a world's agents."""
    if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_ or mask.shape != (batch * per_world,):
        got = f"{type(mask).__name__} {getattr(mask, 'dtype', '')} {getattr(mask, 'shape', '')}".strip()
        raise ValueError(
            f"options['reset_mask'] must be a bool numpy array of shape ({batch * per_world},), got {got}"
        )
    per = mask.reshape(batch, per_world)
    split = np.flatnonzero(per.any(axis=1) & ~per.all(axis=1))
    if split.size:
        raise ValueError(
            f"reset_mask splits world {int(split[0])}: its agents (sub-environments "
            f"{int(split[0]) * per_world}..{(int(split[0]) + 1) * per_world - 1}) share one "
            "world, so mark all of them or none"
        )
    if not per.any():
        raise ValueError("options['reset_mask'] must mark at least one sub-environment")
    return np.flatnonzero(per[:, 0])


@dataclass(frozen=True)
class _ReplayStart:
    """A replay's state that worlds start from: its file's name, its config and the state's batch."""

    name: str
    config: dict[str, Any]
    template: BatchedRezzo

    def restore(self, batch: BatchedRezzo, worlds: np.ndarray, configs: list[Any], names: list[str]) -> None:
        """``batch``'s ``worlds`` at this state, their config and map name this replay's."""
        batch.restore(worlds, self.template)
        for b in worlds.tolist():
            configs[b], names[b] = dict(self.config), self.name


def replay_world(options: Mapping[str, Any], worlds: BatchedRezzo, backend: str) -> _ReplayStart:
    """The state ``options`` name (`replay_start`) as a one-world batch that ``worlds`` restore from."""
    engine = replay_start(options, RezzoEngine.name)
    assert isinstance(engine, RezzoEngine)  # a rezzo replay's: `replay_start` checks the game
    path = os.fspath(options["replay"])
    try:
        template = BatchedRezzo([engine], backend=backend)
    except ValueError as exc:  # a player already out, a torus
        raise ValueError(f"options['tick']: {path}: this state cannot be batched ({exc})") from None
    if (template.plane, template.n_agents) != (worlds.plane, worlds.n_agents):
        raise ValueError(
            f"options['replay']: {path} is a world of {engine.width}x{engine.height} with "
            f"{template.n_agents} agents, this environment's are {worlds.width}x{worlds.height} "
            f"with {worlds.n_agents}: make it with the replay's config"
        )
    return _ReplayStart(os.path.basename(path), config_mapping(engine), template)


class RezzoVectorEnv(VectorEnv[np.ndarray, np.ndarray, np.ndarray]):
    """``worlds`` Rezzo worlds (the options of `RezzoConfig`), every learner agent a sub-environment.

    ``maps``: the pool each world draws its map from per episode (default: the config's map).
    ``random_start``: how far (cells) a start may move the agents (0: the map's start). ``opponent``:
    who plays the seats the learner does not (None: the learner plays every agent); ``learner_seat``
    an int, "alternate", or one seat per world. ``copy``: return fresh arrays from `reset` and `step`
    (as Gymnasium's vector environments do by default); False returns the environment's own buffers,
    which the next call overwrites. ``start``: every episode's first state instead of a map (e.g.
    `RezzoEngine.from_board`; no pool, random starts or replays then). ``backend``: `BatchedRezzo`'s.
    """

    metadata: dict[str, Any] = {  # noqa: RUF012
        "autoreset_mode": AutoresetMode.SAME_STEP,
        "render_modes": ["rgb_array"],
    }

    def __init__(
        self,
        worlds: int,
        config: dict[str, Any] | None = None,
        *,
        maps: Sequence[str] | None = None,
        random_start: int = 0,
        opponent: Opponent | None = None,
        learner_seat: int | str | Sequence[int] = "alternate",
        reward_weights: Mapping[str, float] | None = None,
        copy: bool = True,
        start: RezzoEngine | None = None,
        backend: str = "auto",
        events: bool = False,
        render_mode: str | None = None,
        render_worlds: Sequence[int] = (0,),
        render_scale: int = 8,
        threads: int | str = "auto",
    ) -> None:
        if worlds < 1:
            raise ValueError(f"a vector environment needs at least one world, got {worlds}")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode {render_mode!r} is not offered; use 'rgb_array' or None")
        if random_start < 0:
            raise ValueError(f"random_start must be 0 or more (cells), got {random_start}")
        self.render_mode = render_mode
        self.render_worlds = [int(b) for b in render_worlds]
        self.render_scale = render_scale
        self.backend = backend
        self.random_start = random_start
        self.batch = worlds
        self.weights = check_weights(reward_weights)
        if start is not None:
            if maps is not None or random_start:
                raise ValueError("give either start or maps/random_start: a start is one fixed board")
            self._pool: list[tuple[str, dict[str, Any]]] = []
            first = start
        else:
            self._pool = map_pool(dict(config or {}), maps)
            engines = [self._engine_for(cfg) for _, cfg in self._pool]
            _check_shapes(self._pool, engines)
            first = engines[0]
        self._templates: dict[str, BatchedRezzo] = {}
        self.template = BatchedRezzo([first], backend=backend)
        self._events_in_infos = events
        self._make_batch(first, worlds, threads)
        self.opponent = opponent
        self.learner_seats = learner_seats(learner_seat, self.batch, self.players)
        self._columns(opponent is not None)
        self.num_envs = worlds * self._per_world
        self.copy = copy
        self.single_observation_space = spaces.Box(0, 255, OBS_SHAPE, np.uint8)
        self.single_action_space = spaces.Discrete(len(Move))
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        if opponent is None:  # every agent is the learner's: the batch's own viewports, in order
            self._obs = self.worlds.observations.reshape(self.num_envs, *OBS_SHAPE)
        else:
            self._obs = np.zeros((self.num_envs, *OBS_SHAPE), np.uint8)
        self._episode_state(worlds)
        self._recordings = Recordings(self.agents_per_player)

    # ------------------------------------------------------------------------------- set-up
    def _episode_state(self, worlds: int) -> None:
        """Each world's buffers of a step, its dice, its episode and what it plays on."""
        self._player_of = (
            self._l_cols // self.agents_per_player
        )  # (B, per world): each learner agent's player
        self._rewards = np.zeros(self.num_envs, np.float32)
        self._terminations = np.zeros(self.num_envs, bool)
        self._truncations = np.zeros(self.num_envs, bool)
        self._moves = np.zeros((worlds, self.n_agents), np.int64)
        self._rngs = [np.random.default_rng() for _ in range(worlds)]
        self._seeds = [0] * worlds
        self._episodes = np.zeros(worlds, np.int64)
        self._configs: list[dict[str, Any]] = [dict(self._pool[0][1]) if self._pool else {}] * worlds
        self._map_names = [self._pool[0][0] if self._pool else ""] * worlds
        self._started = np.ones(worlds, bool)
        self._welcomes: list[dict[str, Any]] = [{} for _ in range(worlds)]
        self._shaper = RewardShaper(self.worlds, self.weights, self._player_of)

    def _make_batch(self, first: RezzoEngine, worlds: int, threads: int | str) -> None:
        """The batch of ``worlds`` worlds, all at ``first``'s start until their first reset."""
        if self.template.backend == "numba":
            n_threads = thread_count(threads, worlds)
        else:  # one thread; asking numba how many it has would import it for nothing
            if threads not in ("auto", "all"):
                thread_count(threads, worlds)  # a bad count is refused whatever the backend
            n_threads = 1
        needs_events = any(self.weights.get(t) for t in EVENT_TERMS)
        backend, events = self.backend, self._events_in_infos or needs_events
        self.worlds = BatchedRezzo([first] * worlds, backend=backend, events=events, threads=n_threads)
        self.n_agents = self.worlds.n_agents
        self.players, self.agents_per_player = self.worlds.players, self.worlds.agents_per_player

    def _columns(self, against: bool) -> None:
        """Which agents of each world the learner plays (``_l_rows``, ``_l_cols``) and, ``against`` an
        opponent, which the opponent plays (``_o_rows``, ``_o_cols``, flat)."""
        worlds, k, n = self.batch, self.agents_per_player, self.n_agents
        rows = np.arange(worlds)[:, None]
        if not against:
            self._l_rows, self._l_cols = np.repeat(rows, n, 1), np.tile(np.arange(n), (worlds, 1))
        else:
            self._l_rows = np.repeat(rows, k, 1)
            self._l_cols = self.learner_seats[:, None] * k + np.arange(k)
            others = [[c for c in range(n) if c // k != s] for s in self.learner_seats.tolist()]
            self._o_rows = np.repeat(rows, n - k, 1).reshape(-1)
            self._o_cols = np.array(others, np.intp).reshape(-1)
        self._per_world = self._l_cols.shape[1]

    def _engine_for(self, config: dict[str, Any]) -> RezzoEngine:
        return RezzoEngine.new(config)

    def _template_for(self, text: str, config: dict[str, Any]) -> BatchedRezzo:
        """A one-world batch at the start of the map ``text``, made once (the distinct starts are few)."""
        found = self._templates.pop(text, None)
        if found is None:
            found = BatchedRezzo([self._engine_for({**config, "map_text": text})], backend=self.backend)
            if len(self._templates) >= START_CACHE:
                self._templates.pop(next(iter(self._templates)))
        self._templates[text] = found  # most recently used last
        return found

    # ------------------------------------------------------------------------------- episodes
    def _begin(self, worlds: np.ndarray, start: _ReplayStart | None = None) -> None:
        """Start each world's next episode in ``worlds``: map and start from its dice, or ``start``."""
        if start is not None:
            start.restore(self.worlds, worlds, self._configs, self._map_names)
        elif not self._pool:
            self.worlds.restore(worlds, self.template)
        else:
            by_text: dict[str, list[int]] = {}
            for b in worlds.tolist():
                rng = self._rngs[b]
                name, config = (
                    self._pool[int(rng.integers(len(self._pool)))] if len(self._pool) > 1 else self._pool[0]
                )
                text = random_start(config["map_text"], rng, self.random_start)
                self._configs[b] = {**config, "map_text": text}
                self._map_names[b] = name
                by_text.setdefault(text, []).append(b)
            for text, group in by_text.items():
                self.worlds.restore(
                    np.array(group, np.intp), self._template_for(text, self._configs[group[0]])
                )
        self._episodes[worlds] += 1
        self._started[worlds] = True
        for b in worlds.tolist():
            self._welcomes[b] = self._episode_config(b)
        self._shaper.begin(worlds)
        if start is None:  # a replay asked for starts with a fresh episode, from its first tick
            for b in worlds.tolist():
                self._recordings.begin(b, functools.partial(self._start_recording, b))

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start worlds again (all, or those of ``options["reset_mask"]``): (observations, infos).

        ``seed``: an int gives world b the seed seed + b; a list gives one per world (None: fresh
        dice); None leaves the worlds' dice as they are (fresh ones before the first seed).
        ``infos["map"]``: per sub-environment, the name of its world's map (object array; None and
        False in ``infos["_map"]`` where a partial reset left the world alone).
        """
        super().reset(seed=seed if isinstance(seed, int) else None)
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        replay = {k: options.pop(k) for k in START_OPTIONS if k in options}
        if options:
            raise ValueError(f"unknown reset options {sorted(options)}; it takes reset_mask, replay, tick")
        start = replay_world(replay, self.worlds, self.backend) if replay else None
        worlds = np.arange(self.batch) if mask is None else worlds_of(mask, self.batch, self._per_world)
        if seed is not None:
            seeds = [seed + b for b in range(self.batch)] if isinstance(seed, int) else list(seed)
            if len(seeds) != self.batch:
                raise ValueError(f"seed: give one seed per world ({self.batch}), got {len(seeds)}")
            for b in worlds.tolist():
                given = seeds[b]
                self._rngs[b] = np.random.default_rng(given)
                self._seeds[b] = 0 if given is None else int(given)
        for b in worlds.tolist():
            self._recordings.cut(b)
        self._begin(worlds, start)
        self.worlds.views()
        self._observe()
        if mask is not None:
            self._terminations[mask] = False
            self._truncations[mask] = False
        names = np.array([self._map_names[b] for b in self._l_rows.reshape(-1).tolist()], dtype=object)
        marked = np.ones(self.num_envs, bool) if mask is None else mask.copy()
        names[~marked] = None
        return self._out(self._obs), {"map": names, "_map": marked}

    def _out(self, array: np.ndarray) -> np.ndarray:
        return array.copy() if self.copy else array

    def _observe(self) -> None:
        if self.opponent is None:
            return  # `_obs` is the batch's observations array itself
        obs = self.worlds.observations
        self._obs.reshape(self.batch, self._per_world, 2, -1)[:] = obs[self._l_rows, self._l_cols]

    # ------------------------------------------------------------------------------- stepping
    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One move code per sub-environment, shape (num_envs,); codes that are no move are no-ops.

        Returns (observations, rewards, terminations, truncations, infos) as the module says.
        """
        moves = np.asarray(actions)
        if moves.size != self.num_envs or moves.ndim not in (1, 2):
            raise ValueError(
                f"actions must have shape ({self.num_envs},): one move code for each of the "
                f"{self.batch} worlds' {self._per_world} learner agents; got shape {moves.shape}"
            )
        worlds = self.worlds
        full = self._moves
        full[self._l_rows, self._l_cols] = moves.reshape(self.batch, self._per_world)
        if self.opponent is not None:
            full[self._o_rows, self._o_cols] = self._opponent_moves()
        self._started[:] = False
        self._recordings.tick(full)
        self._shaper.before()
        ended = worlds.step(full)
        rewards = self._rewards.reshape(self.batch, self._per_world)
        rewards.fill(0.0)
        self._terminations.fill(False)
        self._truncations.fill(False)
        happened = worlds.last_events()  # before the reset below forgets them
        self._shaper.add(rewards, full, happened, ended)
        infos: dict[str, Any] = {}
        if happened and self._events_in_infos:
            infos["events"] = happened
        if ended.any():
            done = np.flatnonzero(ended)
            outcome = self.weights["outcome"]
            for b in done.tolist():
                winner = worlds.winner(b)
                if winner is not None:
                    rewards[b] += outcome * np.where(self._player_of[b] == winner, 1.0, -1.0)
                self._recordings.finish(b)
            capped = worlds.player_alive[done].sum(axis=1) > 1
            self._truncations.reshape(self.batch, -1)[done[capped]] = True
            self._terminations.reshape(self.batch, -1)[done[~capped]] = True
            infos.update(final_observations(worlds.views_of(done), done, self._l_cols, self.num_envs))
            self._begin(done)
        worlds.views()
        self._observe()
        return (
            self._out(self._obs),
            self._out(self._rewards),
            self._out(self._terminations),
            self._out(self._truncations),
            infos,
        )

    def _opponent_moves(self) -> np.ndarray:
        assert self.opponent is not None
        w = self.worlds
        rows, cols = self._o_rows, self._o_cols
        k = self.agents_per_player
        seats = OpponentSeats(
            world=rows,
            seat=cols // k,
            agent=cols % k,
            alive=w.alive[rows, cols],
            tick=w.tick[rows],
            started=self._started[rows],
            players=self.players,
            config=self._welcomes,
        )
        obs = w.observations[rows, cols].reshape(-1, *OBS_SHAPE)
        moves = np.asarray(self.opponent(obs, seats))
        if moves.shape != (len(rows),):
            raise ValueError(
                f"the opponent answered {moves.shape} moves for {len(rows)} agents: "
                "return one move code per row"
            )
        return moves

    def _episode_config(self, b: int) -> dict[str, Any]:
        """World ``b``'s options as a bot's welcome has them (no map text: bots get no map)."""
        config = self._configs[b]
        out = {k: v for k, v in config.items() if k != "map_text"}
        out.update(
            width=self.worlds.width, height=self.worlds.height, agents_per_player=self.agents_per_player
        )
        out.setdefault("own_base_counts", True)
        out.setdefault("max_ticks", int(self.worlds.max_ticks[b]))
        return out

    # ------------------------------------------------------------------------------- watching
    def render(self) -> tuple[np.ndarray, ...] | None:
        """With ``render_mode="rgb_array"``: one (H * scale, W * scale, 3) uint8 picture per world in
        ``render_worlds`` (the worlds' agents share their world's picture); else None."""
        if self.render_mode != "rgb_array":
            return None
        return tuple(rgb_frame(self.worlds.cells(b), self.render_scale) for b in self.render_worlds)

    def record(self, world: int, path: str | os.PathLike[str], names: Sequence[str] | None = None) -> None:
        """Write world ``world``'s next episode, from its first tick, to the replay file ``path``.

        The episode begins at the world's next reset (an autoreset, or `reset`); the file is complete
        once the episode ends. ``names``: one per seat (default: "learner" and "opponent").
        """
        if not 0 <= world < self.batch:
            raise ValueError(f"world must be 0..{self.batch - 1}, got {world}")
        if not self._pool:
            raise ValueError("a vector environment made from start= has no map to put in a replay")
        if names is not None and len(names) != self.players:
            raise ValueError(f"names lists {len(names)} bots for {self.players} seats")
        self._recordings.ask(world, os.fspath(path), list(names) if names is not None else None)

    def _start_recording(
        self, b: int, path: str, names: list[str] | None
    ) -> tuple[RezzoEngine, ReplayWriter]:
        """World ``b``'s episode's engine and replay writer, its seats named ``names`` (default:
        "learner" and "opponent")."""
        engine = self._engine_for(self._configs[b])
        if names is None:
            learner = int(self.learner_seats[b]) if self.opponent is not None else -1
            names = [
                "learner" if self.opponent is None or p == learner else "opponent"
                for p in range(self.players)
            ]
        extra = {"vector_env": {"world": b, "episode": int(self._episodes[b]), "map": self._map_names[b]}}
        writer = ReplayWriter(path, engine, seed=self._seeds[b], names=names, extra=extra, events=True)
        return engine, writer

    def close_extras(self, **kwargs: Any) -> None:
        """Close the replays still being written; they read as incomplete."""
        self._recordings.close()
