"""The architecture, checked on the source: games only through their plug-in, and one-way layers.

Core code (everything in server/, arena/ and sdk/ except each game's own package or module and the
SDK's list of games) must neither import a game's modules nor spell a game's name: what differs
between games comes from the game's `GamePlugin`. And the layers point one way: the SDK imports
nothing from the server or the arena and needs no trio; the server imports nothing from the arena;
the games (rules and engines) import none of their tools (options, environments, training, benchmarks),
which import the games. Imports inside functions count too: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

from cellarena.server.games import game_names

ROOT = Path(__file__).resolve().parent.parent
LAYERS = {"sdk": "cellarena.sdk", "server": "cellarena.server", "arena": "cellarena.arena"}
GAMES = game_names()

#: Core files allowed to name a game, and why.
ALLOWED = {
    # The documented `from cellarena.sdk import Bot, Cell, Move`: the SDK's front door re-exports
    # Rezzo's public names, the game the tutorial (docs/sdk.md) starts with.
    "sdk/__init__.py": "re-exports Rezzo's public names",
    # The SDK's registry of game modules: the bot side cannot read the server's plugins.
    "sdk/games/__init__.py": "the SDK's list of games",
}


def _module(rel: str) -> str:
    parts = [LAYERS[Path(rel).parts[0]], *Path(rel).with_suffix("").parts[1:]]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


#: The folders holding one module or package per game, named for the game: its rules and engine
#: (server/games/cata/), its tools in their layers (server/env/games/cata.py,
#: server/bench/games/rezzo/, server/cli/games/cata.py, server/training/rezzo/), its SDK module
#: (sdk/games/cata.py) and its random opponent (sdk/opponents/cata.py).
GAME_HOMES = (
    ("server", "games"),
    ("server", "env", "games"),
    ("server", "bench", "games"),
    ("server", "cli", "games"),
    ("server", "training"),
    ("sdk", "games"),
    ("sdk", "opponents"),
)

#: The packages of the games' tools, which import the games and never the reverse.
TOOL_LAYERS = (
    "cellarena.server.cli",
    "cellarena.server.bench",
    "cellarena.server.env",
    "cellarena.server.training",
)


def _game_of(rel: str) -> str | None:
    """The game whose own package or module ``rel`` is in, or None for core code."""
    parts = Path(rel).parts
    for home in GAME_HOMES:
        if parts[: len(home)] != home or len(parts) == len(home):
            continue
        rest = parts[len(home) :]
        name = rest[0] if len(rest) > 1 else rest[0].removesuffix(".py")
        if name in GAMES:
            return name
    return None


@functools.cache
def _sources() -> list[str]:
    """Every Python file of the three layers, as a path relative to the checkout."""
    return sorted(
        p.relative_to(ROOT).as_posix()
        for layer in LAYERS
        for p in (ROOT / layer).rglob("*.py")
        if "__pycache__" not in p.parts
    )


@functools.cache
def _tree(rel: str) -> ast.Module:
    """The file's syntax tree, parsed once for every check below: they only read it (each parsing
    all 400-odd sources again made this file take half a minute)."""
    return ast.parse((ROOT / rel).read_text(), rel)


@functools.cache
def _walk(tree: ast.AST) -> tuple[ast.AST, ...]:
    """Every node of ``tree`` (`ast.walk`), walked once per tree."""
    return tuple(ast.walk(tree))


def _imports(tree: ast.AST, rel: str) -> Iterator[tuple[int, str]]:
    """(line, module) for every import anywhere in the file; ``from a import b`` yields a and a.b."""
    module = _module(rel)
    package = module if rel.endswith("__init__.py") else module.rpartition(".")[0]
    for node in _walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def _game_modules(game: str) -> tuple[str, str]:
    return f"cellarena.server.games.{game}", f"cellarena.sdk.games.{game}"


def _names_game(name: str, game: str) -> bool:
    return any(name == m or name.startswith(m + ".") or name.startswith(m + ":") for m in _game_modules(game))


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in _walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _game_references(rel: str, text: str | None = None) -> list[str]:
    """Where the file ``rel`` imports another game's module or, if it is core code, spells a game's
    name (outside docstrings). A game's own package may import its own modules only."""
    tree = _tree(rel) if text is None else ast.parse(text, rel)
    own = _game_of(rel)
    others = [g for g in GAMES if g != own]
    problems = [
        f"{rel}:{line}: imports {name}"
        for line, name in _imports(tree, rel)
        for g in others
        if _names_game(name, g)
    ]
    if own is None:
        skip = _docstrings(tree)
        for node in _walk(tree):
            if not isinstance(node, ast.Constant) or not isinstance(node.value, str) or id(node) in skip:
                continue
            if node.value in GAMES or any(_names_game(node.value, g) for g in GAMES):
                problems.append(f"{rel}:{node.lineno}: names the game {node.value!r}")
    return sorted(problems, key=lambda p: int(p.split(":")[1]))


