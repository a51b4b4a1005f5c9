"""The facade's reads return typed values, never Any or dict[str, Any] (rule C2): the
orphans view and verdicts, tick health, the audit's status and Parquet export, the
store's recorder and log token, a stream's state by its id's kind. The CLI encodes them to the bytes it printed before
(tests/cli/test_cli_golden.py, rule C1). Mutation caught: any of them back to `-> Any`."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import msgspec
import pytest

from epochledger import ManualClock, open_ledger, tick
from epochledger.app import Batch, Ledger
from epochledger.ledger.store.base import Store
from epochledger.projections import audit, orphans
from epochledger.projections import tick_health as tick_health_view

PUBLIC = [
    Ledger.orphan_view,
    Ledger.orphans,
    tick.tick_health,
    tick.run_tick_health,
    audit.status,
    audit.export_parquet,
]


def _returns(f: typing.Any, localns: dict[str, typing.Any] | None = None) -> typing.Any:
    return typing.get_type_hints(f, globalns=vars(__import__(f.__module__, fromlist=["_"])), localns=localns)["return"]


@pytest.mark.parametrize("f", PUBLIC, ids=lambda f: f.__qualname__)
def test_C2_public_reads_name_their_result_type(f: typing.Any) -> None:
    returned = _returns(f)
    assert "Any" not in repr(returned), f"{f.__qualname__} -> {returned}"


def test_C2_the_store_hands_out_typed_library_parts() -> None:
    # ledger/store/base.py names the library's types for the type checker alone (a read
    # never imports the library, rule W2): they resolve in the library's own namespace.
    import eventsourcing.persistence

    for name in ("recorder", "datastore"):
        prop = getattr(Store, name)
        assert _returns(prop.fget, vars(eventsourcing.persistence)) is not typing.Any, name
    assert _returns(Store.log_token) is not typing.Any


def test_C2_the_results_are_what_they_say(tmp_path: Path, clock: ManualClock) -> None:
    store = f"sqlite:///{tmp_path / 'l.db'}"
    with open_ledger(store, clock=clock, init=True) as ledger:
        w1 = ledger.boot("worker-1", epoch="w1.e1")
        ledger.queue("r1", process="worker-1")
        ledger.start("r1", epoch=w1.epoch, process="worker-1")
        clock.restart(after=5)
        ledger.boot("worker-1", epoch="w1.e2")
        assert isinstance(ledger.orphan_view(), orphans.View)
        [(state, verdict)] = ledger.orphans()
        assert state.run == "r1" and isinstance(verdict, orphans.Verdict)
        assert isinstance(tick.tick_health(ledger), tick_health_view.View)
        health = tick.run_tick_health(ledger, "r1")
        assert isinstance(health, tick_health_view.RunTickHealth) and health.streak is None
        path = str(tmp_path / "l.duckdb")
        audit.sync(ledger._store, path)
        status = audit.status(path, ledger._store)
        assert isinstance(status, audit.AuditStatus) and (status.position, status.behind) == (
            ledger._store.max_position(),
            0,
        )
        assert msgspec.to_builtins(audit.status(path)).keys() == {"duckdb", "events", "latest", "position", "store"}
        exported = audit.export_parquet(path, str(tmp_path / "pq"))
        assert isinstance(exported, audit.ParquetExport) and exported.events == status.events


STATE_READS = [Ledger.read_state, Ledger.read_states, Batch.state]
STATES = {
    "RunState",
    "ProcessState",
    "Settings",
    "RoleState",
    "PassState",
    "KeptOutcome",
    "TokenRegistry",
    "StreamState",
}
STREAM_KINDS = {
    "RunStream",
    "ProcessStream",
    "LedgerStream",
    "RoleStream",
    "PassStream",
    "IdempotencyStream",
    "TokenStream",
}


@pytest.mark.parametrize("f", STATE_READS, ids=lambda f: f.__qualname__)
def test_C2_a_state_read_is_typed_by_its_streams_kind(f: typing.Any) -> None:
    # The annotations name the deciders' states for the type checker alone (rule W2:
    # ledger/streams.py), so they are read as written: a state, never Any, and one
    # overload per stream kind a read is asked of, then `str` for an id of no known kind.
    items = [*typing.get_overloads(f), f]
    for item in items:
        returned = item.__annotations__["return"]
        words = set(re.findall(r"\w+", returned))
        assert "Any" not in words and words & STATES, (item, returned)
    kinds = {next(a for k, a in o.__annotations__.items() if k != "return") for o in typing.get_overloads(f)}
    assert kinds - {"str", "Sequence[str]"} <= STREAM_KINDS | {f"Sequence[{k}]" for k in STREAM_KINDS}
    assert "str" in kinds or "Sequence[str]" in kinds
    if f is not Ledger.read_states:
        assert kinds == STREAM_KINDS | {"str"}


def test_C2_each_kinds_read_returns_its_state(tmp_path: Path, clock: ManualClock) -> None:
    from epochledger.ledger.events import process_stream, role_stream, run_stream
    from epochledger.ledger.process import ProcessState
    from epochledger.ledger.role import RoleState
    from epochledger.ledger.run import RunState

    with open_ledger(f"sqlite:///{tmp_path / 'l.db'}", clock=clock, init=True) as ledger:
        w1 = ledger.boot("worker-1", epoch="w1.e1")
        ledger.queue("r1", process="worker-1")
        ledger.acquire_role("leader", w1)
        assert type(ledger.read_state(run_stream("r1"))) is RunState
        assert type(ledger.read_state(process_stream("worker-1"))) is ProcessState
        assert type(ledger.read_state(role_stream("leader"))) is RoleState
        assert ledger.read_state(run_stream("nobody")) is None
        assert {type(s) for s in ledger.read_states([run_stream("r1")]).values()} == {RunState}
        with ledger.batch() as b:
            assert type(b.state(run_stream("r1"))) is RunState


def _generic_report_json(report: tick.TickReport) -> dict[str, typing.Any]:
    """The report's JSON as TickReport.to_builtins made it before it was typed: every
    field walked from the dataclasses' own dicts (the reference the typed one keeps)."""

    def plain(x: typing.Any) -> typing.Any:
        d = {k: v for k, v in x.__dict__.items() if k != "exception"}
        if isinstance(x, tick.Unrecorded):
            d["error"] = f"{type(x.error).__name__}: {x.error}"
        if isinstance(x, tick.DeadLetter):
            d["deadline"] = x.deadline.total_seconds()
        return d

    lists = ("failures", "dead_letters", "unrecorded", "fatal", "item_failures")
    built: dict[str, typing.Any] = msgspec.to_builtins(
        {
            **{k: v for k, v in report.__dict__.items() if k not in lists},
            "item_failures": [plain(f) for f in report.item_failures],
            "failures": [plain(f) for f in report.failures],
            "dead_letters": [plain(d) for d in report.dead_letters],
            "unrecorded": [plain(u) for u in report.unrecorded],
            "fatal": plain(report.fatal) if report.fatal else None,
            "ok": report.ok,
        }
    )
    return built


