"""Connections, from accept to the last frame: the handshake, PROXY headers, TLS, the poller and
each client's sends."""