def test_the_games_are_found() -> None:
    # Guards the checks below against passing because they looked at nothing.
    assert {"rezzo", "cata"} <= set(GAMES)
    assert len(_sources()) > 50
    assert _game_of("server/games/rezzo/engine.py") == "rezzo"
    assert _game_of("sdk/games/cata.py") == "cata"
    assert _game_of("server/games/plugin.py") is None
    assert _game_of("server/env/games/cata.py") == "cata"
    assert _game_of("server/bench/games/rezzo/load.py") == "rezzo"
    assert _game_of("server/training/rezzo/vector_env.py") == "rezzo"
    assert _game_of("server/env/turns.py") is None
    assert _game_of("server/games/rezzo.py") == "rezzo"


def test_core_code_reaches_games_only_through_their_plugins() -> None:
    problems = []
    for rel in _sources():
        if rel not in ALLOWED:
            problems += _game_references(rel)
    assert not problems, "core code names a game; take it from the game's plugin instead:\n" + "\n".join(
        problems
    )


@pytest.mark.parametrize("rel", sorted(ALLOWED))
def test_each_exception_is_still_needed(rel: str) -> None:
    # An exception nobody needs any more would hide the next one that creeps in.
    assert _game_references(rel), f"{rel} no longer names a game: take it off the list"


def test_the_checker_catches_what_it_should() -> None:
    probe = (
        '"""Docstrings may say rezzo."""\n'
        "from cellarena.server.games.rezzo.engine import RezzoEngine\n"
        "from cellarena.sdk.games import cata\n"
        "def f(game):\n"
        '    return game == "rezzo" or game in {"cloth"}\n'
        'TARGET = "cellarena.server.games.drop2df.engine:Drop2dfEngine"\n'
    )
    found = _game_references("server/probe.py", probe)
    assert [p.split(": ", 1)[1] for p in found] == [
        "imports cellarena.server.games.rezzo.engine",
        "imports cellarena.server.games.rezzo.engine.RezzoEngine",
        "imports cellarena.sdk.games.cata",
        "names the game 'rezzo'",
        "names the game 'cloth'",
        "names the game 'cellarena.server.games.drop2df.engine:Drop2dfEngine'",
    ]


def test_layers_point_one_way() -> None:
    forbidden = {
        "sdk": ("cellarena.server", "cellarena.arena", "trio"),
        "server": ("cellarena.arena",),
        "arena": (),
    }
    problems = []
    for rel in _sources():
        layer = Path(rel).parts[0]
        tree = _tree(rel)
        for line, name in _imports(tree, rel):
            for bad in forbidden[layer]:
                if name == bad or name.startswith(bad + "."):
                    problems.append(f"{rel}:{line}: {layer} imports {name}")
    assert not problems, "\n".join(sorted(set(problems)))


def _upward_imports(rel: str, text: str | None = None) -> list[str]:
    """Where a module of the games' layer (server/games/) imports one of their tools' layers."""
    tree = _tree(rel) if text is None else ast.parse(text, rel)
    return [
        f"{rel}:{line}: imports {name}"
        for line, name in _imports(tree, rel)
        if any(name == layer or name.startswith(layer + ".") for layer in TOOL_LAYERS)
    ]


def test_the_games_import_none_of_their_tools() -> None:
    """Rules and engines (server/games/) stand alone: options, environments, training and benchmarks
    live in the layers above and import them. A plugin names its tools as "module:attr" strings."""
    problems = [p for rel in _sources() if rel.startswith("server/games/") for p in _upward_imports(rel)]
    assert not problems, "a game imports its tools' layer; move the code up:\n" + "\n".join(problems)


