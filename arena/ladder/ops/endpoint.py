"""What a game's ``ladder serve`` exposes to bots from outside, worked out as it starts listening and
recorded in the database (`connect_commands.Endpoint`) for ``ladder web``'s connect page."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path

from cellarena.arena.ladder.connect_commands import Endpoint, certificates_only

#: Addresses that mean every address of the machine: no name a bot could use.
WILDCARDS = ("", "0.0.0.0", "::")
#: Round trips an in-memory handshake takes at most (TLS 1.3 needs two, 1.2 three).
_HANDSHAKE_ROUNDS = 8


def endpoint_of(
    game: str,
    *,
    host: str,
    port: int,
    public_host: str | None = None,
    public_port: int | None = None,
    tls: ssl.SSLContext | None = None,
    cert_file: str | None = None,
) -> Endpoint:
    """The endpoint of a server listening on ``host``:``port`` (the bound port), as ``--public-host``
    and ``--public-port`` say a proxy or NAT shows it; with ``tls``, the certificates of
    ``cert_file`` for bots to trust, unless a CA this machine trusts signed them."""
    shown = public_host or (None if host.strip("[]") in WILDCARDS else host)
    ca_pem = None
    if tls is not None and cert_file is not None and not system_trusts(tls):
        try:
            ca_pem = certificates_only(Path(cert_file).read_text("utf-8", errors="replace")) or None
        except OSError:
            ca_pem = None  # it was read to make ``tls``: gone since, the page says to ask the host
    return Endpoint(game, shown, public_port or port, tls=tls is not None, ca_pem=ca_pem)


def system_trusts(server: ssl.SSLContext) -> bool:
    """Whether a client that trusts this machine's CAs accepts ``server``'s certificate chain (its
    name aside): a handshake between the two in memory, no socket."""
    client = ssl.create_default_context()
    client.check_hostname = False
    to_server, to_client, server_in, server_out = (ssl.MemoryBIO() for _ in range(4))
    c = client.wrap_bio(to_client, to_server)
    s = server.wrap_bio(server_in, server_out, server_side=True)
    for _ in range(_HANDSHAKE_ROUNDS):
        try:
            c.do_handshake()
            return True
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLError:
            return False  # a certificate it does not trust, above all
        server_in.write(to_server.read())
        try:
            s.do_handshake()
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLError:
            return False
        to_client.write(server_out.read())
    return False


async def record_endpoint(
    write: Callable[[Endpoint], None], endpoint: Endpoint, notify: Callable[[str], None]
) -> None:
    """Write ``endpoint`` (in a worker thread: the store blocks); a database that cannot take it is
    said once, and the ladder serves on (the pages show the address they last knew)."""
    import trio

    try:
        await trio.to_thread.run_sync(write, endpoint)
    except Exception as exc:  # the store's errors and a database gone away alike
        notify(f"could not record {endpoint.game}'s address for the connect page: {exc}")
