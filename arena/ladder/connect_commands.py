"""How a bot from outside reaches a ladder's game, and the one builder of the commands that start it.

`ladder serve` records what it exposes (`Endpoint`: the address and port a proxy or NAT shows, TLS,
the certificate to trust when no public CA signed it) in the database's settings as it starts;
``ladder web`` reads it for the connect page and the token page, and ``ladder register`` gets the same
`Address` from the pages' API. Every command an owner is shown comes from `connect_commands`: the
Python SDK's and each kit's (``sdk/kits/*/README.md``: C++ and Rust speak plain TCP, so on a TLS
ladder they go through a local stunnel). Pure: no I/O, nothing of the ladder imported.
"""

from __future__ import annotations

import ipaddress
import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

#: The settings row of a game's endpoint is ``endpoint:GAME``.
SETTING_PREFIX = "endpoint:"
#: The kits, in the order the pages show them, and their names for people.
KITS = {
    "python": "Python (the SDK)",
    "typescript": "TypeScript / JavaScript kit",
    "java": "Java kit",
    "cpp": "C++ kit",
    "rust": "Rust kit",
}
#: How each kit's bot starts, in the folder `cellarena new-bot GAME NAME --lang ...` writes.
PROGRAMS = {
    "python": "python {name}.py",
    "typescript": "node dist/src/bot.js",
    "java": "java -jar build/{name}.jar",
    "cpp": "build/{name}",
    "rust": "target/release/{name}",
}
#: Kits that speak TLS themselves (``--tls``, ``--tls-ca``); the others reach TLS through stunnel.
TLS_KITS = ("python", "typescript", "java")
#: The local port stunnel listens on for a kit without TLS (the kits' README uses it too).
STUNNEL_PORT = 7778
#: The system's CA bundle on Debian and Ubuntu, for stunnel when a public CA signed the ladder's.
SYSTEM_CAS = "/etc/ssl/certs/ca-certificates.crt"
#: A bot folder's name as `cellarena new-bot` takes it: a bot named otherwise runs as ``my_bot``.
_FOLDER_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
_PEM = re.compile(r"-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]+-----END CERTIFICATE-----")


def certificates_only(pem: str) -> str:
    """The certificates of a PEM text, nothing else: a ``--tls-cert`` file may hold its key too,
    which must never reach a page."""
    return "".join(block + "\n" for block in _PEM.findall(pem))


@dataclass(frozen=True)
class Address:
    """Where a bot connects for ``game``: ``host`` and ``port``, whether over TLS, and whether it
    must trust the ladder's own certificate (``own_ca``: self-signed or a private CA's) rather than
    the system's CAs."""

    game: str
    host: str
    port: int
    tls: bool = False
    own_ca: bool = False

    @property
    def ca_file(self) -> str:
        """The name the ladder's certificate is saved under (the pages download it so)."""
        return f"{self.game}-ca.pem"

    def to_json(self) -> dict[str, Any]:
        return {
            "game": self.game,
            "host": self.host,
            "port": self.port,
            "tls": self.tls,
            "own_ca": self.own_ca,
        }

    @classmethod
    def from_json(cls, data: object) -> Address | None:
        """The address in an API answer, or None if it is not one (an older ladder sends none)."""
        if not isinstance(data, dict):
            return None
        game, host, port = data.get("game"), data.get("host"), data.get("port")
        if not isinstance(game, str) or not isinstance(host, str) or not host:
            return None
        if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
            return None
        return cls(game, host, port, tls=data.get("tls") is True, own_ca=data.get("own_ca") is True)


