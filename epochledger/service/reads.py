"""The reads over HTTP (rule H2, docs/service.md "Reads"): GET routes under /v1.

Each route parses its query, makes one facade call (`Ledger`'s reports,
epochledger/reports.py) inside `Service.use()`, and returns the facade's typed result,
so the OpenAPI document shows the same msgspec Structs the Python API returns. Every
route names that facade method as its operation (`opt={"op": ...}`), which the role
table of rule H4 keys on. Bad input is refused by the facade (InvalidInput, naming the
parameter) or by Litestar's decoding of a typed parameter; both become a 422 problem
document through epochledger/service/problems.py, as every ledger error does.

The audit routes read the DuckDB audit file, not the ledger: they call their facade
function without taking the process's ledger (a query may run for its whole time
bound, and holding the one ledger that long would stall every write).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from litestar import Response, get
from litestar.datastructures import State
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath, FromQuery, Parameter

from epochledger import reports
from epochledger.ledger.codec import instant
from epochledger.ledger.events import Status
from epochledger.reports import (
    AuditTable,
    Digest,
    EpochLiveness,
    ErrorClassHealth,
    HistoryEntry,
    Orphaned,
    ReplayedDocument,
    RoleHolder,
    RunPage,
    RunView,
    StreakingRuns,
    TickHealth,
    Verification,
    WhatIf,
)
from epochledger.service.app import Service

# A listing's page (docs/service.md "Reads"): the size when none is asked, and the
# largest a request may ask (rule H8: a response is bounded like a request).
PAGE_DEFAULT = 100
PAGE_MAX = 1000

Many = Annotated[list[str] | None, Parameter(description="repeatable")]


def _service(state: State) -> Service:
    service: Service = state.service
    return service


def _labels(label: list[str] | None) -> list[tuple[str, str]]:
    return [reports.label_pair(x, "label") for x in label or ()]


def _statuses(status: list[Status] | None) -> list[str]:
    return [str(s) for s in status or ()]


@get("/v1/runs", opt={"op": "list_runs"}, sync_to_thread=True, summary="Runs, filtered, one page")
def list_runs(
    state: State,
    status: FromQuery[list[Status] | None] = None,
    predicate: Many = None,
    code: Many = None,
    label: Annotated[list[str] | None, Parameter(description="KEY=VALUE, repeatable: every one must match")] = None,
    process: Many = None,
    parent: Many = None,
    after: Annotated[str | None, Parameter(description="the `next` cursor of the previous page")] = None,
    limit: Annotated[int, Parameter(ge=1, le=PAGE_MAX)] = PAGE_DEFAULT,
) -> RunPage:
    """Live runs filtered as `epochledger runs` filters them (status, lifecycle predicate,
    failure code, label, process slot, parent run), one page in the store's key order;
    `next` is the cursor of the following page (null on the last)."""
    labels = _labels(label)
    with _service(state).use() as ledger:
        page = ledger.list_runs(
            statuses=_statuses(status),
            predicates=predicate or (),
            codes=code or (),
            labels=labels,
            processes=process or (),
            parents=parent or (),
            shape="listed",
            after=after,
            limit=limit,
        )
    return RunPage(runs=page.runs, lag=page.lag, next=page.next)


@get("/v1/runs/{run:str}", opt={"op": "run_view"}, sync_to_thread=True, summary="One run")
def run_view(state: State, run: FromPath[str]) -> RunView:
    """One run: its state, shown code, every lifecycle predicate, checkpoint, labels,
    parent and children, attempts and tick health."""
    with _service(state).use() as ledger:
        return ledger.run_view(run)


@get("/v1/runs/{run:str}/history", opt={"op": "history_of"}, sync_to_thread=True, summary="A run's history")
def history_of(state: State, run: FromPath[str]) -> list[HistoryEntry]:
    """Every event of a run in order, with the status before it and its label:
    corrections (`CORRECTION A -> B`), fenced late reports (`FENCED ...`) and
    undecodable events stand out; each event names its actor, reason and code."""
    with _service(state).use() as ledger:
        return ledger.history_of(run)


@get("/v1/streaking", opt={"op": "streaking"}, sync_to_thread=True, summary="Runs with an open tick streak")
def streaking(
    state: State,
    status: FromQuery[list[Status] | None] = None,
    predicate: Many = None,
    code: Many = None,
    label: Many = None,
    process: Many = None,
) -> StreakingRuns:
    """The listed runs whose tick keeps failing, oldest streak first, with its age in
    ledger time (docs/tick.md)."""
    labels = _labels(label)
    with _service(state).use() as ledger:
        return ledger.streaking(
            statuses=_statuses(status),
            predicates=predicate or (),
            codes=code or (),
            labels=labels,
            processes=process or (),
        )


@get("/v1/orphans", opt={"op": "orphaned"}, sync_to_thread=True, summary="Orphans and unjudged runs")
def orphaned(
    state: State,
    status: FromQuery[list[Status] | None] = None,
    predicate: Many = None,
    code: Many = None,
    label: Many = None,
) -> list[Orphaned]:
    """The running runs the ledger's events say are orphans, each with its verdict
    (rule and evidence), and those no slot can judge (`unjudged`, rule O9). Reads only:
    recovering them is a sweep's."""
    labels = _labels(label)
    with _service(state).use() as ledger:
        return ledger.orphaned(statuses=_statuses(status), predicates=predicate or (), codes=code or (), labels=labels)


