"""The state cache of the write side (rule W1): the states of recently written
streams, kept between writes by a Ledger (epochledger/app.py) so a write decides
against a cached state plus the events after its version, never a re-fold of the
whole stream. The write path that fills and reads it is epochledger/writes.py.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from epochledger.ledger.events import Recorded
from epochledger.ledger.run import RunState

if TYPE_CHECKING:
    from epochledger.ledger.store import Poison
    from epochledger.ledger.streams import StreamState

CACHE_STREAMS = 10_000  # streams whose state a Ledger keeps between writes (rule W1)


class StateCache:
    """The states of recently written streams, each with its stream version: a write
    decides against the cached state plus the events after its version (one indexed
    read), never a re-fold of the whole stream (rule W1; Equinox's caching strategy).

    Only states that are true of the log go in: a state as read and folded from the
    store, or a batch's state after its commit landed. A batch's own uncommitted state
    never does, so a rolled-back batch cannot poison it. A stale entry (another writer
    moved the stream) costs the read of what it missed; a wrong one (a version the
    stream does not hold at that event) is found by that same read and folded again
    from zero, and the store's own check (Store.append) refuses any version that is
    taken or beyond the stream's end, so a cache can cost a re-read, never a wrong
    write. Bounded (least recently used out first); safe across threads.

    Fresh entries: where the store has a log token (Store.log_token: SQLite), the cache
    also knows which of its states were their stream's latest when the log's token was
    `_fresh_at` (read after that token was taken, or written by a commit that landed
    at it). While the store's token is still that one, nothing was appended since, so
    a write decides against such a state without reading its stream at all. Marked by
    identity: a state put any other way (`put`, a forged entry) is read as before."""

    def __init__(self, limit: int = CACHE_STREAMS):
        self.limit = limit
        self._states: OrderedDict[str, StreamState] = OrderedDict()
        self._lock = threading.Lock()
        self._fresh: dict[str, StreamState] = {}  # stream -> the state (this very object) latest at _fresh_at
        self._fresh_at: Any = None

    def fresh(self, streams: Sequence[str], token: Any) -> dict[str, StreamState | None]:
        """The cached states of `streams` that are their stream's latest now, the log's
        token being `token` (taken on this thread just before). A token other than the
        one the marks were made at forgets every mark: the log may have moved."""
        if token is None:
            return {}
        with self._lock:
            if token != self._fresh_at:
                self._fresh.clear()
                self._fresh_at = token
                return {}
            out: dict[str, StreamState | None] = {}
            states, fresh = self._states, self._fresh
            for stream in streams:
                state = fresh.get(stream)
                if state is not None and states.get(stream) is state:
                    states.move_to_end(stream)
                    out[stream] = state
            return out

    def get(self, stream: str) -> StreamState | None:
        with self._lock:
            state = self._states.get(stream)
            if state is not None:
                self._states.move_to_end(stream)
            return state

    def holds_any(self, streams: Sequence[str]) -> bool:
        """Is any of these streams cached?"""
        held = self._states
        return any(s in held for s in streams)  # a read of a dict: no lock needed for a hint

    def get_many(self, streams: Sequence[str]) -> dict[str, StreamState | None]:
        """`get` for each stream (None if not cached), under one taking of the lock."""
        with self._lock:
            held = self._states
            out = {s: held.get(s) for s in streams}
            for s, state in out.items():
                if state is not None:
                    held.move_to_end(s)
            return out

    def put(self, stream: str, state: StreamState | None) -> None:
        """One stream's state, not marked fresh (put_many)."""
        if state is not None:
            self.put_many([(stream, state)])

    def committed(self, states: Sequence[tuple[str, StreamState | None]], after_append: Callable[[Any], Any]) -> None:
        """`put_many` of a landed batch's states. `after_append` (the store's
        token_after_append) gives the log's token just after the batch from the token
        the marks were made at: then the marks carry over to it (the log at it is that
        log plus this batch) and the batch's states are marked too; None forgets them."""
        if self.limit <= 0:
            return
        with self._lock:
            after = after_append(self._fresh_at)
            if after is None:
                self._fresh.clear()
            self._fresh_at = after
            self._put(states, mark=after is not None)

    def put_many(self, states: Sequence[tuple[str, StreamState | None]], fresh_at: Any = None) -> None:
        """`put` for each (stream, state), under one taking of the lock. `fresh_at`: the
        log token taken before these states were read (`fresh`), to mark them fresh."""
        if self.limit <= 0:
            return
        with self._lock:
            self._put(states, mark=fresh_at is not None and fresh_at == self._fresh_at)

    def _put(self, states: Sequence[tuple[str, StreamState | None]], mark: bool) -> None:
        held, fresh = self._states, self._fresh
        for stream, state in states:
            if state is None:  # moved, state unknown here: whatever is cached is read again
                fresh.pop(stream, None)
                continue
            old = held.get(stream)
            if old is not None:
                if old.version > state.version:
                    continue  # both are true of the log; keep the later one
                held.move_to_end(stream)
            held[stream] = state
            if mark:
                fresh[stream] = state
        while len(held) > self.limit:
            fresh.pop(held.popitem(last=False)[0], None)

    def drop(self, stream: str) -> None:
        with self._lock:
            self._states.pop(stream, None)
            self._fresh.pop(stream, None)

    def clear(self) -> None:
        with self._lock:
            self._states.clear()
            self._fresh.clear()

    def __len__(self) -> int:
        return len(self._states)


def _holds(state: StreamState, rec: Recorded | Poison) -> bool:
    """Is `rec` (the stored event at the state's version) the event the state last
    folded? A run's state keeps its last event; a slot's, only the version. A row that
    no longer decodes was skipped by the fold (T4): nothing to compare."""
    if rec.version != state.version:
        return False
    if type(rec) is Recorded and isinstance(state, RunState) and state.last is not None:
        return bool(state.last == rec.event)
    return True
