"""The writes over HTTP (rules H2, H3): one route per write of the Python API, and the
group commit.

Each route parses its body (a msgspec Struct: Litestar decodes and validates it, and the
OpenAPI document shows it), makes one facade call and encodes the typed state it returns.
A run's or a slot's write is submitted to one `Batch` (epochledger/writes.py), the facade's
write path, so the response can say whether it appended anything: `recorded` is false
and `already` true when the decider found its effect already held (a retried delivery,
rule H3). With an `Idempotency-Key` header the first outcome is kept in the same
transaction as the write (epochledger/service/idempotency.py) and returned again.

The ids and fields are plain strings here: the facade checks them (rule L4) and refuses
bad input by name, so no rule is restated in the service.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec
from litestar import Request, Response, post
from litestar.params import FromPath, HeaderParameter, JSONBody

from epochledger.app import BOOT_ATTEMPTS, ORPHAN_MARGIN_S, ROLE_ATTEMPTS
from epochledger.ledger.errors import InvalidInput, LedgerError
from epochledger.ledger.events import Cause, Status
from epochledger.ledger.process import EpochState, ProcessState
from epochledger.ledger.role import RoleState
from epochledger.ledger.run import RunState
from epochledger.probe import ProbeReport
from epochledger.service import auth
from epochledger.service.idempotency import KEY_HEADER, kept, written
from epochledger.sweep import SweepReport
from epochledger.tick import TickOutcome, TickReport

if TYPE_CHECKING:
    from epochledger.app import Batch, Ledger
    from epochledger.service.app import Service

Req = Request[Any, Any, Any]
IdemKey = Annotated[
    str | None,
    HeaderParameter(
        name=KEY_HEADER,
        required=False,
        description="Keep this write's first outcome under this key and answer a retry with it (rule H3)",
    ),
]


class Body(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A write's request body: fields as the Python API names them."""


# ----------------------------------------------------------------- responses
class RunWritten(msgspec.Struct, frozen=True, kw_only=True):
    """A run's state after the write. `recorded`: this request appended its event;
    `already`: nothing was appended because the effect already held (the same write
    again, or the same Idempotency-Key: rule H3)."""

    run: RunState
    recorded: bool
    already: bool


class EpochWritten(msgspec.Struct, frozen=True, kw_only=True):
    """An epoch's state after the write (boot, begin-stop, stop, exited); `recorded`
    and `already` as for a run."""

    epoch: EpochState
    recorded: bool
    already: bool


class StartupWritten(msgspec.Struct, frozen=True, kw_only=True):
    """The booted epoch and its sweep's report (Ledger.startup, rule O5)."""

    epoch: EpochState
    report: SweepReport


# ------------------------------------------------------------- run commands
class RunBody(Body, frozen=True, kw_only=True):
    actor: str | None = None
    reason: str | None = None
    at: datetime | None = None  # when it happened; default: the server's clock now

    def apply(self, b: Batch, run: str) -> RunState:
        raise NotImplementedError  # each command below says its one facade call

    def slots(self) -> tuple[str, ...]:
        """The process slots this write acts for (auth.check_slot)."""
        return ()

    def act_by(self) -> str | None:
        """Who a resume says resumes (auth.check_act: `operator` is an operator's act)."""
        return None

    def epochs(self) -> tuple[str, ...]:
        """The epochs this write reports on behalf of (auth.check_epoch)."""
        return ()


class ReportBody(RunBody, frozen=True, kw_only=True):
    """A report written on behalf of an epoch (fenced: rule F1)."""

    epoch: str | None = None

    def epochs(self) -> tuple[str, ...]:
        return (self.epoch,) if self.epoch is not None else ()


class QueueBody(RunBody, frozen=True, kw_only=True):
    workflow: str | None = None
    process: str | None = None
    labels: dict[str, str] | None = None
    parent: str | None = None

    def apply(self, b: Batch, run: str) -> RunState:
        return b.queue(
            run,
            workflow=self.workflow,
            process=self.process,
            actor=self.actor,
            reason=self.reason,
            at=self.at,
            labels=self.labels,
            parent=self.parent,
        )

    def slots(self) -> tuple[str, ...]:
        return (self.process,) if self.process is not None else ()


