"""The tick driver: fault-isolated per-run steps, a durable failure streak, and a
bounded dead-letter (rules T1-T3). The contract and the arguments are in docs/tick.md.

    epoch, _ = ledger.startup("scheduler-1")
    driver = TickDriver(ledger, [("reconcile", reconcile), ("admit", admit), ("advance", advance)],
                        epoch=epoch, on_dead_letter=release_leases)
    while running:
        report = driver.tick()
        if report.fatal: ...        # the tick as a whole failed (listing, store down)
        for f in report.failures: ...  # one run's step raised; the others went on
        sleep(interval)

What the driver guarantees:
- T1 isolation: a step's exception is caught, attributed to its run, and the tick goes
  on with the next run; the next run's step runs outside any `except` block, so it
  never sees another run's exception (no `__context__`, empty `sys.exc_info()`).
  Only failures that belong to no run (listing the active runs, the store failing
  under the driver's own writes) make `report.fatal`; listing failures append nothing.
- T3 durable, free streak: a failed run gets `run.tick_failed`; a successful run whose
  streak is open gets `run.tick_recovered`; a healthy run gets nothing, and the driver
  reads nothing per run: the streak comes folded in the listing's RunState.
- T2 bound: a failure whose streak began more than `tick_failure_deadline` ago (wall
  clock, from the clock port, from the streak's first failure; tick frequency is
  irrelevant) becomes `run.dead_lettered` (`failed`, TICK_DEADLINE_EXCEEDED). The
  scheduler's cleanup runs first, best-effort: if it raises, its error goes into the
  reason and the dead-letter lands anyway. Nothing the driver needs for it is read
  per run, so a run whose every read fails is still dead-lettered.

- F1 fencing: the driver is bound to the epoch it ticks for (`epoch=`, the boot of its
  process). Its events carry that epoch and are fenced like any report: once the epoch
  is superseded or stopped, the driver can neither fail, streak, recover nor
  dead-letter a run. A tick by a stale epoch stops and says so (`report.fatal.stage ==
  "stale_epoch"`): checked before any step runs, and again if a step's own write is
  fenced for this epoch; events of a tick that found itself stale are kept as
  `run.fenced` evidence, never lost, never counted against the run.

- T6 cross-run passes: `passes={name: CrossRunPass}` (epochledger/passes.py) run after
  the steps, item by item: a failing item is delivered again up to its ceiling, then
  retired (`pass.item_retired`); no run's state moves; listing the items is tick-fatal.
- T7 one holder of a role: a step bound to an exclusive role (`exclusive={"admit":
  "admission"}`) runs only in a tick whose epoch holds the role (Ledger.acquire_role,
  ledger/role.py), and is skipped, not failed, otherwise; `token(role)` is the grant's
  fencing token for the systems the step drives.

The driver returns a report; it never logs.
"""

from __future__ import annotations

import dataclasses
import math
import queue
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, TypedDict

import msgspec

from epochledger import passes as passes_mod
from epochledger import reports
from epochledger.app import Ledger
from epochledger.ledger import lifecycle
from epochledger.ledger.clock import elapsed
from epochledger.ledger.codec import check_value
from epochledger.ledger.errors import (
    ConflictError,
    InvalidInput,
    LedgerError,
    RoleHeld,
    RunNotFound,
    StaleEpoch,
    StoreError,
)
from epochledger.ledger.events import (
    Name,
    RunDeadLettered,
    RunEventBase,
    RunFenced,
    RunTickFailed,
    RunTickRecovered,
    run_stream,
    tag_of,
)
from epochledger.ledger.process import EpochRef, EpochState
from epochledger.ledger.role import RoleState
from epochledger.ledger.run import RunState, TickStreak
from epochledger.passes import CrossRunPass, ItemFailure, ItemFailureDoc
from epochledger.projections import tick_health as tick_health_view

DEFAULT_TICK_FAILURE_DEADLINE = timedelta(minutes=5)
# Rule T5: how long one step may run on one run before the tick abandons it, and how
# many abandoned steps may still be running (each holds one thread) before the driver
# stops starting steps. Both are documented in docs/tick.md, "A step's deadline".
DEFAULT_STEP_DEADLINE = timedelta(seconds=30)
DEFAULT_MAX_ABANDONED_STEPS = 16
MAX_ERROR = 4096  # characters of an exception message kept in an event
MAX_CLASS = 200  # the Name limit of error_class

Step = Callable[[RunState], object]
Cleanup = Callable[[RunState], object]
Decision = Literal["healthy", "recovered", "failed", "dead_letter"]


class StepDeadlineExceeded(Exception):
    """A step did not return within its deadline (rule T5). The tick abandoned it and
    counted it as the run's tick failure: recorded as `run.tick_failed` with this class,
    so the T2 bound dead-letters a run whose step always hangs."""

    def __init__(self, run: str, step: str, deadline: timedelta, abandoned_by: str | None = None):
        self.run, self.step, self.deadline, self.abandoned_by = run, step, deadline, abandoned_by
        seconds = f"{deadline.total_seconds():g}s"
        if abandoned_by is None:
            text = f"step {step!r} did not return within its deadline of {seconds}: abandoned for this tick (rule T5)"
        else:
            text = (
                f"step {step!r}, abandoned by tick {abandoned_by} past its deadline of {seconds}, has not "
                f"returned yet: not started again (rule T5)"
            )
        super().__init__(text)


@dataclass
class _Current:
    index: int  # of the run in its batch
    step: str
    limit: timedelta | None
    started: float  # elapsed()


@dataclass
class _Batch:
    """The runs one worker drives in order, and what it has done so far. `lock` makes
    the driver's "abandon it" and the worker's "next step" one decision."""

    states: Sequence[RunState]
    steps: Sequence[tuple[str, Step]]
    limits: Mapping[str, timedelta | None]
    epoch: str
    results: list[tuple[str | None, BaseException | None]] = field(default_factory=list)
    current: _Current | None = None
    abandoned: bool = False
    finished: bool = False
    done: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    owner: _StepThreads | None = None  # the threads that keep the books of its abandoned step


