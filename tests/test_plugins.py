"""Games as plug-ins: the entry-point registry, a game added by another installed package, and the one
declarative config validator every game's config goes through."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
from cellarena_cli import here
from click.testing import CliRunner

from cellarena.arena.cli import main
from cellarena.arena.runner import TournamentSpec
from cellarena.server.games import ConfigError, game_names, get_engine, plugin, registry
from cellarena.server.games.config import GameConfig, option
from cellarena.server.play.match import TickSettings

ROOT = Path(__file__).resolve().parent.parent

TOY = '''
import click

from cellarena.server.games.plugin import GamePlugin

@click.command("toyhello")
def hello():
    """Say hello from an installed game."""
    click.echo("hello from toy")

PLUGIN = GamePlugin(
    name="toy",
    summary="a game from another package",
    engine="cellarena.server.games.drop2df.engine:Drop2dfEngine",
    config="cellarena.server.games.drop2df.engine:Drop2dfConfig",
    cli="cellarena.server.cli.games.drop2df:CLI",
    root_commands={"toyhello": "toygame:hello"},
)
WRONG = "not a plugin"
'''


def _install(site: Path, entry_points: str) -> None:
    """A distribution as pip would leave it: the module, and metadata naming its entry points."""
    (site / "toygame.py").write_text(TOY)
    info = site / "toygame-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toygame\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[cellarena.games]\n{entry_points}\n")


@pytest.fixture
def fresh_registry() -> Iterator[None]:
    """The registry reads entry points once per process: make it read them again, before and after."""
    registry._entry_points.cache_clear()
    registry.plugin.cache_clear()
    yield
    registry._entry_points.cache_clear()
    registry.plugin.cache_clear()


def test_the_built_in_games_are_registered() -> None:
    assert game_names() == ["cata", "cloth", "colorblocks", "drop2df", "rezzo"]


def test_an_unknown_game_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="unknown game 'chess'; known games: cata, cloth, colorblocks"):
        plugin("chess")


def test_another_package_adds_a_game(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_registry: None
) -> None:
    _install(tmp_path, "toy = toygame:PLUGIN")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry._entry_points.cache_clear()
    assert "toy" in game_names()
    assert get_engine("toy").name == "drop2df"
    runner = CliRunner()
    top = runner.invoke(main, ["--help"])
    assert (
        top.exit_code == 0 and "toyhello" in top.output and "Say hello from an installed game" in top.output
    )
    assert runner.invoke(main, ["toyhello"]).output == "hello from toy\n"
    listed = runner.invoke(main, ["match", "--help"])
    assert "toy" in listed.output and "a game from another package" in listed.output
    # It has no sim command of its own, so the sim group does not list it.
    assert "toy" not in runner.invoke(main, ["sim", "--help"]).output


def test_a_broken_registration_says_which_and_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_registry: None
) -> None:
    _install(tmp_path, "toy = toygame:WRONG\nmissing = toygame:NOTHING")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(
        registry.PluginError, match=r"entry point 'toy' = 'toygame:WRONG'.*must name a GamePlugin"
    ):
        plugin("toy")
    with pytest.raises(
        registry.PluginError, match=r"game plugin 'missing' \(toygame:NOTHING\) cannot be loaded"
    ):
        plugin("missing")


def test_the_arena_limits_each_match_by_the_games_own_horizon() -> None:
    def limit(game: str, config: dict[str, Any]) -> float:
        settings = TickSettings(fast=True, budget_ms=100.0)
        return TournamentSpec(game, (), (), 1, 0, settings, connect_timeout=5.0).wall_limit(config)

    # 60 s to start and stop, twice the connect timeout, and twice each decision point's budget.
    assert limit("rezzo", {"map": "duel", "max_ticks": 500}) == pytest.approx(60 + 2 * 500 * 0.1 + 10)
    assert limit("drop2df", {"turns": 12}) == pytest.approx(60 + 2 * 12 * 0.1 + 10)
    assert limit("cata", {"max_turns": 10}) == pytest.approx(60 + 2 * 40 * 0.1 + 10)  # four moves a turn
    assert limit("colorblocks", {"max_turns": 10}) == pytest.approx(60 + 2 * 20 * 0.1 + 10)
    assert limit("cloth", {}) == pytest.approx(60 + 2 * 40 * 0.1 + 10)  # 20 rounds of two placements


# ---------------------------------------------------------------------------- the validator
@dataclass(frozen=True)
class Probe(GameConfig):
    game: ClassVar[str] = "probe"

    size: int = option(8, "the side", min=2, max=64)
    density: float = option(0.5, "a share", min=0.0, max=1.0)
    mode: str = option("fast", "how to run", choices=("fast", "slow"))
    label: str | None = option(None, "a name")
    wrap: bool = option(False, "whether edges wrap")
    plain: int = 3

    def check(self) -> None:
        if self.mode == "slow" and self.size > 16:
            raise ConfigError("probe option size must be at most 16 in slow mode")

    def max_decisions(self) -> int:
        return self.size


def test_defaults_and_round_trip() -> None:
    made = Probe.from_mapping({})
    assert made == Probe()
    stored = Probe.from_mapping({"size": 9, "label": "x", "wrap": True}).to_mapping()
    assert stored == {"size": 9, "density": 0.5, "mode": "fast", "label": "x", "wrap": True, "plain": 3}
    assert Probe.from_mapping(stored).to_mapping() == stored


def test_a_whole_number_is_a_float_option_too() -> None:
    made = Probe.from_mapping({"density": 1})
    assert made.density == 1.0 and isinstance(made.density, float)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"sise": 3, "zz": 1},
            "unknown probe option(s) sise, zz; known: size, density, mode, label, wrap, plain",
        ),
        ({"size": "8"}, "probe option size must be a whole number, got '8' (size: the side)"),
        ({"size": True}, "probe option size must be a whole number, got True"),
        ({"size": 1}, "probe option size must be between 2 and 64, got 1"),
        ({"density": math.nan}, "probe option density must be between 0 and 1, got nan"),
        ({"density": "half"}, "probe option density must be a number, got 'half'"),
        ({"mode": "medium"}, "probe option mode must be one of fast, slow, got 'medium' (mode: how to run)"),
        ({"label": 3}, "probe option label must be a string or none, got 3"),
        ({"wrap": 1}, "probe option wrap must be true or false, got 1"),
        ({"plain": 2.5}, "probe option plain must be a whole number, got 2.5"),
        ({"mode": "slow", "size": 20}, "size must be at most 16 in slow mode"),
    ],
)
def test_errors_name_the_game_the_key_and_what_is_allowed(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Probe.from_mapping(config)
    assert message in str(caught.value)


def test_an_option_of_another_type_is_refused_when_first_used() -> None:
    @dataclass(frozen=True)
    class Bad(GameConfig):
        game: ClassVar[str] = "bad"
        sizes: tuple[int, ...] = option((), "several")

    with pytest.raises(TypeError, match=r"Bad\.sizes: a config option is int, bool, float or str"):
        Bad.from_mapping({})


def test_help_imports_no_engine_numpy_or_rich() -> None:
    # `cellarena --help` lists the commands the plugins add, which loads the plugins, and nothing more.
    probe = (
        "import sys\n"
        "from cellarena.arena.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = [m for m in sys.modules if m in ('numpy', 'rich', 'trio') or m.endswith('.engine')]\n"
        "print('heavy:', sorted(heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert "maps" in done.stdout
    assert done.stdout.splitlines()[-1] == "heavy: []"


def test_the_tournament_benchmark_plays_the_workload_the_plugin_gives(tmp_path: Path) -> None:
    bots = tmp_path / "bots"
    bots.mkdir()
    for name in ("random_walker.py", "builder.py"):
        shutil.copy(ROOT / "example_bots" / "rezzo" / name, bots / name)
    args = ["bench", "tournament", "--bots-dir", str(bots), "--rounds", "1", "--max-ticks", "20", "--json"]
    done = here(*args)
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    # Rezzo's workload: its two benchmark maps, both seat orders.
    assert report["maps"] == ["duel", "field"] and report["matches"] == 4 and report["failed"] == 0
    assert sorted(report["bots"]) == ["builder", "random_walker"]


@pytest.mark.parametrize("command", ["server", "tournament"])
def test_a_load_benchmark_names_the_games_that_have_a_workload(command: str) -> None:
    done = here("bench", command, "--game", "cata")
    assert done.exit_code == 2
    assert "cata gives no load benchmark workload; these do: rezzo" in done.output


PLUGINS_OF_TWO_AGES = '''
from dataclasses import replace

from cellarena.server.games.base import Events, Result, event
from cellarena.server.games.drop2df.engine import Drop2dfEngine
from cellarena.server.games.plugin import GamePlugin


class OldEngine(Drop2dfEngine):
    """A plugin written before events and causes: its Events and Result have neither."""

    name = "oldtoy"

    def apply(self, actions):
        got = super().apply(actions)
        return Events(got.malformed, got.illegal, got.losers)

    def result(self):
        done = super().result()
        return None if done is None else Result(done.ranks, done.winner, done.reason, done.ticks, done.scores)


class NewEngine(Drop2dfEngine):
    """A plugin that reports events and a cause of its own."""

    name = "newtoy"

    def apply(self, actions):
        got = super().apply(actions)
        got.log.append(event("toy_ping", self.tick, seat=0))
        return got

    def result(self):
        done = super().result()
        if done is None:
            return None
        mine = {"cause": "toy_rule", "tick": done.ticks, "text": "{0} met the toy rule"}
        return replace(done, causes={s: dict(mine) for s in done.ranks})


def plugin(name, engine):
    return GamePlugin(
        name=name,
        summary="a toy",
        engine=f"toyages:{engine}",
        config="cellarena.server.games.drop2df.engine:Drop2dfConfig",
        cli="cellarena.server.cli.games.drop2df:CLI",
    )


OLD = plugin("oldtoy", "OldEngine")
NEW = plugin("newtoy", "NewEngine")
'''


def test_plugins_without_events_still_run_and_plugins_with_their_own_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_registry: None
) -> None:
    from cellarena.server.games.causes import sentence
    from cellarena.server.replay import ReplayWriter, read_replay, verify

    (tmp_path / "toyages.py").write_text(PLUGINS_OF_TWO_AGES)
    info = tmp_path / "toyages-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyages\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[cellarena.games]\noldtoy = toyages:OLD\nnewtoy = toyages:NEW\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry._entry_points.cache_clear()
    for game in ("oldtoy", "newtoy"):
        engine = get_engine(game).new({}, 1)
        path = tmp_path / f"{game}.replay"
        writer = ReplayWriter(path, engine, seed=1, names=["a", "b"], events=True)
        while engine.result() is None:
            tick = engine.tick
            writer.record(tick, {}, engine, events=engine.apply({}).log)
        result = engine.result()
        assert result is not None
        writer.finish(result)
        replay = read_replay(path)
        assert verify(replay).ok
        if game == "oldtoy":
            assert replay.events() == [] and replay.causes() == {}
            assert "unknown" in sentence(0, replay.causes().get(0), replay.names)
        else:
            assert {e["kind"] for e in replay.events()} == {"toy_ping"}
            assert sentence(0, replay.causes()[0], replay.names) == "a met the toy rule"


PLAIN = '''
from cellarena.server.games.drop2df.engine import Drop2dfEngine
from cellarena.server.games.plugin import GamePlugin


class PlainEngine:
    """An engine written before the optional capabilities (base.HashScheme, RulesHistory, Substeps,
    DebugPlacing): only what `Engine` asks, no base class, none of their members."""

    name = "plaintoy"
    default_tick_rate = 2.0
    default_budget_ms = None

    def __init__(self, inner):
        self._inner = inner

    @classmethod
    def new(cls, config, seed=0):
        return cls(Drop2dfEngine.new(config, seed))

    players = property(lambda self: self._inner.players)
    tick = property(lambda self: self._inner.tick)
    config = property(lambda self: self._inner.config)

    def pending(self):
        return self._inner.pending()

    def decode(self, seat, request, answer):
        return self._inner.decode(seat, request, answer)

    def apply(self, actions):
        return self._inner.apply(actions)

    def result(self):
        return self._inner.result()

    def frame(self):
        return self._inner.frame()

    def public_config(self):
        return self._inner.public_config()

    def state_hash(self):
        return self._inner.state_hash()


PLAIN = GamePlugin(
    name="plaintoy",
    summary="a toy from before the capabilities",
    engine="plaintoy:PlainEngine",
    config="cellarena.server.games.drop2df.engine:Drop2dfConfig",
    cli="cellarena.server.cli.games.drop2df:CLI",
)
'''


def test_an_engine_without_the_optional_capabilities_gets_their_defaults_and_still_plays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_registry: None
) -> None:
    from cellarena.server.games import base
    from cellarena.server.replay import ReplayWriter, board_at, read_replay, verify
    from cellarena.server.web.timeline import Timeline

    (tmp_path / "plaintoy.py").write_text(PLAIN)
    info = tmp_path / "plaintoy-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plaintoy\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[cellarena.games]\nplaintoy = plaintoy:PLAIN\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry._entry_points.cache_clear()
    engine = get_engine("plaintoy").new({}, 1)
    request = engine.pending()[0]
    assert (base.hash_version(engine), base.rules_version(engine), base.rules_changes(engine)) == (1, 1, {})
    assert base.older_hash_scheme(engine) is None and base.debug_placer(engine, 0, request) is None
    path = tmp_path / "plain.replay"
    writer = ReplayWriter(path, engine, seed=1, names=["a", "b"], events=True)
    while engine.result() is None:
        tick = engine.tick
        writer.record(tick, {}, engine, events=engine.apply({}).log)
        assert base.substeps(engine) == 0 and list(base.substep_frames(engine)) == []
    result = engine.result()
    assert result is not None
    writer.finish(result)
    replay = read_replay(path)
    assert (replay.rules, replay.hashes) == (1, 1)
    assert verify(replay).ok
    assert board_at(replay).state_hash() == engine.state_hash()
    assert not base.shows_substeps(type(engine))
    timeline = Timeline(replay)
    timeline.count_frames()
    assert timeline.count == len(replay.ticks) + 1  # no frames between decision points


def test_the_built_in_engines_offer_their_capabilities_as_typed_protocols() -> None:
    """The games that changed their hashes or rules, or show states between decision points, say so
    through the protocols of `base` (which mypy checks their members against), not loose names."""
    from cellarena.server.games import base
    from cellarena.server.games.rezzo.batch.slot_batch import BatchedWorld

    rezzo = get_engine("rezzo").new({"map": "duel"}, 0)
    assert base.hash_version(rezzo) == 2
    older = base.older_hash_scheme(rezzo)
    assert older is not None and older(2) == rezzo.state_hash() and older(1) != rezzo.state_hash()
    batched = BatchedWorld.new({"map": "duel"}, 0)
    assert base.hash_version(batched) == 2 and batched.state_hash() == rezzo.state_hash()
    seat, request = next(iter(rezzo.pending().items()))
    place = base.debug_placer(rezzo, seat, request)
    assert place is not None and place(None, [-1, 0]) is None  # a cell off the viewport: nowhere
    drop2df = get_engine("drop2df").new({}, 0)
    assert base.rules_version(drop2df) == 2 and 2 in base.rules_changes(drop2df)
    assert base.rules_version(rezzo) == 1 and base.rules_changes(rezzo) == {}
    cloth = get_engine("cloth").new({}, 0)
    assert base.substeps(cloth) == 0  # nothing applied yet
    assert base.shows_substeps(type(cloth)) and not base.shows_substeps(type(rezzo))
    assert base.substeps(drop2df) == 0 and base.debug_placer(drop2df, 0, {}) is None
