"""The projection engine: materializes views into the ledger's own database, exactly
once, rebuildable, and checkable against a replay (rules R2, R3, T4).

A view is a ViewSpec, exported by its module (projections/view.py; the registered
ones are in projections/registry.py). A view whose state is not a dict (a Struct or
dataclass of several parts) is stored whole, as one row with key "*": registering it is
one line, but every batch that changes it rewrites it whole, so this suits small views
only; a large one should be a dict keyed by stream or entity, with `keys(rec)`, so the
engine keeps a bounded cache of entries and loads the rest from the table on demand.

Exactly once: each batch of events is applied in memory, then its changed rows and the
new tracking position are written in one transaction that first moves the tracking
position with a compare-and-set (projections/tables.py, `commit_view`). A crash loses the uncommitted
batch, whose events are read again; a racing runner's batch is refused, and the loser
reloads from the table.

Poison (T4): an event that does not decode, or whose evolve raises, is tried
MAX_ATTEMPTS times, then parked in `epochledger_parked` with its position, stream,
tag, error and a ledger time (not the wall clock: the engine stays deterministic): an
event whose evolve raises, its own; a row that does not decode, whose own time cannot be
read, the last event's before it. The tracking position moves past it. `rebuild` starts
from zero and so retries every parked event; the swap replaces the view's parked list.

Rebuild: from position zero into `view_<NAME>__rebuild` (tracked as `<NAME>__rebuild`),
resumable if killed, then swapped in by rename in one transaction (tables.swap_view).
Several views are rebuilt or caught up in one pass (`run_together`): each batch is read
and decoded once and handed to each view's own runner (only the events of its TYPES).

Live catch-up: `catch_up` on demand (show/runs do it before reading), `follow` keeps
going: polling on SQLite (the library has no SQLite subscription), LISTEN/NOTIFY on
PostgreSQL as the wake-up (Store.wake_ups), reconnecting when the server goes away. All SQL and
every eventsourcing type stay in the store adapter. See docs/projections.md.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import islice
from operator import attrgetter, itemgetter
from typing import Any, TypeGuard, cast

import msgspec

from epochledger.ledger import process as process_mod
from epochledger.ledger.errors import ConflictError, InvalidInput, StoreError
from epochledger.ledger.events import Recorded
from epochledger.ledger.store import READ_BATCH, Poison, Store
from epochledger.projections import tables
from epochledger.projections.registry import VIEWS
from epochledger.projections.view import View, ViewSpec, spec

MAX_ATTEMPTS = 3
CACHE_LIMIT = 100_000  # decoded entries a keyed view keeps between batches
SHADOW = "__rebuild"
# Events per batch of a rebuild: a commit per view per batch, so a rebuild of every view
# in one pass commits a fifth as often as at READ_BATCH (~10% faster, docs/benchmarks.md);
# a batch of decoded records costs ~30 MB at this size. Catch-ups keep READ_BATCH.
REBUILD_BATCH = 50_000

Progress = Callable[[str, int, int], None]  # (view, position reached, head)

# A slot's state (ledger/process.py) is a persistent value, stored as its ProcessRow.
_encoder = msgspec.json.Encoder(order="deterministic", enc_hook=process_mod.enc_hook)


class Stats(msgspec.Struct, kw_only=True):
    """What a run of the engine did. No timings: nothing under projections/ reads a
    clock (rules R1, O4); the CLI and the benchmarks time it from outside."""

    view: str
    events: int = 0
    parked: int = 0
    position: int = 0
    rebuilt: bool = False


WHOLE = "*"  # the key of the one row of a view stored whole


def keys_of(module: View) -> Callable[[Recorded], tuple[str, ...]] | None:
    """The view's `keys(rec)`, if it has one (projections/view.py)."""
    return spec(module).keys


def types_of(module: View) -> frozenset[type] | None:
    """The view's `TYPES` (the event classes its evolve acts on), None if it has none:
    then every event goes through its evolve (projections/view.py)."""
    return spec(module).TYPES


def indexes_of(module: View) -> dict[str, tuple[str, ...]]:
    """The view's `INDEXES` (name -> columns), none if it has none (projections/view.py)."""
    return dict(spec(module).INDEXES)


def table_of(view_key: str) -> str:
    return "view_" + view_key


def is_whole(module: View) -> bool:
    return spec(module).whole


def column_spec(module: View) -> tuple[tuple[str, str], ...]:
    return spec(module).COLUMNS


def state_type(module: View) -> Any:
    return spec(module).state_type


def entries(module: View, view: Any) -> dict[str, Any]:
    """The view as rows-to-be: its own dict, or {"*": view} for a view stored whole."""
    return {WHOLE: view} if is_whole(module) else view


def row_of(module: View, key: str, value: Any) -> tuple[Any, ...]:
    columns = spec(module).columns
    return (key, *(columns(key, value) if columns is not None else ()), _encoder.encode(value))


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic GC off for the block (as it was after). Applying a batch, or reading a
    fleet's rows, makes hundreds of thousands of acyclic msgspec structs and containers:
    the GC would walk them again and again (~1.3x on a rebuild, ~1.5x on `runs
    --status S` over 143k matching runs; docs/benchmarks.md)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


class ShadowGone(Exception):
    """A rebuild's shadow table was swapped in (or reset) under it by another runner."""