POLL_S = 1.0  # the driver re-reads the worker's progress at least this often while a step runs


class _StepThreads:
    """Where the steps run (rule T5): one daemon worker thread, reused from tick to tick
    (so its store connection is too), drives a tick's runs in order while the driver's
    thread watches the deadline of the step under way. One hand-off a tick, not one a
    step: a step costs the worker a lock and a read of the monotonic clock.

    A step past its deadline is abandoned: Python cannot stop a thread, so its worker is
    left to finish that step on its own (it then exits, its result dropped) and a fresh
    worker drives the rest. `running` says which run each abandoned step belongs to, so
    later ticks charge that run without starting it again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inbox: queue.SimpleQueue[_Batch] | None = None
        self.running: dict[str, tuple[str, str, timedelta]] = {}  # run -> (step, abandoning tick, deadline)

    @property
    def leaked(self) -> int:
        with self._lock:
            return len(self.running)

    def abandoned(self, run: str) -> tuple[str, str, timedelta] | None:
        with self._lock:
            return self.running.get(run)

    def drive(self, batch: _Batch, tick: str, first_wait: float) -> _Current | None:
        """Hand `batch` to the worker and wait until it is done or its step under way is
        past its deadline: None, or the step abandoned (its run's index, name, deadline;
        `batch.results` then holds the outcomes of the runs before it)."""
        if self._inbox is None:
            self._inbox = queue.SimpleQueue()
            threading.Thread(target=self._work, args=(self._inbox,), name="epochledger-tick-steps", daemon=True).start()
        batch.owner = self
        self._inbox.put(batch)
        wait = first_wait
        while True:
            batch.done.wait(wait)
            with batch.lock:
                if batch.finished:
                    return None
                now = elapsed()
                cur = batch.current
                if cur is None or cur.limit is None:
                    wait = first_wait
                    continue
                left = cur.limit.total_seconds() - (now - cur.started)
                if left > 0:
                    wait = min(left, POLL_S)
                    continue
                batch.abandoned = True
                with self._lock:
                    self.running[batch.states[cur.index].run] = (cur.step, tick, cur.limit)
            self._inbox = None  # that worker is busy for good, as far as this driver knows
            return cur

    def _work(self, inbox: queue.SimpleQueue[_Batch]) -> None:
        while run_batch(inbox.get()):
            pass

    def returned(self, run: str) -> None:
        """An abandoned step of `run` returned at last: the run may be ticked again."""
        with self._lock:
            self.running.pop(run, None)


def run_batch(b: _Batch) -> bool:
    """Drive `b`'s runs in order, in the calling thread (the worker's, or the driver's
    own when no step has a deadline). False if it was abandoned: the calling thread is
    then a worker whose step returned too late, and it must exit."""
    for i, state in enumerate(b.states):
        outcome: tuple[str | None, BaseException | None] = (None, None)
        for name, step in b.steps:
            with b.lock:
                if b.abandoned:
                    return _too_late(b)
                b.current = _Current(i, name, b.limits[name], elapsed())
            # The exception is kept outside its `except` block: the next step (this
            # run's or the next run's) starts with no exception being handled, so it can
            # neither see nor chain (`__context__`) another run's failure.
            caught: BaseException | None = None
            try:
                step(state)
            except BaseException as exc:  # noqa: BLE001 - handed to the driver, which decides
                caught = exc
            if caught is not None:
                outcome = (name, caught)
                break
        with b.lock:
            if b.abandoned:
                return _too_late(b)
            b.results.append(outcome)
            b.current = None
        if _stops_the_tick(outcome[1], b.epoch):
            break
    with b.lock:
        if b.abandoned:
            return _too_late(b)
        b.finished = True
        b.done.set()
    return True


def _too_late(b: _Batch) -> bool:
    assert b.current is not None and b.owner is not None
    b.owner.returned(b.states[b.current.index].run)
    return False


def _stops_the_tick(raised: BaseException | None, epoch: str) -> bool:
    """A step's error that ends the whole tick, not one run's: the driver's own epoch
    fenced (rule F1), or a BaseException (Ctrl-C, SystemExit: the scheduler stops)."""
    if raised is None:
        return False
    return not isinstance(raised, Exception) or (isinstance(raised, StaleEpoch) and raised.epoch == epoch)


# ------------------------------------------------------------------ report
@dataclass(frozen=True)
class RunFailure:
    """One run's step raised in this tick (T1)."""

    run: str
    step: str
    error_class: str
    error: str
    failing_since: datetime  # first failure of the streak (this tick's if it just opened)
    failures: int  # failures in the streak, this one included
    dead_lettered: bool  # this failure ended the streak in a dead-letter
    recorded: bool  # its event is in the ledger
    exception: BaseException = field(repr=False, compare=False)


@dataclass(frozen=True)
class DeadLetter:
    """A run dead-lettered by this tick (T2). `recorded` is False only if the store
    refused the write; then the next failing tick dead-letters it again."""

    run: str
    step: str
    error_class: str
    error: str
    failing_since: datetime
    failures: int
    deadline: timedelta
    reason: str
    cleanup_error: str | None
    recorded: bool


@dataclass(frozen=True)
class Unrecorded:
    """The driver could not write a run's tick event (another writer kept moving the
    run). The step outcome is still in the report; the next tick records it."""

    run: str
    event: str
    error: LedgerError


@dataclass(frozen=True)
class TickFatal:
    """A failure that belongs to no single run (T1): listing the active runs failed
    (nothing ran, nothing was appended), the store failed under the driver's own
    writes (the steps ran; their events may be missing), or the driver's epoch is no
    longer live (`stale_epoch`, rule F1: the tick stopped; what it had observed is kept
    as run.fenced evidence), or `max_abandoned_steps` steps abandoned past their deadline
    are still running (`abandoned_steps`, rule T5: no further step was started; the runs
    not driven are in `TickReport.skipped`, their streaks untouched), or asking for an
    exclusive role failed (`role`, rule T7: no step ran; a grant asked for before the
    failure may have landed, and is this epoch's)."""

    stage: FatalStage
    # "list" also covers a cross-run pass whose listing raised (rule T6): nothing ran.
    error_class: str
    error: str
    exception: BaseException = field(repr=False, compare=False)


