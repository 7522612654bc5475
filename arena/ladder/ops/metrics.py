"""``GET /metrics`` on the health port: the ladder server's figures in the Prometheus text format.

Read from the services on each scrape (a `prometheus_client` collector over `LadderSeating`; no
figure is kept twice), in a registry of this server's own, so nothing of the process's other
libraries leaks in. Like ``/health`` it shows no token, bot name or path:

============================================ ======= ===============================================
``cellarena_ladder_bots_connected``          gauge   bots connected: queued, being checked, seated here,
                                                     or playing a match handed to a worker or the cluster
``cellarena_ladder_bots_playing``            gauge   seats of the matches under way, here and away
``cellarena_ladder_queue_length``            gauge   bots waiting in the queue
``cellarena_ladder_queue_wait_seconds``      gauge   recent queue waits, by ``quantile`` 0.5/0.9/0.99
``cellarena_ladder_matches_running``         gauge   matches under way, here and on the cluster
``cellarena_ladder_matches_started_total``   counter matches started since the server started
``cellarena_ladder_matches_ended_total``     counter matches ended with a result
``cellarena_ladder_matches_per_minute``      gauge   matches that ended in the last 60 s
``cellarena_ladder_ticks_total``             counter ticks played by the ended matches
``cellarena_ladder_ticks_late_total``        counter of those, ticks late (an answer late) or behind
``cellarena_ladder_ticks_on_time_ratio``     gauge   1 - late / ticks (1 before any tick)
``cellarena_ladder_database_up``             gauge   1 while the database answers, 0 while it is down
``cellarena_ladder_database_errors_total``   counter failed polls and reconnects of the database
``cellarena_ladder_pending_results``         gauge   results kept on disk, waiting for the database
``cellarena_ladder_pauses_total``            counter bots paused (automatically or by the host)
``cellarena_ladder_challenges_pending``      gauge   challenges waiting for both bots to be free
``cellarena_ladder_challenges_played_total`` counter challenges whose match started
============================================ ======= ===============================================
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import trio
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from cellarena.arena.ladder.services.seating import LadderSeating

#: The media type of the text format (version 0.0.4), as Prometheus asks for it.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class LadderCollector(Collector):
    """The seating's figures, read at each scrape."""

    def __init__(self, seating: LadderSeating) -> None:
        self.seating = seating

    def collect(self) -> Iterator[Metric]:
        seating = self.seating
        stats, starter, queue = seating.queue.stats, seating.starter, seating.queue
        # Distinct open connections: admission holds each from its hello until it closes, so one
        # may be in its room and in the queue or a seat at once.
        conns = {c for c in seating.admission.waiting() if not c.closed}
        conns.update(q.conn for q in queue.waiting.values() if not q.conn.closed)
        conns.update(
            seat.conn
            for live in starter.live.values()
            for seat in live.match.seats
            if seat.connected and seat.conn is not None
        )
        # A bot sent to a worker (or the cluster) plays there, connected to it rather than here.
        away = sum(len(bots) for bots in starter.remote.values())
        yield _gauge(
            "bots_connected",
            "Bots connected: queued, being checked, seated, or playing away.",
            len(conns) + away,
        )
        here = sum(len(live.bots) for live in starter.live.values())
        yield _gauge("bots_playing", "Seats of the matches under way, here and away.", here + away)
        yield _gauge("queue_length", "Bots waiting in the queue.", len(queue.waiting))
        waits = GaugeMetricFamily(
            "cellarena_ladder_queue_wait_seconds", "Recent queue waits, by quantile.", labels=["quantile"]
        )
        for q in (50, 90, 99):
            value = stats.wait_percentile(q)
            waits.add_metric([f"{q / 100:g}"], 0.0 if value is None else value)
        yield waits
        yield _gauge("matches_running", "Matches under way.", len(starter.live) + len(starter.remote))
        yield _counter("matches_started", "Matches started.", stats.matches_started)
        yield _counter("matches_ended", "Matches ended with a result.", stats.matches_ended)
        yield _gauge(
            "matches_per_minute", "Matches that ended in the last minute.",
            stats.matches_per_minute(trio.current_time()),
        )  # fmt: skip
        yield _counter("ticks", "Ticks played by the ended matches.", stats.ticks)
        yield _counter("ticks_late", "Ticks with a late answer, or started behind schedule.", stats.bad_ticks)
        on_time = 1.0 - stats.bad_ticks / stats.ticks if stats.ticks else 1.0
        yield _gauge("ticks_on_time_ratio", "Share of ticks on time.", on_time)
        database = seating.database
        yield _gauge("database_up", "1 while the database answers.", 1 if database.up else 0)
        yield _counter("database_errors", "Failed polls and reconnects of the database.", database.errors)
        spool = seating.results.spool
        yield _gauge("pending_results", "Results kept on disk.", 0 if spool is None else len(spool))
        yield _counter("pauses", "Bots paused.", stats.pauses)
        yield _gauge("challenges_pending", "Challenges waiting to be played.", len(queue.challenges))
        yield _counter("challenges_played", "Challenges whose match started.", stats.challenges_played)


def _gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"cellarena_ladder_{name}", text, value=value)


def _counter(name: str, text: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(f"cellarena_ladder_{name}", text, value=value)


def metrics_text(seating: LadderSeating) -> bytes:
    """The text a scrape gets (a registry per call: nothing else can register into it)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LadderCollector(seating))
    return generate_latest(registry)
