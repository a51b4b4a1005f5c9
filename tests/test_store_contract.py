"""One contract for a store, run against every backend (SQLite file, PostgreSQL):
STYLE.md "Layers and rooms". A behaviour only one backend has is a bug in the other."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ledger import ConflictError, IllegalTransition, InvalidInput, RunNotFound, StoreError
from ledger.events import RunFailed, RunQueued, Status
from ledger.service import Ledger
from ledger.store import Append, open_store
from tests.conftest import T0


def test_L1_each_transition_is_one_event_carrying_status_and_code(ledger: Ledger) -> None:
    ledger.queue("r1", workflow="wf", actor="api")
    ledger.start("r1", process="w-1")
    ledger.fail("r1", "TIMEOUT", resumable=True, error="slow", actor="w-1", reason="step load")
    history = ledger.history("r1")
    assert [r.event.status for r in history] == [Status.QUEUED, Status.RUNNING, Status.FAILED_RESUMABLE]
    assert [r.version for r in history] == [1, 2, 3]
    last = history[-1].event
    assert isinstance(last, RunFailed) and last.code == "TIMEOUT" and last.actor == "w-1" and last.reason == "step load"
    assert ledger.get_run("r1").code == "TIMEOUT"


def test_L3_unknown_codes_round_trip_unharmed(ledger: Ledger) -> None:
    odd = "OOM_KILLED: cgroup memory.max ü 💥"
    ledger.queue("r1")
    ledger.start("r1")
    ledger.fail("r1", odd, resumable=False)
    assert ledger.get_run("r1").code == odd
    assert [r.event.code for r in ledger.events()][-1] == odd


def test_L4_refused_command_appends_nothing(ledger: Ledger) -> None:
    ledger.queue("r1")
    before = ledger.store.max_position()
    with pytest.raises(IllegalTransition) as e:
        ledger.finish("r1")
    assert (e.value.run, e.value.status, e.value.attempted) == ("r1", "queued", "run.finished")
    with pytest.raises(InvalidInput, match=r"\$\.reason"):
        ledger.cancel("r1", reason="x" * 70_000)
    with pytest.raises(InvalidInput, match=r"\$\.run"):
        ledger.queue("bad id with spaces")
    with pytest.raises(RunNotFound):
        ledger.get_run("nope")
    assert ledger.store.max_position() == before


def test_L1_same_command_twice_appends_once(ledger: Ledger) -> None:
    ledger.queue("r1")
    ledger.start("r1")
    ledger.checkpoint("r1", "n", "ref")
    ledger.checkpoint("r1", "n", "ref")
    ledger.finish("r1")
    ledger.finish("r1")
    assert len(ledger.history("r1")) == 4


def test_L5_group_commit_is_all_or_nothing(ledger: Ledger) -> None:
    ledger.queue("a")
    with pytest.raises(IllegalTransition):
        with ledger.batch() as b:
            b.queue("b")
            b.start("a")
            b.finish("b")  # illegal: b is queued
    with pytest.raises(RunNotFound):
        ledger.get_run("b")
    assert ledger.get_run("a").status == Status.QUEUED
    with ledger.batch() as b:
        for i in range(50):
            b.queue(f"g{i}")
            b.start(f"g{i}")
    assert len(ledger.runs()) == 51
    assert len(b.recorded) == 100 and len({r.position for r in b.recorded}) == 100


def test_L5_stale_writer_gets_a_typed_conflict_and_nothing_lands(store_url: str, clock) -> None:  # noqa: ANN001
    from ledger import open_ledger

    with open_ledger(store_url, clock=clock) as one, open_ledger(store_url, clock=clock) as two:
        one.queue("r1")
        b1, b2 = one.batch(), two.batch()
        b1.start("r1")
        b2.cancel("r1")
        b2.queue("other")
        b1.commit()
        with pytest.raises(ConflictError) as e:
            b2.commit()
        assert e.value.streams == ["run:r1"]
        assert one.get_run("r1").status == Status.RUNNING
        with pytest.raises(RunNotFound):
            one.get_run("other")  # the whole losing batch rolled back


def test_R1_read_all_is_log_order_with_keyset_batches(ledger: Ledger) -> None:
    with ledger.batch() as b:
        for i in range(25):
            b.queue(f"r{i:02d}")
    all_ = list(ledger.store.read_all(batch=7))
    assert [r.position for r in all_] == sorted(r.position for r in all_)
    assert [r.event.run for r in all_] == [f"r{i:02d}" for i in range(25)]
    mid = all_[9].position
    assert [r.position for r in ledger.store.read_all(after=mid, batch=4)] == [r.position for r in all_[10:]]
    assert [r.position for r in ledger.store.read_all(upto=mid, batch=4)] == [r.position for r in all_[:10]]
    assert ledger.store.max_position() == all_[-1].position


def test_L8_events_are_stamped_by_the_injected_clock(ledger: Ledger, clock) -> None:  # noqa: ANN001
    ledger.queue("r1")
    clock.advance(90)
    ledger.start("r1")
    assert [r.event.at for r in ledger.history("r1")] == [T0, T0.replace(minute=1, second=30)]


def test_O1_boot_records_boot_instant_from_uptime(ledger: Ledger, clock) -> None:  # noqa: ANN001
    booted = ledger.boot("api-1", host="h", pid=7)
    assert booted.booted_at == T0 - timedelta(seconds=60)  # the clock's uptime is 60 s
    assert booted.at == T0
    state = ledger.process("api-1")
    assert state is not None and state.current is not None and state.current.epoch == booted.epoch
    again = ledger.boot("api-1")
    state = ledger.process("api-1")
    assert state.epoch(booted.epoch).superseded_by == again.epoch  # type: ignore[union-attr]


def test_L5_raw_store_append_checks_expected_version(store_url: str) -> None:
    store = open_store(store_url)
    try:
        e = RunQueued(at=T0, run="x", status=Status.QUEUED)
        store.append([Append("run:x", 1, e)])
        with pytest.raises(ConflictError):
            store.append([Append("run:x", 1, e)])
        assert store.stream_version("run:x") == 1
    finally:
        store.close()


def test_bad_store_urls_say_what_is_wrong(tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(InvalidInput, match="unsupported store URL scheme 'mysql'"):
        open_store("mysql://x/y")
    with pytest.raises(InvalidInput, match="needs a path"):
        open_store("sqlite://")
    with pytest.raises(StoreError, match="does not exist"):
        open_store(str(tmp_path / "missing" / "x.db"))


def test_store_url_forms(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.chdir(tmp_path)
    assert open_store("sqlite:///rel.db").url == f"sqlite:///{tmp_path}/rel.db"
    assert open_store(f"sqlite:///{tmp_path}/abs.db").url == f"sqlite:///{tmp_path}/abs.db"
    assert open_store("bare.db").url == f"sqlite:///{tmp_path}/bare.db"
    monkeypatch.setenv("EPOCHLEDGER_STORE", "fromenv.db")
    assert open_store().url == f"sqlite:///{tmp_path}/fromenv.db"
    monkeypatch.delenv("EPOCHLEDGER_STORE")
    assert open_store().url == f"sqlite:///{tmp_path}/epochledger.db"
