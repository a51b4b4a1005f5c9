"""The service's settings and their documented defaults (rule H8, docs/service.md,
"Bounds and shutdown": a test keeps that table equal to these)."""

from __future__ import annotations

import msgspec


class ServiceConfig(msgspec.Struct, frozen=True, kw_only=True):
    store: str | None = None  # the ledger's URL (ledger/store/url.py); None: $EPOCHLEDGER_STORE, then ./epochledger.db
    host: str = "127.0.0.1"
    port: int = 8750
    max_body_bytes: int = 4 * 1024 * 1024  # a request body larger than this is refused (413)
    max_batch: int = 10_000  # commands in one group commit (/v1/batch); more: 422
    request_timeout_s: float = 30.0  # a request waiting this long for the ledger is answered 503
    max_streams: int = 64  # concurrent live streams (/v1/stream); more: 503 with Retry-After
    stream_stall_s: float = 10.0  # a stream whose queue stays full this long drops its slow client (rule H5)
    heartbeat_s: float = 15.0  # an idle stream sends a comment this often, so proxies keep it open
    ready_max_lag: int = 10_000  # /readyz: 503 while a view lags the log's head by more positions (rule H7)
    idle_timeout_s: float = 5.0  # keep-alive connections idle this long are closed
    grace_s: float = 10.0  # SIGTERM: in-flight requests have this long to finish
    max_connections: int = 1024  # open connections; more are refused by the server (503)
