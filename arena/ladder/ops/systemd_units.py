"""The systemd units of a ladder (`ladder systemd CONFIG`, docs/ladder.md "Running it as a service"):
a service per `serve GAME` and one for `web`, each running `cellarena ladder --config CONFIG ...`, so
the file stays the one place its options are said; a target that starts and stops them together;
a one-shot service that registers the file's house bots first.

A unit per part rather than one for `ladder up`: systemd is then the supervisor (restarts, the
journal per part, `systemctl restart` of the pages without stopping the matches).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

#: Ports below this need CAP_NET_BIND_SERVICE.
PRIVILEGED = 1024
DB_VARIABLE = "CELLARENA_LADDER_DB"


@dataclass(frozen=True)
class Service:
    """One part: its unit's name (without ``.service``), what it is, its arguments after `cellarena`,
    and the ports it binds."""

    name: str
    what: str
    args: tuple[str, ...]
    ports: tuple[int, ...]


@dataclass(frozen=True)
class Host:
    """Where and as whom the units run: the `cellarena` script, the user, the config file, the
    ladder's folder, the database, the environment file that holds a DSN with a password."""

    cellarena: Path
    user: str
    config: Path
    folder: Path
    db: str | None
    env_file: Path
    stop_seconds: float


def db_has_password(db: str | None) -> bool:
    return db is not None and urlsplit(db).password is not None


def quoted(word: str) -> str:
    """``word`` as one word of a unit's command line or setting: ``%`` and ``$`` kept literal, quoted
    when it holds spaces or quotes."""
    word = word.replace("%", "%%").replace("$", "$$")
    if any(c.isspace() or c in "\"'\\;" for c in word) or not word:
        return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return word


def service_unit(service: Service, host: Host, target: str, setup: str | None) -> str:
    """The ``.service`` file of ``service``."""
    after = ["network-online.target", *([f"{setup}.service"] if setup else [])]
    unit = [
        "[Unit]",
        f"Description=cellarena ladder: {service.what} ({host.config})",
        # Wants, not Requires: a registration that failed (the database not up yet) stops no game.
        f"Wants={' '.join(after)}",
        f"After={' '.join(after)}",
        f"PartOf={target}.target",
        "",
        "[Service]",
        "Type=simple",
        f"User={host.user}",
        f"WorkingDirectory={quoted(str(host.config.parent))}",
        *_database(host),
        f"ExecStart={' '.join(quoted(w) for w in (str(host.cellarena), *service.args))}",
        "# SIGTERM: matches under way are voided, every bot is told, the process exits.",
        "KillSignal=SIGTERM",
        f"TimeoutStopSec={host.stop_seconds:g}",
        "Restart=on-failure",
        "RestartSec=2",
        *_capabilities(service.ports),
        *_hardening(host),
        "",
        "[Install]",
        f"WantedBy={target}.target",
        "",
    ]
    return "\n".join(unit)


def setup_unit(host: Host, target: str) -> str:
    """The one-shot service that registers the file's house bots (`ladder up CONFIG --check`)."""
    args = ("ladder", "up", str(host.config), "--check")
    return "\n".join(
        [
            "[Unit]",
            f"Description=cellarena ladder: register the house bots of {host.config}",
            "Wants=network-online.target",
            "After=network-online.target",
            f"PartOf={target}.target",
            "",
            "[Service]",
            "Type=oneshot",
            "RemainAfterExit=yes",
            f"User={host.user}",
            f"WorkingDirectory={quoted(str(host.config.parent))}",
            *_database(host),
            f"ExecStart={' '.join(quoted(w) for w in (str(host.cellarena), *args))}",
            "CapabilityBoundingSet=",  # it only writes to the database
            *_hardening(host),
            "",
        ]
    )


def target_unit(names: list[str], host: Host) -> str:
    """The target that starts (and, through the services' PartOf=, stops) every part."""
    wants = " ".join(f"{n}.service" for n in names)
    return "\n".join(
        [
            "[Unit]",
            f"Description=cellarena ladder ({host.config})",
            f"Wants={wants}",
            f"After={wants}",
            "",
            "[Install]",
            "WantedBy=multi-user.target",
            "",
        ]
    )


def env_file_text(db: str) -> str:
    value = "".join("\\" + c if c in '\\"$`' else c for c in db)
    return f'# Read by systemd as root: keep this file root\'s, mode 0600.\n{DB_VARIABLE}="{value}"\n'


def _database(host: Host) -> list[str]:
    """The database variable: in the unit when it holds no secret, else from the root-only file."""
    if host.db is None:
        return []
    if db_has_password(host.db):
        return [f"EnvironmentFile={quoted(str(host.env_file))}"]
    return [f"Environment={quoted(f'{DB_VARIABLE}={host.db}')}"]


def _capabilities(ports: tuple[int, ...]) -> list[str]:
    low = sorted(p for p in ports if 0 < p < PRIVILEGED)
    if not low:
        return []
    return [
        f"# Port {', '.join(map(str, low))} is below {PRIVILEGED}: this capability, not root.",
        "AmbientCapabilities=CAP_NET_BIND_SERVICE",
    ]


def _hardening(host: Host) -> list[str]:
    paths = (host.cellarena, host.config, host.folder)
    under_home = any(p.is_relative_to("/home") or p.is_relative_to("/root") for p in paths)
    return [
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        f"ReadWritePaths={quoted(str(host.folder))}",
        "PrivateTmp=yes",
        f"ProtectHome={'read-only' if under_home else 'yes'}",
        "PrivateDevices=yes",
        "ProtectKernelTunables=yes",
        "ProtectKernelModules=yes",
        "RestrictSUIDSGID=yes",
        "LockPersonality=yes",
    ]
