"""The incident picture (rule V1): one self-contained HTML page of the replayed history.

`history(records)` folds the log into a model: a lane per process slot with its epochs
(each from its boot to the event at which `ledger.process.end_of`, the one liveness
definition, first says it is over: superseded, stopped, exited, or its host rebooted;
rule O7), the runs queued for that slot as bars whose segments
are coloured by status (with the failure code), and markers for boots, sweeps (with the
step-back skips and the give-ups), recoveries, fenced reports and corrections.
`render(model, ...)` turns it into a page: inline SVG and CSS, a legend, a cursor at the
instant under investigation, and hover details (each element's SVG `<title>`, and a
tiny inline script that shows the same text in a tooltip). Nothing is fetched: no URL
appears in the page but the SVG namespace. Both are pure: no clock, no randomness (the
page says what it shows by log position and ledger time, never when it was drawn), so the
same history always gives the same bytes.

Times are the events' own stamps (ledger time). A clock that stepped back shows as it
was recorded: a run stamped before the boot of the epoch that started it, and the
sweep's `clock stepped back` marker that says why the time fallback took nothing.
"""

from __future__ import annotations

import functools
import html
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from epochledger.ledger import lifecycle
from epochledger.ledger import process as slot
from epochledger.ledger.codes import show_code
from epochledger.ledger.errors import InvalidInput, RunNotFound
from epochledger.ledger.events import (
    ProcessBooted,
    ProcessEventBase,
    ProcessExited,
    ProcessStopped,
    ProcessStopping,
    ProcessSweepFailed,
    ProcessSweepSkipped,
    Recorded,
    RunCorrected,
    RunDeleted,
    RunEventBase,
    RunFenced,
    RunQueued,
    RunRecovered,
    Status,
    process_stream,
    run_stream,
)
from epochledger.ledger.store import Store
from epochledger.projections import spans
from epochledger.replay.whatif import EARLY, KILLED_LIVE, LATE, MISSED, WhatIf

NO_SLOT = spans.NO_SLOT  # the lane of a run whose first event names no slot


# ------------------------------------------------------------------ the model
@dataclass(slots=True)  # slots: a window of a fleet holds tens of thousands of them
class Segment:
    status: Status
    code: str
    start: datetime
    end: datetime | None = None  # None: still in this status at the end of the history
    position: int = 0


@dataclass(slots=True)
class Mark:
    kind: str  # a key of MARKS: boot | stop | stopping | supersede | exit | reboot | sweep | ... | correction
    at: datetime
    position: int
    detail: str
    run: str | None = None
    epoch: str | None = None


@dataclass(slots=True)
class Bar:
    run: str
    process: str
    workflow: str | None = None
    segments: list[Segment] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)

    @property
    def start(self) -> datetime:
        return self.segments[0].start

    @property
    def status(self) -> Status:
        return self.segments[-1].status

    @property
    def code(self) -> str:
        return self.segments[-1].code


@dataclass(eq=False)  # an epoch is itself: two boots may carry equal facts
class Epoch:
    process: str
    epoch: str
    booted_at: datetime
    recorded_at: datetime
    host: str | None = None
    pid: int | None = None
    host_boot: str | None = None
    end: datetime | None = None  # the instant of the event at which end_of first said it is over
    end_kind: str | None = None  # "supersede" | "stop" | "exit" | "reboot"
    end_why: str | None = None  # end_of's sentence
    superseded_by: str | None = None


@dataclass
class Lane:
    process: str
    epochs: list[Epoch] = field(default_factory=list)
    bars: list[Bar] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    live: list[Epoch] = field(default_factory=list)  # its epochs end_of has not ended yet


# end_of's rule -> how the page draws the end of the epoch
END_KINDS = {slot.SUPERSEDED: "supersede", slot.STOPPED: "stop", slot.EXITED: "exit", slot.HOST_REBOOTED: "reboot"}


@dataclass
class History:
    lanes: dict[str, Lane] = field(default_factory=dict)
    bars: dict[str, Bar] = field(default_factory=dict)
    first: datetime | None = None
    last: datetime | None = None
    position: int = 0
    events: int = 0
    # The liveness facts, folded as the ledger folds them (ledger/process.py): each
    # slot's state, each host's boots by machine id (rule O10), and the live epochs by
    # (machine id, host boot id).
    slots: dict[str, slot.ProcessState] = field(default_factory=dict)
    hosts: dict[str, slot.HostState] = field(default_factory=dict)
    on_host_boot: dict[tuple[str, str], list[Epoch]] = field(default_factory=dict)

    def lane(self, process: str) -> Lane:
        if process not in self.lanes:
            self.lanes[process] = Lane(process)
        return self.lanes[process]


@functools.lru_cache(maxsize=1 << 16)  # a picture names few instants, many times (10,000 bars started at once)
def _iso(t: datetime | None) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if t is not None else "?"


@functools.lru_cache(maxsize=1024)  # of a status and a code: a few pairs, asked once per event
def _bar_open(status: Status, code: str) -> bool:
    return spans.bar_open(status, code)  # the bar rule, one place: projections/spans.py


def _run_event(h: History, rec: Recorded, e: RunEventBase) -> None:
    bar = h.bars.get(e.run)
    if bar is None or isinstance(e, RunQueued):
        process = spans.bar_lane(e)  # the lane rule, one place: projections/spans.py
        bar = Bar(run=e.run, process=process, workflow=getattr(e, "workflow", None))
        h.bars[e.run] = bar
        h.lane(process).bars.append(bar)
    kind = type(e)
    if kind is RunFenced or kind is RunRecovered or kind is RunCorrected:
        _marked(bar, rec, e)
        if kind is RunFenced:
            return
    last = bar.segments[-1] if bar.segments else None
    if kind is RunDeleted:
        if last is not None and last.end is None:
            last.end = e.at
        return
    assert e.status is not None
    if last is not None and last.end is None:
        if last.status is e.status and last.code == e.code:
            return  # a checkpoint, a tick failure: same status, same segment
        last.end = e.at
    seg = Segment(e.status, e.code, e.at, None, rec.position)
    if not _bar_open(e.status, e.code):
        seg.end = e.at  # a point: the bar ends here (a resume opens a new segment)
    bar.segments.append(seg)


def _marked(bar: Bar, rec: Recorded, e: RunEventBase) -> None:
    """The marker of a fenced report, a recovery or a correction, on its run's bar."""
    where = f"position {rec.position}"
    if type(e) is RunFenced:
        claim = f", claiming {e.reported}" if e.reported is not None else ""
        bar.marks.append(
            Mark(
                "fenced",
                e.at,
                rec.position,
                run=e.run,
                epoch=e.epoch,
                detail=(
                    f"{e.run}: FENCED {e.refused}{claim} from stale epoch {e.epoch} at {_iso(e.at)} ({where}): {e.why}; "
                    "kept as evidence, the run's status is unchanged (rules F1, F2)"
                ),
            )
        )
        return
    assert e.status is not None
    if type(e) is RunRecovered:
        bar.marks.append(
            Mark(
                "recovery",
                e.at,
                rec.position,
                run=e.run,
                epoch=e.swept_by,
                detail=(
                    f"{e.run}: recovered by the sweep of {e.swept_by} ({e.swept_by_process}) at {_iso(e.at)} ({where}), "
                    f"rule {e.rule}: {e.reason or ''}"
                ),
            )
        )
    elif type(e) is RunCorrected:
        bar.marks.append(
            Mark(
                "correction",
                e.at,
                rec.position,
                run=e.run,
                detail=(f"{e.run}: corrected to {e.to} by {e.actor} at {_iso(e.at)} ({where}): {e.reason or ''}"),
            )
        )