@get("/v1/epochs", opt={"op": "epoch_liveness"}, sync_to_thread=True, summary="Epochs with their liveness facts")
def epoch_liveness(
    state: State, process: FromQuery[str | None] = None, live: FromQuery[bool] = False, retired: FromQuery[bool] = False
) -> list[EpochLiveness]:
    """Every epoch of every slot (or of `process`), live or with the rule that ended it
    and its evidence (rule O7); `live`: only the live ones; `retired`: also the slots
    that retired (rule O8)."""
    with _service(state).use() as ledger:
        return ledger.epoch_liveness(process=process, live_only=live, retired=retired)


@get("/v1/roles/{role:str}", opt={"op": "role_holder"}, sync_to_thread=True, summary="Who holds an exclusive role")
def role_holder(state: State, role: FromPath[str]) -> RoleHolder:
    """The role's last grant (holder epoch and slot, fencing token, when granted; null
    if never granted) and whether that holder's epoch is live by the facts of O7 (rule
    T7): a holder no longer live keeps the grant until a live epoch acquires the role."""
    with _service(state).use() as ledger:
        return ledger.role_holder(role)


@get("/v1/tick-health", opt={"op": "tick_health_summary"}, sync_to_thread=True, summary="Fleet tick health")
def tick_health_summary(state: State) -> TickHealth:
    """Open tick failure streaks and dead-letters by step and error class (docs/tick.md)."""
    with _service(state).use() as ledger:
        return ledger.tick_health_summary()


@get(
    "/v1/tick-health/error-class",
    opt={"op": "error_class_health"},
    sync_to_thread=True,
    summary="One error class's open streaks and dead-letters",
)
def error_class_health(
    state: State, name: Annotated[str, Parameter(description="the error class, as tick health names it")]
) -> ErrorClassHealth:
    """The runs whose open tick streak is of this error class (oldest first) and its
    dead-letters in log order: what the fleet's row of the class counts (docs/tick.md).
    A class the log never named has neither."""
    with _service(state).use() as ledger:
        return ledger.error_class_health(name)


@get(
    "/v1/replay",
    opt={"op": "replay"},
    sync_to_thread=True,
    summary="The fleet at a position or an instant, with its state hash",
    responses={
        200: ResponseSpec(
            data_container=ReplayedDocument, description="the state and its hash", generate_examples=False
        )
    },
)
def replay(
    state: State,
    position: Annotated[int | None, Parameter(ge=0)] = None,
    at: Annotated[str | None, Parameter(description="RFC 3339 with a time zone")] = None,
    by: FromQuery[Literal["log", "event-time"]] = "log",
) -> Response[bytes]:
    """The fleet's state as of a log position or an instant (rule R1): the bytes of
    `epochledger replay --json`, the state canonically encoded and the SHA-256 of
    exactly those bytes."""
    cut = instant(at, "at")
    with _service(state).use() as ledger:
        replayed = ledger.replay(position=position, at=cut, by=by)
    return Response(replayed.document(), media_type="application/json")