def test_C2_the_tick_reports_json_and_a_batchs_savepoint_are_typed() -> None:
    """TickReport.to_builtins returns a TickReportDoc (each part a TypedDict of its
    dataclass's fields, in order, but the exception), the same dict, key order included,
    as the untyped walk of the fields gave; Batch.savepoint a Savepoint, which
    Batch.rollback takes. Mutations caught: a field left out of a part's JSON, or put
    out of its order; `-> dict[str, Any]` back."""
    import dataclasses
    from datetime import UTC, datetime, timedelta

    from epochledger import passes
    from epochledger.ledger.errors import ConflictError

    at = datetime(2026, 9, 9, 1, 2, 3, 456789, tzinfo=UTC)
    boom = RuntimeError("boom")
    failure = tick.RunFailure(
        run="r1",
        step="advance",
        error_class="RuntimeError",
        error="boom",
        failing_since=at,
        failures=3,
        dead_lettered=True,
        recorded=False,
        exception=boom,
    )
    dead = tick.DeadLetter(
        run="r1",
        step="advance",
        error_class="RuntimeError",
        error="boom",
        failing_since=at,
        failures=3,
        deadline=timedelta(minutes=5, microseconds=1),
        reason="tick deadline",
        cleanup_error=None,
        recorded=True,
    )
    unrecorded = tick.Unrecorded(run="r2", event="run.tick_failed", error=ConflictError({"run:r2": (1, 2)}))
    item = passes.ItemFailure(
        name="p",
        item="i1",
        error_class="KeyError",
        error="'x'",
        deliveries=2,
        retired=True,
        recorded=True,
        exception=boom,
    )
    fatal = tick.TickFatal(stage="record", error_class="StoreError", error="down", exception=boom)
    report = tick.TickReport(
        tick="t1",
        started_at=at,
        active=3,
        advanced=("a",),
        recovered=("b",),
        failures=(failure,),
        dead_letters=(dead,),
        unrecorded=(unrecorded,),
        fatal=fatal,
        skipped=("c",),
        appended=4,
        fenced=1,
        roles_held={"admission": 2},
        roles_not_held={"gc": "epoch e of p, token 3"},
        steps_skipped=("gc",),
        item_failures=(item,),
        items_recovered=("p/i0",),
    )
    for empty in (report, tick.TickReport(tick="t2", started_at=at)):
        doc = empty.to_builtins()
        assert list(doc.items()) == list(_generic_report_json(empty).items())
        assert msgspec.json.encode(doc) == msgspec.json.encode(_generic_report_json(empty))
    parts = [
        (tick.RunFailure, tick.RunFailureDoc),
        (tick.DeadLetter, tick.DeadLetterDoc),
        (tick.Unrecorded, tick.UnrecordedDoc),
        (tick.TickFatal, tick.TickFatalDoc),
        (passes.ItemFailure, passes.ItemFailureDoc),
    ]
    for cls, doc_type in parts:
        fields = [f.name for f in dataclasses.fields(cls) if f.name != "exception"]
        assert list(typing.get_type_hints(doc_type)) == fields, cls
    report_fields = [f.name for f in dataclasses.fields(tick.TickReport)]
    assert sorted(typing.get_type_hints(tick.TickReportDoc)) == sorted([*report_fields, "ok"])
    for f in (tick.TickReport.to_builtins, Batch.savepoint):
        assert "Any" not in repr(_returns(f)), f
    assert typing.get_type_hints(Batch.rollback)["point"] is typing.get_type_hints(Batch.savepoint)["return"]


def test_C2_the_audit_results_and_the_run_listings_are_typed() -> None:
    """The audit reports' rows are Cells (docs/audit.md, "Values"), the facade's
    AuditTable too, and a listing's runs are of its shape: RunStates, ListedRuns or
    RunRows, one overload each. Mutation caught: a row or a listing back to Any."""
    from epochledger import reports
    from epochledger.projections.audit.results import Result

    for f in (audit.report, audit.query, reports.audit_report, reports.audit_query):
        assert _returns(f) is Result, f
    for hints in (typing.get_type_hints(Result), typing.get_type_hints(reports.AuditTable)):
        assert "Any" not in repr(hints["rows"]), hints["rows"]
    assert "Any" not in repr(typing.get_type_hints(reports.RunRow))
    shapes = {
        o.__annotations__["shape"]: o.__annotations__["return"] for o in typing.get_overloads(reports.Reports.list_runs)
    }
    assert shapes == {
        "Literal['state']": "Runs[RunState]",
        "Literal['listed']": "Runs[ListedRun]",
        "Literal['row']": "Runs[RunRow]",
    }
    assert typing.get_type_hints(reports.Runs)["runs"] == list[reports.Shaped]  # type: ignore[valid-type]
