"""`cellarena train GAME` for the games whose imitation is theirs through the same code as Rezzo's
(C.A.T.A., Cloth of Gold, Colorblocks, drop2df; Rezzo's own is tests/test_train_rezzo.py). For each,
a few short matches of an example bot against another, played in-process and recorded, are exported
(all games into one dataset); a `new-bot GAME NAME --template trained` folder is trained from the
export alone, the samples are the imitated bot's recorded moves, the same command writes the same
bytes, the evaluation plays the example bots, and the folder's bot plays the weights in a match over
TCP. The win rates are docs/training.md's measured claims, not tests.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import msgpack
import pyarrow.parquet as pq
import pytest
from cellarena_cli import CLI, ROOT, here

from cellarena.sdk import MatchInfo
from cellarena.sdk.games import cloth, colorblocks, drop2df
from cellarena.server.games.base import Engine
from cellarena.server.games.cata.engine import CataEngine
from cellarena.server.games.cloth.engine import ClothEngine
from cellarena.server.games.colorblocks.engine import ColorblocksEngine
from cellarena.server.games.drop2df.engine import Drop2dfEngine
from cellarena.server.replay import Replay, ReplayWriter, read_replay, verify
from cellarena.server.training.bot_folder import load_module
from cellarena.server.training.cata import imitation as cata_imitation
from cellarena.server.training.cloth import imitation as cloth_imitation
from cellarena.server.training.colorblocks import imitation as colorblocks_imitation
from cellarena.server.training.colorblocks.imitation import turn_samples
from cellarena.server.training.drop2df import imitation as drop2df_imitation
from cellarena.server.training.drop2df.imitation import action_of

#: A game's check of the first training's report against its partition of the dataset: (the game's
#: parquet files, the report, the trained folder).
SamplesCheck = Callable[[list[Path], dict[str, Any], Path], None]


@dataclass(frozen=True)
class Game:
    """One game's case: how its matches are recorded, trained on, evaluated and played over TCP."""

    name: str
    #: The example bot imitated and the one it meets in the recorded matches (files of example_bots/).
    imitated: str
    recorded_against: str
    #: (the example bots' modules, the match's number) -> (imitated, other): the bots of one match.
    bots: Callable[[dict[str, ModuleType], int], tuple[Any, Any]]
    #: The match's number -> its engine; the number is the replay's seed, and the imitated bot's seat
    #: is the number modulo 2.
    engine: Callable[[int], Engine]
    matches: int
    answer: Callable[[Any, int, dict[str, Any]], Any]
    net: str
    epochs: str
    #: The example bot the evaluation plays, and the match options of the evaluation and of the match
    #: over TCP.
    against: str
    options: tuple[str, ...]
    check_samples: SamplesCheck
    #: What the match over TCP's replay shows beyond being complete.
    check_replay: Callable[[Replay], bool]

    @property
    def bots_dir(self) -> Path:
        return ROOT / "example_bots" / self.name


def _rows(parts: list[Path], columns: list[str]) -> list[dict[str, Any]]:
    return [r for part in parts for r in pq.read_table(part, columns=columns).to_pylist()]


def _cata_samples(parts: list[Path], report: dict[str, Any], folder: Path) -> None:
    moves = sum(
        1 for r in _rows(parts, ["bot", "action"]) if r["bot"] == "lookahead" and r["action"] is not None
    )
    assert report["ok"] and report["seats"] == 2 and report["samples"] == moves > 20
    assert sum(report["moves"].values()) == moves
    assert set(report["moves"]) <= {"strike", "block", "meditate", "pass"}


def _cloth_samples(parts: list[Path], report: dict[str, Any], folder: Path) -> None:
    batches = units = 0
    for r in _rows(parts, ["bot", "tick", "observation", "action"]):
        if r["bot"] != "planner" or r["action"] is None:
            continue
        view = cloth.make_view({"tick": r["tick"], **msgpack.unpackb(r["observation"])})
        placed, refused = cloth.place(view.board, msgpack.unpackb(r["action"]), view.me, view.first)
        assert placed and not refused  # planner sends the units that stick
        batches += 1
        units += len(placed)
    assert report["ok"] and report["seats"] == 2 and report["samples"] == batches + units
    assert report["moves"] == {"unit": units, "end": batches} and units > batches > 0