FatalStage = Literal["list", "record", "stale_epoch", "abandoned_steps", "role"]


# The report as JSON (TickReport.to_builtins): each part's fields, in their order, but
# the exceptions (tests/app/test_typed_results.py checks each against its dataclass).
class RunFailureDoc(TypedDict):
    run: str
    step: str
    error_class: str
    error: str
    failing_since: str
    failures: int
    dead_lettered: bool
    recorded: bool


class DeadLetterDoc(TypedDict):
    run: str
    step: str
    error_class: str
    error: str
    failing_since: str
    failures: int
    deadline: float  # seconds
    reason: str
    cleanup_error: str | None
    recorded: bool


class UnrecordedDoc(TypedDict):
    run: str
    event: str
    error: str  # "ErrorClass: message"


class TickFatalDoc(TypedDict):
    stage: FatalStage
    error_class: str
    error: str


class TickReportDoc(TypedDict):
    """A TickReport as JSON: its fields in their order, the five lists of failures and
    the fatal error last, then `ok` (its tuples of run ids kept as tuples, as
    msgspec.to_builtins keeps them: JSON arrays once encoded)."""

    tick: str
    started_at: str
    active: int
    advanced: tuple[str, ...]
    recovered: tuple[str, ...]
    skipped: tuple[str, ...]
    appended: int
    fenced: int
    roles_held: dict[str, int]
    roles_not_held: dict[str, str]
    steps_skipped: tuple[str, ...]
    items_recovered: tuple[str, ...]
    item_failures: list[ItemFailureDoc]
    failures: list[RunFailureDoc]
    dead_letters: list[DeadLetterDoc]
    unrecorded: list[UnrecordedDoc]
    fatal: TickFatalDoc | None
    ok: bool


@dataclass(frozen=True)
class TickReport:
    tick: str
    started_at: datetime
    active: int = 0  # runs the tick drove
    advanced: tuple[str, ...] = ()  # every step succeeded
    recovered: tuple[str, ...] = ()  # ... and an open streak closed
    failures: tuple[RunFailure, ...] = ()
    dead_letters: tuple[DeadLetter, ...] = ()
    unrecorded: tuple[Unrecorded, ...] = ()
    fatal: TickFatal | None = None
    skipped: tuple[str, ...] = ()  # runs not driven: too many abandoned steps still running (T5)
    appended: int = 0  # events the driver appended (run.fenced evidence included)
    fenced: int = 0  # of them, run.fenced evidence kept for a stale epoch (rule F1)
    # Rule T7: the exclusive roles this tick held (role -> the grant's fencing token), the
    # ones another live epoch held (role -> "epoch E of P, token N"), and the steps that
    # were skipped, not failed, for want of their role.
    roles_held: Mapping[str, int] = field(default_factory=dict)
    roles_not_held: Mapping[str, str] = field(default_factory=dict)
    steps_skipped: tuple[str, ...] = ()  # steps and cross-run passes
    # Rule T6: the cross-run passes' items that raised (retired ones flagged), and the
    # items that succeeded after failures ("pass/item").
    item_failures: tuple[ItemFailure, ...] = ()
    items_recovered: tuple[str, ...] = ()

    @property
    def item_retirements(self) -> tuple[ItemFailure, ...]:
        return tuple(f for f in self.item_failures if f.retired)

    @property
    def ok(self) -> bool:
        return self.fatal is None and not self.failures and not self.unrecorded and not self.item_failures

    def to_builtins(self) -> TickReportDoc:
        """JSON-ready (exceptions shown by class and message): each part's fields walked
        from the dataclass itself, so the document's shape is the TypedDicts above."""

        def plain(x: Any) -> Any:
            d = {k: v for k, v in x.__dict__.items() if k != "exception"}
            if isinstance(x, Unrecorded):
                d["error"] = f"{type(x.error).__name__}: {x.error}"
            if isinstance(x, DeadLetter):
                d["deadline"] = x.deadline.total_seconds()
            return d

        lists = ("failures", "dead_letters", "unrecorded", "fatal", "item_failures")
        built: TickReportDoc = msgspec.to_builtins(
            {
                **{k: v for k, v in self.__dict__.items() if k not in lists},
                "item_failures": [plain(f) for f in self.item_failures],
                "failures": [plain(f) for f in self.failures],
                "dead_letters": [plain(d) for d in self.dead_letters],
                "unrecorded": [plain(u) for u in self.unrecorded],
                "fatal": plain(self.fatal) if self.fatal else None,
                "ok": self.ok,
            }
        )
        return built


# ------------------------------------------------------------- pure parts
def decision(streak: TickStreak | None, failed: bool, now: datetime, deadline: timedelta) -> Decision:
    """What the tick records for one run. Pure. The deadline counts wall-clock time from
    the streak's first failure ("longer than": strictly greater), never ticks. A clock
    that stepped back gives a negative age: no dead-letter until it catches up."""
    if not failed:
        return "recovered" if streak is not None else "healthy"
    if streak is not None and now - streak.since > deadline:
        return "dead_letter"
    return "failed"


_UNSAFE = re.compile(r"[\s\x00-\x1f\x7f]")


def error_class(exc: BaseException) -> str:
    """`module.Qualname` (builtins bare), fitted to the event's Name field; a failure
    a foreign tick loop reported keeps the class it named (ReportedFailure)."""
    cls = type(exc)
    if isinstance(exc, ReportedFailure):
        name = exc.error_class
    else:
        name = cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    return _UNSAFE.sub("_", name)[:MAX_CLASS] or "Exception"


def error_message(exc: BaseException) -> str:
    """str(exc), cut to MAX_ERROR. A poison exception whose __str__ raises must not
    take the tick down with it."""
    try:
        text = str(exc)
    except Exception as e:  # noqa: BLE001 - any failure of a foreign __str__
        text = f"<str() of the exception raised {type(e).__name__}>"
    return text if len(text) <= MAX_ERROR else text[: MAX_ERROR - 14] + " …(truncated)"