class StartBody(ReportBody, frozen=True, kw_only=True):
    process: str | None = None

    def apply(self, b: Batch, run: str) -> RunState:
        return b.start(run, epoch=self.epoch, process=self.process, actor=self.actor, reason=self.reason, at=self.at)

    def slots(self) -> tuple[str, ...]:
        return (self.process,) if self.process is not None else ()


class CheckpointBody(ReportBody, frozen=True, kw_only=True):
    node: str
    ref: str

    def apply(self, b: Batch, run: str) -> RunState:
        return b.checkpoint(
            run, self.node, self.ref, epoch=self.epoch, actor=self.actor, reason=self.reason, at=self.at
        )


class PauseBody(ReportBody, frozen=True, kw_only=True):
    kind: Literal["operator", "waiting_human"]
    interaction: str | None = None
    questions: list[str] | None = None

    def apply(self, b: Batch, run: str) -> RunState:
        return b.pause(
            run,
            self.kind,
            interaction=self.interaction,
            questions=self.questions,
            epoch=self.epoch,
            actor=self.actor,
            reason=self.reason,
            at=self.at,
        )


class ResumeBody(RunBody, frozen=True, kw_only=True):
    by: Literal["operator", "auto"]
    answers: dict[str, str] | None = None

    def apply(self, b: Batch, run: str) -> RunState:
        return b.resume(run, self.by, answers=self.answers, actor=self.actor, reason=self.reason, at=self.at)

    def act_by(self) -> str | None:
        return self.by


class FailBody(ReportBody, frozen=True, kw_only=True):
    code: str
    resumable: bool
    error: str | None = None
    cause: Cause | None = None

    def apply(self, b: Batch, run: str) -> RunState:
        return b.fail(
            run,
            self.code,
            resumable=self.resumable,
            error=self.error,
            cause=self.cause,
            epoch=self.epoch,
            actor=self.actor,
            reason=self.reason,
            at=self.at,
        )


class FinishBody(ReportBody, frozen=True, kw_only=True):
    def apply(self, b: Batch, run: str) -> RunState:
        return b.finish(run, epoch=self.epoch, actor=self.actor, reason=self.reason, at=self.at)


class CancelBody(RunBody, frozen=True, kw_only=True):
    def apply(self, b: Batch, run: str) -> RunState:
        return b.cancel(run, actor=self.actor, reason=self.reason, at=self.at)


class CorrectBody(Body, frozen=True, kw_only=True):
    to: Status
    actor: str
    reason: str
    code: str = ""
    error: str | None = None
    at: datetime | None = None

    def apply(self, b: Batch, run: str) -> RunState:
        return b.correct(
            run, self.to, actor=self.actor, reason=self.reason, code=self.code, error=self.error, at=self.at
        )

    def slots(self) -> tuple[str, ...]:
        return ()

    def epochs(self) -> tuple[str, ...]:
        return ()

    def act_by(self) -> str | None:
        return None


class RewindBody(RunBody, frozen=True, kw_only=True):
    to_ref: str | None = None

    def apply(self, b: Batch, run: str) -> RunState:
        return b.rewind(run, to_ref=self.to_ref, actor=self.actor, reason=self.reason, at=self.at)


class DeleteBody(RunBody, frozen=True, kw_only=True):
    def apply(self, b: Batch, run: str) -> RunState:
        return b.delete(run, actor=self.actor, reason=self.reason, at=self.at)


# ------------------------------------------------------------ slot commands
class BootBody(Body, frozen=True, kw_only=True):
    """A boot of a process that runs elsewhere: it states its own facts. `booted_at`
    is the instant the process started, by its own clock (rule O1); the sweeps of its
    epoch judge with it (O3)."""

    booted_at: datetime
    host: str
    pid: int
    epoch: str | None = None  # default: a fresh id
    actor: str | None = None
    host_boot: str | None = None
    pid_start: int | None = None
    machine: str | None = None


class StartupBody(BootBody, frozen=True, kw_only=True):
    margin: float | None = None  # the O3 margin in seconds; default: the facade's
    new_slot: bool = True


class StopBody(Body, frozen=True, kw_only=True):
    actor: str | None = None
    reason: str | None = None


class ExitedBody(Body, frozen=True, kw_only=True):
    observed_by: str
    exit_code: int | None = None
    signal: int | None = None
    evidence: str | None = None
    actor: str | None = None
    reason: str | None = None
    at: datetime | None = None


