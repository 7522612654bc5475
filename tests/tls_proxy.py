"""A TLS-terminating proxy for client TLS tests: accepts TLS on loopback (trio.SSLStream, a
certificate from a throwaway `trustme` CA) and forwards the plain bytes to a plain server, as a
host's stunnel or nginx stream proxy would put TLS in front of `cellarena serve`."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import trio
import trustme


@dataclass
class Certificates:
    """A CA whose certificate a client trusts (``ca_file``), a second CA that signed nothing the proxy
    shows (``other_ca_file``), and the proxy's server context."""

    ca_file: Path
    other_ca_file: Path
    server: ssl.SSLContext


def certificates(folder: Path, *names: str) -> Certificates:
    """A CA and a server certificate for ``names`` (host names or IP addresses) in ``folder``."""
    ca, other = trustme.CA(), trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*names).configure_cert(server)
    ca_file, other_file = folder / "ca.pem", folder / "other-ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    other.cert_pem.write_to_path(str(other_file))
    return Certificates(ca_file, other_file, server)


class TLSProxy:
    """TLS on ``port`` (loopback), plain TCP to ``target_port``. ``handshakes`` counts the handshakes
    that succeeded, ``refused`` those that failed."""

    def __init__(self, context: ssl.SSLContext, target_port: int) -> None:
        self.context = context
        self.target_port = target_port
        self.port = 0
        self.handshakes = 0
        self.refused = 0

    async def start(self, nursery: trio.Nursery) -> int:
        listeners = await nursery.start(partial(trio.serve_tcp, self._handle, 0, host="127.0.0.1"))
        self.port = listeners[0].socket.getsockname()[1]
        return self.port

    async def _handle(self, stream: trio.SocketStream) -> None:
        tls = trio.SSLStream(stream, self.context, server_side=True)
        try:
            with trio.fail_after(10):
                await tls.do_handshake()
        except (trio.BrokenResourceError, trio.TooSlowError):
            self.refused += 1
            await trio.aclose_forcefully(tls)
            return
        self.handshakes += 1
        try:
            upstream = await trio.open_tcp_stream("127.0.0.1", self.target_port)
        except OSError:
            await trio.aclose_forcefully(tls)
            return
        async with trio.open_nursery() as pumps:
            pumps.start_soon(self._pump, tls, upstream, pumps.cancel_scope)
            pumps.start_soon(self._pump, upstream, tls, pumps.cancel_scope)
        await trio.aclose_forcefully(upstream)
        with trio.move_on_after(1):  # a close_notify, as a real TLS server ends a connection
            await tls.aclose()
        await trio.aclose_forcefully(tls)

    @staticmethod
    async def _pump(source: trio.abc.Stream, sink: trio.abc.Stream, scope: trio.CancelScope) -> None:
        """Copy until either side ends, then end both directions."""
        try:
            while data := await source.receive_some(1 << 16):
                await sink.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            scope.cancel()