def dead_letter_reason(
    tick: str,
    step: str,
    cls: str,
    error: str,
    since: datetime,
    now: datetime,
    failures: int,
    deadline: timedelta,
    cleanup_error: str | None,
) -> str:
    """Names the tick, the step and the bound, so a reader can tell a dead-letter from a
    step's own failure (which would be `run.failed` with the step's code)."""
    reason = (
        f"tick deadline exceeded: tick {tick} dead-lettered the run because step {step!r} "
        f"has failed on every tick since {since.isoformat()} ({failures} failures over "
        f"{(now - since).total_seconds():.0f}s, bound tick_failure_deadline={deadline.total_seconds():.0f}s); "
        f"last error {cls}: {error}; rule T2"
    )
    if cleanup_error is not None:
        reason += f"; dead-letter cleanup failed (best-effort, the dead-letter stands): {cleanup_error}"
    return reason


def _positive(value: timedelta | float | None, what: str) -> timedelta | None:
    """A positive duration (seconds or a timedelta), or None where None is allowed."""
    if value is None:
        if what == "tick_failure_deadline":
            raise InvalidInput("must be a duration, got None", where=what)
        return None
    if isinstance(value, bool) or not isinstance(value, timedelta | int | float):
        raise InvalidInput(f"must be seconds or a timedelta, got {value!r}", where=what)
    try:  # a huge number of seconds overflows timedelta: refused like any other bad duration
        duration = value if isinstance(value, timedelta) else timedelta(seconds=value) if math.isfinite(value) else None
    except OverflowError:
        duration = None
    if duration is None or duration <= timedelta(0):
        raise InvalidInput(f"must be a positive, finite duration, got {value!r}", where=what)
    return duration


def _describe(exc: BaseException) -> tuple[str, str]:
    return error_class(exc), error_message(exc)


def _name(value: str, what: str) -> str:
    checked: str = check_value(value, Name, what)
    return checked


# ------------------------------------------------------------------ driver
@dataclass
class _Outcome:
    state: RunState
    now: datetime
    step: str | None = None
    exc: BaseException | None = None
    decision: Decision = "healthy"
    event: RunEventBase | None = None
    cleanup_ran: bool = False
    cleanup_error: str | None = None
    recorded: bool = False