def _process_event(h: History, rec: Recorded, e: ProcessEventBase) -> None:
    lane = h.lane(e.process)
    where = f"position {rec.position}"
    h.slots[e.process] = slot.evolve(h.slots.get(e.process), e)  # type: ignore[arg-type]
    rebooted: list[Epoch] = []  # live epochs whose host boot id this event showed is over
    match e:
        case ProcessBooted():
            if e.machine is not None and e.host_boot is not None:  # a host is its machine id (rule O10)
                before = h.hosts.get(e.machine)
                after = slot.evolve_host(before, e)
                assert after is not None
                h.hosts[e.machine] = after
                for old_boot in after.ended.keys() - (before.ended.keys() if before else set()):
                    rebooted.extend(h.on_host_boot.pop((e.machine, old_boot), []))
            for old in [*lane.live, *rebooted]:  # the epochs this boot ended, marked before it
                _end_if_over(h, old, e.at, rec.position)
            ep = Epoch(e.process, e.epoch, e.booted_at, e.at, e.host, e.pid, e.host_boot)
            lane.epochs.append(ep)
            lane.marks.append(
                Mark(
                    "boot",
                    e.booted_at,
                    rec.position,
                    epoch=e.epoch,
                    detail=(
                        f"boot of {e.process}, epoch {e.epoch}, on {e.host or '?'} pid {e.pid if e.pid is not None else '?'}: "
                        f"booted at {_iso(e.booted_at)}, recorded at {_iso(e.at)} ({where}) by {e.actor or '?'}"
                    ),
                )
            )
        case ProcessStopping():
            lane.marks.append(
                Mark(
                    "stopping",
                    e.at,
                    rec.position,
                    epoch=e.epoch,
                    detail=f"epoch {e.epoch} of {e.process} began to stop at {_iso(e.at)} ({where})",
                )
            )
        case ProcessStopped():
            lane.marks.append(
                Mark(
                    "stop",
                    e.at,
                    rec.position,
                    epoch=e.epoch,
                    detail=(
                        f"epoch {e.epoch} of {e.process} recorded a clean stop at {_iso(e.at)} ({where}): "
                        "its running runs are orphans at any age (rule O2)"
                    ),
                )
            )
        case ProcessExited():  # rule O7: someone saw it die
            how = "".join(f", {k} {v}" for k, v in (("exit code", e.exit_code), ("signal", e.signal)) if v is not None)
            lane.marks.append(
                Mark(
                    "exit",
                    e.at,
                    rec.position,
                    epoch=e.epoch,
                    detail=(
                        f"epoch {e.epoch} of {e.process} exited, seen by {e.observed_by} at {_iso(e.at)} ({where}){how}"
                        + (f": {e.evidence}" if e.evidence else "")
                        + "; its running runs are orphans at any age (rule O7)"
                    ),
                )
            )
        case ProcessSweepSkipped():
            lane.marks.append(
                Mark(
                    "sweep-skipped",
                    e.at,
                    rec.position,
                    epoch=e.epoch,
                    detail=f"the sweep of {e.epoch} skipped the time fallback at {_iso(e.at)} ({where}): {e.why}",
                )
            )
        case ProcessSweepFailed():
            lane.marks.append(
                Mark(
                    "sweep-failed",
                    e.at,
                    rec.position,
                    epoch=e.epoch,
                    detail=(
                        f"the sweep of {e.epoch} gave up after {e.attempts} attempts at {_iso(e.at)} ({where}): {e.error}"
                    ),
                )
            )
    # Which epochs this event ended: end_of decides (never this module), asked of the
    # lane's live epochs (and, for a boot, above: of those on a host it showed rebooted).
    if isinstance(e, ProcessBooted):
        ep = lane.epochs[-1]
        lane.live.append(ep)
        if e.machine is not None and ep.host_boot is not None:
            h.on_host_boot.setdefault((e.machine, ep.host_boot), []).append(ep)
        _end_if_over(h, ep, e.at, rec.position)  # a boot recorded on a host boot id already over
    else:
        for ep in list(lane.live):
            _end_if_over(h, ep, e.at, rec.position)


def _end_if_over(h: History, ep: Epoch, at: datetime, position: int) -> None:
    lane = h.lanes[ep.process]
    if ep.end is not None:
        return
    state = h.slots[ep.process].epoch(ep.epoch)
    assert state is not None  # the lane's epochs are the slot's
    ended = slot.end_of(state, h.hosts.get(state.machine) if state.machine is not None else None)
    if ended is None:
        return
    rule, why = ended
    ep.end, ep.end_kind, ep.end_why, ep.superseded_by = at, END_KINDS[rule], why, state.superseded_by
    lane.live.remove(ep)
    where = f"position {position}"
    if rule == slot.SUPERSEDED:
        lane.marks.append(
            Mark(
                "supersede",
                at,
                position,
                epoch=ep.epoch,
                detail=(
                    f"epoch {ep.epoch} of {ep.process} superseded by {state.superseded_by} at {_iso(at)} ({where}): "
                    "its running runs are orphans at any age (rule O2)"
                ),
            )
        )
    elif rule == slot.HOST_REBOOTED:
        lane.marks.append(
            Mark(
                "reboot",
                at,
                position,
                epoch=ep.epoch,
                detail=(f"{why} ({where}): its running runs are orphans at any age (rule O7)"),
            )
        )


def history(records: Iterable[Recorded]) -> History:
    """Fold the log (in log order) into the page's model."""
    h = History()
    sweeps: dict[tuple[str, str, datetime], list[tuple[str, int]]] = {}  # the runs each sweep recovered, where
    for rec in records:
        e = rec.event
        h.first = e.at if h.first is None else min(h.first, e.at)
        h.last = e.at if h.last is None else max(h.last, e.at)
        h.position, h.events = rec.position, h.events + 1
        if isinstance(e, RunEventBase):
            _run_event(h, rec, e)
            if type(e) is RunRecovered:
                sweeps.setdefault((e.swept_by_process, e.swept_by, e.at), []).append((e.run, rec.position))
        elif isinstance(e, ProcessEventBase):
            _process_event(h, rec, e)
            if isinstance(e, ProcessBooted):
                h.first = min(h.first, e.booted_at)
    for (process, epoch, at), recovered in sweeps.items():
        runs = [run for run, _ in recovered]
        h.lane(process).marks.append(
            Mark(
                "sweep",
                at,
                recovered[0][1],  # a sweep is no event of its own: its first recovery's position
                epoch=epoch,
                detail=(
                    f"the sweep of {epoch} at {_iso(at)} recovered {len(runs)} orphan{'s' if len(runs) != 1 else ''}: "
                    + ", ".join(runs)
                ),
            )
        )
    return h


def with_whatif(h: History, found: WhatIf) -> History:
    """`h` with each differing verdict of the what-if `found` (replay/whatif.py, rule R4:
    its result, never judged again here) as a mark on its run's bar, at the sweep that
    judged it: on the bar of that run which had started by then (a run queued again has
    a bar for each time; of two that started at one instant, the later in the log), else
    its first. `h` itself is left as it was."""
    bars_of: dict[str, list[Bar]] = {}
    for lane in h.lanes.values():
        for bar in lane.bars:
            if bar.segments:
                bars_of.setdefault(bar.run, []).append(bar)
    added: dict[int, list[Mark]] = {}  # id(bar) -> its what-if marks
    for d in found.differences:
        # In log order within an instant (a bar's first segment's position), not in the
        # order of the lanes: a windowed history's lanes are made in another order (V2).
        candidates = sorted(bars_of.get(d.run, []), key=lambda b: (b.start, b.segments[0].position))
        if not candidates:
            continue  # a run with nothing drawn (no event of it is a bar's)
        bar = next((b for b in reversed(candidates) if b.start <= d.at), candidates[0])
        detail = (
            f"what-if {found.policy}: {d.run} {d.kind} at the sweep of {d.sweep_epoch} ({d.sweep_process}) "
            f"at {_iso(d.at)} (position {d.position}): {d.message}"
        )
        added.setdefault(id(bar), []).append(
            Mark(WHATIF + d.kind, d.at, d.position, run=d.run, epoch=d.sweep_epoch, detail=detail)
        )

    def marked(bar: Bar) -> Bar:
        return replace(bar, marks=[*bar.marks, *added[id(bar)]]) if id(bar) in added else bar

    lanes = {name: replace(lane, bars=[marked(b) for b in lane.bars]) for name, lane in h.lanes.items()}
    bars = {run: marked(bar) for run, bar in h.bars.items()}
    return replace(h, lanes=lanes, bars=bars)


