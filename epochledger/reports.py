"""The read facade's reports (rule H1): every read, check and maintenance job a skin
offers (the CLI today, the HTTP service next) as one method of `Ledger` (the `Reports`
mixin it inherits) or, for the audit file alone, one function here, each returning a
typed value. A skin parses, makes one of these calls and renders what it returns; it
never reaches the store, the projection engine, the view tables, verify, replay or
the audit module itself (docs/architecture.md, "One facade, two skins").

What lived in the CLI and belongs to the library is here: a rebuild's catch-up and
its timing, the run listing's filters and the shapes it decodes, a history's
`from_status` and labels, a run's view with its tick health.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar, cast, overload

import msgspec

from epochledger.ledger import codec, lifecycle
from epochledger.ledger.codes import show_code
from epochledger.ledger.errors import ChainBroken, InvalidInput
from epochledger.ledger.events import AnyEvent, Status
from epochledger.ledger.process import EpochState
from epochledger.ledger.role import RoleState
from epochledger.ledger.run import FencedEnd, RunState
from epochledger.ledger.store import Poison, Store
from epochledger.ledger.store.chain import ChainReport, Digest, Sealed
from epochledger.projections import audit, engine, registry, tables
from epochledger.projections import tick_health as tick_health_view
from epochledger.projections.audit import AuditStatus, ParquetExport, SyncResult
from epochledger.projections.audit import Cell as AuditCell
from epochledger.projections.audit import Result as AuditResult
from epochledger.projections.engine import (
    gc_paused,  # for a skin rendering 100k runs (docs/benchmarks.md, "Fleet size")
)
from epochledger.projections.orphans import MARGIN, Unjudged, Verdict
from epochledger.projections.runs import fleet_of, predicates_of
from epochledger.projections.tick_health import DeadLetterRow, OpenStreak
from epochledger.replay import canonical_bytes, state_at, state_hash
from epochledger.replay.pointintime import FleetState
from epochledger.replay.verify import Verification
from epochledger.replay.whatif import Policy, WhatIf, resolve
from epochledger.sweep import SweepReport
from epochledger.sweep import preview as sweep_preview

if TYPE_CHECKING:
    from epochledger.app import Ledger
    from epochledger.import_dagster import FollowRound as FollowRound  # a skin names it from here (rule H1)
    from epochledger.import_dagster import ImportReport
    from epochledger.ndjson import ClockSteps, ImportResult, OnError

__all__ = [
    "VIEW_NAMES",
    "AuditCell",
    "AuditResult",
    "AuditStatus",
    "AuditTable",
    "ChainReport",
    "Digest",
    "EpochLiveness",
    "ErrorClassHealth",
    "HistoryEntry",
    "LogEntry",
    "LogPage",
    "ListedRun",
    "Orphaned",
    "Parked",
    "ParquetExport",
    "Rebuilt",
    "Replayed",
    "ReplayedDocument",
    "Reports",
    "RunPage",
    "RunRow",
    "RunView",
    "Runs",
    "Sealed",
    "Streaking",
    "StreakingRuns",
    "SweepReport",
    "SyncResult",
    "TickHealth",
    "TimelineWritten",
    "Verification",
    "ViewLag",
    "WhatIf",
    "audit_export_parquet",
    "audit_path",
    "audit_query",
    "audit_report",
    "chain_error",
    "check_policy",
    "decode_cursor",
    "encode_cursor",
    "gc_paused",
    "label_pair",
    "parse_digest",
    "predicates_of",
    "read_tick_health",
    "run_tick_health",
    "shown_code",
]

VIEW_NAMES: tuple[str, ...] = tuple(v.NAME for v in registry.VIEWS)

# (view, position reached, head): told of a rebuild's or a catch-up's advance.
ViewProgress = Callable[[str, int, int], None]


@functools.lru_cache(maxsize=4096)
def shown_code(status: str, code: str) -> str:
    """The shown code of a run: a function of these two alone, so a listing of 100,000
    runs computes it once per distinct pair, not per run (docs/benchmarks.md, "Fleet
    size")."""
    return show_code(code) if lifecycle.is_failure(status) else ""


# ------------------------------------------------------------- typed results
class Rebuilt(msgspec.Struct, kw_only=True):
    """One view rebuilt (`rebuild`): the events it folded (the rebuild's and the
    catch-up's after it), those it parked, the position it reached, and the seconds of
    the whole pass (for every view, the shared pass) with its rate."""

    view: str
    events: int
    parked: int
    position: int
    seconds: float
    events_per_second: int


class Parked(msgspec.Struct, kw_only=True):
    """An event a view could not process, parked after bounded retries (rule T4)."""

    view: str
    position: int
    stream: str
    tag: str | None
    error: str
    attempts: int
    parked_at: str | None  # the ledger time it was parked at, as stored (TEXT)


class Replayed(msgspec.Struct, kw_only=True):
    """The fleet as of a position or an instant (rule R1): its state, the state's
    canonical bytes and their SHA-256 (the same prefix of the log, the same bytes)."""

    state: FleetState
    canonical: bytes
    state_hash: str

    def document(self) -> bytes:
        """`{"state": ..., "state_hash": ...}` with the state's canonical bytes verbatim,
        keys in sorted order: the hash covers exactly the bytes between the braces of
        "state" (`replay --json`, GET /v1/replay)."""
        return b'{"state":' + self.canonical + b',"state_hash":"' + self.state_hash.encode() + b'"}'


class ReplayedDocument(msgspec.Struct, kw_only=True):
    """The schema of Replayed.document(): the fleet's state and its state hash."""

    state: FleetState
    state_hash: str


class TimelineWritten(msgspec.Struct, kw_only=True):
    """The incident page written (rule V1): where, and how many bytes."""

    path: str
    size: int


class TickHealth(msgspec.Struct, kw_only=True):
    """Fleet tick health (docs/tick.md): ledger time, open streaks (oldest first, as
    rows of builtins), dead-letters and their counts by step and by error class."""

    now: datetime | None  # ledger time: the `at` of the last event the view has seen
    open_streaks: list[OpenStreak]
    dead_letters: int
    dead_letters_by_step: dict[str, int]
    dead_letters_by_error_class: dict[str, int]


class LogEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One event of the log as a reader outside the process receives it: its position,
    its type (tag) and its JSON, the bytes `epochledger export` writes for it (one
    encoder). An event that does not decode (rule T4) is `decoded=False`, its JSON the
    Poison's fields (position, stream, version, tag, error), so a reader sees it and
    goes past it."""

    position: int
    type: str
    data: bytes
    decoded: bool = True


class LogPage(msgspec.Struct, frozen=True, kw_only=True):
    """A page of the log after a position, filtered: `entries` in log order, and `upto`,
    the last position read (filtered-out events included): where the next page starts."""

    entries: list[LogEntry]
    upto: int


class ViewLag(msgspec.Struct, frozen=True, kw_only=True):
    """A live view's tracking position and how many positions it lags the log's head
    (the whole log when it was never built at its VERSION), read without catching up."""

    view: str
    position: int
    lag: int


class RunView(msgspec.Struct, kw_only=True):
    """One run as `show` presents it: its state from the runs view, how far that view
    was behind, and the run's tick health; its shown code, every lifecycle predicate
    (one evaluation: predicates_of, rule P4) and its children, the live runs whose
    parent it is (rule I2), by run id."""

    state: RunState
    lag: int
    tick_health: tick_health_view.RunTickHealth
    code_shown: str = ""
    predicates: dict[str, bool] = {}
    children: list[str] = []


class HistoryEntry(msgspec.Struct, kw_only=True):
    """One event of a run's history: the event (None if it does not decode: `poison`
    holds why, shown in its place, rule T4), the status before it, and its label: the
    event's type, or `CORRECTION A -> B`, `FENCED T -> S`, `UNDECODABLE T` (rules C1,
    F1, F2, T4)."""

    position: int
    version: int
    from_status: str | None
    label: str
    event: AnyEvent | None = None  # the decoded event (a run's stream holds run events)
    poison: Poison | None = None


def _listed_field(f: msgspec.structs.FieldInfo) -> tuple[Any, ...]:
    if f.default is not msgspec.NODEFAULT:
        return (f.name, f.type, f.default)
    if f.default_factory is not msgspec.NODEFAULT:
        return (f.name, f.type, msgspec.field(default_factory=f.default_factory))
    return (f.name, f.type)


# `runs --json`'s record of a run as one Struct: RunState's fields but `last`, derived
# from RunState itself (a field added there is listed here too), plus the record's two
# derived fields. Decoded straight from the runs view's stored state (engine.read_runs
# `shape`), the 143k records of a fleet listing are encoded in one msgspec call.
ListedRun = msgspec.defstruct(
    "ListedRun",
    [
        *(_listed_field(f) for f in msgspec.structs.fields(RunState) if f.name != "last"),
        ("code_shown", str, ""),
        ("predicates", dict[str, bool], {}),
    ],
    kw_only=True,
)


class RunRow(msgspec.Struct, kw_only=True):
    """The fields of a RunState that the `runs` table shows and its filters read,
    decoded from the stored state (msgspec skips the rest). `updated_at` is kept as the
    stored text, which is what `msgspec.to_builtins` makes of it."""

    run: str
    status: str
    code: str = ""
    workflow: str | None = None
    process: str | None = None
    updated_at: str
    actor: str | None = None
    labels: dict[str, str] = {}
    deleted: bool = False
    fenced_end: FencedEnd | None = None  # read by predicates_of where a listing filters in memory (rule P4)
    parent: str | None = None  # read where a listing filters by parent in memory (a read-only store, rule I2)


Shape = Literal["state", "listed", "row"]
_SHAPES: dict[str, Any] = {"state": RunState, "listed": ListedRun, "row": RunRow}


Shaped = TypeVar("Shaped", covariant=True)  # a page of RunRows is a page of runs


class Runs(msgspec.Struct, Generic[Shaped], kw_only=True):
    """A listing of runs (sorted by run id; a page: in the store's key order) and how
    far the runs view was behind, each run in the listing's shape (`list_runs`): shape
    "state": RunStates; "listed": ListedRuns with their shown code and predicates;
    "row": RunRows (the table's fields). `next`: a page's cursor, for `after=` of the
    next page; None on the last page or unpaged."""

    runs: list[Shaped]
    lag: int
    next: str | None = None


class RunPage(msgspec.Struct, kw_only=True):
    """A page of runs as ListedRuns (the `runs --json` record: every RunState field
    but the last event, the shown code, every predicate), the runs view's lag, and the
    cursor of the next page (None: the last page). The schema of a listing over HTTP."""

    runs: list[ListedRun]  # type: ignore[valid-type]  # ListedRun is made by defstruct from RunState's fields
    lag: int
    next: str | None = None


_CURSOR_TAG = b"run:"


def encode_cursor(run: str) -> str:
    """The opaque cursor of a page that ends at `run`: the key itself, tagged and in
    URL-safe base64, so a client passes it back and never builds one."""
    import base64  # where a page is cut: `show RUN` lists none (rule W2)

    return base64.urlsafe_b64encode(_CURSOR_TAG + run.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, where: str = "after") -> str:
    """The run key a cursor of encode_cursor holds; InvalidInput naming `where` for
    anything else (a cursor from elsewhere, a hand edit, a truncated copy)."""
    import base64
    import binascii

    from epochledger.ledger.codec import check_value
    from epochledger.ledger.events import Name

    bad = InvalidInput(f"not a cursor of this listing: {cursor[:80]!r} (pass back the `next` of a page)", where=where)
    key: str | None = None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = raw[len(_CURSOR_TAG) :].decode() if raw.startswith(_CURSOR_TAG) else None
    except (ValueError, binascii.Error, UnicodeDecodeError):  # not base64, or not UTF-8 inside
        key = None
    if key is None or encode_cursor(key) != cursor:  # one cursor per key: no other spelling passes
        raise bad
    try:
        found: str = check_value(key, Name, where)
    except InvalidInput:
        raise bad from None
    return found


def label_pair(text: str, where: str = "label") -> tuple[str, str]:
    """`KEY=VALUE` as a label filter (rule I2): (key, value), split at the first `=`
    (a value may hold `=`); InvalidInput naming `where` otherwise."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise InvalidInput(f"expected KEY=VALUE, got {text!r}", where=where)
    return key, value


class Streaking(msgspec.Struct, kw_only=True):
    """A run with an open tick failure streak, oldest streak first (docs/tick.md)."""

    state: RunState
    streak: OpenStreak


class StreakingRuns(msgspec.Struct, kw_only=True):
    """The listed runs with an open tick streak, oldest streak first, and the runs
    view's lag (`runs --streaking`)."""

    runs: list[Streaking]
    lag: int


class ErrorClassHealth(msgspec.Struct, kw_only=True):
    """One error class's tick health (docs/tick.md): the listed runs whose open streak
    is of this class, oldest streak first (as `streaking` lists them), and its
    dead-letters in log order (as the tick-health view counts them by class), with the
    runs view's lag. What the fleet's row of this class counts, run by run."""

    error_class: str
    streaking: list[Streaking]
    dead_letters: list[DeadLetterRow]
    lag: int


class EpochLiveness(msgspec.Struct, kw_only=True):
    """An epoch with its liveness facts (rule O7): live, or the rule that ended it
    (`ended`) and its evidence in words (`why`)."""

    epoch: EpochState
    live: bool
    ended: str | None = None
    why: str | None = None


class RoleHolder(msgspec.Struct, kw_only=True):
    """Who holds an exclusive role (rule T7): its last grant (`grant`: the holder's
    epoch and slot, its fencing token, when granted; None if the role was never
    granted), and whether that holder's epoch is live by the facts of O7 (`live`;
    otherwise the rule that `ended` it and `why`). A holder that is not live still holds
    the grant until a live epoch asks (`acquire_role`): that grant passes it on."""

    role: str
    grant: RoleState | None = None
    live: bool | None = None  # None: no grant, no holder to judge
    ended: str | None = None
    why: str | None = None


class AuditTable(msgspec.Struct, kw_only=True):
    """An audit result as data: its columns and its rows (each a list of Cells in
    columns' order: JSON values, docs/audit.md "Values")."""

    columns: list[str]
    rows: list[list[AuditCell]]

    @classmethod
    def of(cls, result: AuditResult) -> AuditTable:
        return cls(columns=list(result.columns), rows=[list(r) for r in result.rows])


class Fleet(msgspec.Struct, kw_only=True):
    """The fleet now, as the console's first page shows it: live runs by status and the
    running runs (those holding a launch slot) by slot, both from the counts the runs
    view keeps (projections/runs.py COUNTS), the orphans and unjudged runs with their
    rule and evidence (`Reports.orphaned`), the runs with an open tick streak
    (`Reports.streaking`), tick health with its dead-letters, the epochs whose sweep gave
    up (rule O5), the log's head and every view's lag behind it."""

    by_status: dict[str, int]
    running_by_slot: dict[str, int]  # "" for running runs without a slot
    orphans: list[Orphaned]
    streaking: list[Streaking]
    tick_health: TickHealth
    sweep_failed: list[EpochState]
    head: int
    lags: list[ViewLag]


class Orphaned(msgspec.Struct, kw_only=True):
    """A running run the ledger's events say is an orphan (`verdict`), or one no slot
    can judge (`unjudged`, rule O9), with the rule that applies and why, in words
    (`runs --orphaned`'s `rule` and `why`)."""

    state: RunState
    verdict: Verdict | None = None
    unjudged: Unjudged | None = None
    rule: str = ""
    why: str = ""


class _Filtered(Protocol):
    @property
    def status(self) -> str: ...
    @property
    def code(self) -> str: ...
    @property
    def labels(self) -> dict[str, str]: ...


def _keep(codes: Sequence[str], labels: Sequence[tuple[str, str]]) -> Callable[[_Filtered], bool]:
    """The filters of a listing that no column of the runs view holds: a failure code
    (shown: UNKNOWN for the empty one) and labels (every one must match, rule I2)."""

    def keep(s: _Filtered) -> bool:
        if codes and not (lifecycle.is_failure(s.status) and show_code(s.code) in codes):
            return False
        return not labels or all(s.labels.get(k) == v for k, v in labels)

    return keep


# A running run on the fleet page: one that holds a launch slot (the predicate's name,
# a column the runs view stores from the one evaluation, rule P4; the view's kept
# counts count by it). A slot's count links to the runs page of this predicate and slot.
RUNNING_PREDICATE = lifecycle.counts_against_launch_limit.__name__


def check_policy(spec: str) -> Policy:
    """A whatif policy NAME[:ARG] resolved (BadPolicy otherwise), before any store is
    read: a typo is refused without reading the log (rule R4)."""
    return resolve(spec)


# ------------------------------------------------------------------- the mixin
class Reports:
    """The read facade's reports, inherited by `Ledger` (epochledger/app.py)."""

    @property
    def _store(self) -> Store:
        """The Ledger's store (Ledger._store): private to the facade and the modules
        behind it."""
        raise NotImplementedError  # pragma: no cover (Ledger defines it)

    @property
    def _ledger(self) -> Ledger:
        """This object as the Ledger it is (the one class that inherits the mixin), for
        the application modules that take a Ledger."""
        return cast("Ledger", self)

    # ---------------------------------------------------------- the log, the chain
    def head(self) -> int:
        """The log's last position (0 for an empty log)."""
        return self._store.max_position()

    def local_files(self) -> list[str]:
        """The files the store keeps on this machine (none for PostgreSQL): an output
        file (an export, a digest, a rejects file) is never written over one of them."""
        return self._store.local_files()

    def sealed_at_open(self) -> Sealed | None:
        """What opening with init=True sealed of a ledger made before the hash chain
        (rule S1), or None."""
        return self._store.chain_upgrade

    def chain(self) -> ChainReport:
        """The hash chain's state, the whole log checked against it (rule S1)."""
        return self._store.check_chain()

    def upgrade_chain(self) -> Sealed:
        """Chain a ledger made before rule S1: seal every event past the chain's end."""
        return self._store.upgrade_chain()

    def verify(self, digests: Sequence[Digest] = ()) -> Verification:
        """The chain (with `digests`, rule S1) and every live view against a replay from
        zero (rule R2); `Verification.error()` is the error to raise, if any."""
        from epochledger.replay.verify import verify_all

        return verify_all(self._store, digests)

    # ---------------------------------------------------------------- the views
    def rebuild(self, view: str | None = None, *, progress: ViewProgress | None = None) -> list[Rebuilt]:
        """Rebuild one view (by name) or all of them from zero beside the live ones,
        swap them in, then catch up the events appended meanwhile (rule R3); timed."""
        views = [registry.by_name(view)] if view else list(registry.VIEWS)
        t0 = time.perf_counter()
        rebuilt = engine.rebuild_all(self._store, views, progress=progress)
        more = engine.catch_up_all(self._store, views)  # events appended during the rebuild
        seconds = time.perf_counter() - t0
        results = []
        for v, st, late in zip(views, rebuilt, more, strict=True):
            rate = round((st.events + late.events) / seconds) if seconds > 0 else 0
            results.append(
                Rebuilt(
                    view=v.NAME,
                    events=st.events + late.events,
                    parked=st.parked + late.parked,
                    position=late.position,
                    seconds=round(seconds, 3),
                    events_per_second=rate,
                )
            )
        return results

    def parked(self, view: str | None = None) -> list[Parked]:
        """Every event a view parked (rule T4), by view and position; `view`: one view's."""
        if view:
            registry.by_name(view)
        tables.ensure(self._store)
        return [
            Parked(view=r[0], position=r[1], stream=r[2], tag=r[3], error=r[4], attempts=r[5], parked_at=r[6])
            for r in tables.parked(self._store, view)
        ]

    def follow(
        self,
        *,
        stop: threading.Event,
        poll: float = 0.2,
        on_batch: Callable[[list[engine.Stats]], None] | None = None,
        progress: ViewProgress | None = None,
    ) -> None:
        """Keep every view caught up until `stop` is set (projections/engine.py, follow)."""
        engine.follow(self._store, stop=stop, poll=poll, on_batch=on_batch, progress=progress)

    def heads(self, *, stop: threading.Event, poll: float = 0.02) -> Iterator[int]:
        """The log's head each time it moved, until `stop` is set: the follow machinery's
        wake-ups (projections/engine.py, heads; LISTEN/NOTIFY on PostgreSQL, a poll on
        SQLite), for readers of the log itself (the live stream, rule H5). Reads the
        store alone (its connections are per thread), so any thread may call it."""
        return engine.heads(self._store, stop=stop, poll=poll)

    def log_page(
        self,
        after: int,
        limit: int,
        *,
        runs: Sequence[str] = (),
        slots: Sequence[str] = (),
        types: Sequence[str] = (),
    ) -> LogPage:
        """Up to `limit` events after position `after` that pass the filters, read in one
        batch of the log's reader (Store.read_batches, the one `export` reads with): the
        streams of `runs` and of `slots` (a slot's own events: boots, stops, exits,
        sweeps skipped or failed; a run's events are filtered by run), and event `types`
        (tags, each refused by name unless known). Empty filters pass everything. Reads
        the store alone, so any thread may call it (rule H5)."""
        from epochledger.ledger.codec import check_value
        from epochledger.ledger.errors import InvalidInput
        from epochledger.ledger.events import EVENT_TYPES, Name, process_stream, run_stream

        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidInput(f"limit must be a positive integer, got {limit!r}", where="limit")
        known = _event_tags(EVENT_TYPES)
        for t in types:
            if t not in known:
                raise InvalidInput(f"unknown event type {t!r} (known: {', '.join(sorted(known))})", where="type")
        streams: set[str] = {run_stream(check_value(r, Name, "run")) for r in runs}
        streams |= {process_stream(check_value(p, Name, "slot")) for p in slots}
        wanted = frozenset(types)
        batch = next(iter(self._store.read_batches(after, None, limit)), [])
        entries: list[LogEntry] = []
        for rec in batch:
            if streams and rec.stream not in streams:
                continue
            if isinstance(rec, Poison):
                if wanted and rec.tag not in wanted:
                    continue
                entries.append(
                    LogEntry(position=rec.position, type=rec.tag or "", data=msgspec.json.encode(rec), decoded=False)
                )
                continue
            tag = _tag(rec.event)
            if wanted and tag not in wanted:
                continue
            entries.append(LogEntry(position=rec.position, type=tag, data=codec.encode(rec.event)))
        return LogPage(entries=entries, upto=batch[-1].position if batch else after)

    def view_lags(self) -> list[ViewLag]:
        """Every live view's tracking position and lag behind the head, read only (no
        catch-up): what a health check and the metrics report (rule H7)."""
        head = self._store.max_position()
        out = []
        for v in registry.VIEWS:
            tracking = engine.status(self._store, v)
            position = tracking[1] if tracking is not None and tracking[0] == v.VERSION else 0
            out.append(ViewLag(view=v.NAME, position=position, lag=max(0, head - position)))
        return out

    def tick_health_summary(self, *, catch_up_first: bool = True) -> TickHealth:
        """Fleet tick health from the tick-health view, caught up first unless told not
        to (a metrics scrape reads what the view holds, rule H7; docs/tick.md)."""
        s = tick_health_view.summary(read_tick_health(self._store, catch_up_first=catch_up_first))
        return TickHealth(**s)

    # ------------------------------------------------------------------- runs
    def run_view(self, run: str, *, catch_up_first: bool = True) -> RunView:
        """One run from the runs view (one road to a run's state, rule P4) with the lag
        and its tick health."""
        state, lag = engine.read_run(self._store, run, catch_up_first=catch_up_first)
        health = run_tick_health(self._store, run, catch_up_first=catch_up_first)
        children, _ = engine.read_runs(self._store, catch_up_first=False, shape=RunRow, parents=[state.run])
        return RunView(
            state=state,
            lag=lag,
            tick_health=health,
            code_shown=shown_code(state.status, state.code),
            predicates=dict(predicates_of(state)),
            children=[c.run for c in children],
        )

    @overload
    def list_runs(
        self,
        *,
        statuses: Sequence[str] = (),
        predicates: Sequence[str] = (),
        codes: Sequence[str] = (),
        labels: Sequence[tuple[str, str]] = (),
        processes: Sequence[str] = (),
        parents: Sequence[str] = (),
        catch_up_first: bool = True,
        shape: Literal["state"] = "state",
        after: str | None = None,
        limit: int | None = None,
    ) -> Runs[RunState]: ...

    @overload
    def list_runs(
        self,
        *,
        statuses: Sequence[str] = (),
        predicates: Sequence[str] = (),
        codes: Sequence[str] = (),
        labels: Sequence[tuple[str, str]] = (),
        processes: Sequence[str] = (),
        parents: Sequence[str] = (),
        catch_up_first: bool = True,
        shape: Literal["listed"],
        after: str | None = None,
        limit: int | None = None,
    ) -> Runs[ListedRun]:  # type: ignore[valid-type]  # made by defstruct from RunState's fields
        ...

    @overload
    def list_runs(
        self,
        *,
        statuses: Sequence[str] = (),
        predicates: Sequence[str] = (),
        codes: Sequence[str] = (),
        labels: Sequence[tuple[str, str]] = (),
        processes: Sequence[str] = (),
        parents: Sequence[str] = (),
        catch_up_first: bool = True,
        shape: Literal["row"],
        after: str | None = None,
        limit: int | None = None,
    ) -> Runs[RunRow]: ...

    def list_runs(
        self,
        *,
        statuses: Sequence[str] = (),
        predicates: Sequence[str] = (),
        codes: Sequence[str] = (),
        labels: Sequence[tuple[str, str]] = (),
        processes: Sequence[str] = (),
        parents: Sequence[str] = (),
        catch_up_first: bool = True,
        shape: Shape = "state",
        after: str | None = None,
        limit: int | None = None,
    ) -> Runs[RunState | ListedRun | RunRow]:  # type: ignore[valid-type]  # ListedRun: made by defstruct
        """Live runs from the runs view, filtered: `statuses`, `predicates` (the
        columns the view stored from the one evaluation of each predicate, rule P4),
        `processes` (slots) and `parents` (rule I2) in SQL, `codes` (shown: UNKNOWN for
        the empty one) and `labels` (rule I2) as read. Each shape decodes only what it
        holds (docs/benchmarks.md, "Fleet size").

        `limit`: one page of at most that many runs, in the store's key order, from
        the one after the cursor `after` (a page's `next`; decode_cursor refuses any
        other, naming `after`), selected in SQL by key range (engine.read_runs_page):
        a page costs its own rows at a million runs. Without `limit`, every run."""
        keep = _keep(codes, labels) if codes or labels else None
        filters: dict[str, Any] = {
            "catch_up_first": catch_up_first,
            "statuses": statuses,
            "shape": _SHAPES[shape],
            "predicates": predicates,
            "processes": processes,
            "parents": parents,
        }
        cursor = decode_cursor(after) if after is not None else None
        if cursor is not None and limit is None:
            raise InvalidInput("a cursor reads one page: give the page's size too", where="limit")
        following: str | None = None
        with engine.gc_paused():  # a listing of 100k runs: ~1.5x faster without the GC
            if limit is not None:
                found, lag, last = engine.read_runs_page(self._store, keep, after=cursor, limit=limit, **filters)
                following = encode_cursor(last) if last is not None else None
            else:
                found, lag = engine.read_runs(self._store, keep, **filters)
            if shape == "listed":
                for s in found:
                    s.code_shown, s.predicates = shown_code(s.status, s.code), predicates_of(s)
        return Runs(runs=found, lag=lag, next=following)

    def streaking(
        self,
        *,
        statuses: Sequence[str] = (),
        predicates: Sequence[str] = (),
        codes: Sequence[str] = (),
        labels: Sequence[tuple[str, str]] = (),
        processes: Sequence[str] = (),
        catch_up_first: bool = True,
    ) -> StreakingRuns:
        """The listed runs with an open tick streak, oldest streak first, with its age in
        ledger time (docs/tick.md), and the runs view's lag. Reads the runs the open
        streaks name, by key, not the fleet."""
        view = read_tick_health(self._store, catch_up_first=catch_up_first)
        return self._streaking(view, statuses, predicates, codes, labels, processes, catch_up_first=catch_up_first)

    def _streaking(
        self,
        view: tick_health_view.View,
        statuses: Sequence[str] = (),
        predicates: Sequence[str] = (),
        codes: Sequence[str] = (),
        labels: Sequence[tuple[str, str]] = (),
        processes: Sequence[str] = (),
        *,
        catch_up_first: bool,
    ) -> StreakingRuns:
        streaks = tick_health_view.open_streaks(view)
        keep = _keep(codes, labels) if codes or labels else None
        with engine.gc_paused():
            found, lag = engine.read_runs(
                self._store,
                keep,
                catch_up_first=catch_up_first,
                statuses=statuses,
                predicates=predicates,
                processes=processes,
                keys=sorted({st.run for st in streaks}),
            )
        by_run = {s.run: s for s in found}
        rows = [Streaking(state=by_run[st.run], streak=st) for st in streaks if st.run in by_run]
        return StreakingRuns(runs=rows, lag=lag)

    def error_class_health(self, error_class: str, *, catch_up_first: bool = True) -> ErrorClassHealth:
        """The runs of one error class (`OpenStreak.error_class`, a dead-letter's
        `error_class`): its open streaks, each with its run, and its dead-letters. A class
        the log never named has neither: an empty result, not an error."""
        view = read_tick_health(self._store, catch_up_first=catch_up_first)  # one read: streaks and dead-letters agree
        listed = self._streaking(view, catch_up_first=catch_up_first)
        return ErrorClassHealth(
            error_class=error_class,
            streaking=[s for s in listed.runs if s.streak.error_class == error_class],
            dead_letters=[d for d in view.dead_letters if d.error_class == error_class],
            lag=listed.lag,
        )

    def fleet(self) -> Fleet:
        """The fleet now (`Fleet`): the counts the runs view keeps (projections/runs.py
        `COUNTS`, a few rows: never a listing or a count of the fleet), every other part
        read by the facade's own report, every view caught up once, first. Its cost
        follows the orphan candidates, the open streaks and the slots, not the fleet
        (docs/benchmarks.md, "The console at a million runs")."""
        stored = not self._store.read_only  # a backup copy's reads fold the rest in memory instead
        if stored:
            engine.catch_up_all(self._store)  # every view once, in one pass over the new events
        kept, _ = engine.read_fleet_counts(self._store, catch_up_first=not stored)
        by_status, by_slot = fleet_of(kept)
        return Fleet(
            by_status=by_status,
            running_by_slot=by_slot,
            orphans=self.orphaned(),
            streaking=self.streaking(catch_up_first=not stored).runs,
            tick_health=self.tick_health_summary(catch_up_first=not stored),
            sweep_failed=[e for e in self._ledger.epochs() if e.sweep_failed_at is not None],
            head=self.head(),
            lags=self.view_lags(),
        )

    def epoch_liveness(
        self, *, process: str | None = None, live_only: bool = False, retired: bool = False
    ) -> list[EpochLiveness]:
        """Every epoch (of one slot: `process`) with its liveness facts (rule O7:
        Ledger.liveness), in slot and boot order; `live_only`: the live ones; of
        retired slots (rule O8) only with `retired=True`."""
        return [
            EpochLiveness(
                epoch=e, live=ended is None, ended=ended[0] if ended else None, why=ended[1] if ended else None
            )
            for e, ended in self._ledger.liveness(retired=retired)
            if process in (None, e.process) and not (live_only and ended)
        ]

    def role_holder(self, role: str) -> RoleHolder:
        """Who holds `role` (Ledger.role, its last grant) and whether that holder is
        live: end_of for the holder's epoch (rule O7), as `acquire_role` judges it.
        Reads only: a holder found ended keeps the grant until a live epoch asks."""
        grant = self._ledger.role(role)
        if grant is None:
            return RoleHolder(role=role)
        lookup = self._ledger.batch()
        ended = lookup.end_of(lookup.find_epoch(grant.epoch, must_be_in=grant.process))
        return RoleHolder(
            role=role,
            grant=grant,
            live=ended is None,
            ended=ended[0] if ended else None,
            why=ended[1] if ended else None,
        )

    def orphaned(
        self,
        *,
        predicates: Sequence[str] = (),
        statuses: Sequence[str] = (),
        codes: Sequence[str] = (),
        labels: Sequence[tuple[str, str]] = (),
    ) -> list[Orphaned]:
        """The running runs the ledger's events say are orphans (rules O2, O3), with
        their verdicts, and those no slot can judge (rule O9), filtered as a listing
        is, sorted by run id. Reads only."""
        keep = _keep(codes, labels)
        wanted = set(statuses)
        found = [
            Orphaned(state=s, verdict=v, rule=v.rule, why=v.explain())
            for s, v in self._ledger.orphans()
            if (not wanted or s.status in wanted) and keep(s) and all(predicates_of(s)[p] for p in predicates)
        ]
        found += [
            Orphaned(state=s, unjudged=u, rule=u.rule, why=u.explain())
            for s, u in self._ledger.unjudged()
            if (not wanted or s.status in wanted) and keep(s)
        ]
        found.sort(key=lambda o: str(o.state.run))
        return found

    def history_of(self, run: str) -> list[HistoryEntry]:
        """Every event of a run in order with the status before it and its label: a
        correction, a fenced late report and an undecodable event stand out (rules
        C1, F1, F2, T4)."""
        entries: list[HistoryEntry] = []
        previous: str | None = None
        for r in self._ledger.history(run):
            if isinstance(r, Poison):  # shown in its place, never a reason to hide the rest (rule T4)
                entries.append(
                    HistoryEntry(
                        position=r.position,
                        version=r.version,
                        from_status=None,
                        label=f"UNDECODABLE {r.tag or '(unknown type)'}",
                        poison=r,
                    )
                )
                continue
            d = msgspec.to_builtins(r.event)
            label = d["type"]
            if label == "run.corrected":  # corrections stand out in every history
                label = f"CORRECTION {previous} -> {d['status']}"
            elif label == "run.fenced":  # so do late reports of stale epochs (rules F1, F2)
                label = f"FENCED {d['refused']}" + (f" -> {d['reported']}" if d.get("reported") else "")
            entries.append(
                HistoryEntry(position=r.position, version=r.version, from_status=previous, label=label, event=r.event)
            )
            previous = d["status"]
        return entries

    # ------------------------------------------------------------- forensics
    def replay(
        self, *, position: int | None = None, at: datetime | None = None, by: Literal["log", "event-time"] = "log"
    ) -> Replayed:
        """The fleet as of a log position or an instant (rule R1), with its canonical
        bytes and state hash."""
        state = state_at(self._store, position=position, at=at, by=by)
        return Replayed(state=state, canonical=canonical_bytes(state), state_hash=state_hash(state))

    def whatif(self, policy: str | Policy, *, at: datetime | None = None, name: str | None = None) -> WhatIf:
        """The recorded history replayed under another orphan policy (rule R4)."""
        from epochledger.replay.whatif import whatif

        return whatif(self._store, policy, at=at, name=name)

    def timeline(
        self,
        output: str,
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        cursor: datetime | None = None,
        runs: Sequence[str] | None = None,
        policy: str | Policy | None = None,
        upto: datetime | None = None,
        name: str | None = None,
    ) -> TimelineWritten:
        """Write the incident's page (rule V1) to `output`, atomically, never over the
        ledger's own files. With `policy` (NAME[:ARG] or a resolved policy, `name` its
        label): the what-if `Reports.whatif` gives up to `upto` (the whole log without
        it), each differing verdict flagged on its run, as the console's incident page
        draws it with `policy=` and `upto=`."""
        from epochledger.files import atomic_write

        found = None if policy is None else self.whatif(policy, at=upto, name=name)
        text = self.timeline_page(start=start, end=end, cursor=cursor, runs=runs, whatif=found).encode()
        with atomic_write(output, protected=self._store.local_files()) as f:
            f.write(text)
        return TimelineWritten(path=output, size=len(text))

    def timeline_page(
        self,
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        cursor: datetime | None = None,
        runs: Sequence[str] | None = None,
        assets: str | None = None,
        header: str = "",
        live: bool = False,
        whatif: WhatIf | None = None,
        fold_link: Callable[[str, Status], str | None] | None = None,
    ) -> str:
        """The incident's page (rule V1) as text; `assets`: the URL prefix it links its
        style and script from instead of inlining them; `header`: the caller's HTML
        before its title; `live`: its picture marked for the console's live script;
        `whatif`: a what-if's result (`Reports.whatif`), each differing verdict flagged
        on its run; `fold_link`: the URL that opens a slot's runs of a status, which a
        density band of them links to when the window folds its runs (replay/timeline.py)."""
        from epochledger.replay.timeline import page

        return page(
            self._store,
            start=start,
            end=end,
            cursor=cursor,
            runs=runs,
            assets=assets,
            header=header,
            live=live,
            whatif=whatif,
            fold_link=fold_link,
        )

    # --------------------------------------------------- import, export, digests
    # epochledger/ndjson.py, digests.py and import_dagster.py take the Ledger, which
    # inherits this class: imported when called, so that app.py can import this module.
    def import_ndjson(
        self,
        lines: Iterable[bytes | str],
        *,
        on_error: OnError = "stop",
        rejects: str | None = None,
        protected: Iterable[str] = (),
        clock_steps: ClockSteps = "refuse",
    ) -> ImportResult:
        """Import NDJSON lines through the one write path, in one transaction (rule I1;
        epochledger/ndjson.py, import_events)."""
        from epochledger.ndjson import import_events

        return import_events(
            self._ledger, lines, on_error=on_error, rejects=rejects, protected=protected, clock_steps=clock_steps
        )

    def export_ndjson(self, out: IO[bytes], after: int = 0) -> int:
        """The log after position `after` as NDJSON on `out`, in log order; how many events."""
        from epochledger.ndjson import export_to

        return export_to(self._ledger, out, after)

    def export_ndjson_file(self, path: str, after: int = 0) -> int:
        """Export to the file `path`, atomically, never over the ledger's own files."""
        from epochledger.ndjson import export_file

        return export_file(self._ledger, path, after)

    def import_dagster(
        self,
        home: str,
        *,
        local_workers: bool = False,
        on_error: OnError = "stop",
        rejects: str | None = None,
        dagster_tags: bool = False,
    ) -> ImportReport:
        """Import a Dagster instance's runs (rule I3; epochledger/import_dagster.py)."""
        from epochledger.import_dagster import import_dagster

        return import_dagster(
            self._ledger,
            home,
            local_workers=local_workers,
            on_error=on_error,
            rejects=rejects,
            dagster_tags=dagster_tags,
        )

    def follow_dagster(
        self,
        home: str,
        *,
        stop: threading.Event,
        interval: float = 1.0,
        local_workers: bool = False,
        dagster_tags: bool = False,
        on_round: Callable[[FollowRound], None] | None = None,
    ) -> int:
        """Keep the ledger current from a live Dagster instance until `stop` is set: a
        round of what changed every `interval` seconds, with the probe in the loop
        (rules I3, I4; epochledger/import_dagster.py, follow_dagster). The rounds run."""
        from epochledger.import_dagster import follow_dagster

        return follow_dagster(
            self._ledger,
            home,
            stop=stop,
            interval=interval,
            local_workers=local_workers,
            dagster_tags=dagster_tags,
            on_round=on_round,
        )

    def take_digest(self) -> Digest:
        """The chain's head now, after checking the whole log against it (rule S1)."""
        from epochledger.digests import take_digest

        return take_digest(self._ledger)

    def write_digest(self, path: str) -> Digest:
        """Take a digest and write it to `path` atomically, never over the ledger's files."""
        from epochledger.digests import write_digest

        return write_digest(self._ledger, path)

    def preview_sweep(
        self,
        process: str | None,
        *,
        margin: float = MARGIN.total_seconds(),
        new_slot: bool = True,
        as_epoch: str | None = None,
    ) -> SweepReport:
        """What a sweep would recover now, writing nothing (`sweep --dry-run`; rule O9)."""
        return sweep_preview(self._ledger, process, margin=margin, new_slot=new_slot, as_epoch=as_epoch)

    # ----------------------------------------------------------------- audit
    def audit_sync(
        self, path: str, *, progress: Callable[[int, int], None] | None = None, wait: float | None = None
    ) -> SyncResult:
        """Copy the events since the last sync into the audit file at `path` (see
        audit_path; docs/audit.md). The ledger store is only read."""
        if wait is None:  # the audit module's default
            return audit.sync(self._store, path, progress=progress)
        return audit.sync(self._store, path, progress=progress, wait=wait)

    def audit_status(self, path: str) -> AuditStatus:
        """How far the audit file at `path` has synced, and how far behind the ledger it is."""
        return audit.status(path, self._store)


# ------------------------------------------------------------ the tick's health
# Reads of the tick-health view: here, not in epochledger/tick.py (the tick's write
# side, whose tick_health and run_tick_health call these), so that `show RUN` reads a
# run's tick health without importing the tick (rule W2).
@functools.cache
def _event_tags(types: tuple[type[msgspec.Struct], ...]) -> frozenset[str]:
    return frozenset(str(t.__struct_config__.tag) for t in types)


def _tag(event: msgspec.Struct) -> str:
    return str(type(event).__struct_config__.tag)


def read_tick_health(store: Store, *, catch_up_first: bool = True) -> tick_health_view.View:
    """The tick-health view (projections.tick_health), read from its materialized
    table, caught up first unless told not to: an event that does not decode is parked
    there, never a reason for this read to fail (rule T4)."""
    found, _lag = engine.read_view(store, tick_health_view, catch_up_first=catch_up_first)
    assert isinstance(found, tick_health_view.View)  # the view is stored whole: its state itself
    return found


def run_tick_health(store: Store, run: str, *, catch_up_first: bool = True) -> tick_health_view.RunTickHealth:
    """One run's tick health for `show`: its open streak with its age in ledger time
    (the `at` of the last event the view has seen) and its dead-letters, from the
    tick-health view."""
    return tick_health_view.run_health(read_tick_health(store, catch_up_first=catch_up_first), run)


def parse_digest(text: str, where: str = "digest") -> Digest:
    """A digest as `epochledger digest` writes it ({"position", "hash", "at"}), given
    as text (a query parameter); InvalidInput naming `where` otherwise."""
    from epochledger.digests import parse_digest as parse

    return parse(text.encode("utf-8", "surrogateescape"), where)


def chain_error(report: ChainReport) -> ChainBroken | None:
    """The error a chain report's failure is (exit 12), or None."""
    f = report.failure
    return None if f is None else ChainBroken(f.kind, f.position, f.message, stream=f.stream, version=f.version)


# ------------------------------------------- the audit file alone (no store opened)
def audit_report_names() -> list[str]:
    """The canned audit reports' names (docs/audit.md), in order."""
    return audit.report_names()


def audit_periods() -> tuple[str, ...]:
    """The periods a canned report groups by (`period=`)."""
    return tuple(audit.PERIODS)


def audit_path(store_url: str | None, duckdb: str | None = None) -> str:
    """The audit file: `duckdb`, else beside the SQLite store `store_url` names as the
    user gave it (runs.db -> runs.duckdb), else ./epochledger.duckdb."""
    return duckdb or audit.default_path(store_url)


def _bounds(timeout: float | None, memory_limit: str | None) -> dict[str, Any]:
    """The bounds given; the audit module's defaults apply to the rest."""
    return {k: v for k, v in (("timeout", timeout), ("memory_limit", memory_limit)) if v is not None}


def audit_report(
    store_url: str | None,
    name: str,
    *,
    duckdb: str | None = None,
    as_of: datetime | None = None,
    period: str = "day",
    label: str | None = None,
    timeout: float | None = None,
    memory_limit: str | None = None,
) -> AuditResult:
    """A canned audit report over the audit file (docs/audit.md)."""
    return audit.report(
        audit_path(store_url, duckdb), name, as_of=as_of, period=period, label=label, **_bounds(timeout, memory_limit)
    )


def audit_query(
    store_url: str | None,
    sql: str,
    *,
    duckdb: str | None = None,
    timeout: float | None = None,
    memory_limit: str | None = None,
) -> AuditResult:
    """One read-only, bounded SQL statement on the audit file (docs/audit.md)."""
    return audit.query(audit_path(store_url, duckdb), sql, **_bounds(timeout, memory_limit))


def audit_export_parquet(store_url: str | None, directory: str, *, duckdb: str | None = None) -> ParquetExport:
    """The audit file's events as Parquet files partitioned by event date."""
    return audit.export_parquet(audit_path(store_url, duckdb), directory)