class SweepBody(Body, frozen=True, kw_only=True):
    """Sweep with an epoch the caller booted itself (as `epochledger sweep --as-epoch`),
    judged with its recorded boot instant; an epoch no longer live is refused (422)."""

    margin: float | None = None


class ProbeBody(Body, frozen=True, kw_only=True):
    epoch: str | None = None  # the caller's own live epoch to sweep with
    sweep: bool = True


# ------------------------------------------------------------------ helpers
def service(request: Req) -> Service:
    svc: Service = request.app.state.service
    return svc


def _epoch_state(b: Batch | ProcessState, epoch: str) -> EpochState:
    """The state of `epoch` as the batch (or the slot's state after a write) now sees it."""
    found = b.epoch(epoch) if isinstance(b, ProcessState) else b.find_epoch(epoch)
    assert found is not None  # just written or found (find_epoch raises UnknownEpoch)
    return found


def _check_run_write(request: Req, op: str, body: RunBody | CorrectBody) -> None:
    """The guard's checks a run's write needs past its route's role: an operator's act
    (a resume by the operator, a cancel as one; auth.check_act) and its slots."""
    auth.check_act(request, op, by=body.act_by(), actor=body.actor)
    for slot in body.slots():
        auth.check_slot(request, slot)


async def run_write(request: Req, op: str, run: str, body: RunBody | CorrectBody, key: str | None) -> Response[Any]:
    _check_run_write(request, op, body)
    svc = service(request)

    def apply(b: Batch) -> Callable[[bool], RunWritten]:
        for epoch in body.epochs():
            auth.check_epoch(request, svc.ledger, epoch)
        state = body.apply(b, run)
        return lambda appended: RunWritten(run=state, recorded=appended, already=not appended)

    return await written(svc, request, key, body, apply)


async def epoch_write(
    request: Req, body: Body, key: str | None, epoch: str, act: Callable[[Batch], object], *, slot: str | None = None
) -> Response[Any]:
    if slot is not None:
        auth.check_slot(request, slot)
    svc = service(request)

    def apply(b: Batch) -> Callable[[bool], EpochWritten]:
        auth.check_epoch(request, svc.ledger, epoch)
        act(b)
        state = _epoch_state(b, epoch)
        return lambda appended: EpochWritten(epoch=state, recorded=appended, already=not appended)

    return await written(svc, request, key, body, apply)


def ledger_call(request: Req, key: str | None, body: Body, call: Callable[[Ledger], msgspec.Struct]) -> Response[Any]:
    """A write the facade makes in transactions of its own (startup, sweep, probe, a
    tick report): its Idempotency-Key outcome is kept after it (idempotency.kept)."""
    with service(request).use() as ledger:
        return kept(ledger, request, key, body, lambda: call(ledger))


# ------------------------------------------------------------------- routes
def _run_route(op: str, path: str, body_type: type[RunBody] | type[CorrectBody], summary: str) -> Any:
    async def handler(request: Req, run: FromPath[str], data: Any, idempotency_key: IdemKey = None) -> Response[Any]:
        return await run_write(request, op, run, data, idempotency_key)

    # The body's and the answer's types, for Litestar's decoding and the OpenAPI document,
    # written as annotations are (strings, resolved in this module).
    handler.__annotations__ = {
        **handler.__annotations__,
        "data": f"JSONBody[{body_type.__name__}]",
        "return": "Response[RunWritten]",
    }
    handler.__name__ = handler.__qualname__ = f"run_{op}"
    return post(
        f"/v1/runs/{{run:str}}/{path}",
        status_code=200,
        opt={"op": op},
        summary=summary,
        operation_id=op,
        tags=["runs"],
    )(handler)


RUN_ROUTES = [
    _run_route("queue", "queue", QueueBody, "Queue a new run"),
    _run_route("start", "start", StartBody, "Start a run on behalf of an epoch"),
    _run_route("checkpoint", "checkpoint", CheckpointBody, "Record a checkpoint"),
    _run_route("pause", "pause", PauseBody, "Pause a run (operator, or waiting on a human)"),
    _run_route("resume", "resume", ResumeBody, "Resume a paused or resumable run"),
    _run_route("fail", "fail", FailBody, "Record a failure with its code"),
    _run_route("finish", "finish", FinishBody, "Record that a run finished"),
    _run_route("cancel", "cancel", CancelBody, "Cancel a run"),
    _run_route("correct", "correct", CorrectBody, "Correct a final run's verdict (audited)"),
    _run_route("rewind", "rewind", RewindBody, "Rewind a run to a checkpoint"),
    _run_route("delete", "delete", DeleteBody, "Delete a run (its history stays)"),
]