def _colorblocks_samples(parts: list[Path], report: dict[str, Any], folder: Path) -> None:
    net = load_module(folder / "policy.py")
    turns = actions = 0
    for r in _rows(parts, ["bot", "tick", "observation", "action"]):
        if r["bot"] != "greedy" or r["action"] is None:
            continue
        sent = msgpack.unpackb(r["action"])
        view = colorblocks.make_view({"tick": r["tick"], **msgpack.unpackb(r["observation"])})
        labels = [s[3] for s in turn_samples(view, sent, net)]
        # every action greedy sent is legal: one sample each, in order, then the turn's end
        before = colorblocks.make_view({"tick": r["tick"], **msgpack.unpackb(r["observation"])})
        for action, label in zip(sent, labels, strict=False):
            assert net.CODES_OF.legal(before)[label][:4] == action[:4]
            assert before.play(action)
        assert labels[len(sent) :] == [net.CODES_OF.end_turn]
        turns += 1
        actions += len(sent)
    assert report["ok"] and report["seats"] == 2 and report["samples"] == turns + actions > 20
    assert report["moves"]["end_turn"] == turns and report["moves"]["spawn"] > 0


DROP2DF_TURNS = 12


def _drop2df_samples(parts: list[Path], report: dict[str, Any], folder: Path) -> None:
    codes = drop2df.ActionCodes(11)
    kinds: dict[str, int] = {}
    for r in _rows(parts, ["bot", "action"]):
        if r["bot"] == "planner" and r["action"] is not None:
            action = action_of(msgpack.unpackb(r["action"]), codes)
            assert action is not None
            kind = "pass" if action == 0 else "edit" if action < 11 else "token"
            kinds[kind] = kinds.get(kind, 0) + 1
    assert report["ok"] and report["seats"] == 3 and report["samples"] == 3 * DROP2DF_TURNS
    assert report["moves"] == kinds and kinds.get("edit", 0) > 0


def _a_seat_moved(recorded: Replay) -> bool:
    return any(0 in t.moves for t in recorded.ticks)


GAMES = {
    "cata": Game(
        name="cata", imitated="lookahead", recorded_against="random_legal",
        bots=lambda m, n: (m["lookahead"].Lookahead(generation_budget=300), m["random_legal"].RandomLegal()),
        engine=lambda n: CataEngine.new({"size": 16, "max_turns": 12}, seed=n),
        matches=2, answer=cata_imitation.answer, net="cnet", epochs="5", against="random_legal",
        options=("--size", "16", "--max-turns", "12"), check_samples=_cata_samples,
        check_replay=_a_seat_moved,
    ),
    "cloth": Game(
        name="cloth", imitated="planner", recorded_against="random_placer",
        bots=lambda m, n: (m["planner"].Planner(seed=n), m["random_placer"].RandomPlacer(seed=n)),
        engine=lambda n: ClothEngine.new({"max_rounds": 3, "generations": 20}, seed=n),
        matches=2, answer=cloth_imitation.answer, net="clnet", epochs="2", against="random_placer",
        options=("--max-rounds", "1", "--generations", "20"), check_samples=_cloth_samples,
        check_replay=_a_seat_moved,
    ),
    "colorblocks": Game(
        name="colorblocks", imitated="greedy", recorded_against="random_legal",
        bots=lambda m, n: (m["greedy"].Greedy(), m["random_legal"].RandomLegal()),
        engine=lambda n: ColorblocksEngine.new({"max_turns": 8}),
        matches=2, answer=colorblocks_imitation.answer, net="cbnet", epochs="3", against="random_legal",
        options=("--max-turns", "8"), check_samples=_colorblocks_samples, check_replay=_a_seat_moved,
    ),
    "drop2df": Game(
        name="drop2df", imitated="planner", recorded_against="passer",
        bots=lambda m, n: (m["planner"].Planner(), m["passer"].Passer()),
        engine=lambda n: Drop2dfEngine.new({"turns": DROP2DF_TURNS}, seed=n),
        matches=3, answer=drop2df_imitation.answer, net="dnet", epochs="5", against="passer",
        options=("--turns", str(DROP2DF_TURNS)), check_samples=_drop2df_samples,
        check_replay=lambda recorded: len(recorded.ticks) == DROP2DF_TURNS,
    ),
}  # fmt: skip


def record(game: Game, path: Path, number: int) -> None:
    """Match ``number`` of the imitated bot (in seat ``number % 2``) against the other, recorded."""
    modules = {
        stem: load_module(game.bots_dir / f"{stem}.py") for stem in (game.imitated, game.recorded_against)
    }
    mine, other = game.bots(modules, number)
    seat = number % 2
    bots = [mine, other] if seat == 0 else [other, mine]
    names = [game.imitated, game.recorded_against][:: 1 if seat == 0 else -1]
    engine = game.engine(number)
    for s, b in enumerate(bots):
        b.info = MatchInfo(seat=s, players=2, names=tuple(names), game=game.name)
    writer = ReplayWriter(path, engine, seed=number, names=names, events=True)
    while engine.result() is None:
        tick = engine.tick
        moves = {s: game.answer(bots[s], tick, req) for s, req in engine.pending().items()}
        writer.record(tick, moves, engine, events=engine.apply(moves).log)
    result = engine.result()
    assert result is not None
    writer.finish(result)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every game's recorded matches, exported at once: one folder, a partition per game."""
    tmp = tmp_path_factory.mktemp("train")
    (tmp / "replays").mkdir()
    for game in GAMES.values():
        for number in range(game.matches):
            record(game, tmp / "replays" / f"{game.name}{number}.replay", number)
    exported = here("replay", "export", str(tmp / "replays"), "--out", str(tmp / "data"))
    assert exported.exit_code == 0, exported.output
    return tmp / "data"