class TickDriver:
    """Runs the scheduler's per-run steps over the active runs, one tick per `tick()`.

    `steps`: (name, callable) pairs, or a mapping, run in order on each active run's
    RunState; the first that raises ends that run's tick. A step that writes to the
    ledger (start, finish, ...) does so itself through the ledger it closes over.
    `on_dead_letter`: best-effort cleanup called with the run's state just before its
    dead-letter is written; it must be idempotent (a dead-letter the store refused is
    retried on the next failing tick).
    `step_deadline` (rule T5): how long a step may run on one run (default 30 s;
    None: no deadline, the step runs in the caller's thread and a hang stalls the tick);
    `step_deadlines` overrides it per step name. A step past its deadline is abandoned
    and counted as the run's tick failure (StepDeadlineExceeded); while it still runs,
    later ticks charge the run again without starting it. `max_abandoned_steps`: how
    many abandoned steps may still be running before the driver starts no more steps
    (each holds one thread: docs/tick.md, "A step's deadline").
    `passes` (rule T6): name -> CrossRunPass (epochledger/passes.py), work that is not
    about one run, run after the steps with per-item isolation and a delivery ceiling;
    its listing is read with the runs' listing, and a listing that raises is tick-fatal.
    `exclusive` (rule T7): step (or pass) name -> an exclusive role (e.g. {"admit": "admission"}).
    Each tick asks the ledger for each role (Ledger.acquire_role); a step runs only in a
    tick whose epoch holds its role, and is skipped, not failed, otherwise. While it
    runs, `token(role)` is the grant's fencing token, for the systems the step drives.
    """

    def __init__(
        self,
        ledger: Ledger,
        steps: Sequence[tuple[str, Step]] | Mapping[str, Step],
        *,
        epoch: EpochRef | str,
        tick_failure_deadline: timedelta | float = DEFAULT_TICK_FAILURE_DEADLINE,
        on_dead_letter: Cleanup | None = None,
        actor: str = "tick",
        step_deadline: timedelta | float | None = DEFAULT_STEP_DEADLINE,
        step_deadlines: Mapping[str, timedelta | float | None] | None = None,
        max_abandoned_steps: int = DEFAULT_MAX_ABANDONED_STEPS,
        exclusive: Mapping[str, str] | None = None,
        passes: Mapping[str, CrossRunPass] | None = None,
    ):
        pairs = list(steps.items()) if isinstance(steps, Mapping) else list(steps)
        if not pairs:
            raise InvalidInput("a tick needs at least one step", where="steps")
        names = [_name(n, "steps") for n, _ in pairs]
        if len(set(names)) != len(names):
            raise InvalidInput(f"step names must be unique, got {names}", where="steps")
        for n, f in pairs:
            if not callable(f):
                raise InvalidInput(f"step {n!r} is not callable", where="steps")
        deadline = _positive(tick_failure_deadline, "tick_failure_deadline")
        assert deadline is not None
        overrides = dict(step_deadlines or {})
        unknown = sorted(set(overrides) - set(names))
        if unknown:
            raise InvalidInput(f"names no step of this driver: {unknown} (steps: {names})", where="step_deadlines")
        default = _positive(step_deadline, "step_deadline")
        self.step_deadlines: dict[str, timedelta | None] = {
            n: _positive(overrides[n], f"step_deadlines[{n!r}]") if n in overrides else default for n in names
        }
        if isinstance(max_abandoned_steps, bool) or not isinstance(max_abandoned_steps, int) or max_abandoned_steps < 1:
            raise InvalidInput(
                f"must be a whole number of at least 1, got {max_abandoned_steps!r}", where="max_abandoned_steps"
            )
        self.max_abandoned_steps = max_abandoned_steps
        if exclusive is not None and not isinstance(exclusive, Mapping):
            raise InvalidInput(f"must map step names to roles, got {exclusive!r}", where="exclusive")
        if passes is not None and not isinstance(passes, Mapping):
            raise InvalidInput(f"must map pass names to CrossRunPass, got {passes!r}", where="passes")
        self.passes = {_name(n, "passes"): p for n, p in dict(passes or {}).items()}
        for n, p in self.passes.items():
            if not isinstance(p, CrossRunPass):
                raise InvalidInput(f"pass {n!r} is not a CrossRunPass, got {p!r}", where="passes")
            if n in names:
                raise InvalidInput(f"pass {n!r} has the name of a step", where="passes")
        self.exclusive = {n: _name(r, f"exclusive[{n!r}]") for n, r in dict(exclusive or {}).items()}
        unknown = sorted(set(self.exclusive) - set(names) - set(self.passes))
        if unknown:
            raise InvalidInput(f"names no step of this driver: {unknown} (steps: {names})", where="exclusive")
        self.grants: dict[str, RoleState] = {}  # the roles the current (or last) tick held
        self._threads = _StepThreads()
        self.ledger = ledger
        self.steps: list[tuple[str, Step]] = pairs
        self.deadline = deadline
        self.on_dead_letter = on_dead_letter
        self.actor = _name(actor, "actor")
        if isinstance(epoch, str):
            self.epoch, self.process = _name(epoch, "epoch"), None
        elif isinstance(getattr(epoch, "epoch", None), str) and isinstance(getattr(epoch, "process", None), str):
            self.epoch, self.process = _name(epoch.epoch, "epoch"), _name(epoch.process, "epoch.process")
        else:
            raise InvalidInput(
                f"expected the epoch this driver ticks for (boot()'s result or its id), got {epoch!r}", where="epoch"
            )
        self.process = self._own_epoch(ledger.batch()).process  # UnknownEpoch if no slot booted it

    # -------------------------------------------------------------- tick
    def list_active(self) -> list[RunState]:
        """The runs this tick drives, with their streaks folded in: the tick's one read."""
        return self.ledger.runs(where=lambda s: lifecycle.is_active(s.status, s.code))

    def _own_epoch(self, batch: Any) -> EpochState:
        batch.declare_epoch(self.epoch, self.process) if self.process is not None else None
        found: EpochState = batch.find_epoch(self.epoch, self.process)
        return found

    def tick(self, tick_id: str | None = None) -> TickReport:
        """One pass over the active runs. `tick_id` names the tick in its events and in
        a dead-letter's reason; it must be unique per tick (the default is the start
        instant plus a random suffix), or a repeated identical failure event would be
        taken for a retried delivery and not extend the streak."""
        clock = self.ledger.clock
        started = clock.now()
        tick = _name(tick_id, "tick_id") if tick_id is not None else f"{started:%Y%m%dT%H%M%S}Z-{uuid.uuid4().hex[:8]}"
        try:
            batch = self.ledger.batch()
            own = self._own_epoch(batch)
            ended = batch.end_of(own)  # the one liveness definition, host facts included
            if ended is not None:  # F1: a stale epoch's tick runs no step and writes nothing
                return TickReport(tick=tick, started_at=started, fatal=self._stale(ended[1]))
        except Exception as exc:  # noqa: BLE001 - whatever it is, it belongs to no run
            fatal = TickFatal("list", error_class(exc), error_message(exc), exc)
            return TickReport(tick=tick, started_at=started, fatal=fatal)
        try:
            not_held = self._take_roles(own)
        except StaleEpoch as exc:  # the epoch ended between the check above and the ask (F1)
            return TickReport(tick=tick, started_at=started, fatal=self._stale(exc.why, exc))
        except Exception as exc:  # noqa: BLE001 - the ask belongs to no run either
            fatal = TickFatal("role", error_class(exc), error_message(exc), exc)
            return TickReport(tick=tick, started_at=started, fatal=fatal)
        held = {role: g.token for role, g in self.grants.items()}
        steps = [(n, f) for n, f in self.steps if self.exclusive.get(n) not in not_held]
        skipped_work = [n for n in [*(n for n, _ in self.steps), *self.passes] if self.exclusive.get(n) in not_held]
        roles = dict(roles_held=held, roles_not_held=not_held, steps_skipped=tuple(skipped_work))
        try:
            active = self.list_active()
            items = {n: passes_mod.list_items(p, n) for n, p in self.passes.items() if n not in skipped_work}
        except Exception as exc:  # noqa: BLE001 - whatever it is, it belongs to no run
            fatal = TickFatal("list", error_class(exc), error_message(exc), exc)
            return TickReport(tick=tick, started_at=started, fatal=fatal, **roles)  # type: ignore[arg-type]

        outcomes: list[_Outcome] = []
        stale: StaleEpoch | None = None
        driven, skipped = self._drive(active, tick, steps)
        for state, step, raised in driven:
            if isinstance(raised, StaleEpoch) and raised.epoch == self.epoch:
                stale = raised  # a step's own write was fenced for this epoch: stop here (F1)
                break
            if raised is not None and not isinstance(raised, Exception):
                raise raised  # Ctrl-C, SystemExit from a step: they stop the scheduler, not one run
            o = _Outcome(state, clock.now(), step, raised)
            o.decision = decision(state.tick_streak, raised is not None, o.now, self.deadline)
            o.event = self._event(o, tick)
            outcomes.append(o)

        appended, fenced, unrecorded, recording = self._record(tick, [o for o in outcomes if o.event is not None])
        ended_by = recording if recording is not None or stale is None else self._stale(stale.why, stale)
        if ended_by is None and skipped:
            ended_by = self._exhausted(len(skipped))
        report = self._report(tick, started, outcomes, appended, fenced, unrecorded, ended_by, skipped)
        if ended_by is None:
            report = self._passes(report, items, tick)
        return dataclasses.replace(report, **roles)  # type: ignore[arg-type]

    def _passes(self, report: TickReport, items: Mapping[str, list[tuple[str, Any]]], tick: str) -> TickReport:
        """Run each cross-run pass over its listed items (rule T6): per-item isolation,
        failures recorded on the pass's stream, never a run's."""
        failures: list[ItemFailure] = []
        recovered: list[str] = []
        appended = 0
        fatal: TickFatal | None = None
        for name, listed in items.items():
            try:
                f, r, n = passes_mod.run_pass(
                    self.ledger,
                    name,
                    self.passes[name],
                    listed,
                    tick=tick,
                    epoch=self.epoch,
                    actor=self.actor,
                    describe=_describe,
                )
            except StaleEpoch as exc:
                fatal = self._stale(exc.why, exc)
                break
            except LedgerError as exc:
                fatal = TickFatal("record", error_class(exc), error_message(exc), exc)
                break
            failures += f
            recovered += [f"{name}/{i}" for i in r]
            appended += n
        return dataclasses.replace(
            report,
            item_failures=tuple(failures),
            items_recovered=tuple(recovered),
            appended=report.appended + appended,
            fatal=fatal,
        )

    def _take_roles(self, own: EpochState) -> dict[str, str]:
        """Ask for every exclusive role of this driver (rule T7): held by this epoch
        already, it appends nothing; held by another live epoch, it is not this tick's
        (role -> who holds it, returned). `grants` then holds this tick's grants."""
        self.grants = {}
        not_held: dict[str, str] = {}
        for role in dict.fromkeys(self.exclusive.values()):
            try:
                self.grants[role] = self.ledger.acquire_role(role, own, actor=self.actor)
            except RoleHeld as e:
                not_held[role] = f"epoch {e.holder_epoch} of {e.holder_process}, token {e.token}"
        return not_held

    def token(self, role: str) -> int:
        """The fencing token of this tick's grant of `role` (rule T7), for a step to hand
        to the systems it drives. Only a step of that role runs while it is held."""
        grant = self.grants.get(role)
        if grant is None:
            raise InvalidInput(f"this tick does not hold role {role!r} (held: {sorted(self.grants)})", where="role")
        return grant.token

    def _exhausted(self, skipped: int) -> TickFatal:
        held = self._threads.leaked
        message = (
            f"{held} steps abandoned past their deadlines are still running (max_abandoned_steps="
            f"{self.max_abandoned_steps}): {skipped} runs were not driven this tick; each abandoned step "
            f"holds a thread until it returns: restart the process if they never do (rule T5)"
        )
        return TickFatal("abandoned_steps", "StepDeadlineExceeded", message, RuntimeError(message))

    def _stale(self, why: str, exc: BaseException | None = None) -> TickFatal:
        message = (
            f"the tick's epoch {self.epoch} of {self.process} is no longer live ({why}): the tick stopped (rule F1)"
        )
        return TickFatal("stale_epoch", "StaleEpoch", message, exc or StaleEpoch("", None, "tick", self.epoch, why))

    def _drive(
        self, active: Sequence[RunState], tick: str, steps: Sequence[tuple[str, Step]]
    ) -> tuple[list[tuple[RunState, str | None, BaseException | None]], list[str]]:
        """Run the steps over `active` (rule T5): each run's (state, failed step, error),
        in listing order, and the runs not driven for want of a thread. A run whose step
        an earlier tick abandoned, still running, is charged at once and not started."""
        charged: dict[int, tuple[str | None, BaseException | None]] = {}
        todo: list[int] = []
        for i, state in enumerate(active):
            held = self._threads.abandoned(state.run)
            if held is None:
                todo.append(i)
            else:
                step, by, limit = held
                charged[i] = (step, StepDeadlineExceeded(state.run, step, limit, abandoned_by=by))
        done: dict[int, tuple[str | None, BaseException | None]] = {}
        limits = [d.total_seconds() for d in self.step_deadlines.values() if d is not None]
        pos, not_driven = 0, []
        while pos < len(todo):
            batch = _Batch([active[i] for i in todo[pos:]], steps, self.step_deadlines, self.epoch)
            if not limits:  # no deadline at all: the caller's thread, as without T5
                run_batch(batch)
                hung: _Current | None = None
            elif self._threads.leaked >= self.max_abandoned_steps:
                not_driven = todo[pos:]  # no thread to spare: not these runs' failure
                break
            else:
                hung = self._threads.drive(batch, tick, min([POLL_S, *limits]))
            done.update((todo[pos + k], r) for k, r in enumerate(batch.results))
            if hung is None:
                break  # all driven, or stopped by a step (a fenced epoch, Ctrl-C)
            i = todo[pos + hung.index]
            assert hung.limit is not None
            done[i] = (hung.step, StepDeadlineExceeded(active[i].run, hung.step, hung.limit))
            pos += hung.index + 1
        outcomes = {**charged, **done}
        driven = [(active[i], *outcomes[i]) for i in sorted(outcomes)]
        return driven, [active[i].run for i in not_driven]

    def _event(self, o: _Outcome, tick: str) -> RunEventBase | None:
        s = o.state
        common = dict(at=o.now, run=s.run, actor=self.actor, tick=tick, epoch=self.epoch)
        if o.decision == "healthy":
            return None
        if o.decision == "recovered":
            return RunTickRecovered(**common)  # type: ignore[arg-type]
        assert o.step is not None and o.exc is not None
        cls, msg = error_class(o.exc), error_message(o.exc)
        if o.decision == "failed":
            return RunTickFailed(step=o.step, error_class=cls, error=msg, **common)  # type: ignore[arg-type]
        streak = s.tick_streak
        assert streak is not None
        if not o.cleanup_ran:
            o.cleanup_ran = True
            o.cleanup_error = self._cleanup(s)
        return RunDeadLettered(
            step=o.step,
            error_class=cls,
            error=msg,
            failing_since=streak.since,
            failures=streak.failures + 1,
            deadline_s=self.deadline.total_seconds(),
            cleanup_error=o.cleanup_error,
            reason=dead_letter_reason(
                tick, o.step, cls, msg, streak.since, o.now, streak.failures + 1, self.deadline, o.cleanup_error
            ),
            **common,  # type: ignore[arg-type]
        )

    def _cleanup(self, state: RunState) -> str | None:
        # Best-effort (rule T2): the incident this answers is a run whose reads always
        # failed, so its cleanup's read failed first and the bound never fired. A cleanup
        # error is reported in the reason; it never stops the dead-letter.
        if self.on_dead_letter is None:
            return None
        caught: Exception | None = None
        try:
            self.on_dead_letter(state)
        except Exception as exc:  # noqa: BLE001
            caught = exc
        return None if caught is None else f"{error_class(caught)}: {error_message(caught)}"

    # ------------------------------------------------------------ record
    def _record(self, tick: str, todo: list[_Outcome]) -> tuple[int, int, list[Unrecorded], TickFatal | None]:
        """Group commit: every run's tick event in one transaction, decided against the
        listing's state (no read per run). A run another writer moved meanwhile (a step
        that wrote to it, another replica) makes the commit conflict; the store names the
        moved streams, so those runs are retried one by one against a fresh read and the
        rest are committed together again. One run's conflict never drops another's event.

        If the driver's epoch is found stale while recording (another process booted its
        slot meanwhile), every event is fenced: each is kept as run.fenced evidence in
        the same group commit, and the tick reports `stale_epoch` (F1)."""
        appended = 0
        unrecorded: list[Unrecorded] = []
        group: dict[str, _Outcome] = {run_stream(o.state.run): o for o in todo}
        alone: list[_Outcome] = []
        while group:
            batch = self.ledger.batch()
            self._own_epoch(batch)
            evidence: list[RunFenced] = []
            stale: StaleEpoch | None = None
            for stream, o in list(group.items()):
                assert o.event is not None
                batch.assume(o.state)
                try:
                    batch.submit(o.event)
                except StaleEpoch as e:
                    stale = e
                    if isinstance(e.evidence, RunFenced):
                        evidence.append(e.evidence)
                except LedgerError:
                    # Refused against the listing's view (e.g. a step moved the run out
                    # of the tick): decide again below against a fresh read.
                    alone.append(group.pop(stream))
            if stale is not None:
                return self._keep_stale(evidence, appended, unrecorded, stale)
            try:
                recorded = batch.commit()
            except ConflictError as e:
                moved = [s for s in e.streams if s in group] or list(group)
                alone.extend(group.pop(s) for s in moved)
                continue
            except StoreError as exc:
                return appended, 0, unrecorded, TickFatal("record", error_class(exc), error_message(exc), exc)
            appended += len(recorded)
            for o in group.values():
                o.recorded = True
            break
        for o in alone:
            try:
                appended += self._record_alone(tick, o)
            except StaleEpoch as e:
                return self._keep_stale(
                    [e.evidence] if isinstance(e.evidence, RunFenced) else [], appended, unrecorded, e
                )
            except StoreError as exc:
                return appended, 0, unrecorded, TickFatal("record", error_class(exc), error_message(exc), exc)
            except LedgerError as e:
                assert o.event is not None
                unrecorded.append(Unrecorded(o.state.run, tag_of(o.event), e))
        return appended, 0, unrecorded, None

    def _keep_stale(
        self, evidence: list[RunFenced], appended: int, unrecorded: list[Unrecorded], stale: StaleEpoch
    ) -> tuple[int, int, list[Unrecorded], TickFatal | None]:
        """Append the fenced tick events as evidence, one group commit (run.fenced is
        legal from any status; a run moved meanwhile is re-read)."""
        kept = 0
        for _ in range(5):
            try:
                with self.ledger.batch() as b:
                    for f in evidence:
                        b.submit(f)
                kept = len(b.recorded)
                break
            except ConflictError:
                continue
            except StoreError as exc:
                return appended, 0, unrecorded, TickFatal("record", error_class(exc), error_message(exc), exc)
        return appended + kept, kept, unrecorded, self._stale(stale.why, stale)

    def _record_alone(self, tick: str, o: _Outcome) -> int:
        with self.ledger.batch() as b:
            self._own_epoch(b)
            fresh = b.state(run_stream(o.state.run))
            if fresh is None or fresh.deleted or not lifecycle.is_active(fresh.status, fresh.code):
                # A step (or someone else) moved the run out of the tick: its streak is
                # closed by that move (ledger/run.py), there is nothing to record.
                o.decision = "healthy" if o.exc is None else "failed"
                o.event = None
                return 0
            o.state = fresh
            o.decision = decision(fresh.tick_streak, o.exc is not None, o.now, self.deadline)
            o.event = self._event(o, tick)
            if o.event is not None:
                b.submit(o.event)
            n = b.pending
        o.recorded = o.event is not None
        return n

    # ------------------------------------------------------------ report
    def _report(
        self,
        tick: str,
        started: datetime,
        outcomes: Iterable[_Outcome],
        appended: int,
        fenced: int,
        unrecorded: list[Unrecorded],
        fatal: TickFatal | None,
        skipped: Sequence[str] = (),
    ) -> TickReport:
        advanced: list[str] = []
        recovered: list[str] = []
        failures: list[RunFailure] = []
        dead: list[DeadLetter] = []
        n = 0
        for o in outcomes:
            n += 1
            run = o.state.run
            if o.exc is None:
                advanced.append(run)
                if o.decision == "recovered":
                    recovered.append(run)
                continue
            assert o.step is not None
            streak = o.state.tick_streak
            since = streak.since if streak is not None else o.now
            count = (streak.failures if streak is not None else 0) + 1
            cls, msg = error_class(o.exc), error_message(o.exc)
            failures.append(
                RunFailure(run, o.step, cls, msg, since, count, o.decision == "dead_letter", o.recorded, o.exc)
            )
            if o.decision == "dead_letter":
                assert isinstance(o.event, RunDeadLettered)
                dead.append(
                    DeadLetter(
                        run,
                        o.step,
                        cls,
                        msg,
                        since,
                        count,
                        self.deadline,
                        o.event.reason or "",
                        o.cleanup_error,
                        o.recorded,
                    )
                )
        return TickReport(
            tick=tick,
            started_at=started,
            active=n,
            advanced=tuple(advanced),
            recovered=tuple(recovered),
            failures=tuple(failures),
            dead_letters=tuple(dead),
            unrecorded=tuple(unrecorded),
            fatal=fatal,
            appended=appended,
            fenced=fenced,
            skipped=tuple(skipped),
        )


