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
