"""Where `ladder serve` plays its matches when not in its own process: worker processes, a cluster."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from cellarena.arena.cluster import ClusterSpec
from cellarena.server.cli.params import ParsedParam


@contextlib.contextmanager
def cluster_hand_off(
    spec: ClusterSpec, config: Any, public_host: str | None, cert: str | None, key: str | None, insecure: bool
) -> Iterator[Any]:
    """The ladder's hand-off to the cluster ``spec``, its workers checked; a ClusterError is the
    command's error, said before anyone connects."""
    from cellarena.arena.cluster import ClusterError
    from cellarena.arena.ladder.hosting.cluster_hand_off import HandOffConfig, open_hand_off

    hand_off_config = HandOffConfig(
        public_host=public_host,
        tls_cert=str(Path(cert).resolve()) if cert else None,
        tls_key=str(Path(key).resolve()) if key else None,
        insecure=insecure,
    )
    configs = [config.config_for(m) for m in config.maps]
    try:
        with open_hand_off(spec, config.game, configs, hand_off_config) as hand_off:
            yield hand_off
    except ClusterError as exc:
        raise click.ClickException(str(exc)) from None


class WorkersParam(ParsedParam):
    """``--workers``: a number of worker processes, or ``auto`` (`local_workers.parse_workers`)."""

    name = "N|auto"
    parsed = int

    def parse(self, text: str) -> int:
        from cellarena.arena.ladder.hosting.worker_pool import parse_workers

        return parse_workers(text)


def local_workers_for(
    workers: int,
    workers_host: str | None,
    config: Any,
    cluster: ClusterSpec | None,
    cert: str | None,
    key: str | None,
    insecure: bool,
    verbose: bool,
) -> Any:
    """The ladder's worker processes for ``--workers`` (None for 1), or a clear error naming the option."""
    from cellarena.sdk.client import is_loopback

    if workers == 1:
        if workers_host is not None:
            raise click.BadParameter(
                "it names where bots reach the worker processes: give --workers 2 or more too",
                param_hint="--workers-host",
            )
        return None
    if cluster is not None:
        raise click.BadParameter(
            "the matches go either to a cluster or to worker processes here: give --cluster or --workers, "
            "not both",
            param_hint="--workers",
        )
    from cellarena.arena.ladder.hosting.worker_pool import LocalWorkers
    from cellarena.arena.ladder.hosting.worker_process import WorkerSetup

    public = workers_host or config.host
    if public in ("0.0.0.0", "::", ""):
        raise click.BadParameter(
            f"bots cannot be sent to {public or 'an empty address'}: give --workers-host, the name or "
            "address bots reach this machine at (the one on the TLS certificate)",
            param_hint="--workers-host",
        )
    if cert is None and not insecure and not (is_loopback(public) and is_loopback(config.host)):
        raise click.BadParameter(
            f"the workers would take seat tokens in clear at {public}: give --tls-cert/--tls-key, or "
            "--insecure on a network you trust",
            param_hint="--workers",
        )
    setup = WorkerSetup(
        config.game,
        config.config_for(config.maps[0]),
        config.settings,
        bind_host=config.host,
        tls_cert=str(Path(cert).resolve()) if cert else None,
        tls_key=str(Path(key).resolve()) if key else None,
        max_connections_per_address=config.rules.max_connections_per_address,
        verbose=verbose,
    )
    return LocalWorkers(workers, setup, public_host=public, notify=lambda text: click.echo(text, err=True))