# ------------------------------------------------- ticks run elsewhere
class TickOutcome(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One run's outcome in a tick that a scheduler ran itself, in any language (a Rust
    tick loop over HTTP): every step succeeded (`step` None), step `step` raised an
    error of class `error_class` with message `error`, or step `step` ran past its
    deadline of `abandoned_after_s` seconds and the scheduler abandoned it (rule T5:
    recorded as the driver records its own abandoned steps, StepDeadlineExceeded)."""

    run: str
    step: str | None = None
    error_class: str | None = None
    error: str = ""
    abandoned_after_s: float | None = None


class ReportedFailure(Exception):
    """A step failure a foreign tick loop reported (TickOutcome): the class it named and
    its message, recorded as they were reported."""

    def __init__(self, run: str, step: str, error_class: str, error: str):
        self.run, self.step, self.error_class = run, step, error_class
        super().__init__(error)


class _ReportedTick(TickDriver):
    """The driver over the runs of a reported tick: its steps replay each run's reported
    outcome (the first step a run failed at raises its ReportedFailure), so the streak,
    the recovery, the dead-letter and the fencing are the driver's own (T1-T3, F1), never
    a copy. It drives only the reported runs: a run the report leaves out is not judged."""

    def __init__(self, ledger: Ledger, outcomes: Sequence[TickOutcome], **kw: Any):
        self.outcomes = {o.run: o for o in outcomes}
        names = list(dict.fromkeys(o.step for o in outcomes if o.step is not None)) or ["reported"]
        super().__init__(ledger, [(n, self._replay(n)) for n in names], step_deadline=None, **kw)

    def _replay(self, step: str) -> Step:
        def replay(state: RunState) -> None:
            o = self.outcomes[state.run]
            if o.step == step:
                if o.abandoned_after_s is not None:
                    raise StepDeadlineExceeded(o.run, step, timedelta(seconds=o.abandoned_after_s))
                assert o.error_class is not None
                raise ReportedFailure(o.run, step, o.error_class, o.error)

        return replay

    def list_active(self) -> list[RunState]:
        states = self.ledger.read_states([run_stream(r) for r in self.outcomes])
        found: list[RunState] = []
        for run in self.outcomes:
            state = states[run_stream(run)]
            if state is None or state.deleted:
                raise RunNotFound(run, deleted=state is not None)
            if lifecycle.is_active(state.status, state.code):
                found.append(state)
        return found


def report_tick(
    ledger: Ledger,
    epoch: EpochRef | str,
    outcomes: Sequence[TickOutcome],
    *,
    tick_id: str | None = None,
    tick_failure_deadline: timedelta | float = DEFAULT_TICK_FAILURE_DEADLINE,
    actor: str = "tick",
) -> TickReport:
    """Record a tick that a scheduler ran itself: each reported run's outcome, judged by
    the driver's rules (T1-T3: `decision`, the streak, a recovery only when one is open,
    the dead-letter once the streak outlives `tick_failure_deadline`), on behalf of
    `epoch` (fenced, F1). A run the report names that is unknown or deleted is refused
    (RunNotFound) before anything is appended; one that is no longer active is not in
    the tick. The same report again with the same `tick_id` appends nothing (a retried
    delivery). No cleanup runs here: the scheduler releases what a dead-lettered run held
    when the report names it (`dead_letters`)."""
    if not isinstance(outcomes, Sequence) or not all(isinstance(o, TickOutcome) for o in outcomes):
        raise InvalidInput(f"expected a list of TickOutcome, got {outcomes!r}", where="outcomes")
    for i, o in enumerate(outcomes):
        _name(o.run, f"outcomes[{i}].run")
        if o.abandoned_after_s is not None:
            _abandoned(o, f"outcomes[{i}]")
        elif (o.step is None) != (o.error_class is None):
            raise InvalidInput(
                "a failed run names both the step and the error class; a run whose steps all succeeded names neither",
                where=f"outcomes[{i}]",
            )
        if o.step is not None:
            _name(o.step, f"outcomes[{i}].step")
        if o.error_class is not None:
            _name(o.error_class, f"outcomes[{i}].error_class")
    runs = [o.run for o in outcomes]
    if len(set(runs)) != len(runs):
        twice = sorted({r for r in runs if runs.count(r) > 1})
        raise InvalidInput(f"a tick reports each run once; reported twice: {twice}", where="outcomes")
    driver = _ReportedTick(ledger, outcomes, epoch=epoch, tick_failure_deadline=tick_failure_deadline, actor=actor)
    return driver.tick(tick_id)


def _abandoned(o: TickOutcome, where: str) -> None:
    """An abandoned step (rule T5) names the step and the deadline it ran past, a
    positive number of seconds; its class and message are T5's own, never reported."""
    after = o.abandoned_after_s
    if o.step is None or o.error_class is not None or o.error:
        raise InvalidInput(
            "an abandoned step names the step and abandoned_after_s alone: its error class and message are "
            "rule T5's (StepDeadlineExceeded), not reported",
            where=where,
        )
    if isinstance(after, bool) or not isinstance(after, int | float) or not 0 < after < 10**9:
        raise InvalidInput(
            f"abandoned_after_s is the deadline the step ran past, in seconds (more than 0), got {after!r}",
            where=f"{where}.abandoned_after_s",
        )


# ------------------------------------------------------------------- reads
def tick_health(ledger: Ledger, *, catch_up_first: bool = True) -> tick_health_view.View:
    """The tick-health view, read as the facade reads it (epochledger/reports.py,
    read_tick_health: the one home of the read)."""
    return reports.read_tick_health(ledger._store, catch_up_first=catch_up_first)


def run_tick_health(ledger: Ledger, run: str, *, catch_up_first: bool = True) -> tick_health_view.RunTickHealth:
    """One run's tick health for `show` (epochledger/reports.py, run_tick_health)."""
    return reports.run_tick_health(ledger._store, run, catch_up_first=catch_up_first)
