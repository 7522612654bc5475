"""A real local SMTP server for the mail tests (aiosmtpd), run as its own process: `python smtp_server.py
FOLDER CHAIN KEY` listens on 127.0.0.1 three ways and prints their ports as one JSON line:

- ``plain``: no TLS, no login (a relay on loopback, as ``--smtp-tls none`` allows);
- ``starttls``: STARTTLS required, then AUTH (user ``mailer``, password ``secret pw``) required;
- ``tls``: TLS from the first byte (as port 465).

Each message taken is written to FOLDER as ``NNNN.eml`` (whole, atomically) with ``NNNN.json`` beside
it (envelope, TLS, login). A recipient whose address starts with ``refuse`` is refused ``550``, and
the ``MAIL FROM`` of ``slow@...`` is answered after 10 s (a deadline's test).

Importable too: `SmtpServer` starts it for a test module and waits for the ports.
"""

from __future__ import annotations

import asyncio
import email
import email.message
import email.policy
import json
import os
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

USER, PASSWORD = "mailer", "secret pw"


class Keep:
    """aiosmtpd's handler: refuses ``refuse*`` recipients, writes each message to the folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.count = 0

    async def handle_MAIL(  # noqa: N802 (aiosmtpd's name)
        self, server: Any, session: Any, envelope: Any, address: str, options: Any
    ) -> str:
        if address.startswith("slow@"):
            await asyncio.sleep(10)
        envelope.mail_from = address
        return "250 OK"

    async def handle_RCPT(  # noqa: N802 (aiosmtpd's name)
        self, server: Any, session: Any, envelope: Any, address: str, options: Any
    ) -> str:
        if address.startswith("refuse"):
            return "550 5.1.1 no mailbox here by that name"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(  # noqa: N802 (aiosmtpd's name)
        self, server: Any, session: Any, envelope: Any
    ) -> str:
        self.count += 1
        stem = self.folder / f"{os.getpid()}-{self.count:04d}"
        about = {
            "from": envelope.mail_from,
            "to": envelope.rcpt_tos,
            "tls": server.transport.get_extra_info("ssl_object") is not None,
            "login": bool(session.authenticated),
        }
        for suffix, data in ((".json", json.dumps(about).encode()), (".eml", envelope.content)):
            part = stem.with_suffix(suffix + ".part")
            part.write_bytes(data)
            part.rename(stem.with_suffix(suffix))  # the .eml last: a reader that sees it sees both
        return "250 2.0.0 message taken"


def _login(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> Any:
    from aiosmtpd.smtp import AuthResult, LoginPassword

    ok = (
        isinstance(data, LoginPassword) and data.login == USER.encode() and data.password == PASSWORD.encode()
    )
    return AuthResult(success=ok, handled=False)


async def _serve(folder: Path, chain: str, key: str) -> None:
    from aiosmtpd.smtp import SMTP

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(chain, key)
    handler = Keep(folder)
    loop = asyncio.get_running_loop()
    kinds: dict[str, tuple[dict[str, Any], ssl.SSLContext | None]] = {
        "plain": ({}, None),
        "starttls": (
            {
                "tls_context": context,
                "require_starttls": True,
                "authenticator": _login,
                "auth_required": True,
            },
            None,
        ),
        "tls": ({}, context),
    }
    ports = {}
    for name, (options, wrap) in kinds.items():
        server = await loop.create_server(
            lambda options=options: SMTP(handler, hostname="localhost", **options),  # type: ignore[misc]
            "127.0.0.1",
            0,
            ssl=wrap,
        )
        ports[name] = server.sockets[0].getsockname()[1]
    print(json.dumps(ports), flush=True)
    await asyncio.Event().wait()


class SmtpServer:
    """The server as a child process of a test module; ``stop()`` ends it."""

    def __init__(self, folder: Path, chain: Path, key: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.proc = subprocess.Popen(
            [sys.executable, __file__, str(folder), str(chain), str(key)],
            stdout=subprocess.PIPE,
            text=True,
        )
        from cellarena_cli import line_within  # here: the server's own process needs none of it

        line = line_within(self.proc.stdout, what="line of ports")  # printed once it listens
        if not line:
            self.stop()
            raise AssertionError("the test SMTP server did not start (is aiosmtpd installed?)")
        self.ports: dict[str, int] = json.loads(line)

    def messages(self) -> list[Path]:
        return sorted(self.folder.glob("*.eml"))

    def mails_to(self, address: str) -> list[email.message.EmailMessage]:
        """The mails taken for ``address``, oldest first."""
        found = []
        for path in self.messages():
            if address in json.loads(path.with_suffix(".json").read_text())["to"]:
                message = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
                assert isinstance(message, email.message.EmailMessage)
                found.append(message)
        return found

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


if __name__ == "__main__":
    asyncio.run(_serve(Path(sys.argv[1]), sys.argv[2], sys.argv[3]))