# ------------------------------------------------------------------ drawing
# Colours: assigned by the order of the Status enum (no status set is written here, rule P3).
_PALETTE = ["#b8c2cc", "#3b82f6", "#a78bfa", "#c084fc", "#818cf8", "#f59e0b", "#dc2626", "#6b7280", "#16a34a"]
COLOURS: dict[Status, str] = dict(zip(Status, _PALETTE, strict=True))
MARKS = {  # kind -> (shape, colour, legend text)
    "boot": ("tri", "#111827", "boot (epoch starts)"),
    "supersede": ("bar", "#111827", "superseded by a later boot"),
    "stop": ("square", "#111827", "clean stop"),
    "exit": ("cross", "#111827", "exited (process.exited)"),
    "reboot": ("bar", "#b91c1c", "its host rebooted (a later boot there carried another host boot id)"),
    "stopping": ("square-open", "#111827", "began to stop"),
    "sweep": ("diamond", "#0891b2", "sweep (recovered orphans)"),
    "sweep-skipped": ("diamond-open", "#b45309", "sweep skipped the time fallback (clock stepped back)"),
    "sweep-failed": ("cross", "#dc2626", "sweep gave up (alert)"),
    "recovery": ("circle", "#0891b2", "recovery (run.recovered)"),
    "fenced": ("x", "#be123c", "fenced late report (evidence)"),
    "correction": ("star", "#7c3aed", "audited correction"),
}

# A what-if's differing verdicts (replay/whatif.py, rule R4), drawn on the runs they
# concern when the page is given one: its kind -> (shape, colour, legend text). The
# verdicts are the what-if's result (`with_whatif`), never judged again here.
WHATIF = "whatif-"  # the mark kind of a difference: WHATIF + its kind
WHATIF_MARKS = {
    WHATIF + KILLED_LIVE: ("flag", "#c2410c", "would have recovered this run while it was live (killed-live)"),
    WHATIF + MISSED: ("flag", "#a21caf", "would never have recovered this orphan (missed)"),
    WHATIF + LATE: ("flag", "#0f766e", "would have recovered this orphan at a later sweep (late)"),
    WHATIF + EARLY: ("flag", "#4d7c0f", "would have recovered this orphan before any recorded sweep (early)"),
}
KINDS = {**MARKS, **WHATIF_MARKS}

LEFT = 170  # px for the lane labels
WIDTH = 1200  # px of time
ROW = 14  # px per row of run bars
EPOCH_ROW = 18
LANE_GAP = 16
TOP = 52  # px above the lanes: the cursor's instant, the dates, the times


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


_TICKS = [1, 5, 15, 30, 60, 300, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800]


