"""The live stream of the log (rule H5): Server-Sent Events from a position.

    GET /v1/stream?after=POS&run=R&slot=S&type=T      (text/event-stream)

Each event of the log after POS, in log order, once: `id:` is its position, `data:`
its JSON as `epochledger export` writes it (one encoder: the facade's `log_page`). A
client that reconnects sends `Last-Event-ID` (browsers' EventSource do) and resumes
after it; the header wins over `after`. Without either, the stream starts at the head.
Filters (each repeatable, an empty one passes all): `run`, `slot` (the slot's own
events), `type` (event tags). An event that does not decode (rule T4) comes as
`event: undecodable` with its position, so a reader goes past it.

Bounds (rule H8, docs/service.md "The live stream"): at most `max_streams` streams at
once (503 problem with Retry-After past it). Each stream reads the log ahead of its
client into a queue of at most STREAM_QUEUE events; when the queue stays full for
`stream_stall_s` the client is too slow and is dropped, never buffered: the stream ends
with `event: dropped`, whose data names why and the position to resume after
(`resume_after`, the last event handed to the connection). The stream waits for new
events with the facade's wake-ups (`Ledger.heads`, one watcher per server process while
a stream is open, the `Live` below), never holding the Service lock while it waits: it reads only the log,
through the store's per-thread connections. A comment line every `heartbeat_s` keeps
proxies from closing an idle stream.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Annotated, Any

import anyio
import msgspec
from litestar import Request, Response, get
from litestar.datastructures import Cookie
from litestar.enums import MediaType
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import HeaderParameter, Parameter, QueryParameter
from litestar.response.base import ASGIResponse
from litestar.types import Receive, Scope, Send

from epochledger.ledger.errors import LedgerError, ReadOnlyStore
from epochledger.service import problems

if TYPE_CHECKING:
    from litestar.background_tasks import BackgroundTask, BackgroundTasks

    from epochledger.reports import LogEntry, LogPage
    from epochledger.service.app import Service

# A stream holds at most STREAM_QUEUE events and STREAM_QUEUE_BYTES of them for its client
# (one larger event alone may pass); full for stream_stall_s: the client is dropped.
STREAM_QUEUE = 1000
STREAM_QUEUE_BYTES = 1 << 20
PAGE = 200  # events read from the log at a time: at most this many are held beside the queue
POLL_S = 0.02  # SQLite has no subscription: the head is polled this often (PostgreSQL: LISTEN/NOTIFY)
FOLLOW_POLL_S = 0.5  # SQLite: the views are caught up this often (PostgreSQL: woken by NOTIFY)
RETRY_MS = 1000  # the reconnect delay an EventSource is told


class Live:
    """The server process's watcher of the log. Two jobs, each paid only when due:

    - the streams: while one is open, a thread follows the head with the facade's
      wake-ups (`Ledger.heads`) and tells the streams it moved; with none open it sleeps
      on an event the first stream's admission sets, reading nothing;
    - the metrics' ledger-wide counters (rule H7): `count` hands each event appended
      since the last count to `on_events`, once, in log order. The views' follower
      counts after each catch-up that found new events (every FOLLOW_POLL_S on SQLite,
      at each NOTIFY on PostgreSQL), and every scrape counts first, so a scrape's
      counters are exact as of the scrape.

    Why not one thread polling the head every POLL_S for both: on a server taking
    writes and serving no stream it woke 50 times a second, each time taking the
    interpreter lock from the request path for a page of the log, the larger part of
    the tail at 200 requests/s (docs/benchmarks.md, "The service over HTTP").
    Counting starts at the head as the server starts: what was appended before the
    server started is not counted again."""

    def __init__(self, service: Service, on_events: Callable[[list[LogEntry]], None] | None = None):
        self.service = service
        self.config = service.config
        self.on_events = on_events
        self.head = 0
        self.active = 0  # streams open now
        self.dropped: dict[str, int] = {}  # streams ended by the server, by reason
        self._changed = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()
        # Set while a stream is open (or the server stops) / while none is (or it stops):
        # the watcher waits on the first and follows the head until the second.
        self._wanted = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._threads: list[threading.Thread] = []
        self.draining = False  # the server is stopping: streams end (drain)
        self._counted: int | None = None
        self._counting = threading.Lock()  # one count at a time: each event counted once

    # ------------------------------------------------------------ the watcher
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        # Counting starts at the head as the server starts, before it listens: an event
        # appended once it answers is counted, whenever the next count comes.
        try:
            self._counted = await anyio.to_thread.run_sync(self.service.ledger.head)
        except LedgerError:
            self._counted = None  # the store is away: counting starts at the first head seen
        self.head = self._counted or 0
        for target, name in ((self._watch, "epochledger-live"), (self._follow, "epochledger-follow")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        self._wanted.set()
        self._idle.set()
        for thread in self._threads:
            thread.join(timeout=5)

    def _follow(self) -> None:
        """Keep the views caught up (the facade's follow, rule R3), so the metrics read
        from them and /readyz are current on a server that only takes writes, and count
        the events each catch-up found (`count`). A store that went away is waited out
        and followed again."""
        while not self._stop.is_set():
            try:
                self.service.ledger.follow(stop=self._stop, poll=FOLLOW_POLL_S, on_batch=lambda _: self.count())
                return
            except ReadOnlyStore:
                return  # a backup copy: its views are folded in memory when read, never written
            except LedgerError as e:
                import logging

                logging.getLogger("epochledger.follow").warning("follow: %s; trying again in %g s", e, FOLLOW_POLL_S)
                self._stop.wait(FOLLOW_POLL_S)

    def count(self) -> None:
        """Hand every event appended since the last count to `on_events` (the metrics'
        counters), each once, in log order. Any thread may call it; a store that went
        away is left to the next count."""
        if self.on_events is None:
            return
        ledger = self.service.ledger
        with self._counting:
            try:
                head = ledger.head()
                if self._counted is None:
                    self._counted = head  # start at the head
                while self._counted < head and not self._stop.is_set():
                    page = ledger.log_page(self._counted, PAGE)
                    self.on_events(page.entries)
                    if page.upto <= self._counted:
                        break
                    self._counted = page.upto
            except LedgerError:
                return  # the store went away: the next count tries again

    def _watch(self) -> None:
        ledger = self.service.ledger
        while not self._stop.is_set():
            self._wanted.wait()  # a stream is open (or the server stops)
            if self._stop.is_set():
                return
            for head in ledger.heads(stop=self._idle, poll=POLL_S):
                if self._loop is not None:
                    with contextlib.suppress(RuntimeError):  # the loop closed: the server is stopping
                        self._loop.call_soon_threadsafe(self._moved, head)

    def drain(self) -> None:
        """The server is stopping (SIGTERM, serve.py): every stream ends now with its
        final event, so the grace period waits for no stream (rule H8). Safe from a
        signal handler or another thread."""
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        self.draining = True
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _moved(self, head: int) -> None:
        self.head = max(self.head, head)
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait_past(self, position: int, timeout: float) -> bool:
        """Wait until the head is past `position` (True) or `timeout` passed (False)."""
        with anyio.move_on_after(timeout):
            while self.head <= position and not self.draining:
                await self._changed.wait()
            return True
        return self.head > position

    # ------------------------------------------------------------ admission
    # On the event loop alone, so the two events change in the order the streams come and go.
    def admit(self) -> bool:
        if self.active >= self.config.max_streams:
            return False
        self.active += 1
        if self.active == 1:
            self._idle.clear()
            self._wanted.set()
        return True

    def release(self) -> None:
        self.active -= 1
        if self.active == 0 and not self._stop.is_set():
            self._wanted.clear()
            self._idle.set()

    def count_drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1


class _Frame(msgspec.Struct, frozen=True):
    body: bytes
    position: int | None = None  # an event's: what a client that got this frame resumes after


def _event_frame(position: int, data: bytes, event: str | None = None) -> _Frame:
    head = f"id: {position}\n" + (f"event: {event}\n" if event else "")
    return _Frame(head.encode() + b"data: " + data + b"\n\n", position)


def _end_frame(reason: str, detail: str, resume_after: int) -> _Frame:
    data = msgspec.json.encode({"reason": reason, "detail": detail, "resume_after": resume_after})
    return _Frame(b"event: dropped\ndata: " + data + b"\n\n")


_HEARTBEAT = _Frame(b": heartbeat\n\n")
_END = _Frame(b"")


class _Stream:
    """One client's stream: a producer reads the log into a bounded queue, a sender
    writes it out; a queue full for `stall_s` ends the stream (rule H5)."""

    def __init__(
        self, live: Live, start: int, first: LogPage, *, runs: list[str], slots: list[str], types: list[str]
    ) -> None:
        self.live = live
        self.start = start
        self.first: LogPage | None = first
        self.scanned = first.upto
        self.filters: dict[str, Any] = {"runs": runs, "slots": slots, "types": types}
        self.frames: collections.deque[_Frame] = collections.deque()
        self.queued = 0  # bytes in `frames`
        self.room = asyncio.Event()  # set when the sender took a frame
        self.ready = asyncio.Event()  # set when the producer added one
        self.handed = -1  # the last event position handed to the connection
        self.last_put = time.monotonic()

    def _full(self, frame: _Frame) -> bool:
        return len(self.frames) >= STREAM_QUEUE or (
            bool(self.frames) and self.queued + len(frame.body) > STREAM_QUEUE_BYTES
        )

    def _put(self, frame: _Frame) -> None:
        self.frames.append(frame)
        self.queued += len(frame.body)
        self.last_put = time.monotonic()
        self.ready.set()

    def _heartbeat_due(self) -> bool:
        return not self.frames and time.monotonic() - self.last_put >= self.live.config.heartbeat_s

    def _read(self) -> LogPage:
        return self.live.service.ledger.log_page(self.scanned, PAGE, **self.filters)

    async def _produce(self) -> tuple[str, str]:
        """Fill the queue until the client is too slow or the store fails: (reason, detail)."""
        config = self.live.config
        while True:
            if self.live.draining:
                return "server-stopping", "the server is stopping: reconnect (to another server, or to this one later)"
            if self.first is not None:
                page, self.first = self.first, None
            else:
                if self.scanned >= self.live.head and not await self.live.wait_past(self.scanned, config.heartbeat_s):
                    if not self.frames:
                        self._put(_HEARTBEAT)
                    continue
                try:
                    page = await anyio.to_thread.run_sync(self._read)
                except LedgerError as e:
                    return "store-unavailable", str(e)
            for entry in page.entries:
                frame = _event_frame(entry.position, entry.data, None if entry.decoded else "undecodable")
                try:
                    with anyio.fail_after(config.stream_stall_s):
                        while self._full(frame):
                            self.room.clear()
                            await self.room.wait()
                except TimeoutError:
                    return "slow-reader", (
                        f"the client read nothing for {config.stream_stall_s:g} s with {len(self.frames)} events "
                        f"({self.queued} bytes) waiting"
                    )
                self._put(frame)
            self.scanned = page.upto
            if self._heartbeat_due():  # a filter that passed nothing for a while, on a log that moves
                self._put(_HEARTBEAT)

    async def _send(self, send: Send) -> None:
        while True:
            while not self.frames:
                self.ready.clear()
                await self.ready.wait()
            frame = self.frames.popleft()
            self.queued -= len(frame.body)
            self.room.set()
            if frame is _END:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            if frame.position is not None:
                self.handed = frame.position
            await send({"type": "http.response.body", "body": frame.body, "more_body": True})

    async def run(self, send: Send, receive: Receive) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_cancel_on_disconnect, tg.cancel_scope, receive)
            await send({"type": "http.response.body", "body": f"retry: {RETRY_MS}\n\n".encode(), "more_body": True})
            sender = asyncio.ensure_future(self._send(send))
            try:
                reason, detail = await self._produce()
            except BaseException:
                sender.cancel()
                raise
            self.live.count_drop(reason)
            self.frames.clear()  # events not handed over: the client resumes after `handed`
            self.queued = 0
            resume = self.handed if self.handed >= 0 else self.start
            self._put(_end_frame(reason, detail, resume))
            self._put(_END)
            # The final event gets as long again to go out; a client that still reads
            # nothing is cut off (the connection is closed under it).
            done, _ = await asyncio.wait({sender}, timeout=self.live.config.stream_stall_s)
            if not done:
                sender.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sender
            tg.cancel_scope.cancel()


async def _cancel_on_disconnect(scope: anyio.CancelScope, receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return


class _LiveASGI(ASGIResponse):
    __slots__ = ("stream",)
    _should_set_content_length = False

    def __init__(self, stream: _Stream, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.stream = stream

    async def send_body(self, send: Send, receive: Receive) -> None:
        await self.stream.run(send, receive)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.stream.live.release()


class EventStream(Response[bytes]):
    """The response of /v1/stream: text/event-stream, written by `_Stream`."""

    def __init__(self, stream: _Stream) -> None:
        super().__init__(
            b"",
            media_type="text/event-stream",
            # Connection: close: a stream that ends (dropped, or the server stopping)
            # leaves no idle keep-alive connection behind; a client reconnects anew.
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no", "Connection": "close"},
        )
        self.stream = stream

    def to_asgi_response(
        self,
        app: Any,
        request: Request[Any, Any, Any],
        *,
        background: BackgroundTask | BackgroundTasks | None = None,
        cookies: Iterable[Cookie] | None = None,
        headers: dict[str, str] | None = None,
        is_head_response: bool = False,
        media_type: MediaType | str | None = None,
        status_code: int | None = None,
        **_: Any,
    ) -> ASGIResponse:
        return _LiveASGI(
            self.stream,
            background=self.background or background,
            cookies=list(self.cookies) + list(cookies or ()),
            headers={**(headers or {}), **self.headers},
            is_head_response=is_head_response,
            media_type="text/event-stream",
            status_code=200,
        )


@get(
    "/v1/stream",
    opt={"op": "stream"},
    media_type="text/event-stream",
    summary="The log as a live stream (Server-Sent Events, rule H5)",
    description="Each event after `after` (or after `Last-Event-ID`, which wins), in log order, once; `id:` is "
    "its position, `data:` its JSON as `epochledger export` writes it. Without either, from the head. A client "
    "too slow to read is dropped with a final `event: dropped` naming the position to resume after. At most "
    "max_streams at once: 503 with Retry-After past it.",
    responses={
        503: ResponseSpec(
            problems.Problem,
            generate_examples=False,
            description="This server serves max_streams streams already (too-many-streams), or the store does not "
            "answer (store-unavailable); with Retry-After",
            media_type=problems.MEDIA_TYPE,
        )
    },
)
async def stream(
    request: Request[Any, Any, Any],
    after: Annotated[int | None, Parameter(ge=0, description="start after this log position")] = None,
    last_event_id: Annotated[
        int | None, HeaderParameter(name="Last-Event-ID", ge=0, description="resume after this position (wins)")
    ] = None,
    run: Annotated[list[str] | None, Parameter(description="only these runs' events")] = None,
    slot: Annotated[list[str] | None, Parameter(description="only these process slots' own events")] = None,
    types: Annotated[list[str] | None, QueryParameter(name="type", description="only events of these types")] = None,
) -> Response[Any]:
    live: Live = request.app.state["live"]
    start = last_event_id if last_event_id is not None else after  # an EventSource reconnecting sends both
    filters = {"runs": run or [], "slots": slot or [], "types": types or []}
    ledger = live.service.ledger
    # The first page is read before the response starts, so a bad filter, a bad
    # position or a store that is down is a problem document (422, 503), not a stream.
    if start is None:
        start = await anyio.to_thread.run_sync(ledger.head)
    first = await anyio.to_thread.run_sync(lambda: ledger.log_page(start, PAGE, **filters))
    if not live.admit():
        return problems.document(  # the 503 the route declares
            503,
            "too-many-streams",
            "too many live streams",
            f"this server already serves its {live.config.max_streams} live streams (max_streams); try again later",
            retry_after=problems.RETRY_AFTER_S,
        )
    return EventStream(_Stream(live, start, first, **filters))


ROUTES: list[Any] = [stream]
