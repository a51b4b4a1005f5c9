"""The startup sweep (rule O5): recover every orphan visible to a freshly booted epoch.

The I/O edge of projections/orphans.py: it folds the log into the orphans view, asks
that module for the verdicts, and submits one `run.recovered` event per orphan in one
group commit. The wall clock enters only here, in the O3 step-back guard: if the clock
reads earlier than the epoch's boot instant, the time fallback recovers nothing and
`process.sweep_skipped` says why (never clamp a negative age to zero: the clamp makes
the cutoff "now" and sweeps runs the live process started after the step).

Wire it at process start, never on first query: `ledger.startup(name)` (= `boot()` then
`sweep()`), docs/operations.md. Safe to run twice and from two replicas at once: a
recovery is an append at the run's expected version, the loser of a race gets a
conflict for that run, re-reads, finds it already recovered and recovers nothing.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import msgspec

from ledger.clock import boot_instant
from ledger.codec import check_value
from ledger.errors import ConflictError, InvalidInput, LedgerError, StoreError, SweepFailed
from ledger.events import (
    Name,
    ProcessBooted,
    ProcessSweepFailed,
    ProcessSweepSkipped,
    Recorded,
    RunRecovered,
    process_stream,
)
from ledger.process import EpochRef
from projections import orphans

if TYPE_CHECKING:
    from epochledger.app import Ledger

log = logging.getLogger("epochledger.sweep")

ATTEMPTS = 3  # rule O5: 3 attempts, 2 gaps
GAPS = (1.0, 4.0)  # seconds before attempt 2 and attempt 3
CONFLICT_ROUNDS = 8  # re-reads after losing a race, within one attempt


class SweepReport(msgspec.Struct, kw_only=True, omit_defaults=True):
    process: str
    epoch: str
    # "swept": the sweep ran to the end (recovered may be empty);
    # "stopping": the epoch has begun to stop, no (further) attempt was started;
    # "superseded": a later boot of the slot exists; its own sweep is the one that counts;
    # "exited", "host-rebooted": the sweeping epoch itself is no longer live (rule O7): a
    # dead process's sweep recovers nothing;
    # "preview": nothing was written (preview()).
    outcome: str
    recovered: list[orphans.Verdict] = []
    fallback_skipped: str | None = None  # why O3 recovered nothing (clock stepped back)
    attempts: int = 0
    conflict_rounds: int = 0


def sweep(
    ledger: Ledger,
    epoch: EpochRef | str,
    *,
    margin: float | timedelta = orphans.MARGIN,
    attempts: int = ATTEMPTS,
    gaps: Sequence[float] = GAPS,
    sleep: Callable[[float], object] | None = None,
) -> SweepReport:
    """Recover every orphan visible to `epoch` (its state, as `boot()` returns it, any
    object with `.process` and `.epoch`, or the epoch's id). Store errors are retried
    (`attempts` attempts, `gaps` between them); exhaustion logs at ERROR on logger
    `epochledger.sweep`, records `process.sweep_failed` if the store takes it, and
    raises SweepFailed. Once `begin_stop()` was called for the epoch, no attempt starts.
    `sleep` waits out a gap (default: wakes early when the process begins to stop)."""
    process: str | None
    if isinstance(epoch, str):  # an id: its slot is found in the first attempt (a read, retried)
        process, epoch_id = None, check_value(epoch, Name, "epoch")
    else:
        process = check_value(getattr(epoch, "process", None), Name, "epoch.process")
        epoch_id = check_value(getattr(epoch, "epoch", None), Name, "epoch.epoch")
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise InvalidInput(f"attempts must be an int >= 1, got {attempts!r}", where="attempts")
    if not isinstance(gaps, Sequence) or len(gaps) < attempts - 1 or not all(
            isinstance(g, int | float) and not isinstance(g, bool) and 0 <= g < math.inf for g in gaps):  # fmt: skip
        raise InvalidInput(f"need {attempts - 1} gaps of >= 0 finite seconds, got {gaps!r}", where="gaps")
    m = orphans.as_margin(margin)

    def wait(seconds: float) -> object:
        return sleep(seconds) if sleep is not None else ledger.wait_for_stop(epoch_id, seconds)

    last: StoreError | None = None
    for attempt in range(1, attempts + 1):
        if ledger.is_stopping(epoch_id):
            log.warning(
                "sweep of %s epoch %s: the process has begun to stop; no attempt %d", process or "?", epoch_id, attempt
            )
            return SweepReport(process=process or "", epoch=epoch_id, outcome="stopping", attempts=attempt - 1)
        try:
            if process is None:
                process = ledger.epoch(epoch_id).process  # UnknownEpoch if no slot booted it
            report = _attempt(ledger, process, epoch_id, m)
            report.attempts = attempt
            return report
        except StoreError as e:  # infrastructure: retried. Conflicts are handled inside.
            last = e
            log.warning(
                "sweep of %s epoch %s: attempt %d of %d failed: %s", process or "?", epoch_id, attempt, attempts, e
            )
            if attempt < attempts:
                wait(gaps[attempt - 1])
    assert last is not None
    slot = process or "?"  # "?": an epoch id whose slot no attempt could read
    log.error("sweep of %s epoch %s gave up after %d attempts: %s; orphans may still show as running",
              slot, epoch_id, attempts, last)  # fmt: skip
    recorded = False
    if process is None:  # the alert belongs on the slot's stream, and no read found the slot
        log.error("sweep of ? epoch %s: its slot could not be read, so process.sweep_failed was not recorded", epoch_id)
    else:
        try:
            ledger.submit(ProcessSweepFailed(at=ledger.clock.now(), process=process, epoch=epoch_id, actor=epoch_id,
                                             attempts=attempts, error=str(last)))  # fmt: skip
            recorded = True
        except LedgerError as e:
            log.error("sweep of %s epoch %s: could not record process.sweep_failed either: %s", process, epoch_id, e)
    raise SweepFailed(slot, epoch_id, attempts, str(last), recorded) from last


def _attempt(ledger: Ledger, process: str, epoch_id: str, margin: timedelta) -> SweepReport:
    skipped: str | None = None
    lost: list[str] = []
    for rounds in range(CONFLICT_ROUNDS):
        # The runs that could be orphans, not the fleet; its own slot even if it retired (O8)
        view = ledger.orphan_view(candidates_only=True, slots=(process,))
        me = view.epoch(process, epoch_id)
        if me is None:
            raise InvalidInput(
                f"epoch {epoch_id!r} of {process!r} was never booted; boot() before sweep()", where="sweep"
            )
        if me.stopping_at is not None or me.stopped_at is not None:
            return SweepReport(process=process, epoch=epoch_id, outcome="stopping", conflict_rounds=rounds)
        ended = view.end_of(me)  # the one liveness definition (ledger.process.end_of, rule O7)
        if ended is not None:
            outcome = {orphans.SUPERSEDED: "superseded", orphans.EXITED: "exited",
                       orphans.HOST_REBOOTED: "host-rebooted"}.get(ended[0], "stopping")  # fmt: skip
            return SweepReport(process=process, epoch=epoch_id, outcome=outcome, conflict_rounds=rounds)
        now = ledger.clock.now()
        found = orphans.verdicts(view, me, margin)
        if now < me.booted_at or skipped is not None:
            # The wall clock stepped back past the boot instant: every O3 stamp compared
            # with it is suspect, so the fallback recovers nothing. Do NOT clamp the
            # negative age to zero (that makes the cutoff "now": an incident in docs/rules.md).
            skipped = skipped or (f"wall clock {now.isoformat()} reads earlier than the boot instant "
                                  f"{me.booted_at.isoformat()} (it stepped back): the time fallback "
                                  "recovers nothing in this sweep, rule O3")  # fmt: skip
            found = [v for v in found if not v.uses_time]
        try:
            with ledger.batch() as b:
                if skipped is not None:  # in the same batch: a lost race writes neither
                    b.submit(ProcessSweepSkipped(at=now, process=process, epoch=epoch_id, actor=epoch_id,
                                                 why=skipped, now=now, booted_at=me.booted_at))  # fmt: skip
                for v in found:
                    # Decide against the state the verdict was made on; the append still
                    # expects its version, so a run that moved since the fold (another
                    # replica recovered it) fails the batch and we judge again.
                    b.assume(view.runs[v.run])
                    b.submit(_recovery(v, now, process, epoch_id))
        except ConflictError as e:
            lost = e.streams
            continue  # another writer (another replica's sweep) moved a stream: re-read
        return SweepReport(
            process=process,
            epoch=epoch_id,
            outcome="swept",
            recovered=found,
            fallback_skipped=skipped,
            conflict_rounds=rounds,
        )
    raise ConflictError(
        lost, f"sweep of {process} epoch {epoch_id!r} kept losing races after {CONFLICT_ROUNDS} re-reads"
    )


def _recovery(v: orphans.Verdict, now: datetime, process: str, epoch_id: str) -> RunRecovered:
    return RunRecovered(
        at=now,
        run=v.run,
        actor=epoch_id,
        reason=v.explain(),
        rule=v.rule,
        swept_by=epoch_id,
        swept_by_process=process,
        owner_process=v.owner_process,
        owner_epoch=v.owner_epoch,
        superseded_by=v.superseded_by,
        stopped_at=v.stopped_at,
        started_at=v.started_at,
        booted_at=v.booted_at,
        cutoff=v.cutoff,
        margin=v.margin,
        exited_at=v.exited_at,
        observed_by=v.observed_by,
        exit_code=v.exit_code,
        signal=v.signal,
        host=v.host,
        host_boot=v.host_boot,
        rebooted_to=v.rebooted_to,
        rebooted_by=v.rebooted_by,
        evidence=v.evidence,
    )


PREVIEW_EPOCH = "(preview)"


def preview(ledger: Ledger, process: str, *, margin: float = orphans.MARGIN.total_seconds()) -> SweepReport:
    """What booting a new epoch of `process` now and sweeping with it would recover,
    without writing anything: the same verdicts (projections/orphans.py) over the log
    plus a boot that is only folded, never appended. For `epochledger sweep --dry-run`."""
    m = orphans.as_margin(margin)
    process = check_value(process, Name, "process")
    view = ledger.orphan_view(slots=(process,))  # its slot even if it retired (rule O8), as the sweep reads it
    now = ledger.clock.now()
    # The boot startup() would record, host facts included: on a host that rebooted, it
    # ends the epochs of the earlier boot (O2-host-rebooted), and the preview says so.
    facts = ledger.host
    boot = ProcessBooted(at=now, process=process, epoch=PREVIEW_EPOCH, booted_at=boot_instant(ledger.clock),
                         host=facts.name(), host_boot=facts.boot_id(), machine=facts.machine_id())  # fmt: skip
    orphans.evolve(view, Recorded(view.position, process_stream(process), 0, boot))
    found = orphans.verdicts(view, view.epoch(process, PREVIEW_EPOCH), m)
    return SweepReport(process=process, epoch=PREVIEW_EPOCH, outcome="preview", recovered=found)