def _ticks(start: datetime, end: datetime) -> tuple[int, list[datetime]]:
    span = (end - start).total_seconds()
    step = next((s for s in _TICKS if span / s <= 12), _TICKS[-1])
    epoch0 = datetime(1970, 1, 1, tzinfo=UTC)
    first = (int((start - epoch0).total_seconds()) // step + 1) * step
    out, t = [], epoch0 + timedelta(seconds=first)
    while t <= end:
        out.append(t)
        t += timedelta(seconds=step)
    return step, out


def _shape(kind: str, x: float, y: float, detail: str, extra: str = "") -> str:
    shape, colour, _ = KINDS[kind]
    attrs = f'class="marker {kind}" data-kind="{kind}" data-detail="{_esc(detail)}"{extra}'
    title = f"<title>{_esc(detail)}</title>"
    s = 5.0
    if shape == "tri":
        body = f'<path d="M{x - s:.1f},{y - s:.1f} L{x + s:.1f},{y:.1f} L{x - s:.1f},{y + s:.1f} Z" fill="{colour}"/>'
    elif shape == "bar":
        body = f'<rect x="{x - 1.5:.1f}" y="{y - 8:.1f}" width="3" height="16" fill="{colour}"/>'
    elif shape in ("square", "square-open"):
        fill = colour if shape == "square" else "#fff"
        body = f'<rect x="{x - s:.1f}" y="{y - s:.1f}" width="{2 * s}" height="{2 * s}" fill="{fill}" stroke="{colour}" stroke-width="1.5"/>'
    elif shape in ("diamond", "diamond-open"):
        fill = colour if shape == "diamond" else "#fff"
        body = (
            f'<path d="M{x:.1f},{y - 6:.1f} L{x + 6:.1f},{y:.1f} L{x:.1f},{y + 6:.1f} L{x - 6:.1f},{y:.1f} Z" '
            f'fill="{fill}" stroke="{colour}" stroke-width="2"/>'
        )
    elif shape == "flag":  # a pennant on a pole: a what-if's verdict on this run
        body = (
            f'<path d="M{x:.1f},{y + 7:.1f} L{x:.1f},{y - 8:.1f} L{x + 9:.1f},{y - 4.5:.1f} L{x:.1f},{y - 1:.1f}" '
            f'fill="{colour}" stroke="{colour}" stroke-width="1.5"/>'
        )
    elif shape == "circle":
        body = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="#fff" stroke="{colour}" stroke-width="2"/>'
    elif shape in ("x", "cross"):
        w = 2.5 if shape == "x" else 3
        body = (
            f'<path d="M{x - 4:.1f},{y - 4:.1f} L{x + 4:.1f},{y + 4:.1f} M{x + 4:.1f},{y - 4:.1f} L{x - 4:.1f},{y + 4:.1f}" '
            f'stroke="{colour}" stroke-width="{w}"/>'
        )
    else:  # star
        pts = " ".join(
            f"{x + dx:.1f},{y + dy:.1f}"
            for dx, dy in [
                (0, -6),
                (1.8, -1.8),
                (6, -1.5),
                (2.8, 1.2),
                (3.7, 5.5),
                (0, 3),
                (-3.7, 5.5),
                (-2.8, 1.2),
                (-6, -1.5),
                (-1.8, -1.8),
            ]
        )
        body = f'<polygon points="{pts}" fill="{colour}"/>'
    return f"<g {attrs}>{title}{body}</g>"


CHAR = 6.5  # px per character of a 10px label (generous, so labels never run into the next bar)


def _key(bar: Bar) -> bool:
    """A run the incident is about: one with a marker (a recovery, a fenced report, a
    correction). Its name is always drawn, after the bar when it does not fit inside."""
    return bool(bar.marks)


def _label(bar: Bar, x0: float, x1: float) -> tuple[str, str]:
    """(text inside the bar, text after it that the packing keeps room for): the run and
    its code inside when they fit, else after the bar the run and its code for a key run
    (`_key`), the failure code alone for another (its name is drawn after it too where
    the row leaves room, `_fits`)."""
    code = show_code(bar.code) if lifecycle.is_failure(bar.status, bar.code) else ""
    label = bar.run + (f" {code}" if code else "")
    verdicts = [m.kind.removeprefix(WHATIF) for m in bar.marks if m.kind in WHATIF_MARKS]
    if verdicts:  # the what-if's verdict named beside the run, without hover
        label += f" (what-if: {', '.join(verdicts)})"
    if x1 - x0 > CHAR * len(label) + 6:
        return label, ""
    return "", label if _key(bar) else code


def _after(bar: Bar, x_of: Callable[[datetime], float], end: datetime) -> float:
    """Where a label after the bar starts: past its end and past its markers."""
    return max([x_of(bar.segments[-1].end or end), *(x_of(m.at) + 5 for m in bar.marks)]) + 3


def _extent(b: Bar, x_of: Callable[[datetime], float], end: datetime) -> tuple[float, float]:
    """Where a bar starts and ends in its row, its markers and the label after it included."""
    x0 = x_of(b.start) - (6 if b.marks and min(m.at for m in b.marks) <= b.start else 0)
    # A bar's markers count as part of it: a fenced report that came after the bar
    # ended must not sit on the next bar of the row.
    x1 = max([x_of(b.segments[-1].end or end) + 3, *(x_of(m.at) + 6 for m in b.marks)])  # + 3: a point is 3 px wide
    _, outside = _label(b, x_of(b.start), x_of(b.segments[-1].end or end))
    if outside:  # the text written after the bar and its markers: part of the bar too
        x1 = max(x1, _after(b, x_of, end) + CHAR * len(outside))
    return x0, x1


def _pack(extents: Sequence[tuple[float, float]]) -> list[int]:
    """A row for each bar (its `_extent`), greedy in start order, so that bars of one row
    never overlap."""
    rows: list[float] = []
    out = []
    for x0, x1 in extents:
        for i, free in enumerate(rows):
            if free <= x0:
                rows[i] = x1 + 2
                out.append(i)
                break
        else:
            rows.append(x1 + 2)
            out.append(len(rows) - 1)
    return out


def _row_starts(extents: Sequence[tuple[float, float]], rows: Sequence[int]) -> dict[int, list[float]]:
    """Where each bar of each row starts (its `_extent`), in order: the room a name may take."""
    starts: dict[int, list[float]] = {}
    for (x0, _), row in zip(extents, rows, strict=True):
        starts.setdefault(row, []).append(x0)
    return {row: sorted(xs) for row, xs in starts.items()}


def _fits(after: float, text: str, starts: Sequence[float], x0: float) -> bool:
    """A name written at `after` ends before the next bar of its row (or the picture's edge)."""
    limit = min((x for x in starts if x > x0), default=LEFT + WIDTH + 18)
    return after + CHAR * len(text) + 2 <= limit


SPREAD = 12  # px between the markers of one row that would fall on each other
CLOSE = 8  # px: markers closer than this (in a chain) are one cluster, counted


def _spread(placed: Sequence[tuple[float, float, Mark, str]]) -> list[float]:
    """The x each marker is drawn at: markers of one row closer than SPREAD px are fanned
    out SPREAD px apart around their mean, so each one shows (their instants are in their
    details, and in the cluster's count, `_clusters`)."""
    xs = [x for x, _, _, _ in placed]
    by_row: dict[float, list[int]] = {}
    for i, (_, y, _, _) in enumerate(placed):
        by_row.setdefault(y, []).append(i)
    for members in by_row.values():
        members.sort(key=lambda i: xs[i])
        groups: list[list[int]] = []
        for i in members:
            if groups and xs[i] - xs[groups[-1][-1]] < SPREAD:
                groups[-1].append(i)
            else:
                groups.append([i])
        for group in groups:
            if len(group) < 2:
                continue
            mid = sum(placed[i][0] for i in group) / len(group)
            for k, i in enumerate(group):
                xs[i] = mid + (k - (len(group) - 1) / 2) * SPREAD
    return xs


def _clusters(placed: Sequence[tuple[float, float, Mark, str]]) -> list[str]:
    """A count over each cluster of a lane's markers (closer than CLOSE px in time, whatever
    their rows): at a whole day's view the five markers of a takeover fall on a few
    pixels; the badge says how many there are, its details list each."""
    order = sorted(placed, key=lambda p: (p[0], p[2].at, p[2].position))
    groups: list[list[tuple[float, float, Mark, str]]] = []
    for p in order:
        if groups and p[0] - groups[-1][-1][0] < CLOSE:
            groups[-1].append(p)
        else:
            groups.append([p])
    out = []
    for group in groups:
        if len(group) < 2:
            continue
        first, last = group[0][2].at, group[-1][2].at
        when = _iso(first) if first == last else f"{_iso(first)} to {_iso(last)}"
        detail = f"{len(group)} events at {when}:\n" + "\n".join(p[2].detail for p in group)
        x = max(p[0] for p in group) + 5 + (len(group) - 1) / 2 * SPREAD
        out.append(
            f'<g class="cluster" data-count="{len(group)}" data-detail="{_esc(detail)}"><title>{_esc(detail)}</title>'
            f'<rect x="{x:.1f}" y="-6" width="{8 + 6 * len(str(len(group)))}" height="12" rx="6"/>'
            f'<text x="{x + 4 + 3 * len(str(len(group))):.1f}" y="3.5">{len(group)}</text></g>'
        )
    return out


def _exact(t: datetime) -> str:
    return t.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _epoch_detail(ep: Epoch) -> str:
    end_txt = (
        f"superseded by {ep.superseded_by} at {_iso(ep.end)}"
        if ep.end_kind == "supersede"
        else f"stopped at {_iso(ep.end)}"
        if ep.end_kind == "stop"
        else f"exited at {_iso(ep.end)}"
        if ep.end_kind == "exit"
        else f"its host rebooted, seen at {_iso(ep.end)}"
        if ep.end_kind == "reboot"
        else "live at the end of the history"
    )
    return (
        f"epoch {ep.epoch} of {ep.process} (host {ep.host or '?'}, pid {ep.pid if ep.pid is not None else '?'}): "
        f"booted {_iso(ep.booted_at)}, recorded {_iso(ep.recorded_at)}; {end_txt}"
    )


def _segment_detail(bar: Bar, seg: Segment) -> str:
    seg_code = f" {show_code(seg.code)}" if lifecycle.is_failure(seg.status, seg.code) else ""
    until = _iso(seg.end) if seg.end is not None else "the end of the history"
    return (
        f"{bar.run} ({bar.workflow or '?'}, slot {bar.process}): {seg.status}{seg_code} "
        + (f"at {_iso(seg.start)}" if seg.end == seg.start else f"from {_iso(seg.start)} to {until}")
        + f" (position {seg.position})"
    )


# When a picture would draw more runs than it can usefully show as rows, it draws the
# runs that matter as rows and folds the rest into density bands (`_fold`, `_bands`).
RUNS_MAX = 500  # runs a picture draws as rows at most (rule V1: readable at 500 runs)
BUCKET = 5  # px of time per cell of a density band
MARKED, AT_CURSOR, FAILING, MOVED = 0, 1, 2, 3  # why a run matters, most first (`_matters`)


def _matters(bar: Bar, lo: datetime, hi: datetime, near: tuple[datetime, datetime] | None) -> int | None:
    """Why the incident is about this run, if it is, most first: a marker in the window
    (a recovery, a fenced report, a correction, a what-if's verdict: `_key`'s runs), an
    event within the cursor's reach (the runs its panel speaks of), a failure in the
    window (`lifecycle.is_failure`), another transition in the window. None: the run
    only passes through the window (its bar began before it and nothing happens to it
    there)."""
    for m in bar.marks:
        if lo <= m.at <= hi:
            return MARKED
    why = None
    for seg in bar.segments:
        if near is not None and near[0] <= seg.start <= near[1]:
            return AT_CURSOR
        if lo <= seg.start <= hi and why != FAILING:
            why = FAILING if lifecycle.is_failure(seg.status, seg.code) else MOVED
    if near is not None:
        for m in bar.marks:
            if near[0] <= m.at <= near[1]:
                return AT_CURSOR
    return why


def _fold(
    shown: dict[str, list[Bar]], lo: datetime, hi: datetime, cursor: datetime | None
) -> tuple[dict[str, list[Bar]], dict[str, list[Bar]]]:
    """(the bars each lane draws as rows, those it folds into its density bands). At
    most RUNS_MAX runs in the picture: all of them as rows. More: the runs that matter
    (`_matters`), most first, then by start and name, up to RUNS_MAX, as rows; every
    other run of the window folded. A function of the bars the window shows and the
    window alone, so a window's page is the whole log's (rule V2)."""
    if sum(len(bars) for bars in shown.values()) <= RUNS_MAX:
        return shown, {}
    near = None if cursor is None else _reach(cursor, _around(lo, hi))
    ranked = []
    for name, bars in shown.items():
        for b in bars:
            why = _matters(b, lo, hi, near)
            if why is not None:
                ranked.append((why, b.start, b.run, b.segments[0].position, name))
    kept = {(name, run, position) for _, _, run, position, name in sorted(ranked)[:RUNS_MAX]}
    rows: dict[str, list[Bar]] = {}
    folded: dict[str, list[Bar]] = {}
    for name, bars in shown.items():
        for b in bars:
            into = rows if (name, b.run, b.segments[0].position) in kept else folded
            into.setdefault(name, []).append(b)
    return rows, folded


def _bands(
    lane: str,
    bars: Sequence[Bar],
    x_of: Callable[[datetime], float],
    t_of: Callable[[float], datetime],
    lo: datetime,
    hi: datetime,
    y0: float,
    link: Callable[[str, Status], str | None] | None,
) -> list[str]:
    """The density bands of a lane's folded runs: a row per status they are in within the
    window, in the order of the Status enum, cut in cells of BUCKET px; each cell run of
    one count is a rect shaded by it, whose details say how many runs were in that
    status there, and the row's label counts the runs and, given `link`, opens them."""
    cells = int(WIDTH / BUCKET) + 1
    diff: dict[Status, list[int]] = {}
    runs: dict[Status, list[str]] = {}
    known: dict[datetime, int] = {}  # instant -> its cell: a fleet's runs share a few instants

    def cell(t: datetime) -> int:
        c = known.get(t)
        if c is None:
            c = known[t] = int((x_of(t) - LEFT) // BUCKET)
        return c

    for b in bars:
        spans_of: dict[Status, list[tuple[int, int]]] = {}  # the cells of each status it is in
        for seg in b.segments:
            end = seg.end or hi
            if seg.start <= hi and end >= lo:  # drawn from its start on, as its rect is (a clock stepped back)
                c0 = cell(seg.start)
                spans_of.setdefault(seg.status, []).append((c0, max(c0, cell(end))))
        for status, cs in spans_of.items():  # a run counts once in a cell, whatever its segments there
            d = diff.get(status)
            if d is None:
                d = diff[status] = [0] * (cells + 1)
                runs[status] = []
            runs[status].append(b.run)
            if len(cs) > 1:
                cs.sort()
            a, z = cs[0]
            for c0, c1 in cs[1:]:
                if c0 > z:
                    d[a] += 1
                    d[z + 1] -= 1
                    a, z = c0, c1
                else:
                    z = max(z, c1)
            d[a] += 1
            d[z + 1] -= 1
    out = []
    for k, status in enumerate(s for s in Status if s in diff):
        counts, n = [], 0
        for delta in diff[status][:cells]:
            n += delta
            counts.append(n)
        peak = max(counts)
        y = y0 + k * ROW
        names = sorted(runs[status])
        total = len(names)
        listed = ", ".join(names[:FOLD_NAMES]) + (f" and {total - FOLD_NAMES:,} more" if total > FOLD_NAMES else "")
        about = f"{lane}: {total:,} more runs {status} in the window, folded into this band: {listed}"
        parts = [f'<g class="fold" data-status="{status}" data-count="{total}">']
        c = 0
        while c < cells:
            n = counts[c]
            e = c
            while e + 1 < cells and counts[e + 1] == n:
                e += 1
            if n:
                x0, x1 = LEFT + c * BUCKET, min(LEFT + (e + 1) * BUCKET, LEFT + WIDTH)
                detail = (
                    f"{lane}: {n:,} run{'s' if n != 1 else ''} {status} from {_iso(t_of(x0))} to {_iso(t_of(x1))}, "
                    f"folded into this band (of {total:,})"
                )
                parts.append(
                    f'<rect class="cell" data-count="{n}" data-detail="{_esc(detail)}" x="{x0:.1f}" y="{y:.1f}" '
                    f'width="{max(x1 - x0, 1):.1f}" height="{ROW - 4}" fill="{COLOURS[status]}" '
                    f'fill-opacity="{0.25 + 0.75 * n / peak:.2f}"><title>{_esc(detail)}</title></rect>'
                )
            c = e + 1
        label = f'<text class="fold-label" x="12" y="{y + ROW - 6:.1f}">{total:,} {_esc(status)}</text>'
        href = None if link is None else link(lane, status)
        title = f"<title>{_esc(about)}</title>"
        if href is not None:
            label = f'<a href="{_esc(href)}">{title}{label}</a>'
        else:
            label = f'<g class="fold-names" data-detail="{_esc(about)}">{title}{label}</g>'
        parts.append(label)
        parts.append("</g>")
        out.append("".join(parts))
    return out


FOLD_NAMES = 10  # runs a band's label names, the first by name


NEAR = 0.05  # of the window, each side of the cursor: what the cursor's panel calls around it
NEAREST = 14  # events the panel lists at most, the nearest to the cursor


def _offset(seconds: float) -> str:
    s = round(abs(seconds))
    text = f"{s // 3600}h {s % 3600 // 60}m" if s >= 3600 else f"{s // 60}m {s % 60}s" if s >= 60 else f"{s}s"
    return ("-" if seconds < 0 else "+") + text


def _around(lo: datetime, hi: datetime) -> timedelta:
    """How far each side of the cursor its panel reaches (NEAR of the window drawn), and
    the cursor's runs the picture keeps as rows when it folds (`_fold`)."""
    return timedelta(seconds=(hi - lo).total_seconds() * NEAR)


_MIN, _MAX = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)


def _reach(cursor: datetime, around: timedelta) -> tuple[datetime, datetime]:
    """The instants within `around` of the cursor, as an interval (its ends clamped to
    what a datetime holds): `abs(t - cursor) <= around` is `a <= t <= z`."""
    try:
        a = cursor - around
    except OverflowError:
        a = _MIN
    try:
        z = cursor + around
    except OverflowError:
        z = _MAX
    return a, z


def _panel(h: History, cursor: datetime, lo: datetime, hi: datetime, wanted: set[str] | None) -> str:
    """What happened at and around the cursor, in words: each slot's epochs live there
    (the picture's epoch bands, ended where end_of says), then the events within NEAR of
    the window each side (the NEAREST nearest): transitions, and the markers' verdicts
    and evidence (a recovery's rule and reason, a fenced report's refusal, a sweep's
    orphans), each with its instant, its distance from the cursor and its log position."""
    around = _around(lo, hi)
    epochs: list[str] = []
    # (at, position, what, detail): a segment's detail is made for the events listed only
    near: list[tuple[datetime, int, str, str | tuple[Bar, Segment]]] = []
    a, z = _reach(cursor, around)  # the events within it, in the order they are met
    for name in sorted(h.lanes):
        lane = h.lanes[name]
        bars = [b for b in lane.bars if b.segments and (wanted is None or b.run in wanted)]
        if wanted is not None and not bars:
            continue
        live = [ep for ep in lane.epochs if ep.booted_at <= cursor and (ep.end is None or cursor < ep.end)]
        epochs.extend(f"<li>{_esc(_epoch_detail(ep))}</li>" for ep in live)
        near.extend((m.at, m.position, KINDS[m.kind][2], m.detail) for m in lane.marks if a <= m.at <= z)
        for b in bars:
            if b.marks:
                near.extend((m.at, m.position, KINDS[m.kind][2], m.detail) for m in b.marks if a <= m.at <= z)
            for seg in b.segments:
                if a <= seg.start <= z:
                    near.append((seg.start, seg.position, str(seg.status), (b, seg)))
    chosen = sorted(sorted(near, key=lambda f: (abs(f[0] - cursor), f[1]))[:NEAREST], key=lambda f: (f[0], f[1]))
    items = "".join(
        f'<li><time datetime="{_iso(at)}">{_iso(at)}</time> <span class="off">'
        f"({_offset((at - cursor).total_seconds())})</span> <strong>{_esc(what)}</strong>: "
        f"{_esc(detail if isinstance(detail, str) else _segment_detail(*detail))}</li>"
        for at, _, what, detail in chosen
    )
    count = f"the {len(chosen)} nearest of {len(near)} events" if len(near) > len(chosen) else f"{len(near)} events"
    return (
        f'<section id="cursor-panel" aria-label="at the cursor"><h2>At the cursor, {_iso(cursor)}</h2>'
        f"<h3>Epochs live at the cursor</h3><ul>{''.join(epochs) or '<li>none</li>'}</ul>"
        f"<h3>Within {_offset(around.total_seconds())[1:]} each side: {count}</h3>"
        f"<ol>{items or '<li>none</li>'}</ol></section>"
    )


def render(
    h: History,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    cursor: datetime | None = None,
    runs: Sequence[str] | None = None,
    title: str = "epochledger timeline",
    assets: str | None = None,
    header: str = "",
    live: bool = False,
    whatif: WhatIf | None = None,
    fold_link: Callable[[str, Status], str | None] | None = None,
) -> str:
    """The page, as text. `start`/`end`: the window (default: the whole history);
    `cursor`: the instant under investigation; `runs`: only these runs (and their lanes);
    `assets`: a URL prefix the page links its style and script from (`timeline.css`,
    `timeline.js`: STYLE and SCRIPT, for a page served under a Content-Security-Policy
    without inline code, the console's), else both inline (one self-contained file);
    `header`: HTML the caller made (and escaped) put before the title, the console's
    navigation and window form; `live`: the picture, its summary and the cursor's panel
    marked `data-live` (one part, `#picture`), for the console's script to swap in anew;
    `whatif`: a what-if's result, each differing verdict a mark on its run (`with_whatif`),
    named beside it and in the legend; `fold_link`: the URL (or None) that opens a slot's
    runs of a status, which the label of a density band of them links to. With a cursor, the page says under the picture what happened at and around it
    (`_panel`). Markers that fall on each other are fanned out (`_spread`) and counted
    (`_clusters`); a key run is named without hover (`_label`), another where its row
    leaves room (`_fits`); the axis names the date of each day's first tick. A window
    that shows more than RUNS_MAX runs draws those that matter as rows and folds the
    others into each slot's density bands (`_fold`, `_bands`)."""
    if whatif is not None:
        h = with_whatif(h, whatif)
    lo = start or h.first or datetime(1970, 1, 1, tzinfo=UTC)
    hi = end or h.last or lo
    if cursor is not None and start is None and end is None:
        lo, hi = min(lo, cursor), max(hi, cursor)
    if hi <= lo:
        hi = lo + timedelta(minutes=1)
    pad = (hi - lo) * 0.02
    if start is None:
        lo -= pad
    if end is None:
        hi += pad
    span = (hi - lo).total_seconds()

    def x_of(t: datetime) -> float:
        return LEFT + max(0.0, min(1.0, (t - lo).total_seconds() / span)) * WIDTH

    def visible(a: datetime, b: datetime | None) -> bool:
        return a <= hi and (b is None or b >= lo)

    def t_of(x: float) -> datetime:
        return lo + timedelta(seconds=(x - LEFT) / WIDTH * span)

    wanted = set(runs) if runs else None
    body: list[str] = []
    y = TOP + 10
    step, ticks = _ticks(lo, hi)
    shown_runs = 0
    shown = {
        name: sorted(
            (
                b
                for b in h.lanes[name].bars
                if b.segments and (wanted is None or b.run in wanted) and visible(b.start, b.segments[-1].end)
            ),
            key=lambda b: (b.start, b.run),
        )
        for name in sorted(h.lanes)
    }
    drawn, folded = _fold(shown, lo, hi, cursor)
    for name in sorted(h.lanes):
        lane = h.lanes[name]
        bars, rest = drawn.get(name, []), folded.get(name, [])
        if wanted is not None and not shown[name]:
            continue
        extents = [_extent(b, x_of, hi) for b in bars]
        rows = _pack(extents)
        n_rows = max(rows, default=-1) + 1
        # The bands go under the rows, and under the lane's second line of words (row 0's left).
        first_band = max(n_rows, 1)
        bands = _bands(name, rest, x_of, t_of, lo, hi, EPOCH_ROW + first_band * ROW + 2, fold_link) if rest else []
        height = EPOCH_ROW + (first_band + len(bands) if bands else max(n_rows, 1)) * ROW + 8
        sub = f"{len(lane.epochs)} epochs, {len(shown[name])} runs"
        g = [
            f'<g class="lane" data-process="{_esc(name)}" transform="translate(0,{y})">',
            f'<rect class="lane-bg" x="0" y="0" width="{LEFT + WIDTH + 10}" height="{height}"/>',
            f'<text class="lane-label" x="8" y="13">{_esc(name)}</text>',
            f'<text class="lane-sub" x="8" y="26">{sub}</text>',
        ]
        for i, ep in enumerate(lane.epochs):
            if not visible(ep.booted_at, ep.end):
                continue
            x0, x1 = x_of(ep.booted_at), x_of(ep.end or hi)
            detail = _epoch_detail(ep)
            g.append(
                f'<g class="epoch" data-epoch="{_esc(ep.epoch)}" data-detail="{_esc(detail)}">'
                f"<title>{_esc(detail)}</title>"
                f'<rect class="epoch-band e{i % 2}" x="{x0:.1f}" y="3" width="{max(x1 - x0, 1):.1f}" height="{EPOCH_ROW - 6}"/>'
                + (
                    f'<text class="epoch-label" x="{x0 + 8:.1f}" y="{EPOCH_ROW - 6}">{_esc(ep.epoch)}</text>'
                    if x1 - x0 > 60
                    else ""
                )
                + "</g>"
            )
        # Every marker of the lane with where it falls: (x, y, mark, extra attributes).
        placed: list[tuple[float, float, Mark, str]] = [
            (x_of(m.at), EPOCH_ROW / 2, m, f' data-epoch="{_esc(m.epoch or "")}"')
            for m in sorted(lane.marks, key=lambda m: (m.at, m.position, m.kind))
            if lo <= m.at <= hi
        ]
        n_lane = len(placed)
        by_of = [EPOCH_ROW + row * ROW + 2 for row in rows]
        for bar, by in zip(bars, by_of, strict=True):
            placed.extend(
                (x_of(m.at), by + (ROW - 4) / 2, m, f' data-run="{_esc(bar.run)}"')
                for m in bar.marks
                if lo <= m.at <= hi
            )
        spread = _spread(placed)
        for (_, my, m, extra), mx in zip(placed[:n_lane], spread[:n_lane], strict=True):
            g.append(_shape(m.kind, mx, my, m.detail, extra))
        starts = _row_starts(extents, rows)
        for bar, row, by in zip(bars, rows, by_of, strict=True):
            shown_runs += 1
            code = show_code(bar.code) if lifecycle.is_failure(bar.status, bar.code) else ""
            parts = [f'<g class="run" data-run="{_esc(bar.run)}" data-status="{bar.status}" data-code="{_esc(code)}">']
            for seg in bar.segments:
                if not visible(seg.start, seg.end):
                    continue
                sx0, sx1 = x_of(seg.start), x_of(seg.end or hi)
                detail = _segment_detail(bar, seg)
                w = max(sx1 - sx0, 3.0)
                parts.append(
                    f'<rect class="seg" data-status="{seg.status}" data-detail="{_esc(detail)}" x="{sx0:.1f}" '
                    f'y="{by:.1f}" width="{w:.1f}" height="{ROW - 4}" fill="{COLOURS[seg.status]}">'
                    f"<title>{_esc(detail)}</title></rect>"
                )
            x0 = x_of(bar.start)
            x1 = x_of(bar.segments[-1].end or hi)
            inside, outside = _label(bar, x0, x1)
            if inside:
                parts.append(f'<text class="run-label" x="{x0 + 3:.1f}" y="{by + ROW - 6:.1f}">{_esc(inside)}</text>')
            else:
                after = _after(bar, x_of, hi)
                name = bar.run + (f" {code}" if code else "")
                if not _key(bar) and name != outside and _fits(after, name, starts[row], x0):
                    outside = name  # the row leaves room after the bar: its name too
                if outside:
                    klass = "run-label" if outside.startswith(bar.run) else "run-code"
                    parts.append(
                        f'<text class="{klass} after" x="{after:.1f}" y="{by + ROW - 6:.1f}">{_esc(outside)}</text>'
                    )
            parts.append("</g>")
            g.append("".join(parts))
        # A bar's markers are drawn after every bar of the lane, so no bar covers one.
        for (_, my, m, extra), mx in zip(placed[n_lane:], spread[n_lane:], strict=True):
            g.append(_shape(m.kind, mx, my, m.detail, extra))
        g.extend(_clusters(placed))
        g.extend(bands)
        g.append("</g>")
        body.append("\n".join(g))
        y += height + LANE_GAP
    axis = [
        f'<g class="axis"><line x1="{LEFT}" y1="{TOP}" x2="{LEFT + WIDTH}" y2="{TOP}"/>'
        f'<text class="tick zone" x="{LEFT - 10}" y="{TOP - 6}">UTC</text>'
    ]
    day = None
    for t in ticks:
        x = x_of(t)
        fmt = "%H:%M:%S" if step < 60 else "%H:%M" if step < 86400 else "%Y-%m-%d"
        axis.append(
            f'<line class="grid" x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{y}"/>'
            f'<text class="tick" x="{x:.1f}" y="{TOP - 6}">{t.strftime(fmt)}</text>'
        )
        if step < 86400 and t.date() != day:  # the date over the first tick of each day
            day = t.date()
            axis.append(f'<text class="tick date" x="{x:.1f}" y="{TOP - 19}">{t.strftime("%Y-%m-%d")}</text>')
    axis.append("</g>")
    cursor_svg = ""
    if cursor is not None and lo <= cursor <= hi:
        cx = x_of(cursor)
        detail = f"cursor: {_iso(cursor)}"
        cursor_svg = (
            f'<g class="cursor" data-at="{_iso(cursor)}" data-detail="{_esc(detail)}"><title>{_esc(detail)}</title>'
            f'<line x1="{cx:.1f}" y1="{TOP - 17}" x2="{cx:.1f}" y2="{y}"/>'
            f'<text x="{cx + 4 if cx < LEFT + WIDTH - 160 else cx - 4:.1f}" y="{TOP - 32}" '
            f'text-anchor="{"start" if cx < LEFT + WIDTH - 160 else "end"}">{_esc(_iso(cursor))}</text></g>'
        )
    height = y + 10
    # The window as drawn (data-lo, data-hi: exact, padding included) and where time runs
    # (data-left, data-width), for a script that maps a pointer to an instant.
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{LEFT + WIDTH + 20}" height="{height}" '
        f'viewBox="0 0 {LEFT + WIDTH + 20} {height}" data-lo="{_exact(lo)}" data-hi="{_exact(hi)}" '
        f'data-left="{LEFT}" data-width="{WIDTH}" data-top="{TOP}">'
        + "".join(axis)
        + "\n".join(body)
        + cursor_svg
        + "</svg>"
    )
    panel = "" if cursor is None else _panel(h, cursor, lo, hi, wanted)
    n_folded = sum(len(bars) for bars in folded.values())
    return _page(
        title,
        h,
        lo,
        hi,
        cursor,
        shown_runs,
        svg,
        assets,
        header,
        panel=panel,
        live=live,
        whatif=whatif,
        folded=n_folded,
    )


