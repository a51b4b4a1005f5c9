"""The ASGI application: Litestar routes over the process's one `Ledger` (rule H1).

Litestar was chosen by reading its source (docs/architecture.md, "The service"): it
decodes and validates request bodies with msgspec and encodes msgspec Structs natively,
and builds its OpenAPI 3.1 document from the same Structs, so the event catalogue's
types are the service's schema with no second model layer.

One `Ledger` per server process, used by one thread at a time (`Service.use`): a
Ledger's cache and views are not made for threads, and its store serialises the
process's writers anyway (ledger/store/sqlite.py). The writes that are one group commit
(a run's write, a boot, a slot's stop or exit, /v1/batch) and the token checks do not
each take that turn from a thread of their own: the event loop hands them to the
process's writer thread (`Service.write`, `Service.token_registry`), which takes the
ledger once for everything that arrived meanwhile: one read of the token registry for
every waiting check, then one transaction for every waiting write, each request's
commands decided in arrival order against the batch's own view and a refused request's
dropped alone (`Batch.mark`, `Batch.restore`). Several server processes share one
ledger through its store, PostgreSQL for scale-out (rule H6).
"""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

from litestar import Litestar, Router
from litestar.datastructures import State
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin

from epochledger.ledger.errors import CommitUnknown, ConflictError, LedgerError, LockTimeout, StaleEpoch, StoreError
from epochledger.service.config import ServiceConfig

if TYPE_CHECKING:
    from litestar import Response
    from litestar.handlers import HTTPRouteHandler
    from litestar.types import Method

    from epochledger.app import Batch, Ledger
    from epochledger.ledger.tokens import TokenRegistry


class _Job:
    """One request waiting for the writer thread: a write (`work`) or, with `work`
    None, a token check's registry read. `claimed` once the writer took it (it is
    then carried out whatever the waiter does); `cancelled` by a waiter whose request
    timeout passed first (it is then never begun)."""

    __slots__ = ("work", "attempts", "loop", "future", "claimed", "cancelled")

    def __init__(self, work: Callable[[Batch], Response[Any]] | None, attempts: int) -> None:
        self.work = work
        self.attempts = attempts
        self.loop = asyncio.get_running_loop()
        self.future: asyncio.Future[Any] = self.loop.create_future()
        self.claimed = False
        self.cancelled = False


