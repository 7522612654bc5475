"""`ladder systemd CONFIG`: the systemd units that run the ladder a config file names
(`arena/ladder/ops/systemd_units.py`; docs/ladder.md, "Running it as a service")."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cellarena.arena.cli.ladder.running.up import where_of
from cellarena.server.cli.params import FiniteFloatRange, ranged_option, writable_folder

if TYPE_CHECKING:
    from cellarena.arena.ladder.ops.config_file import LadderFile
    from cellarena.arena.ladder.ops.systemd_units import Host, Service


@click.command()
@click.argument("config", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@ranged_option(
    "--out",
    Path("."),
    click.Path(file_okay=False, path_type=Path),
    "The folder the units are written to (then copied to /etc/systemd/system).",
)
@click.option("--user", default="ladder", show_default=True, help="The user the ladder runs as.")
@click.option(
    "--name",
    default="cellarena-ladder",
    show_default=True,
    help="The units' prefix: NAME.target, NAME-serve-GAME.service, NAME-web.service.",
)
@ranged_option(
    "--env-file",
    Path("/etc/cellarena/ladder.env"),
    click.Path(dir_okay=False, path_type=Path),
    "Where the database's DSN goes when it holds a password (root's, mode 0600): the units name "
    "it; the file is written to --out as ladder.env.",
)
@click.option(
    "--cellarena",
    "script",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="The `cellarena` the units run. [default: the one beside this Python]",
)
@ranged_option(
    "--stop-seconds",
    30.0,
    FiniteFloatRange(1, 600),
    "Seconds each part has to stop after SIGTERM before systemd kills it.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object: written, out, install, warnings."
)
@click.pass_context
def systemd(
    ctx: click.Context,
    config: Path,
    out: Path,
    user: str,
    name: str,
    env_file: Path,
    script: Path | None,
    stop_seconds: float,
    as_json: bool,
) -> None:
    """Write the systemd units that run the ladder CONFIG names: NAME-serve-GAME.service per
    [games.GAME], NAME-web.service with [web], NAME-house.service (registers the [[house]] bots
    first) and NAME.target, which starts them all. Each runs `cellarena ladder --config CONFIG ...`
    in CONFIG's folder, as --user, with network-online, the database variable, CAP_NET_BIND_SERVICE
    only for a port below 1024, and the file system read-only but the ladder's folder."""
    from cellarena.arena.ladder.ops import systemd_units as units
    from cellarena.arena.ladder.ops.config_file import read_config

    group = ctx.parent.command if ctx.parent is not None else None
    assert isinstance(group, click.Group)  # `systemd` is a command of the ladder group
    file = read_config(config, group)
    file.check_runnable()
    where = where_of(file)
    host = units.Host(
        cellarena=_cellarena(script),
        user=user,
        config=config.absolute(),
        folder=where.folder.absolute(),
        db=where.db,
        env_file=env_file,
        stop_seconds=stop_seconds,
    )
    services = _services(file, group, name)
    warnings: list[str] = []
    written = _write(writable_folder(out, "--out"), file, host, services, name, warnings)
    warnings += _plain_tcp(file)
    install = [f"cp {' '.join(str(out / w) for w in written if w != 'ladder.env')} /etc/systemd/system/"]
    if "ladder.env" in written:
        install.append(f"install -m 0600 -o root {out / 'ladder.env'} {env_file}")
    install.append(f"systemctl daemon-reload && systemctl enable --now {name}.target")
    if as_json:
        body = {"written": written, "out": str(out), "install": install, "warnings": warnings}
        click.echo(json.dumps(body))
        return
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(f"wrote {', '.join(written)} to {out}; as root:", err=True)
    for line in install:
        click.echo(f"  {line}")


def _cellarena(script: Path | None) -> Path:
    """The `cellarena` script, absolute: systemd runs no command it has to look up."""
    found = script or next((p for p in (Path(sys.executable).parent / "cellarena",) if p.is_file()), None)
    if found is None and (on_path := shutil.which("cellarena")) is not None:
        found = Path(on_path)
    if found is None:
        raise click.BadParameter(
            "no `cellarena` script beside this Python or on PATH: give its path", param_hint="--cellarena"
        )
    return found.absolute()


def _services(file: LadderFile, group: click.Group, name: str) -> list[Service]:
    from cellarena.arena.ladder.ops.systemd_units import Service

    config = str(file.path.absolute())
    ctx = click.Context(group, info_name="ladder")
    serve = group.get_command(ctx, "serve")
    assert isinstance(serve, click.Group)
    services = []
    for game, values in file.games.items():
        command = serve.get_command(click.Context(serve, parent=ctx), game)
        assert command is not None  # read_config checked the game
        ports = (_value(command, values, "port"), _value(command, values, "health_port"))
        services.append(
            Service(
                f"{name}-serve-{game}",
                f"serve {game}",
                ("ladder", "--config", config, "serve", game),
                tuple(p for p in ports if isinstance(p, int)),
            )
        )
    if file.web is not None:
        web = group.get_command(ctx, "web")
        assert web is not None
        port = _value(web, file.web, "port")
        from cellarena.arena.cli.ladder.running.up import live_arguments

        # The same live view as `ladder up` gives: each served game's, where its serve records it.
        args = ("ladder", "--config", config, "web", *live_arguments(file))
        services.append(Service(f"{name}-web", "web", args, (port,) if port else ()))
    return services


def _value(command: click.Command, values: dict[str, Any], name: str) -> Any:
    """The file's value of parameter ``name``, else the command's default."""
    if name in values:
        return values[name]
    return next((p.default for p in command.params if p.name == name), None)


def _write(
    out: Path, file: LadderFile, host: Host, services: list[Service], name: str, warnings: list[str]
) -> list[str]:
    from cellarena.arena.ladder.ops import systemd_units as units

    setup = f"{name}-house" if file.house else None
    texts = {f"{s.name}.service": units.service_unit(s, host, name, setup) for s in services}
    if setup:
        texts[f"{setup}.service"] = units.setup_unit(host, name)
    texts[f"{name}.target"] = units.target_unit([s.name for s in services], host)
    for filename, text in texts.items():
        (out / filename).write_text(text)
    if host.db is not None and units.db_has_password(host.db):
        secret = out / "ladder.env"
        secret.touch(mode=0o600)
        secret.chmod(0o600)
        secret.write_text(units.env_file_text(host.db))
        texts["ladder.env"] = ""
        if file.ladder.get("db"):
            warnings.append(
                f"{file.path} holds the database's password (db): the units read it from "
                f"{host.env_file}; take db out of the file, which the ladder's user reads"
            )
    return list(texts)


def _plain_tcp(file: LadderFile) -> list[str]:
    """A game served off this machine in plain TCP refuses every remote token (tls_required)."""
    from cellarena.sdk.client import is_loopback

    return [
        f"[games.{game}] serves plain TCP on {values['host']}: bots from other machines are refused "
        "(tls_required); give tls-cert and tls-key in the file"
        for game, values in file.games.items()
        if not is_loopback(values.get("host", "127.0.0.1"))
        and "tls_cert" not in values
        and not values.get("insecure")
    ]
