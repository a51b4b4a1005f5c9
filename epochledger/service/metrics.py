"""What the service tells Prometheus and a load balancer (rule H7): /metrics, /healthz, /readyz.

Two kinds of metric (docs/service.md, "Metrics, health and alerts"):

- Ledger-wide, derived from the log, so every server of a shared PostgreSQL ledger says
  the same whoever wrote: the counters fed by the server's count of the log (stream.py,
  `Live.count`, after each catch-up of the views and at each scrape), which reads each
  event appended after the server started, by any writer
  (events by type, fenced reports, orphans recovered by rule, sweeps that gave up,
  dead-letters), and the gauges read from the views at each scrape (open tick streaks
  and the oldest one's age, each view's position and lag behind the head, the head).
- Per server process: requests by route and status, write requests' latency, the
  write requests each group commit joined (`Service.write`), lost races (conflicts),
  live streams open and dropped, and the last chain verify this process ran
  (`Metrics.record_verify`, which the verify route calls).

/healthz answers without touching the store (the process is alive); /readyz reads the
head and every view's lag: 503 (a problem document) when the store is unreachable or a
view lags the head by more than `ready_max_lag` positions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, cast

import anyio
import msgspec
from litestar import Request, Response, get
from litestar.enums import ScopeType
from litestar.openapi.datastructures import ResponseSpec
from litestar.types import ASGIApp, Message, Receive, Scope, Send
from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from epochledger.ledger.errors import ConflictError, LedgerError
from epochledger.service import problems

if TYPE_CHECKING:
    from epochledger.reports import LogEntry, Verification
    from epochledger.service.app import Service
    from epochledger.service.stream import Live

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Write requests' latency, seconds: from a group commit's ~1 ms to a slow store's seconds.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# Write requests a group commit joins: one on an idle server, up to the clients in flight.
GROUP_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class _Recovered(msgspec.Struct):
    rule: str = ""


_recovered = msgspec.json.Decoder(_Recovered)


class Metrics:
    """One server's metrics, in a registry of its own (never the process-global one)."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.live: Live | None = None
        disable_created_metrics()  # type: ignore[no-untyped-call]  # prometheus-client leaves it unannotated; no *_created series
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        # ledger-wide, from the log (Live.count)
        self.events = Counter(
            "epochledger_events", "Events appended to the ledger by any writer, by type (tag)", ["type"], registry=r
        )
        self.fenced = Counter(
            "epochledger_fenced_reports", "Stale reports refused and kept as run.fenced evidence (F1)", registry=r
        )
        self.recovered = Counter(
            "epochledger_orphans_recovered", "Orphans recovered by a sweep, by the rule that judged them", ["rule"],
            registry=r,
        )  # fmt: skip  # one label list per line would split the rule's name from its help
        self.sweep_failures = Counter(
            "epochledger_sweep_failures", "Sweeps that gave up (process.sweep_failed, O5)", registry=r
        )
        self.dead_letters = Counter(
            "epochledger_dead_letters", "Runs dead-lettered by the tick at its deadline (T2)", registry=r
        )
        self.undecodable = Counter(
            "epochledger_undecodable_events", "Appended events this server cannot decode (T4)", registry=r
        )
        # per process
        self.requests = Counter(
            "epochledger_http_requests", "HTTP requests by route, method and status", ["route", "method", "status"],
            registry=r,
        )  # fmt: skip
        self.latency = Histogram(
            "epochledger_append_latency_seconds",
            "Write requests' latency, from the request to its response's start, by operation",
            ["op"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.group_size = Histogram(
            "epochledger_write_group_size",
            "Write requests decided together in one of the server's group commits (Service.write)",
            buckets=GROUP_BUCKETS,
            registry=r,
        )
        self.conflicts = Counter(
            "epochledger_conflicts", "Writes that lost a race (ConflictError, 409; L5); nothing appended", registry=r
        )
        self.verified: tuple[bool, float] | None = None  # (passed, when): the last verify this process ran
        self._lock = threading.Lock()
        r.register(_LedgerGauges(self))

    def on_events(self, entries: Iterable[LogEntry]) -> None:
        """New events of the log (stream.Live.count): the ledger-wide counters."""
        with self._lock:
            for e in entries:
                self.events.labels(e.type).inc()
                if not e.decoded:
                    self.undecodable.inc()
                elif e.type == "run.fenced":
                    self.fenced.inc()
                elif e.type == "run.recovered":
                    self.recovered.labels(_recovered.decode(e.data).rule).inc()
                elif e.type == "process.sweep_failed":
                    self.sweep_failures.inc()
                elif e.type == "run.dead_lettered":
                    self.dead_letters.inc()

    def record_verify(self, verification: Verification) -> None:
        """The outcome of a verify (chain, digests and views, rules S1, R2): for the
        verify route to call with what `Ledger.verify` returned."""
        self.verified = (verification.error() is None, time.time())

    def exposition(self) -> bytes:
        if self.live is not None:
            self.live.count()  # the counters exact as of this scrape (stream.Live.count)
        return generate_latest(self.registry)


class _LedgerGauges(Collector):
    """The gauges read from the views at each scrape, without catching them up (the
    server's follower does that): the same on every server of one ledger."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def describe(self) -> Iterable[Any]:
        return []  # collected at scrape time; auto_describe would read the store at registration

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        ledger = self.metrics.service.ledger
        up = GaugeMetricFamily("epochledger_store_up", "1 if the store answered this scrape, else 0")
        try:
            head = ledger.head()
            lags = ledger.view_lags()
            health = ledger.tick_health_summary(catch_up_first=False)
        except LedgerError:
            up.add_metric([], 0)
            yield up
            yield from self._streams()
            return
        up.add_metric([], 1)
        yield up
        yield GaugeMetricFamily("epochledger_log_head_position", "The log's last position", value=head)
        lag = GaugeMetricFamily(
            "epochledger_view_lag_positions", "Positions a live view lags the log's head", labels=["view"]
        )
        position = GaugeMetricFamily("epochledger_view_position", "A live view's tracking position", labels=["view"])
        for v in lags:
            lag.add_metric([v.view], v.lag)
            position.add_metric([v.view], v.position)
        yield lag
        yield position
        yield GaugeMetricFamily(
            "epochledger_tick_streaks_open",
            "Runs with an open tick failure streak (T1)",
            value=len(health.open_streaks),
        )
        ages = [s.age_s for s in health.open_streaks if s.age_s is not None]
        yield GaugeMetricFamily(
            "epochledger_tick_streak_oldest_age_seconds",
            "Age of the oldest open tick streak, in ledger time (0 when none is open)",
            value=max(ages, default=0.0),
        )
        yield GaugeMetricFamily(
            "epochledger_dead_lettered_runs", "Dead-letters the tick-health view holds (T2)", value=health.dead_letters
        )
        yield from self._streams()

    def _streams(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        if self.metrics.verified is not None:  # absent until this process verifies: never a false 0
            passed, when = self.metrics.verified
            yield GaugeMetricFamily(
                "epochledger_chain_verify_ok",
                "1 if the last verify this server ran passed, 0 if not",
                value=int(passed),
            )
            yield GaugeMetricFamily(
                "epochledger_chain_verify_timestamp_seconds", "When this server last ran verify (Unix time)", value=when
            )
        live = self.metrics.live
        if live is None:
            return
        yield GaugeMetricFamily("epochledger_streams_open", "Live streams this server serves now", value=live.active)
        dropped = CounterMetricFamily(
            "epochledger_streams_dropped", "Live streams this server ended, by reason (H5)", labels=["reason"]
        )
        for reason, n in sorted(live.dropped.items()):
            dropped.add_metric([reason], n)
        yield dropped


def middleware(app: ASGIApp) -> ASGIApp:
    """Requests by route and status, and write requests' latency (per process)."""

    async def observe(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await app(scope, receive, send)
            return
        method = scope["method"]
        metrics: Metrics = scope["app"].state["metrics"]
        t0 = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                if method in WRITE_METHODS:
                    op = str(scope["route_handler"].opt.get("op", "")) if "route_handler" in scope else ""
                    metrics.latency.labels(op).observe(time.perf_counter() - t0)
            await send(message)

        try:
            await app(scope, receive, sending)
        finally:
            route = str(scope.get("path_template") or "unrouted")
            metrics.requests.labels(route, method, str(status)).inc()

    return observe


async def after_exception(exception: BaseException, scope: Scope) -> None:
    if isinstance(exception, ConflictError):
        scope["app"].state["metrics"].conflicts.inc()


@get("/metrics", opt={"op": "metrics"}, media_type=CONTENT_TYPE, summary="Prometheus metrics (rule H7)")
async def metrics_route(request: Request[Any, Any, Any]) -> Response[bytes]:
    metrics: Metrics = request.app.state["metrics"]
    body = await anyio.to_thread.run_sync(metrics.exposition)
    return Response(body, media_type=CONTENT_TYPE)


class Health(msgspec.Struct, frozen=True, kw_only=True):
    status: str


class Ready(msgspec.Struct, frozen=True, kw_only=True):
    status: str
    head: int
    max_lag: int  # the largest view lag, in positions
    bound: int  # ready while max_lag <= bound (ready_max_lag)


@get("/healthz", opt={"op": "healthz"}, summary="Alive: answers without touching the store (rule H7)")
async def healthz() -> Health:
    return Health(status="alive")


NOT_READY = ResponseSpec(
    problems.Problem,
    generate_examples=False,
    description="Not ready: the store does not answer (store-unavailable) or a view lags the head by more than "
    "ready_max_lag positions (not-ready); with Retry-After",
    media_type=problems.MEDIA_TYPE,
)


@get(
    "/readyz",
    opt={"op": "readyz"},
    summary="Ready: the store answers and the views are caught up (rule H7)",
    responses={503: NOT_READY},
)
async def readyz(request: Request[Any, Any, Any]) -> Response[Ready]:
    service: Service = request.app.state["service"]
    bound = service.config.ready_max_lag
    # A LedgerError (the store away: 503 with Retry-After) is a problem document via problems.py.
    head, lags = await anyio.to_thread.run_sync(lambda: (service.ledger.head(), service.ledger.view_lags()))
    worst = max(lags, key=lambda v: v.lag, default=None)
    if worst is not None and worst.lag > bound:
        # A problem document in place of Ready: the 503 the route declares (NOT_READY).
        return cast(
            "Response[Ready]",
            problems.document(
                503,
                "not-ready",
                "not ready: a view lags the log",
                f"view {worst.view} is {worst.lag} positions behind the head {head} (bound: {bound}, ready_max_lag)",
                retry_after=problems.RETRY_AFTER_S,
                fields={"view": worst.view, "lag": worst.lag, "head": head, "bound": bound},
            ),
        )
    return Response(Ready(status="ready", head=head, max_lag=worst.lag if worst else 0, bound=bound))


ROUTES: list[Any] = [metrics_route, healthz, readyz]
