"""The `cellarena` command: help, version, each subcommand, and clear errors for bad arguments."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cellarena_cli import invoke


def test_help_lists_commands() -> None:
    code, out = invoke("--help")
    assert code == 0
    for command in ("sim", "bench", "maps"):
        assert command in out


def test_version() -> None:
    code, out = invoke("--version")
    assert code == 0
    assert out.startswith("cellarena, version ")
    assert invoke("-V") == (0, out)


def test_a_command_imports_only_what_it_runs() -> None:
    """Each built-in command is imported when asked for: a `cellarena match` process pays for none
    of the ladder's modules, and `--help` lists them all."""
    probe = (
        "import sys\n"
        "from cellarena.arena.cli import main\n"
        "try:\n"
        "    main(['match', 'rezzo', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "ladder = ('cellarena.arena.ladder', 'cellarena.arena.cli.ladder')\n"
        "print(sorted(m for m in sys.modules if m.startswith(ladder)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert "--max-ticks" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
    code, out = invoke("--help")
    assert code == 0
    listed = out.split("Commands:")[1]
    for command in ("bench", "ladder", "match", "new-bot", "replay", "results", "serve", "sim", "tournament"):
        assert f"\n  {command} " in listed, command


def test_numpy_runs_one_blas_thread_in_a_command_unless_the_user_chose() -> None:
    """`cellarena` sets OPENBLAS_NUM_THREADS=1 before a command imports numpy (OpenBLAS then starts no
    pool of threads), and what it starts inherits it; a value the user set is kept."""
    probe = (
        "import os, sys\n"
        "from cellarena.arena.cli import main\n"
        "try:\n"
        "    main(['sim', 'rezzo', '--ticks', '1', '--json'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "assert 'numpy' in sys.modules\n"
        "print(os.environ.get('OPENBLAS_NUM_THREADS'), len(os.listdir('/proc/self/task')))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}

    def run(**extra: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", probe], env={**env, **extra},
            capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
        return done.stdout.strip().splitlines()[-1].split()

    assert run() == ["1", "1"]  # the main thread alone
    chosen = run(OPENBLAS_NUM_THREADS="2")
    assert chosen[0] == "2"
    if (os.cpu_count() or 1) > 1:
        assert int(chosen[1]) > 1  # the user's choice took effect: OpenBLAS started its pool


def test_sim_rezzo_json_is_repeatable() -> None:
    args = ("sim", "rezzo", "--map", "duel", "--ticks", "60", "--agents", "random", "--seed", "3", "--json")
    code, out = invoke(*args)
    assert code == 0, out
    report = json.loads(out)
    assert report["ticks"] == 60 or report["result"] is not None
    assert set(report) >= {"map", "ticks", "result", "first_flag", "illegal", "state_hash"}
    assert json.loads(invoke(*args)[1])["state_hash"] == report["state_hash"]
    other = json.loads(invoke(*args[:-3], "--seed", "4", "--json")[1])
    assert other["state_hash"] != report["state_hash"]


def test_sim_rezzo_text_shows_board_and_result() -> None:
    code, out = invoke("sim", "rezzo", "--map", "duel", "--ticks", "5", "--agents", "idle")
    assert code == 0, out
    assert "state hash" in out
    assert "player 0: first flag" in out
    assert "#" in out  # the board was drawn


def test_sim_unknown_map_names_the_option_and_the_builtins() -> None:
    code, out = invoke("sim", "rezzo", "--map", "no-such-map")
    assert code == 2
    assert "--map" in out
    assert "duel" in out  # the error lists what exists


def test_sim_bad_ticks_is_a_usage_error() -> None:
    code, out = invoke("sim", "rezzo", "--ticks", "0")
    assert code == 2
    assert "--ticks" in out


def test_bench_bad_sizes() -> None:
    code, out = invoke("bench", "rezzo", "--sizes", "big")
    assert code == 2
    assert "--sizes" in out and "comma-separated" in out
    code, out = invoke("bench", "rezzo", "--sizes", "1")
    assert code == 2


def test_bench_rezzo_json_shape() -> None:
    code, out = invoke("bench", "rezzo", "--sizes", "16,70", "--seconds", "0.05", "--json")
    assert code == 0, out
    sizes = json.loads(out)["sizes"]
    assert set(sizes) == {"16", "70"}
    for figures in sizes.values():
        assert figures["cells_per_s"] > 0 and figures["baseline_cells_per_s"] > 0
        assert abs(figures["ratio"] - figures["cells_per_s"] / figures["baseline_cells_per_s"]) < 1e-9


def test_maps_list_and_show() -> None:
    code, out = invoke("maps", "list")
    assert code == 0
    assert "duel" in out
    code, out = invoke("maps", "show", "duel")
    assert code == 0
    assert "A" in out and "a" in out  # a base and a geyser of player 0


def test_maps_check_reports_file_line_col(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("rezzo-map 1\nname: x\nplayers: 2\nagents: 1\nfacing: N S\n---\n..?\n")
    code, out = invoke("maps", "check", str(bad))
    assert code == 1
    assert f"{bad}:7:3" in out


def test_maps_check_accepts_builtin_files() -> None:
    from cellarena.server.games.rezzo import maps as maps_module

    folder = Path(maps_module.__file__).parent / "maps"
    files = sorted(str(p) for p in folder.glob("*.txt"))
    assert files
    code, out = invoke("maps", "check", *files)
    assert code == 0, out
    assert out.count(": ok") == len(files)