@post(
    "/v1/processes/{process:str}/boot",
    status_code=200,
    opt={"op": "boot"},
    operation_id="boot",
    tags=["processes"],
    summary="Boot a new epoch of a process slot (rule O1)",
)
async def boot(
    request: Req, process: FromPath[str], data: JSONBody[BootBody], idempotency_key: IdemKey = None
) -> Response[EpochWritten]:
    auth.check_slot(request, process)
    svc = service(request)

    def apply(b: Batch) -> Callable[[bool], EpochWritten]:
        event = svc.ledger.boot_event(
            process,
            epoch=data.epoch,
            host=data.host,
            pid=data.pid,
            actor=data.actor,
            host_boot=data.host_boot,
            pid_start=data.pid_start,
            machine=data.machine,
            booted_at=data.booted_at,
        )
        state = _epoch_state(b.submit(event), event.epoch)
        return lambda appended: EpochWritten(epoch=state, recorded=appended, already=not appended)

    return await written(svc, request, idempotency_key, data, apply, attempts=BOOT_ATTEMPTS)


@post(
    "/v1/processes/{process:str}/startup",
    sync_to_thread=True,
    status_code=200,
    opt={"op": "startup"},
    operation_id="startup",
    tags=["processes"],
    summary="Boot a new epoch and sweep with it, before serving anything (rule O5)",
)
def startup(
    request: Req, process: FromPath[str], data: JSONBody[StartupBody], idempotency_key: IdemKey = None
) -> Response[StartupWritten]:
    auth.check_slot(request, process)

    def call(ledger: Ledger) -> StartupWritten:
        state, report = ledger.startup(
            process,
            epoch=data.epoch,
            host=data.host,
            pid=data.pid,
            actor=data.actor,
            new_slot=data.new_slot,
            booted_at=data.booted_at,
            host_boot=data.host_boot,
            pid_start=data.pid_start,
            machine=data.machine,
            margin=ORPHAN_MARGIN_S if data.margin is None else data.margin,
        )
        return StartupWritten(epoch=state, report=report)

    return ledger_call(request, idempotency_key, data, call)


@post(
    "/v1/epochs/{epoch:str}/begin-stop",
    status_code=200,
    opt={"op": "begin_stop"},
    operation_id="begin_stop",
    tags=["processes"],
    summary="Record that an epoch has begun to stop (process.stopping)",
)
async def begin_stop(
    request: Req, epoch: FromPath[str], data: JSONBody[StopBody], idempotency_key: IdemKey = None
) -> Response[EpochWritten]:
    return await epoch_write(
        request, data, idempotency_key, epoch, lambda b: b.begin_stop(epoch, actor=data.actor, reason=data.reason)
    )


@post(
    "/v1/epochs/{epoch:str}/stop",
    status_code=200,
    opt={"op": "stop"},
    operation_id="stop",
    tags=["processes"],
    summary="Record a clean stop of an epoch (process.stopping, process.stopped)",
)
async def stop(
    request: Req, epoch: FromPath[str], data: JSONBody[StopBody], idempotency_key: IdemKey = None
) -> Response[EpochWritten]:
    return await epoch_write(
        request, data, idempotency_key, epoch, lambda b: b.stop(epoch, actor=data.actor, reason=data.reason)
    )


@post(
    "/v1/processes/{process:str}/epochs/{epoch:str}/exited",
    status_code=200,
    opt={"op": "exited"},
    operation_id="exited",
    tags=["processes"],
    summary="Record that an epoch's process exited, as whoever saw it (rule O7)",
)
async def exited(
    request: Req,
    process: FromPath[str],
    epoch: FromPath[str],
    data: JSONBody[ExitedBody],
    idempotency_key: IdemKey = None,
) -> Response[EpochWritten]:
    return await epoch_write(
        request,
        data,
        idempotency_key,
        epoch,
        lambda b: b.exited(
            process,
            epoch,
            observed_by=data.observed_by,
            exit_code=data.exit_code,
            signal=data.signal,
            evidence=data.evidence,
            actor=data.actor,
            reason=data.reason,
            at=data.at,
        ),
        slot=process,
    )