@get("/v1/whatif", opt={"op": "whatif"}, sync_to_thread=True, summary="The history under another orphan policy")
def whatif(
    state: State,
    policy: Annotated[str, Parameter(description="NAME[:ARG], as `epochledger whatif --policy`")],
    at: Annotated[str | None, Parameter(description="RFC 3339 with a time zone")] = None,
) -> WhatIf:
    """The recorded history replayed under another orphan policy, every verdict that
    differs from the recorded sweeps' (rule R4)."""
    cut = instant(at, "at")
    chosen = reports.check_policy(policy)  # refused before the log is read
    with _service(state).use() as ledger:
        return ledger.whatif(chosen, at=cut, name=policy)


@get("/v1/verify", opt={"op": "verify"}, sync_to_thread=True, summary="The chain and every view checked")
def verify(
    state: State,
    digest: Annotated[
        list[str] | None, Parameter(description='a digest {"position", "hash", "at"} as JSON; repeatable, older first')
    ] = None,
) -> Verification:
    """The hash chain (rule S1, with the digests given) and every live view against a
    replay from zero (rule R2). A broken chain or a differing view is this report, with
    its first difference, not an error."""
    digests = [reports.parse_digest(d, "digest") for d in digest or ()]
    with _service(state).use() as ledger:
        found = ledger.verify(digests)
    state["metrics"].record_verify(found)  # the chain's last verify outcome (rule H7)
    return found


@get("/v1/digest", opt={"op": "take_digest"}, sync_to_thread=True, summary="The chain's head, to keep elsewhere")
def take_digest(state: State) -> Digest:
    """The hash chain's head now, after checking the whole log against it (rule S1)."""
    with _service(state).use() as ledger:
        return ledger.take_digest()


@get("/v1/audit/reports/{name:str}", opt={"op": "audit_report"}, sync_to_thread=True, summary="A canned audit report")
def audit_report(
    state: State,
    name: FromPath[str],
    as_of: Annotated[str | None, Parameter(description="RFC 3339 with a time zone")] = None,
    period: FromQuery[str] = "day",
    label: FromQuery[str | None] = None,
    timeout: Annotated[float | None, Parameter(gt=0, description="seconds")] = None,
    memory_limit: FromQuery[str | None] = None,
) -> AuditTable:
    """A canned audit report over the audit file (docs/audit.md; `epochledger audit
    sync` fills it), bounded in time and memory as `audit report` is."""
    cut = instant(as_of, "as_of")
    url = _service(state).ledger.url  # the audit file is found beside the store; the ledger is not used
    return AuditTable.of(
        reports.audit_report(
            url, name, as_of=cut, period=period, label=label, timeout=timeout, memory_limit=memory_limit
        )
    )


@get("/v1/audit/query", opt={"op": "audit_query"}, sync_to_thread=True, summary="Read-only audit SQL")
def audit_query(
    state: State,
    sql: Annotated[str, Parameter(description="one SELECT (or WITH, FROM, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN)")],
    timeout: Annotated[float | None, Parameter(gt=0, description="seconds")] = None,
    memory_limit: FromQuery[str | None] = None,
) -> AuditTable:
    """One read-only SQL statement on the audit file, refused if it writes, interrupted
    at its time bound, within its memory bound (docs/audit.md, Bounds)."""
    url = _service(state).ledger.url
    return AuditTable.of(reports.audit_query(url, sql, timeout=timeout, memory_limit=memory_limit))


ROUTES: list[Any] = [
    list_runs,
    run_view,
    history_of,
    streaking,
    orphaned,
    epoch_liveness,
    role_holder,
    tick_health_summary,
    error_class_health,
    replay,
    whatif,
    verify,
    take_digest,
    audit_report,
    audit_query,
]