class Runner:
    """Applies the log to one view's table, batch by batch, from its tracking position."""

    def __init__(self, store: Store, module: View, *, shadow: bool = False, cache_limit: int = CACHE_LIMIT):
        module = spec(module)
        self.store = store
        self.module: ViewSpec[Any] = module
        self.key = module.NAME + (SHADOW if shadow else "")
        self.table = table_of(self.key)
        self.columns = [c for c, _ in column_spec(module)]
        self.keys_of = keys_of(module)
        self.keyed = self.keys_of is not None
        self.types = types_of(module)
        key_field = module.KEY  # keys(rec) == (rec.event.<KEY>,) for its TYPES
        self.key_of = attrgetter("event." + key_field) if key_field and self.types is not None else None
        self.whole = is_whole(module)
        self.cache_limit = cache_limit
        self.counts = None if shadow else module.COUNTS  # a shadow's are counted at its swap
        self._decode = msgspec.json.Decoder(state_type(module), dec_hook=process_mod.dec_hook).decode
        self.view: dict[str, Any] = {}
        self.flushed: dict[str, bytes] = {}
        self.position = 0
        self._reread_keys: set[str] = set()

    def load(self) -> None:
        """(Re)read the tracking position, and for a whole view its rows."""
        tracking = tables.tracking(self.store, self.key)
        if tracking is None:
            raise ShadowGone(self.key)
        self.position = tracking[1]
        self.view = self.module.initial()
        self.flushed = {}
        # The last record seen was folded from another position (a refused batch): kept,
        # a poison applied again from here would carry the time of an event after it (T4).
        self._last = None
        # From an empty table (a rebuild from zero) a key that is neither cached nor
        # evicted is known to be new: no need to look it up. Otherwise, look up.
        self.evicted: set[str] | None = set() if self.keyed and self.position == 0 else None
        if not self.keyed:
            _, rows = tables.view_rows(self.store, self.key, self.table, [])
            for k, state in rows:
                if self.whole:
                    self.view = self._decode(state)
                else:
                    self.view[k] = self._decode(state)
                self.flushed[k] = state

    def run(
        self, upto: int | None = None, progress: Progress | None = None, head: int = 0, batch: int = READ_BATCH
    ) -> Stats:
        stats, gone = run_together([self], upto=upto, progress=progress, head=head, batch=batch)
        if gone:
            raise ShadowGone(self.key)
        return stats[0]

    def apply(
        self, chunk: Sequence[Recorded | Poison], stats: Stats, full: Sequence[Recorded | Poison] | None = None
    ) -> None:
        """Fold `chunk` into the view and commit it with the new tracking position.
        `full`: the batch of the log `chunk` was taken from when it holds only this
        view's TYPES (run_together); the tracking position moves to its end, and an
        undecodable row's ledger time is still the last event's before it in the log."""
        module, view = self.module, self.view
        evolve = module.evolve
        parked: list[tuple[Any, ...]] = []
        dirty: set[str] = set()
        # Poison in the batch (rare): each record is looked at in turn. Otherwise the
        # per-event work runs in C where it can (map, islice): a rebuild's hot path.
        clean = Poison not in set(map(type, chunk))
        if self.keyed:
            keys = self.keys_of
            assert keys is not None
            if clean and self.key_of is not None:
                dirty = set(map(self.key_of, chunk))
            else:
                dirty = {k for rec in chunk if type(rec) is Recorded for k in keys(rec)}
            if self.evicted is None:
                missing = [k for k in dirty if k not in view]
            else:  # the table holds exactly the cached and the evicted entries
                missing = [k for k in dirty if k not in view and k in self.evicted]
            if missing:
                for k, state in tables.load_states(self.store, self.table, missing).items():
                    view[k] = self._decode(state)
        # The hot loop of every rebuild and catch-up: the last record seen is kept in a
        # local and stored on self only where a parked row needs its ledger time.
        last = self._last
        if clean:
            records = cast(Sequence[Recorded], chunk)  # clean: every record decoded
            view = self._fold_clean(view, records, parked)
            if records:
                last = records[-1]
        for rec in () if clean else chunk:
            if type(rec) is not Recorded:
                assert isinstance(rec, Poison)
                rec = self._reread(rec)
                if type(rec) is not Recorded:
                    assert isinstance(rec, Poison)
                    self._last = _latest(last, full, rec.position)
                    parked.append(
                        (self.key, rec.position, rec.stream, rec.tag, rec.error, MAX_ATTEMPTS, self._ledger_time())
                    )
                    continue
            last = rec
            try:
                view = evolve(view, rec)
            except Exception as first:  # noqa: BLE001 - a bug in a view must not wedge it (T4)
                view, error = _retry(evolve, view, rec, first)
                if error is not None:
                    self._last = rec
                    parked.append(
                        (self.key, rec.position, rec.stream, _tag(rec), error, MAX_ATTEMPTS, self._ledger_time())
                    )
        self._last = _latest(last, full)
        self.view = view
        upserts: list[tuple[Any, ...]] = []
        deletes: list[str] = []
        if self.keyed:
            if self._reread_keys:
                dirty |= self._reread_keys
                self._reread_keys = set()
            encode, columns = _encoder.encode, module.columns
            # In key order: the table's B-tree (and, at a rebuild's swap, its index) is
            # then filled left to right, page after page, not split at random places
            # (docs/benchmarks.md, "Rebuild", rows written in random order).
            for k in sorted(dirty):
                v = view.get(k)
                if v is None:
                    deletes.append(k)
                elif columns is not None:  # row_of, inlined: once per changed entry of a batch
                    upserts.append((k, *columns(k, v), encode(v)))
                else:
                    upserts.append((k, encode(v)))
        else:
            current = entries(module, view)
            for k, v in current.items():
                row = row_of(module, k, v)
                if self.flushed.get(k) != row[-1]:
                    upserts.append(row)
                    self.flushed[k] = row[-1]
            for k in [k for k in self.flushed if k not in current]:
                deletes.append(k)
                del self.flushed[k]
        new_position = (full or chunk)[-1].position
        tables.commit_view(
            self.store,
            self.key,
            self.position,
            new_position,
            self.table,
            self.columns,
            upserts,
            deletes,
            parked,
            counts=self.counts,
        )
        self.position = new_position
        stats.events += len(full or chunk)
        stats.parked += len(parked)
        if self.keyed and len(view) > self.cache_limit:
            # Every entry is on disk now; forget the oldest half (insertion order).
            for k in list(islice(view, len(view) - self.cache_limit // 2)):
                del view[k]
                if self.evicted is not None:
                    self.evicted.add(k)

    def _fold_clean(self, view: Any, chunk: Sequence[Recorded], parked: list[tuple[Any, ...]]) -> Any:
        """`chunk` (every record decoded) folded with the view's evolve, in order, as the
        loop in `apply` does; the loop itself is islice's, so an event costs its evolve
        call and little else. An evolve that raises is retried and parked as there,
        and the fold goes on after it."""
        evolve = self.module.evolve
        start = 0
        rec: Recorded | None = None
        while True:
            try:
                for rec in islice(chunk, start, None):
                    view = evolve(view, rec)
                return view
            except Exception as first:  # noqa: BLE001 - a bug in a view must not wedge it (T4)
                assert type(rec) is Recorded
                view, error = _retry(evolve, view, rec, first)
                if error is not None:
                    self._last = rec
                    parked.append(
                        (self.key, rec.position, rec.stream, _tag(rec), error, MAX_ATTEMPTS, self._ledger_time())
                    )
                start = _index(chunk, rec, start) + 1

    _last: Recorded | None = None

    def _reread(self, rec: Poison) -> Recorded | Poison:
        """An undecodable event is read again, MAX_ATTEMPTS reads in all, before it is
        parked (a torn read heals; a bad payload stays bad). A keyed view's entries for
        it are loaded if the re-read decodes."""
        for _ in range(MAX_ATTEMPTS - 1):
            again = next(iter(self.store.read_batches(rec.position - 1, rec.position, 1)), [rec])[0]
            if type(again) is Recorded:
                if self.keyed:
                    assert self.keys_of is not None
                    missing = [k for k in self.keys_of(again) if k not in self.view]
                    for k, state in tables.load_states(self.store, self.table, missing).items():
                        self.view[k] = self._decode(state)
                    self._reread_keys.update(self.keys_of(again))
                return again
        return rec

    def _ledger_time(self) -> str | None:
        """The ledger time of the last event seen: a parked row's `parked_at`."""
        return self._last.event.at.isoformat() if self._last is not None else None


def run_together(
    runners: Sequence[Runner],
    *,
    upto: int | None = None,
    progress: Progress | None = None,
    head: int = 0,
    batch: int = READ_BATCH,
) -> tuple[list[Stats], set[str]]:
    """Apply the log to several views in one pass: each batch is read and decoded once
    and handed to every runner's `apply` (the same per-view fold and commit a single
    view gets: one code path). Each runner keeps its own tracking position and skips
    what it has already applied; one refused by a racing runner (ConflictError)
    reloads from its table and goes on from the position it finds there. A runner
    whose shadow table was swapped in under it (ShadowGone) drops out: its view's NAME
    is in the set returned beside the Stats, for the caller (rebuild) to judge."""
    stats = [Stats(view=r.module.NAME) for r in runners]
    live: list[int] = []
    gone: set[str] = set()
    for i, r in enumerate(runners):
        try:
            r.load()
            live.append(i)
        except ShadowGone:
            gone.add(r.module.NAME)
    with gc_paused():
        if live:
            store = runners[live[0]].store
            before = min(runners[i].position for i in live)  # the pass has read every event up to here
            for chunk in store.read_batches(before, upto, batch):
                for i in list(live):
                    r = runners[i]
                    try:
                        _feed(r, chunk, before, stats[i], batch)
                    except ShadowGone:
                        live.remove(i)
                        gone.add(r.module.NAME)
                        continue
                    if progress is not None:
                        progress(r.module.NAME, r.position, head)
                before = chunk[-1].position
    for i in live:
        stats[i].position = runners[i].position
    return stats, gone


def _feed(r: Runner, chunk: Sequence[Recorded | Poison], before: int, stats: Stats, batch: int) -> None:
    """Apply to `r` what of `chunk` is past its position. A runner refused by a racing
    one (ConflictError) reloads its position from the table; that may be behind the
    pass (a swap puts a rebuild's position in place of the live one), and then the
    events from there to the chunk's end are read again for it alone: none skipped."""
    while True:
        try:
            if r.position < before:
                for part in r.store.read_batches(r.position, chunk[-1].position, batch):
                    _apply_types(r, part, stats)
            elif r.position < chunk[0].position:
                _apply_types(r, chunk, stats)
            else:
                part = [c for c in chunk if c.position > r.position]
                if part:
                    _apply_types(r, part, stats)
            return
        except ConflictError:
            r.load()  # another runner applied these events; carry on from its position


def _apply_types(r: Runner, chunk: Sequence[Recorded | Poison], stats: Stats) -> None:
    """r.apply of the records its view's TYPES name (and every Poison: each view parks
    it), the rest skipped without a call: with every view in one pass, a slot's view
    is not handed each run event (projections/view.py)."""
    types = r.types
    if types is None:
        r.apply(chunk, stats)
        return
    if Poison not in set(map(type, chunk)) and set(map(type, map(_event, chunk))) <= types:
        r.apply(chunk, stats, full=chunk)  # all of it (a rebuild of the runs view): no per-event test
        return
    part = [c for c in chunk if type(c) is not Recorded or type(c.event) in types]
    r.apply(chunk if len(part) == len(chunk) else part, stats, full=chunk)


_event = attrgetter("event")


def _index(chunk: Sequence[Recorded], rec: Recorded, start: int) -> int:
    """Where `rec` is in `chunk`, at or after `start` (by identity: a record's position
    is unique, but this is only reached after an evolve raised, so scan plainly)."""
    for i in range(start, len(chunk)):
        if chunk[i] is rec:
            return i
    raise AssertionError("record not in its batch")


def _latest(
    last: Recorded | None, full: Sequence[Recorded | Poison] | None, before: int | None = None
) -> Recorded | None:
    """The later of `last` (the last record a view folded or healed) and the last
    decoded record of `full` (before position `before`): the last event seen."""
    if full is None:
        return last
    for c in reversed(full):  # at the end of a batch, or when parking: not per event
        if type(c) is Recorded and (before is None or c.position < before):
            return c if last is None or c.position > last.position else last
    return last


def _retry(
    evolve: Callable[[Any, Recorded], Any], view: Any, rec: Recorded, first: Exception
) -> tuple[Any, str | None]:
    """Try again up to MAX_ATTEMPTS in all: (view, None) if it went through, else
    (the unchanged view, the error)."""
    error = f"{type(first).__name__}: {first}"
    for _ in range(MAX_ATTEMPTS - 1):
        try:
            return evolve(view, rec), None
        except Exception as e:  # noqa: BLE001
            error = f"{type(e).__name__}: {e}"
    return view, error


def _tag(rec: Recorded) -> str:
    from epochledger.ledger.events import tag_of

    return tag_of(rec.event)


# ----------------------------------------------------------------- operations
def status(store: Store, module: View) -> tuple[int, int] | None:
    """(version, position) of the live view, None if never built."""
    module = spec(module)
    tables.ensure(store)
    return tables.tracking(store, module.NAME)


def is_current(store: Store, module: View) -> bool:
    module = spec(module)
    return _is_built(status(store, module), module)


def _is_built(tracking: tuple[int, int] | None, module: ViewSpec[Any]) -> TypeGuard[tuple[int, int]]:
    """Whether a tracking row (VERSION, position) is this view's: built, and by its
    VERSION (another VERSION's table is not the view: it is rebuilt)."""
    return tracking is not None and tracking[0] == module.VERSION


def rebuild(
    store: Store,
    module: View,
    *,
    upto: int | None = None,
    progress: Progress | None = None,
    cache_limit: int = CACHE_LIMIT,
    batch: int = REBUILD_BATCH,
) -> Stats:
    """Rebuild `module`'s view from position zero (up to `upto`, default the head)
    beside the live one and swap it in. Resumes a rebuild that was killed (same
    VERSION), else starts from zero."""
    return rebuild_all(store, [module], upto=upto, progress=progress, cache_limit=cache_limit, batch=batch)[0]


def rebuild_all(
    store: Store,
    views: Sequence[View] = VIEWS,
    *,
    upto: int | None = None,
    progress: Progress | None = None,
    cache_limit: int = CACHE_LIMIT,
    batch: int = REBUILD_BATCH,
) -> list[Stats]:
    """Rebuild several views in one pass over the log (run_together: each event read
    and decoded once, folded by each view's own evolve), each beside its live one,
    then swap each in (one transaction per view). Each resumes a rebuild that was
    killed (same VERSION), else starts from zero."""
    specs: list[ViewSpec[Any]] = [spec(v) for v in views]
    tables.ensure(store)
    shadows = [(m.NAME + SHADOW, table_of(m.NAME + SHADOW)) for m in specs]
    for m, (shadow_key, shadow_table) in zip(specs, shadows, strict=True):
        tracking = tables.tracking(store, shadow_key)
        if not _is_built(tracking, m):
            tables.reset_view(store, shadow_key, shadow_table, column_spec(m), m.VERSION)
    head = store.max_position() if upto is None else upto
    runners = [Runner(store, m, shadow=True, cache_limit=cache_limit) for m in specs]

    def raced(m: ViewSpec[Any], shadow_key: str) -> Stats | None:
        # Two runners rebuilding one view at once (two replicas booting on a fresh
        # ledger, two `runs` commands): they share the shadow's tracking row, so their
        # batches never double, and whichever finishes first swaps it in. The other
        # then finds its shadow gone: the view it was building is live, and it is done.
        # Anything else (the store down) still raises: the shadow would still be there.
        if tables.tracking(store, shadow_key) is not None or not is_current(store, m):
            return None
        return Stats(view=m.NAME, position=(tables.tracking(store, m.NAME) or (0, 0))[1])

    try:
        stats, gone = run_together(runners, upto=upto, progress=progress, head=head, batch=batch)
    except StoreError:
        done = [raced(m, k) for m, (k, _) in zip(specs, shadows, strict=True)]
        if any(d is None for d in done):
            raise
        return [d for d in done if d is not None]
    out: list[Stats] = []
    for m, st, (shadow_key, shadow_table) in zip(specs, stats, shadows, strict=True):
        try:
            if m.NAME in gone:
                raise ShadowGone(shadow_key)
            tables.swap_view(store, m.NAME, shadow_key, table_of(m.NAME), shadow_table, indexes_of(m), counts=m.COUNTS)
        except (ShadowGone, StoreError):
            lost = raced(m, shadow_key)
            if lost is None:
                raise
            out.append(lost)
            continue
        st.rebuilt = True
        out.append(st)
    return out


def catch_up(
    store: Store,
    module: View,
    *,
    upto: int | None = None,
    progress: Progress | None = None,
    cache_limit: int = CACHE_LIMIT,
    batch: int | None = None,
) -> Stats:
    """Bring the live view up to the log's head (or `upto`). A view never built, or
    built by another VERSION, is rebuilt first (readers keep the old one meanwhile)."""
    return catch_up_all(store, [module], upto=upto, progress=progress, cache_limit=cache_limit, batch=batch)[0]


def catch_up_all(
    store: Store,
    views: Iterable[View] = VIEWS,
    *,
    upto: int | None = None,
    progress: Progress | None = None,
    cache_limit: int = CACHE_LIMIT,
    batch: int | None = None,
) -> list[Stats]:
    """catch_up for several views, in one pass over the log for those to rebuild and
    one for the catch-up of all (run_together). `batch`: events per batch of both
    (default: REBUILD_BATCH for the rebuild, READ_BATCH for the catch-up).

    Views whose tracking positions are all at the log's head (read after them) have
    nothing to apply: the pass would read no event, so no runner is made (its decoder,
    a whole view's row decoded) and the log is not read (a `show` of a caught-up
    ledger, rule W2). Their Stats are the pass's: no events, at their positions."""
    specs = [spec(v) for v in views]
    tracked = [status(store, v) for v in specs]
    if upto is None and all(_is_built(t, v) for v, t in zip(specs, tracked, strict=True)):
        head = store.max_position()
        positions = [t[1] for t in tracked if t is not None]
        if all(p >= head for p in positions):
            return [Stats(view=v.NAME, position=p) for v, p in zip(specs, positions, strict=True)]
    stale = [v for v, t in zip(specs, tracked, strict=True) if not _is_built(t, v)]
    rebuilt = (
        {
            st.view: st
            for st in rebuild_all(
                store, stale, upto=upto, progress=progress, cache_limit=cache_limit, batch=batch or REBUILD_BATCH
            )
        }
        if stale
        else {}
    )
    runners = [Runner(store, v, cache_limit=cache_limit) for v in specs]
    more, gone = run_together(
        runners, upto=upto, progress=progress, head=store.max_position(), batch=batch or READ_BATCH
    )
    if gone:  # a live view's tracking row vanished: as Runner.run, say so
        raise ShadowGone(", ".join(sorted(gone)))
    out = []
    for st in more:
        first = rebuilt.get(st.view)
        if first is not None:
            first.events += st.events
            first.parked += st.parked
            first.position = st.position
            st = first
        out.append(st)
    return out


def init_views(store: Store, views: Iterable[View] = VIEWS) -> list[Stats]:
    """What `init` leaves (rule R3): the tracking and parked tables and, on SQLite,
    every view's table built at its VERSION and caught up with the log. A read on a
    store that init made then runs no DDL: it only applies new events to tables that
    exist. An upgrade that bumped a VERSION rebuilds that view here, once, not in the
    first read.

    Not on PostgreSQL: there the views belong to the writer role, which rebuilds them by
    drop and rename, and tables the owner's init made would be the owner's and refuse
    the writer (docs/operations.md, PostgreSQL roles). The writer builds them with
    `epochledger rebuild` right after init; until then, its first catch-up does."""
    tables.ensure(store)
    if store.kind == "postgresql":
        return []
    return catch_up_all(store, views)


def _position(store: Store, module: View) -> int:
    tracking = status(store, module)
    return tracking[1] if tracking is not None else 0


def behind(store: Store, module: View) -> int:
    """How many positions the live view lags the log (0 when caught up; the whole log
    when it was never built). Positions, not events: PostgreSQL ids have gaps."""
    module = spec(module)
    tracking = status(store, module)
    return store.max_position() - (tracking[1] if tracking is not None and tracking[0] == module.VERSION else 0)


RECONNECT_BACKOFF = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0)  # seconds between attempts; the last one repeats
# follow's poll on SQLite, in seconds (rule L4): below 10 ms it is a busy loop (a catch-up
# query a poll), and past an hour `follow` is no longer following (1e300 overflowed the
# wait's timestamp: a traceback).
POLL_BOUNDS = (0.01, 3600.0)


def follow(
    store: Store,
    views: Sequence[View] = VIEWS,
    *,
    stop: threading.Event,
    poll: float = 0.2,
    on_batch: Callable[[list[Stats]], None] | None = None,
    on_error: Callable[[StoreError, float], None] | None = None,
    backoff: Sequence[float] = RECONNECT_BACKOFF,
    progress: Progress | None = None,
) -> None:
    """Keep every view caught up until `stop` is set. SQLite: poll every `poll`
    seconds (POLL_BOUNDS: from 0.01 to 3600; 0 or less spun at 100% CPU). PostgreSQL: LISTEN/NOTIFY wakes us (Store.wake_ups); the events
    themselves are read by the fast path. When the server goes away (a restart, a
    terminated connection), follow does not exit: it reports the error to `on_error`
    (error, seconds until the next attempt; default: a warning on logger
    `epochledger.follow`), waits out the backoff (bounded, reset by a success),
    listens again and catches up from the tracking positions. No event is applied
    twice: each batch moves its view's tracking position by compare-and-set (R3).
    `progress` is told of each catch-up's advance, as a rebuild's is."""
    low, high = POLL_BOUNDS
    if isinstance(poll, bool) or not isinstance(poll, int | float) or not low <= poll <= high:
        raise InvalidInput(f"poll must be from {low:g} to {high:g} seconds, got {poll!r}", where="--poll")

    def once() -> None:
        stats = catch_up_all(store, views, progress=progress)
        if on_batch is not None and any(s.events for s in stats):
            on_batch(stats)

    if store.kind != "postgresql":
        once()
        while not stop.wait(poll):
            once()
        return
    failures = 0
    while not stop.is_set():
        try:
            # wake_ups yields the head as soon as it listens: the catch-up that follows
            # covers whatever was appended while no one was listening.
            first = True
            for position in store.wake_ups(min(_position(store, v) for v in views), stop):
                if first or not all(_position(store, v) >= position for v in views):
                    once()  # the first: a view never built, or of another VERSION, is rebuilt
                first = False
                failures = 0
            return  # stop was set
        except StoreError as e:
            failures += 1
            if _waited_out(e, failures, backoff, on_error, stop, "follow"):
                return


def heads(
    store: Store,
    *,
    stop: threading.Event,
    poll: float = 0.02,
    on_error: Callable[[StoreError, float], None] | None = None,
    backoff: Sequence[float] = RECONNECT_BACKOFF,
) -> Iterator[int]:
    """The log's head each time it moved, until `stop` is set: follow's wake-ups for a
    reader of the log itself rather than of the views (the service's live stream and its
    metrics, rule H5). The first value is the head when called. PostgreSQL: woken by the
    store's LISTEN/NOTIFY (Store.wake_ups), reconnecting with follow's backoff after the
    server went away; SQLite, which has no subscription: polled every `poll` seconds
    (POLL_BOUNDS). Never yields a head lower than one it yielded, nor the same twice.
    A StoreError goes to `on_error` (error, seconds until the next attempt; default: a
    warning on logger `epochledger.follow`) and is waited out, as follow does."""
    low, high = POLL_BOUNDS
    if isinstance(poll, bool) or not isinstance(poll, int | float) or not low <= poll <= high:
        raise InvalidInput(f"poll must be from {low:g} to {high:g} seconds, got {poll!r}", where="poll")
    last = -1
    failures = 0
    while not stop.is_set():
        try:
            if store.kind == "postgresql":
                for head in store.wake_ups(max(last, 0), stop):
                    failures = 0
                    if head > last:
                        last = head
                        yield head
                return  # stop was set
            while True:
                head = store.max_position()
                failures = 0
                if head > last:
                    last = head
                    yield head
                if stop.wait(poll):
                    return
        except StoreError as e:
            failures += 1
            if _waited_out(e, failures, backoff, on_error, stop, "heads"):
                return


def _waited_out(
    error: StoreError,
    failures: int,
    backoff: Sequence[float],
    on_error: Callable[[StoreError, float], None] | None,
    stop: threading.Event,
    what: str,
) -> bool:
    """A store error of follow or heads, the `failures`-th in a row: said (to `on_error`,
    else a warning on logger `epochledger.follow`) and waited out with the backoff.
    True when `stop` was set meanwhile."""
    delay = backoff[min(failures - 1, len(backoff) - 1)]
    if on_error is not None:
        on_error(error, delay)
    else:
        import logging

        logging.getLogger("epochledger.follow").warning("%s: %s; trying again in %g s", what, error, delay)
    return stop.wait(delay)


# ---------------------------------------------------------------- fleet reads
def read_view(
    store: Store,
    module: View,
    *,
    key: str | None = None,
    catch_up_first: bool = True,
    where: Sequence[tuple[str, Any]] = (),
    shape: Any = None,
) -> tuple[dict[str, Any], int]:
    """The entries of a live view (all, or the one at `key`; a view stored whole comes
    back as itself) and how many positions it lags the log when read. Catches up first
    unless told not to. On a read-only store (a backup copy, a 0444 file) catching up
    cannot write: the events after the stored view (all of them, if it was never built)
    are folded in memory instead, with the view's own evolve, and nothing is written.

    `shape`: a msgspec Struct each entry is decoded into instead of the view's STATE,
    reading only the fields it names (msgspec skips the others in C): a listing that
    shows a few fields of 143k runs decodes those (docs/benchmarks.md, "Fleet size").
    An entry folded in memory is given the same shape through its stored encoding, so
    both paths give equal values (tests/projections/test_listing.py)."""
    module = spec(module)
    rows, position, head = _stored_rows(store, module, key=key, catch_up_first=catch_up_first, where=where)
    decode = _decoder(module, shape)
    current = position is not None
    with gc_paused():
        if is_whole(module):  # one row, key "*": the view itself
            view: Any = decode(rows[0][1]) if rows and current else module.initial()
        else:
            # C loops (zip, map): 143k rows of a fleet listing cost their decode alone
            view = (
                dict(zip(map(itemgetter(0), rows), map(decode, map(itemgetter(-1), rows)), strict=True))
                if current
                else {}
            )
    if catch_up_first and store.read_only and (position or 0) < head:
        if shape is not None:  # folded from full states: the stored rows decoded as STATE again
            full = _decoder(module, None)
            view = {k: full(state) for k, state in rows} if current else {}
        folded = _fold_in_memory(store, module, view, position or 0, key)
        if shape is not None:
            folded = {k: decode(_encoder.encode(v)) for k, v in folded.items()}
        return folded, 0
    return view, (max(0, head - position) if position is not None else head)


def _decoder(module: View, shape: Any) -> Callable[[bytes], Any]:
    module = spec(module)
    decode: Callable[[bytes], Any] = msgspec.json.Decoder(
        shape or state_type(module), dec_hook=process_mod.dec_hook
    ).decode
    return decode


def _stored_rows(
    store: Store,
    module: View,
    *,
    key: str | None,
    catch_up_first: bool,
    where: Sequence[tuple[str, Any]],
    after: str | None = None,
    limit: int | None = None,
) -> tuple[list[tuple[Any, ...]], int | None, int]:
    """The view's stored rows as read_view reads them (caught up first unless told not
    to), its tracking position (None if never built or of another VERSION: the rows are
    then not the view) and the log's head, read after the rows. `after`, `limit`: one
    page of them in key order (tables.rows_query)."""
    module = spec(module)
    if catch_up_first and not store.read_only:
        catch_up(store, module)
    tables.ensure(store)
    if where and catch_up_first and store.read_only:
        raise InvalidInput("a column filter cannot be folded in memory; filter the entries instead", where="where")
    where = [*([("k", key)] if key is not None else ()), *where]
    with gc_paused():
        tracking, rows = tables.view_rows(
            store, module.NAME, table_of(module.NAME), [], where=where, after=after, limit=limit
        )
        head = store.max_position()
    current = tracking is not None and tracking[0] == module.VERSION
    return rows, (tracking[1] if current and tracking is not None else None), head


def _fold_in_memory(store: Store, module: View, view: Any, after: int, key: str | None) -> Any:
    """The view brought up to the log's head in memory, under the engine's poison rule
    (an event that does not decode, or that evolve refuses, is skipped: parked)."""
    module = spec(module)
    view_keys = keys_of(module) if key is not None else None
    for chunk in store.read_batches(after):
        for rec in chunk:
            if type(rec) is not Recorded or (view_keys is not None and key not in view_keys(rec)):
                continue
            try:
                view = module.evolve(view, rec)
            except Exception as first:  # noqa: BLE001 - the engine's rule, exactly
                view, _error = _retry(module.evolve, view, rec, first)
    if key is not None and not is_whole(module):
        return {k: v for k, v in view.items() if k == key}
    return view


def read_orphan_candidates(store: Store, also_slots: Sequence[str] = ()) -> dict[str, Any]:
    """The runs the orphan rule could judge orphaned (tables.orphan_candidates), by run
    id, from the runs and epochs views as they stand (the caller catches them up first;
    both must be built at their VERSION, or this raises StoreError rather than answer
    from a stale table). `also_slots`: slots whose current epoch the caller knows is
    over by facts the epochs view's columns do not hold (its host rebooted, rule O7):
    every run of theirs in those statuses is a candidate too."""
    from epochledger.ledger import lifecycle
    from epochledger.ledger.events import Status
    from epochledger.projections import epochs, runs

    if not (is_current(store, runs) and is_current(store, epochs)):
        raise StoreError("the runs and epochs views must be built before their orphan candidates are read")
    statuses = [str(s) for s in Status if lifecycle.can_be_orphaned(s)]
    decode = msgspec.json.Decoder(runs.STATE).decode
    rows = tables.orphan_candidates(store, table_of(runs.NAME), table_of(epochs.NAME), statuses, also_slots)
    return {k: decode(state) for k, state in rows}


def read_run(store: Store, run: str, *, catch_up_first: bool = True) -> tuple[Any, int]:
    """One run from the runs view: (RunState, positions behind). RunNotFound if the
    view does not have it or it was deleted."""
    from epochledger.ledger.codec import check_value
    from epochledger.ledger.errors import RunNotFound
    from epochledger.ledger.events import Name
    from epochledger.projections import runs

    run = check_value(run, Name, "run")  # no id that could never be written reaches the store
    found, lag = read_view(store, runs, key=run, catch_up_first=catch_up_first)
    state = found.get(run)
    if state is None:
        raise RunNotFound(run)
    if state.deleted:
        raise RunNotFound(run, deleted=True)
    return state, lag


def read_runs(
    store: Store,
    where: Callable[[Any], bool] | None = None,
    *,
    catch_up_first: bool = True,
    statuses: Sequence[str] = (),
    shape: Any = None,
    predicates: Sequence[str] = (),
    processes: Sequence[str] = (),
    parents: Sequence[str] = (),
    keys: Sequence[str] | None = None,
) -> tuple[list[Any], int]:
    """Every live (not deleted) run from the runs view, sorted by run id, and the lag.
    `statuses`: only runs in one of these, selected by the view's status column, so
    only those rows are read and decoded (a fleet of 1M runs, docs/benchmarks.md).
    `predicates`: only runs for which every one of these lifecycle predicates holds,
    selected by the view's predicate columns, the values its one evaluation stored
    (projections.runs.predicates_of, rule P4). `shape`: the msgspec Struct each run is
    decoded into (default the whole RunState; read_view): it must have the RunState
    fields `run`, `status`, `deleted` (and `code`, `fenced_end` with `predicates`), and
    `where` sees it. `processes`, `parents`: only runs of one of these slots, or
    re-executing one of these runs (rule I2), selected by the view's columns. `keys`:
    only these runs (None: every run), selected by the primary key, KEY_CHUNK a read:
    the runs a report names (the open tick streaks), not the fleet."""
    from epochledger.projections import runs

    _check_predicates(predicates)
    listed: Iterable[Any]
    if catch_up_first and store.read_only:  # a backup copy: read_view folds the rest in memory
        found, lag = read_view(store, runs, catch_up_first=True, shape=shape)
        wanted = None if keys is None else set(keys)
        listed = [
            s
            for k, s in found.items()
            if (wanted is None or k in wanted) and _columns_match(s, statuses, predicates, processes, parents)
        ]
    else:  # the rows in `statuses` selected in SQL, decoded into a list (no dict by key)
        # (docs/benchmarks.md, "The lean listing").
        terms = _run_terms(store, catch_up_first, statuses, predicates, processes, parents)
        if keys is None:
            rows, position, head = _stored_rows(store, runs, key=None, catch_up_first=catch_up_first, where=terms)
        else:  # no key: one read of no row, for the view's position
            chunks = [tuple(keys[i : i + KEY_CHUNK]) for i in range(0, len(keys), KEY_CHUNK)] or [()]
            rows = []
            for n, chunk in enumerate(chunks):
                more, position, head = _stored_rows(
                    store,
                    runs,
                    key=None,
                    catch_up_first=catch_up_first and n == 0,
                    where=[*terms, ("k", chunk)] if chunk else terms,
                    limit=None if chunk else 0,
                )
                rows += more
        with gc_paused():
            listed = list(map(_decoder(runs, shape), map(itemgetter(-1), rows))) if position is not None else []
        lag = max(0, head - position) if position is not None else head
    with gc_paused():  # the GC would walk the fresh entries again while they are kept and sorted
        kept = [s for s in listed if not s.deleted and (where is None or where(s))]
        # Sorted here even when read in key order: PostgreSQL's ORDER BY follows the
        # database's collation, Python's sort the code points (and a sorted list is one pass).
        kept.sort(key=attrgetter("run"))
    return kept, lag


KEY_CHUNK = 5_000  # the most run ids one read of read_runs(keys=) names (SQL parameters: SQLite's bound is 32,766)


def _check_predicates(predicates: Sequence[str]) -> None:
    from epochledger.ledger import lifecycle

    for p in predicates:  # a column name in SQL: only a known predicate's
        if p not in lifecycle.PREDICATES:
            raise InvalidInput(f"unknown predicate {p!r} (known: {', '.join(lifecycle.PREDICATES)})", where="predicate")


def _columns_match(
    s: Any, statuses: Sequence[str], predicates: Sequence[str], processes: Sequence[str], parents: Sequence[str]
) -> bool:
    """A run folded in memory (a read-only store) against the filters the SQL path
    selects by the view's columns (_run_terms): the same values, read from the state."""
    from epochledger.projections import runs

    return (
        (not statuses or str(s.status) in {str(x) for x in statuses})
        and (not processes or s.process in processes)
        and (not parents or s.parent in parents)
        and all(runs.predicates_of(s)[p] for p in predicates)
    )


def _run_terms(
    store: Store,
    catch_up_first: bool,
    statuses: Sequence[str],
    predicates: Sequence[str],
    processes: Sequence[str],
    parents: Sequence[str],
) -> list[tuple[str, Any]]:
    """The column filters of a runs listing, for the view's SQL (tables.rows_query)."""
    from epochledger.projections import runs

    # A view of an older VERSION (read with --no-catch-up before any catch-up) may lack
    # the predicate and parent columns; its rows are not the view and are dropped anyway.
    current = catch_up_first or not (predicates or parents) or is_current(store, runs)
    asked = predicates if current else ()
    return [
        *([("status", tuple(str(s) for s in statuses))] if statuses else ()),
        *((p, 1) for p in asked),
        *([("process", tuple(processes))] if processes else ()),
        *([("parent", tuple(parents))] if parents and current else ()),
    ]


# The most rows of the runs view one page reads (read_runs_page): a filter that no
# column holds reads at most this many, then the page ends short with its cursor.
PAGE_SCAN = 10_000


def read_runs_page(
    store: Store,
    where: Callable[[Any], bool] | None = None,
    *,
    after: str | None,
    limit: int,
    catch_up_first: bool = True,
    statuses: Sequence[str] = (),
    shape: Any = None,
    predicates: Sequence[str] = (),
    processes: Sequence[str] = (),
    parents: Sequence[str] = (),
) -> tuple[list[Any], int, str | None]:
    """One page of read_runs: at most `limit` live runs whose key comes after `after`
    (None: from the first), in the store's key order, the lag, and the key of the
    page's last run if another run follows it (None on the last page). Keyset
    pagination in SQL (tables.rows_query): each read is a range of the primary key, so
    a page costs its own rows at any fleet size, and a run appended between two pages
    is either on a later page or before the cursor, never twice, and no run present
    throughout is skipped. Filters without a column (`where`) read further until the
    page is full or PAGE_SCAN rows were read: such a page may hold fewer than `limit`
    runs and still have a cursor; only a None cursor means the end. On a read-only
    store the view is folded in memory, then sliced."""
    from epochledger.projections import runs

    if limit < 1:
        raise InvalidInput(f"a page holds at least one run: {limit}", where="limit")
    _check_predicates(predicates)
    if catch_up_first and store.read_only:  # a backup copy: folded in memory, then the page cut from it
        found, lag = read_view(store, runs, catch_up_first=True, shape=shape)
        ordered = sorted(
            (
                s
                for k, s in found.items()
                if (after is None or k > after)
                and not s.deleted
                and _columns_match(s, statuses, predicates, processes, parents)
                and (where is None or where(s))
            ),
            key=attrgetter("run"),
        )
        more = len(ordered) > limit
        return ordered[:limit], lag, (ordered[limit - 1].run if more else None)
    terms = [*_run_terms(store, catch_up_first, statuses, predicates, processes, parents), ("deleted", 0)]
    kept: list[Any] = []
    cursor, first, lag, scanned = after, True, 0, 0
    batch = limit + 1  # one more than the page: whether another page follows
    decode = _decoder(runs, shape)
    while True:
        rows, position, head = _stored_rows(
            store, runs, key=None, catch_up_first=catch_up_first and first, where=terms, after=cursor, limit=batch
        )
        if first:
            lag = max(0, head - position) if position is not None else head
            first = False
        if position is None or not rows:
            break
        kept.extend(s for s in map(decode, map(itemgetter(-1), rows)) if not s.deleted and (where is None or where(s)))
        scanned += len(rows)
        if len(kept) > limit or len(rows) < batch:
            break  # the page is full, or these were the view's last rows
        cursor = rows[-1][0]
        if scanned >= PAGE_SCAN:
            # A filter without a column (a code, a label) that keeps few runs: the page
            # ends short at the bound, and its cursor is the last key read, so each
            # request costs at most PAGE_SCAN rows whatever the fleet (rule H8).
            return kept, lag, cursor
        batch = min(max(batch * 4, 256), PAGE_SCAN)  # a filter kept few: read on in larger steps
    if len(kept) > limit:
        return kept[:limit], lag, kept[limit - 1].run
    return kept, lag, None


def read_fleet_counts(store: Store, *, catch_up_first: bool = True) -> tuple[list[tuple[Any, ...]], int]:
    """The runs view's kept counts (projections/runs.py `COUNTS`: live runs by status,
    those holding a launch slot by slot), as rows (status, launch, slot, n), and the
    lag: a few rows read in one snapshot with the view's tracking row, whatever the
    fleet's size (tables.kept_counts). On a read-only store the view is folded in
    memory and its runs counted by the same key from the same columns."""
    from epochledger.projections import runs

    if catch_up_first and store.read_only:  # a backup copy: folded in memory, then counted
        found, _ = read_view(store, runs, catch_up_first=True)
        counted: dict[tuple[Any, ...], int] = {}
        at = [[c for c, _ in runs.COLUMNS].index(c) for c in runs.COUNTS.reads]
        for k, s in found.items():
            row = runs.columns(k, s)  # the values the table would hold
            if (group := runs.COUNTS.key(*(row[i] for i in at))) is not None:
                counted[group] = counted.get(group, 0) + 1
        return [(*g, n) for g, n in sorted(counted.items())], 0
    if catch_up_first:
        catch_up(store, runs)
    elif not is_current(store, runs):  # never built, or an older VERSION's table: no counts kept
        return [], store.max_position()
    tables.ensure(store)
    tracked, rows = tables.kept_counts(store, runs.NAME, table_of(runs.NAME), runs.COUNTS)
    head = store.max_position()
    if not _is_built(tracked, spec(runs)):  # never built, or another VERSION's: not the view
        return [], head
    return rows, max(0, head - tracked[1])


class Spans(msgspec.Struct, frozen=True, kw_only=True):
    """What the spans view says of an interval of ledger time (read_spans): the view's
    position, its tally (the decoded events up to it, the last one's position, the
    earliest and latest instants, None for an empty log), every lane of the picture
    (slot -> whether it has process events), the runs whose hull meets the interval, and
    the runs that only pass through it (projections/spans.py, `passes_through`), each with
    its bar's open segment: (run, lane, status, code, start in microseconds, position)."""

    position: int
    events: int
    last: int
    first_at: int | None
    last_at: int | None
    lanes: dict[str, bool]
    runs: list[str]
    passing: list[tuple[str, str, str, str, int, int]] = []


def read_spans(store: Store, lo: int, hi: int) -> Spans | None:
    """The spans view caught up, then read for the interval [lo, hi] (microseconds since
    the Unix epoch, projections/spans.py) in one snapshot. None on a read-only store (a
    backup copy cannot catch it up: the caller reads the log itself)."""
    from epochledger.projections import spans

    if store.read_only:
        return None
    catch_up(store, spans)
    tables.ensure(store)
    tracked, keys, ended, rows = tables.span_rows(
        store,
        spans.NAME,
        table_of(spans.NAME),
        lo,
        hi,
        open_level=spans.OPEN,
        levels=spans.LEVELS,
        other=(spans.LANE_LEVEL, spans.TALLY_LEVEL),
    )
    if not _is_built(tracked, spec(spans)):  # another VERSION's table (a racing upgrade): not the view
        return None
    decode = msgspec.json.Decoder(spans.STATE).decode
    lanes: dict[str, bool] = {}
    tally = spans.Entry()
    for k, state in rows:
        entry = decode(state)
        if k == spans.TALLY:
            tally = entry
        else:
            lanes[k.removeprefix(spans.LANE)] = entry.slot
    meets = [k.removeprefix(spans.RUN) for k in keys]
    passing = []
    for k, state in ended:  # open hulls before the interval: a bar left open earlier is read whole
        entry = decode(state)
        run = k.removeprefix(spans.RUN)
        if spans.passes_through(entry, lo):
            passing.append((run, entry.lane, entry.status, entry.code, entry.since, entry.since_position))
        else:
            meets.append(run)
    return Spans(
        position=tracked[1],
        events=tally.events,
        last=tally.position,
        first_at=tally.first,
        last_at=tally.last,
        lanes=lanes,
        runs=sorted(meets),
        passing=passing,
    )


class Decisions(msgspec.Struct, frozen=True, kw_only=True):
    """What the decisions view says (read_decisions, projections/decisions.py): its
    position, the slots with process events, the runs a sweep could judge, and each
    block's latest instant (microseconds since the Unix epoch) by block number."""

    position: int
    slots: list[str]
    runs: list[str]
    blocks: dict[int, int]


def read_decisions(store: Store) -> Decisions | None:
    """The decisions view caught up, then read whole in one snapshot (its rows are the
    running runs, those a sweep could judge, the slots and the blocks, not the fleet).
    None on a read-only store (a backup copy cannot catch it up: the caller reads the
    log itself)."""
    from epochledger.projections import decisions

    if store.read_only:
        return None
    rows, position, _head = _stored_rows(store, decisions, key=None, catch_up_first=True, where=())
    if position is None:  # another VERSION's table (a racing upgrade): not the view
        return None
    decode = msgspec.json.Decoder(decisions.STATE).decode
    entries = {k: decode(state) for k, state in rows}
    points = entries[decisions.TALLY].points if decisions.TALLY in entries else 0
    return Decisions(
        position=position,
        slots=sorted(k.removeprefix(decisions.SLOT) for k in entries if k.startswith(decisions.SLOT)),
        runs=sorted(
            k.removeprefix(decisions.RUN)
            for k, entry in entries.items()
            if k.startswith(decisions.RUN) and decisions.judged(entry, points)
        ),
        blocks={
            int(k.removeprefix(decisions.BLOCK_KEY)): entry.latest
            for k, entry in entries.items()
            if k.startswith(decisions.BLOCK_KEY) and entry.latest is not None
        },
    )