@dataclass(frozen=True)
class Endpoint:
    """What one game's ``ladder serve`` exposes: its public host (None: it listens on every address
    and was told no name), port, TLS, and the certificate PEM bots must trust (None: a CA the
    system trusts signed it, or no TLS)."""

    game: str
    host: str | None
    port: int
    tls: bool = False
    ca_pem: str | None = None

    def to_setting(self) -> tuple[str, str]:
        """The settings row (name, value) this endpoint is stored as."""
        value = {"host": self.host, "port": self.port, "tls": self.tls, "ca_pem": self.ca_pem}
        return SETTING_PREFIX + self.game, json.dumps(value)

    @classmethod
    def from_setting(cls, name: str, value: str) -> Endpoint | None:
        """The endpoint of a settings row, or None if the row is none (or not readable: a page
        then says the game's address is unknown rather than failing)."""
        if not name.startswith(SETTING_PREFIX):
            return None
        try:
            data = json.loads(value)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        host, port, ca = data.get("host"), data.get("port"), data.get("ca_pem")
        if not isinstance(port, int) or not 0 < port < 65536 or not isinstance(host, str | None):
            return None
        return cls(
            name[len(SETTING_PREFIX) :],
            host or None,
            port,
            tls=data.get("tls") is True,
            ca_pem=ca if isinstance(ca, str) and ca else None,
        )

    def address(self, fallback_host: str) -> Address:
        """Where a bot connects: the recorded host, else ``fallback_host`` (the pages' own name)."""
        return Address(
            self.game, self.host or fallback_host, self.port, tls=self.tls, own_ca=self.ca_pem is not None
        )


@dataclass(frozen=True)
class KitCommand:
    """How one kit's bot connects: a command to run in its folder; for a kit without TLS on a TLS
    ladder, first a local TLS proxy (``proxy``, a command of its own) with its config (``setup``,
    saved as ``setup_file``)."""

    kit: str
    title: str
    command: str
    proxy: str | None = None
    setup_file: str | None = None
    setup: str | None = None


def program(kit: str, bot: str | None) -> str:
    """How ``kit``'s bot starts in the folder `new-bot` wrote for ``bot`` (``my_bot`` if the bot's
    name cannot name a folder there)."""
    name = bot if bot is not None and _FOLDER_NAME.fullmatch(bot) else "my_bot"
    return PROGRAMS[kit].format(name=name)


def token_file(bot: str | None) -> str:
    """The file a bot's token is kept in: ``NAME.token`` (as `ladder register` writes it), else
    ``bot.token``."""
    return f"{bot}.token" if bot else "bot.token"


def connect_commands(address: Address, bot: str | None = None, token: str | None = None) -> list[KitCommand]:
    """The command of each kit (`KITS`' order) that plays ``bot`` (None: any bot) on the ladder at
    ``address``, its token in the file ``token`` (default: `token_file`); shell-quoted, to be run as
    written."""
    return [kit_command(kit, address, bot, token) for kit in KITS]


def kit_command(kit: str, address: Address, bot: str | None = None, token: str | None = None) -> KitCommand:
    """`connect_commands`' command for one kit."""
    tail = ["--ladder", "--token-file", token or token_file(bot)]
    if not address.tls or kit in TLS_KITS:
        argv = [*shlex.split(program(kit, bot)), "--host", address.host, "--port", str(address.port), *tail]
        if address.tls:
            argv.append("--tls")
            if address.own_ca:
                argv += ["--tls-ca", address.ca_file]
        return KitCommand(kit, KITS[kit], shlex.join(argv))
    argv = [*shlex.split(program(kit, bot)), "--host", "127.0.0.1", "--port", str(STUNNEL_PORT), *tail]
    conf = f"{address.game}-tls.conf"
    return KitCommand(
        kit,
        KITS[kit],
        shlex.join(argv),
        proxy=f"stunnel {shlex.quote(conf)}",
        setup_file=conf,
        setup=stunnel_config(address),
    )


def stunnel_config(address: Address) -> str:
    """A local stunnel that takes a kit's plain TCP on 127.0.0.1 to the ladder over TLS, checking its
    certificate (the ladder's own, pinned, or a public CA's for the ladder's name)."""
    host = address.host
    target = f"[{host}]" if ":" in host else host
    lines = [
        "foreground = yes",
        "[cellarena]",
        "client = yes",
        f"accept = 127.0.0.1:{STUNNEL_PORT}",
        f"connect = {target}:{address.port}",
    ]
    if address.own_ca:
        lines += ["verifyPeer = yes", f"CAfile = {address.ca_file}"]
    else:
        lines += ["verifyChain = yes", f"CAfile = {SYSTEM_CAS}"]
    lines.append(f"{'checkIP' if _is_ip(host) else 'checkHost'} = {host}")
    return "\n".join(lines) + "\n"


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