@pytest.fixture(scope="module", params=sorted(GAMES))
def trained(
    request: pytest.FixtureRequest, dataset: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    game = GAMES[request.param]
    tmp = tmp_path_factory.mktemp(game.name)
    folder = tmp / game.net
    made = here("new-bot", game.name, game.net, "--template", "trained", "--dir", str(folder))
    assert made.exit_code == 0, made.output
    reports = []
    for out in ("a.npz", "b.npz"):
        ran = here(
            "train", game.name, "--dataset", str(dataset), "--imitate", game.imitated, "--bot-dir",
            str(folder), "--out", str(tmp / out), "--epochs", game.epochs, "--eval", "0", "--json",
        )  # fmt: skip
        assert ran.exit_code == 0, ran.output
        reports.append(json.loads(ran.output))
    return {"game": game, "data": dataset, "tmp": tmp, "folder": folder, "reports": reports}


def test_the_samples_are_the_imitated_bots_moves_and_the_bytes_repeat(trained: dict[str, Any]) -> None:
    game, tmp = trained["game"], trained["tmp"]
    parts = sorted((trained["data"] / f"game={game.name}").rglob("*.parquet"))
    game.check_samples(parts, trained["reports"][0], trained["folder"])
    assert (tmp / "a.npz").read_bytes() == (tmp / "b.npz").read_bytes()


def test_the_evaluation_plays_the_example_bots(trained: dict[str, Any]) -> None:
    game, tmp = trained["game"], trained["tmp"]
    ran = here(
        "train", game.name, "--dataset", str(trained["data"]), "--imitate", game.imitated, "--bot-dir",
        str(trained["folder"]), "--out", str(tmp / "c.npz"), "--epochs", "1", "--eval", "2",
        "--against", game.against, "--bots-dir", str(game.bots_dir), *game.options,
    )  # fmt: skip
    assert ran.exit_code == 0, ran.output
    assert f"against {game.against}: won" in ran.output and " of 2, drew " in ran.output
    refused = here("train", game.name, "--dataset", str(trained["data"]), "--imitate", game.imitated,
                     "--out", str(tmp / "d.npz"))  # fmt: skip
    assert refused.exit_code == 2 and "--bot-dir" in refused.output  # no default bot folder


def test_the_folder_plays_the_weights_over_tcp(trained: dict[str, Any]) -> None:
    """The folder's bot.py plays policy.npz (its default) in a match over TCP (the folder's own test
    runs the same, twice, as test_train_rezzo.py checks for Rezzo's folder)."""
    game, folder = trained["game"], trained["folder"]
    (folder / "policy.npz").write_bytes((trained["tmp"] / "a.npz").read_bytes())
    replay = trained["tmp"] / f"{game.net}.replay"
    ran = subprocess.run(
        [*CLI, "match", game.name, "--bot", f"{game.net}=python bot.py", "--bot",
         f"random=python -m cellarena.sdk.opponents {game.name}", *game.options, "--fast",
         "--replay", str(replay), "--json"],
        cwd=folder, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result["invalid"][game.net] == 0 and game.net not in result["forfeits"], ran.stdout
    recorded = read_replay(replay)
    verify(recorded)
    assert recorded.complete and game.check_replay(recorded)


@pytest.mark.parametrize("trained", ["drop2df"], indirect=True)
def test_a_drop2df_network_of_another_row_length_is_a_clear_error(trained: dict[str, Any]) -> None:
    tmp = trained["tmp"]
    other = tmp / "dnet12"
    other.mkdir()
    text = (trained["folder"] / "policy.py").read_text()
    assert "CELLS = 11\n" in text
    (other / "policy.py").write_text(text.replace("CELLS = 11\n", "CELLS = 12\n"))
    ran = here("train", "drop2df", "--dataset", str(trained["data"]), "--imitate", "planner", "--bot-dir",
                 str(other), "--out", str(tmp / "e.npz"), "--eval", "0")  # fmt: skip
    assert ran.exit_code == 1 and "seat " in ran.output
    assert "this network reads rows of 12 cells (--length 9), got 11" in ran.output
    assert "train it again" in ran.output and not (tmp / "e.npz").exists()
