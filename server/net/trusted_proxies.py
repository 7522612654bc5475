"""Which peers are proxies the host trusts to say who their clients are (``--trusted-proxy``).

One list serves every per-address count (connections, wrong tokens, and later sign-ups): on the bot
port a trusted proxy's connection must start with a PROXY protocol header (`proxy_protocol`) naming
the client; over HTTP, `client_of` reads the ``X-Forwarded-For`` chain the same list vouches for.
Anyone not on the list is taken at their socket's address, whatever they send.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_network(text: str) -> Network:
    """An address (``10.0.0.5``, ``::1``) or a network (``10.0.0.0/24``); ValueError saying what to give."""
    try:
        return ipaddress.ip_network(text.strip(), strict=True)
    except ValueError as exc:
        raise ValueError(
            f"{text!r} is not an IP address or network ({exc}); give e.g. 127.0.0.1, 10.0.0.0/24 or ::1"
        ) from None


@dataclass(frozen=True)
class TrustedProxies:
    """The host's list of trusted proxies; empty: nobody is trusted, every peer is the client."""

    networks: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, texts: Iterable[str]) -> TrustedProxies:
        return cls(tuple(parse_network(t) for t in texts))

    def __bool__(self) -> bool:
        return bool(self.networks)

    def trusts(self, host: str) -> bool:
        """Whether the peer at ``host`` is a trusted proxy (an IPv4 peer seen as ``::ffff:a.b.c.d``
        on a dual-stack socket counts as ``a.b.c.d``)."""
        try:
            address = ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            return False
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return any(address in network for network in self.networks)

    def client_of(self, peer: str, forwarded_for: Sequence[str]) -> str:
        """The client behind ``peer`` given an ``X-Forwarded-For`` chain (its comma-separated
        entries, oldest first): walk it from the nearest hop and stop at the first address that is
        not a trusted proxy. Entries only a trusted proxy vouched for are believed; what a client
        wrote itself at the start of the chain is not."""
        client = peer
        for hop in reversed([h.strip() for h in forwarded_for if h.strip()]):
            if not self.trusts(client):
                break
            try:
                client = str(ipaddress.ip_address(hop))
            except ValueError:
                break  # not an address: the proxy before it is where the chain ends
        return client
