"""The engine registry and interface, Rezzo's config validation, and the step's memory behaviour."""

from __future__ import annotations

import numpy as np
import pytest
from rezzo_backends import use

from cellarena.server.bench.games.rezzo.engine import allocations, engine_footprint, random_rezzo_codes
from cellarena.server.games import ConfigError, Engine, get_engine
from cellarena.server.games.rezzo.ca import BitWorld
from cellarena.server.games.rezzo.engine import RezzoEngine


def test_registry_finds_rezzo() -> None:
    assert get_engine("rezzo") is RezzoEngine


def test_registry_unknown_game_lists_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown game 'chess'; known games: .*rezzo"):
        get_engine("chess")


def test_rezzo_engine_implements_the_interface() -> None:
    engine = RezzoEngine.new({"map": "duel"})
    assert isinstance(engine, Engine)
    assert engine.tick == 1  # new() ran tick 1's transition
    requests = engine.pending()
    assert sorted(requests) == list(range(engine.players))
    for request in requests.values():
        assert len(request["cells"]) == len(request["damage"]) == 169 * len(request["agents"])
    events = engine.apply({})
    assert events.losers == [] and engine.tick == 2
    assert engine.result() is None
    frame = engine.frame()
    assert len(frame["cells"]) == engine.width * engine.height


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"map": "duel", "speed": 3}, "unknown rezzo option"),
        ({"max_ticks": "many"}, "max_ticks must be a whole number"),
        ({"max_ticks": True}, "max_ticks must be a whole number"),
        ({"max_ticks": 0}, "max_ticks must be at least 1"),
        ({"torus": "yes"}, "torus must be true or false"),
        ({"map": "nowhere"}, "nowhere"),
    ],
)
def test_rezzo_config_errors_say_what_is_wrong(config: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RezzoEngine.new(config)


def test_tick_cap_ends_in_a_draw_among_survivors() -> None:
    engine = RezzoEngine.new({"map": "duel", "max_ticks": 5})
    while engine.result() is None:
        engine.apply({})
    result = engine.result()
    assert result is not None
    assert result.winner is None and result.ticks == 5
    assert set(result.ranks.values()) == {1}
    assert engine.pending() == {}


@pytest.mark.parametrize("size", [16, 64, 100])
def test_step_allocates_nothing_world_sized_and_keeps_nothing(size: int) -> None:
    rng = np.random.default_rng(size)
    world = BitWorld.from_codes(random_rezzo_codes(size, 3, rng), 3, backend="numpy")
    peak, kept = allocations(world, 20)
    # A world-sized temporary would be at least one plane; small Python objects are far below it.
    one_plane = world.length * 8
    assert peak < min(one_plane, 4096), peak
    assert kept == 0


def test_the_compiled_step_allocates_the_same_small_amount_at_every_size() -> None:
    """numba's call allocates a few hundred bytes of Python objects (more than a 16x16 plane), the
    same at every size: nothing of the world's size, and nothing kept."""
    peaks = []
    for size in (16, 64, 256):
        rng = np.random.default_rng(size)
        world = BitWorld.from_codes(random_rezzo_codes(size, 3, rng), 3, backend=use("numba"))
        peak, kept = allocations(world, 20)
        assert kept == 0
        peaks.append(peak)
    assert max(peaks) < 4096 and max(peaks) - min(peaks) < 256, peaks


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_footprint_is_a_small_constant_per_cell(backend: str) -> None:
    backend = use(backend)
    per_cell = []
    for size in (256, 512):
        world = BitWorld.from_codes(np.zeros((size, size), np.uint8), 2, backend=backend)
        per_cell.append(engine_footprint(world) / (size * size))
    # About a bit per plane per cell: (double-buffered dynamic + static + scratch planes) / 8.
    assert max(per_cell) < 12
    assert abs(per_cell[0] - per_cell[1]) < 1.0


def test_config_carries_the_map_text_so_a_match_can_be_rebuilt_without_the_file(tmp_path) -> None:
    path = tmp_path / "mine.txt"
    from cellarena.server.games.rezzo.maps import read_map

    path.write_text(read_map("duel")[0])
    first = RezzoEngine.new({"map": str(path), "max_ticks": 50})
    assert first.config is not None
    saved = first.config.to_mapping()
    path.unlink()  # the file is gone; the saved config alone rebuilds the same match
    again = RezzoEngine.new(saved)
    for engine in (first, again):
        for _ in range(30):
            engine.apply({0: [1], 1: [4]})
    assert first.state_hash() == again.state_hash()


def test_map_text_errors_name_the_map() -> None:
    with pytest.raises(ConfigError, match=r"^<map mine>:2:1: "):
        RezzoEngine.new({"map": "mine", "map_text": "rezzo-map 1\nnot a header\n"})


def test_bench_server_reports_levels_in_json(caplog: pytest.LogCaptureFixture) -> None:
    import json
    import logging

    from cellarena_cli import invoke

    from cellarena.server.games.rezzo.batch import batched

    code, out = invoke(
        "bench", "server", "--levels", "16", "--seconds", "1", "--debug-agents", "16", "--json"
    )
    assert code == 0, out
    # The command quieted "cellarena.server" for its load only: a later warning is logged.
    logging.getLogger("cellarena.server").warning("after the benchmark")
    assert "after the benchmark" in caplog.text
    report = json.loads(out)
    assert set(report) >= {"max_agents_at_15hz", "cpu_us_per_agent_tick", "levels"}
    (level,) = report["levels"]
    assert level["agents"] == 16 and level["matches"] == 2 and level["ticks"] == 2 * 15
    # Side by side: the server stepping each phase slot's matches as one, and one at a time.
    assert report["batch"] == "both" and level["batch"] is True
    # With numba a slot of one match is batched; the numpy batch waits for enough matches to pay.
    if batched.resolve_backend("auto") == "numba":
        assert level["batched_share"] > 0.9
    else:
        assert level["batched_share"] == 0
    alone = level["one_by_one"]
    assert alone["batch"] is False and alone["batched_share"] == 0 and alone["ticks"] == 2 * 15
    assert level["cpu_one_by_one_over_batched"] > 0
    # The debug layer's cost, side by side: the same level without drawings, with a typical one and
    # with a flood past the caps in every answer, which the server did read (it cut the flood).
    debug = report["debug"]
    assert debug["agents"] == 16
    for drawing in ("none", "typical", "flood"):
        assert debug[drawing]["debug"] == drawing and debug[drawing]["ticks"] == 2 * 15
        assert debug[drawing]["cpu_us_per_agent_tick"] > 0
    # A typical drawing loses only the cells that fall off the bounded board near an edge.
    answers = 16 * 2 * 15  # 16 agents, one a connection, for 30 ticks
    assert debug["none"]["debug_dropped"] == 0 and debug["typical"]["debug_dropped"] < answers * 9
    assert debug["flood"]["debug_dropped"] >= answers * 44  # at least its 44 marks past the cap of 256
    assert debug["typical_over_none"] > 0 and debug["flood_over_none"] > 0


def test_bench_rezzo_times_both_backends_and_the_baseline(monkeypatch: pytest.MonkeyPatch) -> None:
    """`cellarena bench rezzo` reports the numba step beside the numpy one, and only numpy when numba
    is off (the figures themselves are the benchmark's business, not a timed test's)."""
    from cellarena.server.bench.games.rezzo import engine as bench

    use("numba")
    r = bench.run([16], budget_s=0.05)["sizes"]["16"]
    assert r["backend"] == "numba" and r["cells_per_s"] == r["numba_cells_per_s"]
    assert r["numpy_cells_per_s"] > 0 and r["baseline_cells_per_s"] > 0
    monkeypatch.setattr(bench, "numba_available", lambda: False)
    off = bench.run([16], budget_s=0.05)
    assert off["numba"] is False
    assert off["sizes"]["16"]["numba_cells_per_s"] is None and off["sizes"]["16"]["backend"] == "numpy"


def test_auto_compiles_the_step_of_big_worlds_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small worlds (every built-in map) step on numpy, so a match never imports numba for them."""
    from cellarena.server.games.rezzo.ca import COMPILED_FROM

    use("numba")
    assert BitWorld(32, 32, 2).backend == "numpy"
    assert BitWorld(1, COMPILED_FROM - 1, 2).backend == "numpy"
    assert BitWorld(128, 128, 2).backend == "numba" and COMPILED_FROM == 128 * 128
    assert BitWorld(8, 8, 2, backend="numba").backend == "numba"  # asked for by name
    monkeypatch.setenv("CELLARENA_NO_NUMBA", "1")
    assert BitWorld(256, 256, 2).backend == "numpy"