def _legend(whatif: WhatIf | None = None) -> str:
    items = [f'<span class="item status" data-status="{s}"><i class="s-{s}"></i>{s}</span>' for s in Status]
    marks = list(MARKS.items())
    if whatif is not None:
        items.append(f'<span class="item whatif">what-if <strong>{_esc(whatif.policy)}</strong>:</span>')
        marks = [*WHATIF_MARKS.items(), *marks]
    for kind, (_, _, text) in marks:
        items.append(
            f'<span class="item mark" data-kind="{kind}"><svg width="16" height="16" viewBox="0 0 16 16">'
            f"{_shape(kind, 8, 8, text)}</svg>{_esc(text)}</span>"
        )
    return '<div class="legend" id="legend">' + "".join(items) + "</div>"


_CSS = """
body{font:13px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:16px;color:#111827;background:#fff}
h1{font-size:18px;margin:0 0 4px} .sub{color:#4b5563;margin:0 0 10px}
.legend{display:flex;flex-wrap:wrap;gap:6px 16px;margin:8px 0 12px;max-width:1390px}
.legend .item{display:inline-flex;align-items:center;gap:5px}
.legend i{display:inline-block;width:18px;height:10px;border-radius:2px}
svg.timeline{display:block} .lane-bg{fill:#f9fafb;stroke:#e5e7eb}
.lane-label{font-weight:600;font-size:13px} .lane-sub{fill:#6b7280;font-size:11px}
.epoch-band.e0{fill:#e5e7eb} .epoch-band.e1{fill:#d1d5db} .epoch-label{font-size:10px;fill:#374151}
.axis line{stroke:#9ca3af} .axis .grid{stroke:#eef0f3} .tick{font-size:11px;fill:#4b5563;text-anchor:middle}
.seg{stroke:#fff;stroke-width:.5} .run-label,.run-code{font-size:10px;fill:#111827;pointer-events:none}
.run-code{fill:#991b1b} .run:hover .seg{stroke:#111827;stroke-width:1}
.cursor line{stroke:#e11d48;stroke-width:2;stroke-dasharray:4 3;pointer-events:none} .cursor text{fill:#e11d48;font-weight:600;font-size:12px}
header form.window{margin:6px 0 12px} header input{font:inherit;width:15em}
.tick.zone{text-anchor:end;font-weight:600} .tick.date{font-weight:600;fill:#111827}
.cluster rect{fill:#111827} .cluster text{fill:#fff;font-size:10px;font-weight:700;text-anchor:middle}
.fold .cell{stroke:none} .fold-label{font-size:10px;fill:#374151} .fold a .fold-label{fill:#1d4ed8;text-decoration:underline}
#cursor-panel{max-width:1390px;border-top:2px solid #e11d48;margin:8px 0;padding:4px 0}
#cursor-panel h2{font-size:15px;margin:4px 0;color:#9f1239} #cursor-panel h3{font-size:13px;margin:8px 0 2px}
#cursor-panel ol,#cursor-panel ul{margin:0;padding-left:22px} #cursor-panel .off{color:#4b5563}
.toolbar{display:flex;gap:6px;margin:4px 0} .keys{color:#4b5563;margin:2px 0 6px;max-width:1390px}
svg.timeline:focus{outline:2px solid #1d4ed8;outline-offset:2px} .brush{fill:#1d4ed8;fill-opacity:.15;stroke:#1d4ed8}
#tip{position:fixed;display:none;max-width:520px;background:#111827;color:#f9fafb;padding:6px 8px;border-radius:4px;
font-size:12px;pointer-events:none;z-index:10;white-space:pre-wrap}
"""
# The legend's swatches by class, not by a style attribute: a page served under a
# Content-Security-Policy without inline style (the console's) shows them too.
_CSS += "".join(f".legend i.s-{s}{{background:{c}}}" for s, c in COLOURS.items()) + "\n"

