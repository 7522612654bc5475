"""The server's TLS context: a certificate chain and its key, checked when the server starts.

A host gives PEM files (Let's Encrypt's ``fullchain.pem`` and ``privkey.pem`` work as they are).
Every way they can be wrong is a `TlsConfigError` that names the file and says what to fix, raised
before the server listens, never a traceback when the first bot connects.
"""

from __future__ import annotations

import ssl
from pathlib import Path


class TlsConfigError(ValueError):
    """The certificate or key cannot serve TLS; the message names the file."""


def server_context(cert: str | Path, key: str | Path) -> ssl.SSLContext:
    """A server-side context with Python's secure defaults, TLS 1.2 at least, and this chain and key."""
    for path, what in ((cert, "certificate"), (key, "private key")):
        p = Path(path)
        if not p.is_file():
            raise TlsConfigError(f"{path}: no such file (the TLS {what}, PEM)")
        try:
            p.read_bytes()
        except OSError as exc:
            raise TlsConfigError(f"{path}: cannot read the TLS {what}: {exc.strerror}") from None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(cert), str(key))
    except ssl.SSLError as exc:
        reason = exc.reason or str(exc)
        if "KEY_VALUES_MISMATCH" in str(exc):
            raise TlsConfigError(
                f"{key}: this private key does not belong to the certificate {cert}"
            ) from None
        raise TlsConfigError(
            f"{cert} / {key}: not a PEM certificate chain and its private key ({reason})"
        ) from None
    return context