def test_the_upward_import_check_catches_them() -> None:
    probe = (
        "from cellarena.server.cli.game_cli import GameCli\n"
        "def f():\n"
        "    from cellarena.server.env import ansi\n"
        "from cellarena.server.games.base import Engine\n"
        'TOOL = "cellarena.server.bench.games.cata:command"\n'
    )
    found = _upward_imports("server/games/cata/probe.py", probe)
    assert [p.split(": ", 1)[1] for p in found] == [
        "imports cellarena.server.cli.game_cli",
        "imports cellarena.server.cli.game_cli.GameCli",
        "imports cellarena.server.env",
        "imports cellarena.server.env.ansi",
    ]


def test_the_server_does_not_load_the_bot_loop() -> None:
    """`cellarena.sdk` loads its public names on first use (PEP 562): the server's modules import the
    protocol and the games' codes from the SDK, and must not pull in the bot loop with them."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import cellarena.server.play.match, cellarena.server.play.lobby, cellarena.server.net.connection\n"
        "import cellarena.arena.ladder.services.seating\n"
        "print('cellarena.sdk.bot' in sys.modules)\n"
        "from cellarena.sdk import Bot, RezzoAnswer, run\n"
        "from cellarena.sdk.games.rezzo import RezzoBot\n"
        "print(Bot is RezzoBot, callable(run), 'cellarena.sdk.bot' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "True", "True"]
    from cellarena import sdk

    assert set(sdk.__all__) <= set(dir(sdk))
    try:
        sdk.NoSuchName  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchName" in str(exc)
    else:
        raise AssertionError("an unknown name must raise AttributeError")


@functools.cache
def _import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports, anywhere in the file (under ``TYPE_CHECKING`` and in
    functions too). ``from package import name`` imports ``package.name`` when that is a module, and
    the package itself otherwise."""
    modules = {_module(rel): rel for rel in _sources()}

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, rel in modules.items():
        package = module if rel.endswith("__init__.py") else module.rpartition(".")[0]
        found: set[str | None] = set()
        for node in _walk(_tree(rel)):
            if isinstance(node, ast.Import):
                found.update(owner(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    found.add(full if full in modules else owner(base))
        graph[module] = {m for m in found if m is not None and m != module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles() -> None:
    """No two modules import each other, however indirectly or lazily: the lobby and its seatings, the
    SDK's bot loop and its games, an engine and its batches each depend one way."""
    assert _cycles(_import_graph()) == []


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [["a", "b", "c"]]


def _protocols() -> dict[str, set[str]]:
    """Every `typing.Protocol` of the core, by name, with the members it declares."""
    found: dict[str, set[str]] = {}
    for rel in _sources():
        for node in _walk(_tree(rel)):
            if not isinstance(node, ast.ClassDef):
                continue
            if not any(
                isinstance(b, ast.Name | ast.Attribute) and ast.unparse(b).endswith("Protocol")
                for b in node.bases
            ):
                continue
            members = {
                n.name if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) else ast.unparse(n.target)
                for n in node.body
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.AnnAssign)
            }
            found[node.name] = {m for m in members if not m.startswith("_")}
    return found


def _guesses(tree: ast.AST, members: set[str]) -> list[tuple[int, str]]:
    """(line, name) of every ``getattr(x, "name")`` of a protocol's member (a ``hasattr`` on a library's
    object, a selector's ``fileno``, asks what the platform offers, which no protocol of ours says)."""
    return [
        (node.lineno, node.args[1].value)
        for node in _walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value in members
    ]


def test_interfaces_are_said_not_guessed() -> None:
    """What an object offers is a protocol's member, called; never a getattr that guesses whether it is
    there (the lobby's worker pids, an executor's interrupt), nor a private attribute of a library's
    class (an executor's ``_processes``)."""
    members = set().union(*_protocols().values())
    assert {"start_match", "worker_pids", "interrupt"} <= members
    problems = []
    for rel in _sources():
        tree = _tree(rel)
        problems += [f"{rel}:{line}: guesses {name!r}" for line, name in _guesses(tree, members)]
        problems += [
            f"{rel}:{node.lineno}: reads an executor's private {node.attr}"
            for node in _walk(tree)
            if isinstance(node, ast.Attribute) and node.attr == "_processes"
        ]
    assert not problems, "\n".join(problems)


def test_every_match_host_says_so() -> None:
    """A class that starts matches for a seating declares `MatchHost` (itself, or through its base)."""
    bases: dict[str, list[str]] = {}
    hosts: list[str] = []
    for rel in _sources():
        for node in _walk(_tree(rel)):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = [ast.unparse(b).rpartition(".")[2] for b in node.bases]
                if any(isinstance(n, ast.FunctionDef) and n.name == "start_match" for n in node.body):
                    hosts.append(node.name)

    def said(name: str) -> bool:
        return name == "MatchHost" or any(said(b) for b in bases.get(name, []))

    assert {"Lobby", "WorkerLobby"} <= set(hosts)
    assert [h for h in hosts if h != "MatchHost" and not said(h)] == []


def test_the_guess_finder_finds_guesses() -> None:
    tree = ast.parse('pids = getattr(lobby, "worker_pids", [])\nok = getattr(x, "other")\n')
    assert _guesses(tree, {"worker_pids"}) == [(1, "worker_pids")]


#: The ladder's rooms (docs/architecture.md, "The ladder") and the rooms each may import; the
#: ladder's own top-level modules (records, errors, rules, policy) are open to every room and import
#: none. A room not named here may not be imported by these.
LADDER = "cellarena.arena.ladder"
LADDER_ROOMS: dict[str, set[str]] = {
    "identity": set(),
    "matchmaking": set(),
    "scoring": set(),
    "submissions": set(),
    "store": {"identity", "submissions"},
    "accounts": {"identity", "store"},
    "hosting": {"store", "submissions"},
    "services": {"identity", "store", "scoring", "matchmaking", "hosting", "submissions"},
    "web": {"identity", "store", "accounts", "scoring", "submissions"},
    "ops": {"identity", "store", "services", "hosting", "matchmaking", "scoring", "submissions"},
}
#: Rooms of pure functions: no I/O of their own, so no trio, no threads, no database, no sockets.
PURE_ROOMS = {"matchmaking", "scoring"}
PURE_FORBIDDEN = (
    "trio",
    "threading",
    "socket",
    "sqlite3",
    "psycopg",
    "starlette",
    "cellarena.server.net.connection",
)


def _room(module: str) -> str | None:
    """The ladder room of ``module`` ("" for the ladder's top-level modules), None outside the ladder."""
    if module != LADDER and not module.startswith(LADDER + "."):
        return None
    parts = module[len(LADDER) + 1 :].split(".") if module != LADDER else [""]
    return parts[0] if len(parts) > 1 else ""


def _ladder_problems(graph: dict[str, set[str]], sources: dict[str, list[str]]) -> list[str]:
    problems = []
    for module, imported in sorted(graph.items()):
        room = _room(module)
        if room is None:
            continue
        if room and room not in LADDER_ROOMS:
            problems.append(f"{module}: in a room docs/architecture.md does not draw")
            continue
        allowed = LADDER_ROOMS.get(room, set()) | {room, ""}
        if room == "":
            allowed = {""}
        for other in sorted(imported):
            theirs = _room(other)
            if theirs is not None and theirs not in allowed and other != LADDER:
                problems.append(f"{module} imports {other} ({room or 'top level'} -> {theirs})")
        if room in PURE_ROOMS:
            for name in sources.get(module, []):
                if any(name == bad or name.startswith(bad + ".") for bad in PURE_FORBIDDEN):
                    problems.append(f"{module} imports {name} (the {room} room is pure)")
    return problems


def test_the_ladders_rooms_import_one_way() -> None:
    """Each room of arena/ladder/ imports only the rooms drawn below it: the store no pages, services
    or rules (`scoring` decides, the store writes); the pages no running server; matchmaking and
    scoring nothing with I/O."""
    graph = _import_graph()
    sources = {}
    for rel in _sources():
        module = _module(rel)
        if _room(module) in PURE_ROOMS:
            sources[module] = [name for _, name in _imports(_tree(rel), rel)]
    assert {_room(m) for m in graph} - {None, ""} == set(LADDER_ROOMS)  # every room is drawn
    assert _ladder_problems(graph, sources) == []


def test_the_room_checker_catches_what_it_should() -> None:
    graph = {
        f"{LADDER}.store.tables": {f"{LADDER}.scoring.settlement", f"{LADDER}.records"},
        f"{LADDER}.records": {f"{LADDER}.store.tables"},
        f"{LADDER}.web.pages": {f"{LADDER}.services.queue", f"{LADDER}.accounts.owners"},
        f"{LADDER}.scoring.rules": set(),
        f"{LADDER}.cellar.x": set(),
    }
    sources = {f"{LADDER}.scoring.rules": ["trio", "cellarena.arena.ratings"]}
    assert _ladder_problems(graph, sources) == [
        f"{LADDER}.cellar.x: in a room docs/architecture.md does not draw",
        f"{LADDER}.records imports {LADDER}.store.tables (top level -> store)",
        f"{LADDER}.scoring.rules imports trio (the scoring room is pure)",
        f"{LADDER}.store.tables imports {LADDER}.scoring.settlement (store -> scoring)",
        f"{LADDER}.web.pages imports {LADDER}.services.queue (web -> services)",
    ]


#: The server's rooms and modules (docs/architecture.md, "One distribution, three packages" and "The
#: server") and what each may import of the server: the games below everything, connections (net/)
#: below matches (play/), matches below the bot launcher (bots/) and the worker processes (workers/),
#: the commands, benchmarks and pages above. A room or module not named here fails the test.
SERVER = "cellarena.server"
SERVER_ROOMS: dict[str, set[str]] = {
    "games": set(),
    "wall_clock": set(),
    "scratch_folders": set(),
    "replay": {"games"},
    "net": {"games", "wall_clock"},
    "play": {"games", "net", "replay", "scratch_folders", "wall_clock"},
    "bots": {"games", "net", "play"},
    "workers": {"net", "play"},
    "service": {"play"},
    "env": {"games", "replay"},
    "replay_fork": {"bots", "games", "play", "replay"},
    "training": {"games", "replay", "dataset"},  # imitation reads an exported dataset
    "dataset": {"games", "replay"},
    "web": {"games", "net", "replay"},
    "cli": {
        "bots",
        "dataset",
        "games",
        "net",
        "play",
        "replay",
        "replay_fork",
        "service",
        "training",  # `cellarena train GAME`
        "web",
        "workers",
        "wall_clock",
    },
    "bench": {"cli", "games", "play", "replay", "training", "web", "workers", "net", "bots"},
}


def _server_room(module: str) -> str | None:
    if not module.startswith(SERVER + "."):
        return None
    return module.split(".")[2]


def _server_problems(graph: dict[str, set[str]]) -> list[str]:
    problems = []
    for module, imported in sorted(graph.items()):
        room = _server_room(module)
        if room is None:
            continue
        if room not in SERVER_ROOMS:
            problems.append(f"{module}: in a room docs/architecture.md does not draw")
            continue
        for name in sorted(imported):
            other = _server_room(name)
            if other is not None and other != room and other not in SERVER_ROOMS[room]:
                problems.append(f"{module} imports {name} ({room} -> {other})")
    return problems


def test_the_servers_rooms_import_one_way() -> None:
    graph = _import_graph()
    assert {_server_room(m) for m in graph} - {None} == set(SERVER_ROOMS)  # every room is drawn
    assert _server_problems(graph) == []


def test_the_server_room_checker_catches_what_it_should() -> None:
    graph = {
        f"{SERVER}.net.connection": {f"{SERVER}.play.match", f"{SERVER}.wall_clock"},
        f"{SERVER}.games.rezzo.engine": {f"{SERVER}.cli.run"},
        f"{SERVER}.attic.old": set(),
    }
    assert _server_problems(graph) == [
        f"{SERVER}.attic.old: in a room docs/architecture.md does not draw",
        f"{SERVER}.games.rezzo.engine imports {SERVER}.cli.run (games -> cli)",
        f"{SERVER}.net.connection imports {SERVER}.play.match (net -> play)",
    ]


def test_the_ratings_are_pure_and_below_the_ladder() -> None:
    """arena/ratings/ holds rating systems and the ladder's rules about them (provisional bots, idle
    widening), pure functions of ratings and a clock given to them, imported by the ladder's store and
    scoring rooms: so no I/O, and of the ladder only the pure matchmaking room (the bench schedules
    with it)."""
    ratings = "cellarena.arena.ratings"
    problems = []
    for rel in _sources():
        module = _module(rel)
        if module != ratings and not module.startswith(ratings + "."):
            continue
        for line, name in _imports(_tree(rel), rel):
            io = any(name == bad or name.startswith(bad + ".") for bad in PURE_FORBIDDEN)
            if io or _room(name) not in (None, "matchmaking"):
                problems.append(f"{rel}:{line} imports {name}")
    assert problems == []