# Hover: the SVG <title> already shows each element's details; this shows the same text at once, styled.
_SCRIPT = """
(function(){var tip=document.getElementById('tip');
function find(t){while(t&&t.getAttribute){if(t.getAttribute('data-detail'))return t;t=t.parentNode}return null}
document.addEventListener('mouseover',function(ev){var t=find(ev.target);if(!t){tip.style.display='none';return}
tip.textContent=t.getAttribute('data-detail');tip.style.display='block'});
document.addEventListener('mousemove',function(ev){tip.style.left=(ev.clientX+14)+'px';tip.style.top=(ev.clientY+14)+'px'});
})();
"""


def _page(
    title: str,
    h: History,
    lo: datetime,
    hi: datetime,
    cursor: datetime | None,
    shown: int,
    svg: str,
    assets: str | None = None,
    header: str = "",
    *,
    panel: str = "",
    live: bool = False,
    whatif: WhatIf | None = None,
    folded: int = 0,
) -> str:
    more = (
        f" as rows (the runs that matter: marked, at the cursor, failing or moving in the window), {folded:,} more folded "
        "into each slot's density bands"
        if folded
        else " shown"
    )
    sub = (
        f"{h.events} events up to log position {h.position}; {len(h.lanes)} process slots, {shown} runs{more}; "
        f"ledger time {_iso(lo)} to {_iso(hi)}" + (f"; cursor at {_iso(cursor)}" if cursor is not None else "")
    )
    if whatif is not None:
        sub += (
            f"; what-if {whatif.policy} (replayed to log position {whatif.position}): "
            f"{len(whatif.differences)} verdicts differ from the recorded sweeps', each flagged on its run"
        )
    if assets is None:
        style, script = f"<style>{_CSS}</style>", f"<script>{_SCRIPT}</script>"
    else:
        style = f'<link rel="stylesheet" href="{_esc(assets)}timeline.css">'
        script = f'<script src="{_esc(assets)}timeline.js"></script>'
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_esc(title)}</title>{style}</head><body>{header}"
        f"<h1>{_esc(title)}</h1>{_legend(whatif)}"
        f'<div id="picture"{" data-live" if live else ""}><p class="sub">{_esc(sub)}</p>{svg}{panel}</div>'
        f'<div id="tip"></div>{script}</body></html>\n'
    )