@post(
    "/v1/epochs/{epoch:str}/sweep",
    sync_to_thread=True,
    status_code=200,
    opt={"op": "sweep"},
    operation_id="sweep",
    tags=["processes"],
    summary="Sweep with a live epoch the caller booted, judged by its boot instant (rule O5)",
)
def sweep(
    request: Req, epoch: FromPath[str], data: JSONBody[SweepBody], idempotency_key: IdemKey = None
) -> Response[SweepReport]:
    with service(request).use() as ledger:
        auth.check_epoch(request, ledger, epoch)

    def call(ledger: Ledger) -> SweepReport:
        return ledger.sweep(epoch, require_live=True, margin=ORPHAN_MARGIN_S if data.margin is None else data.margin)

    return ledger_call(request, idempotency_key, data, call)


@post(
    "/v1/probe",
    sync_to_thread=True,
    status_code=200,
    opt={"op": "probe"},
    operation_id="probe",
    tags=["processes"],
    summary="Probe this server's host's live epochs against its kernel, then sweep (rules O7, O8)",
)
def probe(request: Req, data: JSONBody[ProbeBody], idempotency_key: IdemKey = None) -> Response[ProbeReport]:
    if data.epoch is not None:
        with service(request).use() as ledger:
            auth.check_epoch(request, ledger, data.epoch)

    def call(ledger: Ledger) -> ProbeReport:
        return ledger.probe(epoch=data.epoch, sweep=data.sweep)

    return ledger_call(request, idempotency_key, data, call)


# ------------------------------------------------------------ exclusive roles
class RoleBody(Body, frozen=True, kw_only=True):
    """An epoch asking for an exclusive role (rule T7): the caller's own epoch, as
    `boot` or `startup` answered it. Asking again while it holds the role appends
    nothing; each tick of a foreign scheduler asks."""

    epoch: str
    actor: str | None = None
    reason: str | None = None


class RoleWritten(msgspec.Struct, frozen=True, kw_only=True):
    """The grant that stands after the request: the asking epoch holds the role with
    `grant.token` (it only grows: hand it to the systems the exclusive work drives).
    `recorded`: this request granted it (a new holder, the next token); `already`: the
    epoch held it already, nothing appended."""

    grant: RoleState
    recorded: bool
    already: bool


@post(
    "/v1/roles/{role:str}/acquire",
    status_code=200,
    opt={"op": "acquire_role"},
    operation_id="acquire_role",
    tags=["roles"],
    summary="Take or keep an exclusive role for a live epoch, with its fencing token (rule T7)",
)
async def acquire_role(
    request: Req, role: FromPath[str], data: JSONBody[RoleBody], idempotency_key: IdemKey = None
) -> Response[RoleWritten]:
    svc = service(request)

    def apply(b: Batch) -> Callable[[bool], RoleWritten]:
        auth.check_epoch(request, svc.ledger, data.epoch)
        grant = b.acquire_role(role, data.epoch, actor=data.actor, reason=data.reason)
        return lambda appended: RoleWritten(grant=grant, recorded=appended, already=not appended)

    return await written(svc, request, idempotency_key, data, apply, attempts=ROLE_ATTEMPTS)


# ------------------------------------------------------------- tick reports
class TickReportBody(Body, frozen=True, kw_only=True):
    """A tick the scheduler ran itself: each run's outcome (rules T1-T3). `tick` names
    it (unique per tick; the same report again with the same `tick` appends nothing);
    `tick_failure_deadline_s`: the T2 bound, default the tick driver's."""

    outcomes: list[TickOutcome]
    tick: str | None = None
    tick_failure_deadline_s: float | None = None


class TickFailed(msgspec.Struct, frozen=True, kw_only=True):
    run: str
    step: str
    error_class: str
    error: str
    failing_since: datetime  # the streak's first failure
    failures: int  # in the streak, this one included
    dead_lettered: bool
    recorded: bool


class TickDeadLetter(msgspec.Struct, frozen=True, kw_only=True):
    run: str
    step: str
    reason: str
    failing_since: datetime
    failures: int
    recorded: bool  # False: the store refused it; the next failing report dead-letters it again


