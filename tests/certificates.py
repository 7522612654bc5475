"""Throwaway certificates for TLS tests, from a `trustme` CA made for the test."""

from __future__ import annotations

from pathlib import Path

import trustme


def pem_files(folder: Path, *names: str) -> tuple[Path, Path, Path]:
    """(CA file, certificate chain, private key) for a server known by ``names``."""
    ca = trustme.CA()
    cert = ca.issue_cert(*names)
    ca_file, chain, key = folder / "ca.pem", folder / "chain.pem", folder / "key.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    chain.write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    cert.private_key_pem.write_to_path(str(key))
    return ca_file, chain, key