def page(
    store: Store,
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
    """The page of the log in `store` (undecodable events are left out, rule T4), with a
    what-if's differing verdicts flagged on their runs if given (`render`). A window
    with both ends is read through the spans view (`window_history`, rule V2); the whole
    history, an open-ended window or a read-only copy from the whole log. InvalidInput
    for a window that ends before it starts or an instant without a time zone;
    RunNotFound for a `runs` entry the log never queued."""
    for name, t in (("--from", start), ("--to", end), ("--at", cursor)):
        if t is not None and t.tzinfo is None:
            raise InvalidInput("the instant needs a time zone (e.g. 2026-09-09T14:29:19Z)", where=name)
    if start is not None and end is not None and end <= start:
        raise InvalidInput(f"the window ends ({_iso(end)}) before it starts ({_iso(start)})", where="--to")
    h = None
    if start is not None and end is not None:
        h = window_history(store, start, end, cursor=cursor, runs=runs, whatif=whatif)
    if h is None:
        h = whole_history(store)
    for run in runs or ():
        if run not in h.bars:
            raise RunNotFound(run)
    return render(
        h,
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


def whole_history(store: Store) -> History:
    """The model of the whole log."""
    return history(rec for chunk in store.read_batches(0) for rec in chunk if type(rec) is Recorded)


def window_history(
    store: Store,
    start: datetime,
    end: datetime,
    *,
    cursor: datetime | None = None,
    runs: Sequence[str] | None = None,
    whatif: WhatIf | None = None,
) -> History | None:
    """The model the page of the window [start, end] draws, read in proportion to the
    window (rule V2): the same page `render` makes of the whole log's `history`, from
    the streams of the runs the spans view finds in the window and near the cursor
    (projections/spans.py: the rule it keeps), of the runs asked for when `runs` is
    given (with the window's: their recoveries are the sweeps marked on the lanes shown),
    of the runs a what-if flags near them, and of every slot; past RUNS_MAX runs that
    only pass through the window, those are drawn from the view (each its one open
    segment: the picture folds them all, rule V1). The summary's counts and the lanes
    are the view's. None on a read-only copy (no view to catch up): read the whole log.

    Exact because everything `render` and its cursor panel read of a run comes from
    its whole stream (a bar's segments and markers, and whether it is drawn at all),
    every slot's epochs and markers from the slots' whole streams, a run that passes
    through is a band's count in its status from before the window to after it (no
    other segment, marker or event of it is in the window or near the cursor), and the
    only facts of the rest of the log the page shows are the view's tally and lanes; a
    run read that the window does not show draws nothing (tests/replay/test_timeline_window.py
    holds it to the whole log's page)."""
    from epochledger.projections import engine  # the store's view tables: only where a window is read

    us = spans.micros
    margin = 1_000_000  # a second each side: the panel's reach is computed in floats (_panel)
    lo, hi = us(start), us(end)
    if cursor is not None:  # the panel's events: within NEAR of the window each side of the cursor
        around = int((hi - lo) * NEAR) + margin
        lo, hi = min(lo, us(cursor) - around), max(hi, us(cursor) + around)
    lo, hi = lo - margin, hi + margin
    found = engine.read_spans(store, lo, hi)
    if found is None:
        return None
    # The window's runs also when `runs` names some: a sweep's marker is on the slot's
    # lane, made of every run that sweep recovered, and a lane of a run asked for shows it.
    chosen = set(found.runs) | set(runs or ())
    if whatif is not None:  # a flag near the cursor is in the panel, whichever bar it is on
        chosen.update(d.run for d in whatif.differences if lo <= us(d.at) <= hi)
    # A run that only passes through the window is one open segment there, and matters
    # to nothing the page says of the window (`_matters`): past RUNS_MAX of them the
    # picture folds every one, so each is drawn as its segment, from the view; else,
    # and on a page of some runs (which shows none it was not asked for), from its stream.
    passing = [p for p in found.passing if p[0] not in chosen]
    if runs or len(passing) <= RUNS_MAX:
        if not runs:
            chosen.update(p[0] for p in passing)
        passing = []
    streams = [process_stream(p) for p, slot in sorted(found.lanes.items()) if slot]
    read = store.read_streams([*streams, *(run_stream(r) for r in sorted(chosen))])
    records = sorted(
        (rec for recs in read.values() for rec in recs if type(rec) is Recorded and rec.position <= found.position),
        key=lambda rec: rec.position,
    )
    h = history(records)
    epoch0 = datetime(1970, 1, 1, tzinfo=UTC)
    for run, lane, status, code, since, position in passing:
        bar = Bar(run=run, process=lane)
        bar.segments.append(Segment(Status(status), code, epoch0 + timedelta(microseconds=since), None, position))
        h.bars[run] = bar
        h.lane(lane).bars.append(bar)
    for lane in found.lanes:  # the lanes of runs the window does not show: drawn empty
        h.lane(lane)
    h.events, h.position = found.events, found.last
    h.first = None if found.first_at is None else epoch0 + timedelta(microseconds=found.first_at)
    h.last = None if found.last_at is None else epoch0 + timedelta(microseconds=found.last_at)
    return h


STYLE = _CSS  # the page's style and script, for a server that links them (`assets`)
SCRIPT = _SCRIPT