class TickUnrecorded(msgspec.Struct, frozen=True, kw_only=True):
    run: str
    event: str
    error: str


class TickReported(msgspec.Struct, frozen=True, kw_only=True):
    """What the ledger recorded for a reported tick: the runs that advanced, the streaks
    that closed, the failures, and the runs it dead-lettered (release what they held)."""

    tick: str
    active: int
    advanced: list[str]
    recovered: list[str]
    failures: list[TickFailed]
    dead_letters: list[TickDeadLetter]
    unrecorded: list[TickUnrecorded]
    appended: int


def tick_reported(report: TickReport) -> TickReported:
    return TickReported(
        tick=report.tick,
        active=report.active,
        advanced=list(report.advanced),
        recovered=list(report.recovered),
        failures=[
            TickFailed(
                run=f.run,
                step=f.step,
                error_class=f.error_class,
                error=f.error,
                failing_since=f.failing_since,
                failures=f.failures,
                dead_lettered=f.dead_lettered,
                recorded=f.recorded,
            )
            for f in report.failures
        ],
        dead_letters=[
            TickDeadLetter(
                run=d.run,
                step=d.step,
                reason=d.reason,
                failing_since=d.failing_since,
                failures=d.failures,
                recorded=d.recorded,
            )
            for d in report.dead_letters
        ],
        unrecorded=[
            TickUnrecorded(run=u.run, event=u.event, error=f"{type(u.error).__name__}: {u.error}")
            for u in report.unrecorded
        ],
        appended=report.appended,
    )


@post(
    "/v1/epochs/{epoch:str}/tick",
    sync_to_thread=True,
    status_code=200,
    opt={"op": "tick_report"},
    operation_id="tick_report",
    tags=["processes"],
    summary="Report a tick's per-run outcomes; the ledger applies T1-T3 and names the dead-lettered runs",
)
def tick_report(
    request: Req, epoch: FromPath[str], data: JSONBody[TickReportBody], idempotency_key: IdemKey = None
) -> Response[TickReported]:
    with service(request).use() as ledger:
        auth.check_epoch(request, ledger, epoch)

    def call(ledger: Ledger) -> TickReported:
        report = ledger.tick_report(
            epoch, data.outcomes, tick=data.tick, tick_failure_deadline=data.tick_failure_deadline_s
        )
        return tick_reported(report)

    return ledger_call(request, idempotency_key, data, call)


# -------------------------------------------------------------- group commit
# Each command is a route's body with its run (or epoch) inside and `op` as its tag.
class QueueCommand(QueueBody, frozen=True, kw_only=True, tag_field="op", tag="queue"):
    run: str


class StartCommand(StartBody, frozen=True, kw_only=True, tag_field="op", tag="start"):
    run: str


class CheckpointCommand(CheckpointBody, frozen=True, kw_only=True, tag_field="op", tag="checkpoint"):
    run: str


class PauseCommand(PauseBody, frozen=True, kw_only=True, tag_field="op", tag="pause"):
    run: str


class ResumeCommand(ResumeBody, frozen=True, kw_only=True, tag_field="op", tag="resume"):
    run: str


class FailCommand(FailBody, frozen=True, kw_only=True, tag_field="op", tag="fail"):
    run: str


class FinishCommand(FinishBody, frozen=True, kw_only=True, tag_field="op", tag="finish"):
    run: str


class CancelCommand(CancelBody, frozen=True, kw_only=True, tag_field="op", tag="cancel"):
    run: str


class CorrectCommand(CorrectBody, frozen=True, kw_only=True, tag_field="op", tag="correct"):
    run: str


class RewindCommand(RewindBody, frozen=True, kw_only=True, tag_field="op", tag="rewind"):
    run: str


class DeleteCommand(DeleteBody, frozen=True, kw_only=True, tag_field="op", tag="delete"):
    run: str


class BeginStopCommand(StopBody, frozen=True, kw_only=True, tag_field="op", tag="begin_stop"):
    epoch: str


class StopCommand(StopBody, frozen=True, kw_only=True, tag_field="op", tag="stop"):
    epoch: str


class ExitedCommand(ExitedBody, frozen=True, kw_only=True, tag_field="op", tag="exited"):
    process: str
    epoch: str


