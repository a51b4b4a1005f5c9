"""The ASGI application: Litestar routes over the process's one `Ledger` (rule H1).

Litestar was chosen by reading its source (docs/architecture.md, "The service"): it
decodes and validates request bodies with msgspec and encodes msgspec Structs natively,
and builds its OpenAPI 3.1 document from the same Structs, so the event catalogue's
types are the service's schema with no second model layer.

One `Ledger` per server process, shared by its request threads in turn (`Service.use`):
a Ledger's cache and views are not made for threads, and its store serialises the
process's writers anyway (ledger/store/sqlite.py). Several server processes share one
ledger through its store, PostgreSQL for scale-out (rule H6).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from litestar import Litestar, Router
from litestar.datastructures import State
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin

from epochledger.ledger.errors import LockTimeout
from epochledger.service.config import ServiceConfig

if TYPE_CHECKING:
    from litestar.handlers import HTTPRouteHandler
    from litestar.types import Method

    from epochledger.app import Ledger
    from epochledger.ledger.tokens import TokenRegistry


class Service:
    """The server process's ledger, opened once (never created: `epochledger init`
    makes a store) and used by one request at a time."""

    def __init__(self, config: ServiceConfig) -> None:
        from epochledger.app import open_ledger

        self.config = config
        self.ledger: Ledger = open_ledger(config.store, create=False)
        self.lock = threading.Lock()
        # The last token registry read (auth.py, rule H4), read first at the open: a
        # route the guard checks against it while the store is away (access.WHEN_STORE_AWAY,
        # the metrics, rule H7) has one even when no request read the store before.
        try:
            self.last_registry: TokenRegistry = self.ledger.token_registry()
        except BaseException:
            self.ledger.close()
            raise

    @property
    def tokens_issued(self) -> int:
        """Tokens ever issued on this ledger (revoked ones count), as of the last read."""
        return len(self.last_registry.tokens)

    @contextmanager
    def use(self) -> Iterator[Ledger]:
        """The ledger, once the requests before this one are done with it. A request
        that waits longer than the request timeout (rule H8) is refused with LockTimeout
        (503 with Retry-After): it began nothing, so nothing of it was appended."""
        timeout = self.config.request_timeout_s
        if not self.lock.acquire(timeout=timeout):
            raise LockTimeout("request", "the server's ledger (its requests take turns)", timeout)
        try:
            yield self.ledger
        finally:
            self.lock.release()

    def close(self) -> None:
        with self.lock:
            self.ledger.close()


def create_app(config: ServiceConfig, *, service: Service | None = None) -> Litestar:
    """The application for `config`; `service`: an opened one (tests), else opened here."""
    from epochledger import console
    from epochledger.service import auth, metrics, problems, reads, stream, writes

    svc = service if service is not None else Service(config)
    watch = metrics.Metrics(svc)
    live = stream.Live(svc, on_events=watch.on_events)
    watch.live = live
    handlers = [*writes.ROUTES, *reads.ROUTES, *stream.ROUTES, *metrics.ROUTES, *auth.ROUTES]
    problems.document_routes(handlers)
    handlers += console.ROUTES
    return Litestar(
        route_handlers=handlers,
        guards=[auth.guard],
        exception_handlers=problems.HANDLERS,
        state=State({"service": svc, "live": live, "metrics": watch}),
        middleware=[metrics.middleware],
        after_exception=[metrics.after_exception],
        on_startup=[live.start],
        request_max_body_size=config.max_body_bytes,
        on_shutdown=[live.stop, svc.close],
        openapi_config=OpenAPIConfig(
            title="epochledger",
            version=_version(),
            description="The run ledger over HTTP (docs/service.md). Every write goes through the same rules as "
            "the Python API; errors are RFC 9457 problem documents.",
            path="/openapi",
            operation_id_creator=operation_id,
            # The document's own routes declare their operation like every route (rule H4):
            # public, as the schema discloses nothing of the ledger. The document alone,
            # as JSON: no rendered page, as those load their scripts from other hosts.
            openapi_router=Router("/openapi", route_handlers=[], opt={"op": "openapi"}, include_in_schema=False),
            render_plugins=[JsonRenderPlugin()],
        ),
        debug=False,
    )


def operation_id(handler: HTTPRouteHandler, method: Method, components: list[Any]) -> str:
    """A route's operationId: its operation (`opt["op"]`, the facade method it calls, which
    the role table keys on, rule H4), one name per route; the clients are generated with it
    (clients/typescript)."""
    op = handler.opt.get("op")
    if isinstance(op, str) and handler.handler_name and not handler.handler_name.startswith("_"):
        return op
    from litestar._openapi.utils import default_operation_id_creator  # Litestar's own routes

    return default_operation_id_creator(handler, method, components)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("epochledger")
    except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
        return "0"