class Service:
    """The server process's ledger, opened once (never created: `epochledger init`
    makes a store) and used by one thread at a time: a read's (`use`) or the writer
    thread's, whose turn serves every write and token check waiting (`write`)."""

    def __init__(self, config: ServiceConfig) -> None:
        from epochledger.app import open_ledger

        self.config = config
        self.ledger: Ledger = open_ledger(config.store, create=False)
        self.lock = threading.Lock()
        self._queue: collections.deque[_Job] = collections.deque()
        self._wake = threading.Condition()  # guards _queue, each job's claimed/cancelled, _writer, _closing
        self._writer: threading.Thread | None = None
        self._closing = False
        self.on_group: Callable[[int], None] | None = None  # told each group commit's size (the metrics)
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

    # ------------------------------------------------------- the writer thread
    async def write(self, work: Callable[[Batch], Response[Any]], *, attempts: int = 1) -> Response[Any]:
        """`work`'s answer, its commands committed in the writer thread's next group
        commit with whatever other writes are waiting (or its typed error: its own,
        never a neighbour's). `attempts`: a lost race (ConflictError) is decided again
        that many times in all (a boot, a write with an Idempotency-Key). A write still
        waiting for the ledger after the request timeout (rule H8) is refused with
        LockTimeout, never begun."""
        answer: Response[Any] = await self._wait(_Job(work, attempts))
        return answer

    async def token_registry(self) -> TokenRegistry:
        """The token registry as of a read begun after this call (rule H4: a token
        revoked before the request is refused), shared by every check waiting with it."""
        registry: TokenRegistry = await self._wait(_Job(None, 1))
        return registry

    async def _wait(self, job: _Job) -> Any:
        timeout = self.config.request_timeout_s
        with self._wake:
            if self._closing:
                raise StoreError("the server is stopping: its ledger is closing; nothing was begun, retry on another")
            if self._writer is None:
                self._writer = threading.Thread(target=self._run, name="epochledger-writer", daemon=True)
                self._writer.start()
            self._queue.append(job)
            self._wake.notify()
        try:
            return await asyncio.wait_for(asyncio.shield(job.future), timeout)
        except TimeoutError:
            with self._wake:
                if not job.claimed:
                    job.cancelled = True
                    raise LockTimeout("request", "the server's ledger (its requests take turns)", timeout) from None
            return await asyncio.shield(job.future)  # begun: its outcome, whenever it comes

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._queue and not self._closing:
                    self._wake.wait()
                if not self._queue:
                    return
            with self.lock:  # the ledger, in turn with the other routes' requests
                with self._wake:
                    jobs = [job for job in self._queue if not job.cancelled]
                    self._queue.clear()
                    for job in jobs:
                        job.claimed = True
                try:
                    outcomes = self._cycle(jobs)
                except BaseException as e:  # noqa: BLE001 - never a writer thread gone with requests waiting on it
                    outcomes = [(job, e) for job in jobs]
            by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Job, Any]]] = {}
            for job, outcome in outcomes:
                by_loop.setdefault(job.loop, []).append((job, outcome))
            for loop, settled in by_loop.items():
                with suppress(RuntimeError):  # the loop closed: nobody waits any more
                    loop.call_soon_threadsafe(_settle, settled)

    def _cycle(self, jobs: list[_Job]) -> list[tuple[_Job, Any]]:
        """One turn of the ledger: one registry read for every waiting token check,
        then one group commit for every waiting write."""
        outcomes: list[tuple[_Job, Any]] = []
        checks = [job for job in jobs if job.work is None]
        if checks:
            registry: Any
            try:
                registry = self.last_registry = self.ledger.token_registry()
            except Exception as e:  # noqa: BLE001 - the checks' own error (StoreError: auth.py decides)
                registry = e
            outcomes.extend((job, registry) for job in checks)
        writes = [job for job in jobs if job.work is not None]
        if writes:
            outcomes.extend(self._group(writes))
        return outcomes

    def _group(self, jobs: list[_Job]) -> list[tuple[_Job, Any]]:
        """The waiting writes in one transaction, in arrival order, each decided against
        the batch's view (the writes before it included). A refused write is dropped
        alone (`Batch.restore`) with its own error, a stale report's evidence kept after
        the commit (rule F1) as a write alone keeps it. If the commit itself fails, a
        write alone gets its error as it would have; several are each made again alone,
        so a lost race or a refusal is the write's own (rule H6). A commit whose outcome
        is unknown is unknown to each write in it, naming only that write's streams."""
        if self.on_group is not None:
            self.on_group(len(jobs))
        ledger = self.ledger
        b = ledger.batch()
        outcomes: list[tuple[_Job, Any]] = []
        done: list[tuple[_Job, Any, int, int]] = []  # a write, its answer and its appends' range in the batch
        fenced: list[tuple[_Job, StaleEpoch]] = []
        for job in jobs:
            assert job.work is not None
            mark = b.mark()
            try:
                answer = job.work(b)
            except StaleEpoch as e:
                b.restore(mark)
                fenced.append((job, e))
            except Exception as e:  # noqa: BLE001 - the write's own typed error, for its own request
                b.restore(mark)
                outcomes.append((job, e))
            else:
                done.append((job, answer, mark[0], b.pending))
        try:
            if b.pending:
                b.commit()
        except CommitUnknown as e:
            outcomes.extend((job, _unknown(e, b, start, end, len(done))) for job, _, start, end in done)
        except LedgerError as e:
            if len(done) == 1:
                job = done[0][0]
                again = isinstance(e, ConflictError) and job.attempts > 1
                outcomes.append((job, self._alone(job, job.attempts - 1) if again else e))
            else:
                outcomes.extend((job, self._alone(job, job.attempts)) for job, _, _, _ in done)
        else:
            outcomes.extend((job, answer) for job, answer, _, _ in done)
        for job, refusal in fenced:
            try:
                ledger.keep_fenced(refusal)
            except Exception as e:  # noqa: BLE001 - as Batch.__exit__: the evidence's failure is the answer
                outcomes.append((job, e))
            else:
                outcomes.append((job, refusal))
        return outcomes

    def _alone(self, job: _Job, attempts: int) -> Any:
        """`job` in a transaction of its own, decided again on a lost race `attempts`
        times in all: the write's answer or its error."""
        assert job.work is not None
        for attempt in range(attempts):
            try:
                with self.ledger.batch() as b:
                    answer = job.work(b)
                return answer
            except ConflictError as e:
                if attempt == attempts - 1:
                    return e
            except Exception as e:  # noqa: BLE001 - the write's own typed error
                return e
        raise AssertionError  # pragma: no cover - attempts >= 1

    def close(self) -> None:
        """Stop the writer thread once the writes it holds are done, then the ledger."""
        with self._wake:
            self._closing = True
            self._wake.notify()
            writer = self._writer
        if writer is not None:
            writer.join()
        with self.lock:
            self.ledger.close()


def _settle(settled: list[tuple[_Job, Any]]) -> None:
    """On the event loop: each waiting request's outcome, an answer or its error."""
    for job, outcome in settled:
        if job.future.done():
            continue
        if isinstance(outcome, BaseException):
            job.future.set_exception(outcome)
        else:
            job.future.set_result(outcome)


def _unknown(e: CommitUnknown, b: Batch, start: int, end: int, writes: int) -> CommitUnknown:
    """The unknown outcome of a group commit as one write in it sees it: the versions
    its own appends (the batch's `start` to `end`) would have written, no other's."""
    if writes == 1:
        return e
    appends = tuple(b.appended_since(start)[: end - start])
    versions: dict[str, tuple[int, int]] = {}
    for a in appends:
        first, _ = versions.get(a.stream, (a.version, a.version))
        versions[a.stream] = (first, a.version)
    mine = CommitUnknown(versions, e.error, appends)
    mine.__cause__ = e.__cause__
    return mine


def create_app(config: ServiceConfig, *, service: Service | None = None) -> Litestar:
    """The application for `config`; `service`: an opened one (tests), else opened here."""
    from epochledger import console
    from epochledger.service import auth, metrics, problems, reads, stream, writes

    svc = service if service is not None else Service(config)
    watch = metrics.Metrics(svc)
    svc.on_group = watch.group_size.observe
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