RunCommand = (
    QueueCommand
    | StartCommand
    | CheckpointCommand
    | PauseCommand
    | ResumeCommand
    | FailCommand
    | FinishCommand
    | CancelCommand
    | CorrectCommand
    | RewindCommand
    | DeleteCommand
)
Command = RunCommand | BeginStopCommand | StopCommand | ExitedCommand


class BatchBody(Body, frozen=True, kw_only=True):
    """Commands appended together in one transaction, all or nothing (rules L5, H2):
    each decided against the batch's own view (a run queued and started in one batch).
    At most the server's max_batch (422 past it)."""

    commands: list[Command]


class BatchResult(msgspec.Struct, frozen=True, kw_only=True):
    """One command's outcome: the run's or the epoch's state after it, and whether it
    appended anything (`already`: its effect held)."""

    op: str
    run: RunState | None = None
    epoch: EpochState | None = None
    recorded: bool
    already: bool


class BatchWritten(msgspec.Struct, frozen=True, kw_only=True):
    results: list[BatchResult]
    appended: int  # events the batch appended
    recorded: bool
    already: bool  # every command's effect already held: nothing appended


def _apply(b: Batch, command: Command) -> BatchResult:
    before = b.pending
    run: RunState | None = None
    epoch: EpochState | None = None
    if isinstance(command, BeginStopCommand):
        b.begin_stop(command.epoch, actor=command.actor, reason=command.reason)
        epoch = _epoch_state(b, command.epoch)
    elif isinstance(command, StopCommand):
        b.stop(command.epoch, actor=command.actor, reason=command.reason)
        epoch = _epoch_state(b, command.epoch)
    elif isinstance(command, ExitedCommand):
        b.exited(
            command.process,
            command.epoch,
            observed_by=command.observed_by,
            exit_code=command.exit_code,
            signal=command.signal,
            evidence=command.evidence,
            actor=command.actor,
            reason=command.reason,
            at=command.at,
        )
        epoch = _epoch_state(b, command.epoch)
    else:
        run = command.apply(b, command.run)
    appended = b.pending > before
    op: str = command.__struct_config__.tag  # type: ignore[assignment] # every Command has a str tag
    return BatchResult(op=op, run=run, epoch=epoch, recorded=appended, already=not appended)


@post(
    "/v1/batch",
    status_code=200,
    opt={"op": "batch"},
    operation_id="batch",
    tags=["runs"],
    summary="A group commit: every command in one transaction, all or nothing",
)
async def batch(request: Req, data: JSONBody[BatchBody], idempotency_key: IdemKey = None) -> Response[BatchWritten]:
    svc = service(request)
    if len(data.commands) > svc.config.max_batch:
        raise InvalidInput(
            f"{len(data.commands)} commands; a batch holds at most {svc.config.max_batch} (the server's max_batch)",
            where="commands",
        )
    for command in data.commands:  # each command is the act of its own route (rule H4)
        op: str = command.__struct_config__.tag  # type: ignore[assignment] # every Command has a str tag
        if isinstance(command, ExitedCommand):
            auth.require(request, op)
            auth.check_slot(request, command.process)
        elif isinstance(command, BeginStopCommand | StopCommand):
            auth.require(request, op)
        else:
            _check_run_write(request, op, command)

    def apply(b: Batch) -> Callable[[bool], BatchWritten]:
        for command in data.commands:
            epochs = (
                (command.epoch,)
                if isinstance(command, BeginStopCommand | StopCommand | ExitedCommand)
                else command.epochs()
            )
            for epoch in epochs:
                auth.check_epoch(request, svc.ledger, epoch)
        before = b.pending
        results = []
        for i, command in enumerate(data.commands):
            try:
                results.append(_apply(b, command))
            except LedgerError as e:
                e.command = i  # type: ignore[attr-defined] # the problem document names the refused command
                raise
        appended = b.pending - before
        return lambda any_appended: BatchWritten(
            results=results, appended=appended, recorded=any_appended, already=not any_appended
        )

    return await written(svc, request, idempotency_key, data, apply)


ROUTES: list[Any] = [
    *RUN_ROUTES,
    boot,
    startup,
    begin_stop,
    stop,
    exited,
    sweep,
    probe,
    acquire_role,
    tick_report,
    batch,
]
