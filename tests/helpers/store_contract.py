"""The store contract: one abstract suite every backend runs (rules L1, L3, L4, L5, R1).

As eventsourcing's persistence test suites do: `StoreContract` holds every test of what
a store promises; each backend subclasses it with one `create_store()` (SQLite:
tests/ledger/test_store_sqlite.py; PostgreSQL: tests/ledger/test_store_postgres.py), so a third
backend gets the whole suite by writing one class. A behaviour only one backend has is
a bug in the other.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from epochledger import (
    ConflictError,
    IllegalTransition,
    InvalidInput,
    ManualClock,
    RunNotFound,
    StoreError,
    open_ledger,
)
from epochledger.app import Ledger
from epochledger.cli import exit_code
from epochledger.ledger.errors import CommitUnknown, NotCommitted
from epochledger.ledger.events import RunFailed, RunQueued, Status, run_stream
from epochledger.ledger.store import Append, Lines, lines_of, open_store
from tests.conftest import T0
from tests.helpers.engine_helpers import corrupt, random_history


def queued_append(run: str, version: int = 1) -> Append:
    """A store-level append of `run`'s queue, at `version` of its stream."""
    return Append(run_stream(run), version, RunQueued(at=T0, run=run, status=Status.QUEUED))


def _log(ledger: Ledger) -> list[tuple[int, str, int]]:
    return [(r.position, r.stream, r.version) for r in ledger.events()]


class Faults:
    """Makes the next commit of a ledger fail the way a real one does, per backend.

    PostgreSQL: a TCP proxy between psycopg and the server (tests/helpers/pg_proxy.py) cuts the
    connection when the COMMIT passes: before forwarding it (the server never commits),
    or after the server answered it (the server committed; the client never hears).
    `check_fails`: the port closes at that moment, so the store cannot reconnect to
    check. SQLite (a local file has no lost answers; its drivers fail instead): the
    store's transaction raises a disk error before or after its commit, and the check
    fails with the disk."""

    def __init__(self, store_url: str, clock, monkeypatch) -> None:
        self.kind = "postgresql" if store_url.startswith("postgresql") else "sqlite"
        self.monkeypatch = monkeypatch
        self.proxy = None
        if self.kind == "postgresql":
            from tests.helpers.pg_proxy import Proxy

            self.proxy = Proxy()
            store_url = self.proxy.url(store_url) + "&connect_timeout=2"
        from epochledger import open_ledger

        self.ledger = open_ledger(store_url, clock=clock)

    def cut(self, when: str, *, check_fails: bool = False) -> None:
        if self.proxy is not None:
            self.proxy.arm(when, then_refuse=check_fails)  # type: ignore[arg-type]
            return
        import sqlite3

        store = self.ledger._store
        real = store._transact

        def transact(conn, rows):
            self.monkeypatch.setattr(store, "_transact", real)
            if when == "after_commit":
                real(conn, rows)
            raise sqlite3.OperationalError("disk I/O error")

        self.monkeypatch.setattr(store, "_transact", transact)
        if check_fails:

            def check(rows):
                raise sqlite3.OperationalError("disk I/O error")

            self.monkeypatch.setattr(store, "_check", check)

    def heal(self) -> None:
        if self.proxy is not None:
            self.proxy.forward()
        else:
            self.monkeypatch.undo()

    def close(self) -> None:
        self.ledger.close()
        if self.proxy is not None:
            self.proxy.close()


class NewStores(ABC):
    """What every contract suite of a store needs: `create_store()`, which a backend's
    test class implements, and a fresh `tmp_path` and `cleanups` per test (run in
    reverse at teardown). The store contract and the port contracts
    (tests/helpers/port_contracts.py) share it."""

    @abstractmethod
    def create_store(self) -> str:
        """The URL of a new, empty store of this backend. Register anything to undo
        afterwards with `self.cleanups.append(...)`."""

    tmp_path: Path
    cleanups: list[Callable[[], Any]]

    @pytest.fixture(autouse=True)
    def _fresh(self, tmp_path: Path) -> Iterator[None]:
        self.tmp_path, self.cleanups = tmp_path, []
        yield
        for undo in reversed(self.cleanups):
            undo()


class StoreContract(NewStores):
    """Everything a store promises. A backend's test class implements `create_store`."""

    @pytest.fixture
    def store_url(self) -> str:
        return self.create_store()

    @pytest.fixture
    def ledger(self, store_url: str, clock: ManualClock) -> Iterator[Ledger]:
        with open_ledger(store_url, clock=clock) as lg:
            yield lg

    @pytest.fixture
    def faults(self, store_url: str, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> Iterator[Faults]:
        f = Faults(store_url, clock, monkeypatch)
        yield f
        f.close()

    def test_L1_each_transition_is_one_event_carrying_status_and_code(self, ledger: Ledger) -> None:
        ledger.queue("r1", workflow="wf", actor="api")
        ledger.start("r1", process="w-1")
        ledger.fail("r1", "TIMEOUT", resumable=True, error="slow", actor="w-1", reason="step load")
        history = ledger.history("r1")
        assert [r.event.status for r in history] == [Status.QUEUED, Status.RUNNING, Status.FAILED_RESUMABLE]
        assert [r.version for r in history] == [1, 2, 3]
        last = history[-1].event
        assert (
            isinstance(last, RunFailed)
            and last.code == "TIMEOUT"
            and last.actor == "w-1"
            and last.reason == "step load"
        )
        assert ledger.get_run("r1").code == "TIMEOUT"

    def test_L3_unknown_codes_round_trip_unharmed(self, ledger: Ledger) -> None:
        odd = "OOM_KILLED: cgroup memory.max ü 💥"
        ledger.queue("r1")
        ledger.start("r1")
        ledger.fail("r1", odd, resumable=False)
        assert ledger.get_run("r1").code == odd
        assert [r.event.code for r in ledger.events()][-1] == odd

    def test_L4_refused_command_appends_nothing(self, ledger: Ledger) -> None:
        ledger.queue("r1")
        before = ledger._store.max_position()
        with pytest.raises(IllegalTransition) as e:
            ledger.finish("r1")
        assert (e.value.run, e.value.status, e.value.attempted) == ("r1", "queued", "run.finished")
        with pytest.raises(InvalidInput, match=r"\$\.reason"):
            ledger.cancel("r1", reason="x" * 70_000)
        with pytest.raises(InvalidInput, match=r"\$\.run"):
            ledger.queue("bad id with spaces")
        with pytest.raises(RunNotFound) as refused:
            ledger.get_run("nope")
        assert (refused.value.run, refused.value.deleted) == ("nope", False)
        assert ledger._store.max_position() == before

    def test_L1_same_command_twice_appends_once(self, ledger: Ledger) -> None:
        ledger.queue("r1")
        ledger.start("r1")
        ledger.checkpoint("r1", "n", "ref")
        ledger.checkpoint("r1", "n", "ref")
        ledger.finish("r1")
        ledger.finish("r1")
        assert len(ledger.history("r1")) == 4

    def test_L5_group_commit_is_all_or_nothing(self, ledger: Ledger) -> None:
        ledger.queue("a")
        with pytest.raises(IllegalTransition) as refused:
            with ledger.batch() as b:
                b.queue("b")
                b.start("a")
                b.finish("b")  # illegal: b is queued
        assert (refused.value.run, refused.value.status, refused.value.attempted) == (
            "b",
            Status.QUEUED,
            "run.finished",
        )
        with pytest.raises(RunNotFound) as refused:
            ledger.get_run("b")
        assert (refused.value.run, refused.value.deleted) == ("b", False)
        assert ledger.get_run("a").status == Status.QUEUED
        with ledger.batch() as b:
            for i in range(50):
                b.queue(f"g{i}")
                b.start(f"g{i}")
        assert len(ledger.runs()) == 51
        assert len(b.recorded) == 100 and len({r.position for r in b.recorded}) == 100

    def test_L5_stale_writer_gets_a_typed_conflict_and_nothing_lands(self, store_url: str, clock) -> None:
        from epochledger import open_ledger

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
            with pytest.raises(RunNotFound) as refused:
                one.get_run("other")  # the whole losing batch rolled back
            assert (refused.value.run, refused.value.deleted) == ("other", False)

    def test_R1_read_all_is_log_order_with_keyset_batches(self, ledger: Ledger) -> None:
        with ledger.batch() as b:
            for i in range(25):
                b.queue(f"r{i:02d}")
        all_ = list(ledger._store.read_all(batch=7))
        assert [r.position for r in all_] == sorted(r.position for r in all_)
        assert [r.event.run for r in all_] == [f"r{i:02d}" for i in range(25)]
        mid = all_[9].position
        assert [r.position for r in ledger._store.read_all(after=mid, batch=4)] == [r.position for r in all_[10:]]
        assert [r.position for r in ledger._store.read_all(upto=mid, batch=4)] == [r.position for r in all_[:10]]
        assert ledger._store.max_position() == all_[-1].position

    def test_L8_events_are_stamped_by_the_injected_clock(self, ledger: Ledger, clock) -> None:
        ledger.queue("r1")
        clock.advance(90)
        ledger.start("r1")
        assert [r.event.at for r in ledger.history("r1")] == [T0, T0.replace(minute=1, second=30)]

    def test_O1_boot_records_boot_instant_from_uptime(self, ledger: Ledger, clock) -> None:
        booted = ledger.boot("api-1", host="h", pid=7)
        assert booted.booted_at == T0 - timedelta(seconds=60)  # the clock's uptime is 60 s
        assert booted.recorded_at == T0
        state = ledger.process("api-1")
        assert state is not None and state.current is not None and state.current.epoch == booted.epoch
        again = ledger.boot("api-1")
        state = ledger.process("api-1")
        assert state.epoch(booted.epoch).superseded_by == again.epoch  # type: ignore[union-attr]

    def test_L5_raw_store_append_checks_expected_version(self, store_url: str) -> None:
        store = open_store(store_url)
        try:
            e = RunQueued(at=T0, run="x", status=Status.QUEUED)
            store.append([Append("run:x", 1, e)])
            with pytest.raises(ConflictError) as refused:
                store.append([Append("run:x", 1, e)])
            assert refused.value.streams == ["run:x"]
            assert store.stream_version("run:x") == 1
        finally:
            store.close()

    def test_L5_a_commit_whose_answer_was_lost_after_the_server_committed_is_reported_appended_once(
        self, faults
    ) -> None:
        """Issue 10 item 3. The connection drops after the server committed: the append
        returns the batch's positions, nothing is doubled, and sending the same batch again
        appends nothing. Before: the library retried the insert, hit its own rows and
        reported `ConflictError ... nothing was appended` although everything was."""
        lg = faults.ledger
        lg.queue("r1")
        b = lg.batch()
        b.start("r1")
        b.queue("r2")
        faults.cut("after_commit")
        recorded = b.commit()
        assert [(r.stream, r.version) for r in recorded] == [("run:r1", 2), ("run:r2", 1)]
        assert _log(lg)[1:] == [(r.position, r.stream, r.version) for r in recorded]
        assert lg.get_run("r1").status == Status.RUNNING
        same = [Append(r.stream, r.version, r.event) for r in recorded]
        assert lg._store.append(same, resend=True) == [r.position for r in recorded]  # the same batch: nothing more
        assert len(_log(lg)) == 3

    def test_L5_a_commit_cut_before_it_reached_the_server_is_not_committed_and_can_be_retried(self, faults) -> None:
        """Issue 10 item 3: the connection drops before the COMMIT reached the server: a
        NotCommitted (a StoreError: retry is safe) naming the streams, and nothing landed.
        Committing the same batch again lands it once."""
        lg = faults.ledger
        lg.queue("r1")
        b = lg.batch()
        b.start("r1")
        b.queue("r2")
        faults.cut("before_commit")
        with pytest.raises(NotCommitted) as e:
            b.commit()
        assert isinstance(e.value, StoreError) and sorted(e.value.streams) == ["run:r1", "run:r2"]
        assert "nothing was written" in str(e.value)
        assert len(_log(lg)) == 1 and lg.get_run("r1").status == Status.QUEUED
        recorded = b.commit()
        assert _log(lg)[1:] == [(r.position, r.stream, r.version) for r in recorded]

    def test_L5_commit_unknown_then_the_same_batch_again_appends_nothing(self, faults) -> None:
        """Issue 10 item 3: the commit's answer is lost and the store cannot check either:
        CommitUnknown (exit code 11) names each stream's versions and never claims that
        nothing was appended. Batch.commit() again, once the store is back, sees its own
        rows in place and returns their positions: nothing doubled."""
        lg = faults.ledger
        lg.queue("r1")
        b = lg.batch()
        b.start("r1")
        b.checkpoint("r1", "n", "ref")
        b.queue("r2")
        faults.cut("after_commit", check_fails=True)
        with pytest.raises(CommitUnknown) as e:
            b.commit()
        assert e.value.versions == {"run:r1": (2, 3), "run:r2": (1, 1)} and exit_code(e.value) == 13
        assert "nothing was appended" not in str(e.value) and "run:r1 v2-3" in str(e.value)
        faults.heal()
        recorded = b.commit()
        assert [(r.stream, r.version) for r in recorded] == [("run:r1", 2), ("run:r1", 3), ("run:r2", 1)]
        assert _log(lg)[1:] == [(r.position, r.stream, r.version) for r in recorded]

    def test_L5_commit_unknown_when_it_had_not_landed_the_same_batch_lands_once(self, faults) -> None:
        lg = faults.ledger
        lg.queue("r1")
        b = lg.batch()
        b.start("r1")
        faults.cut("before_commit", check_fails=True)
        with pytest.raises((CommitUnknown, NotCommitted)):
            b.commit()
        faults.heal()
        recorded = b.commit()
        assert _log(lg)[1:] == [(r.position, r.stream, r.version) for r in recorded]

    def test_L5_the_same_events_sent_again_without_resend_are_a_conflict(self, store_url: str) -> None:
        """Two writers that decide byte-identical events for the same versions (same clock
        instant) still get one success and one typed conflict: identity by bytes is only
        trusted for a batch sent again after CommitUnknown (resend)."""
        store = open_store(store_url)
        try:
            e = RunQueued(at=T0, run="x", status=Status.QUEUED)
            [pos] = store.append([Append("run:x", 1, e)])
            with pytest.raises(ConflictError) as c:
                store.append([Append("run:x", 1, e)])
            assert c.value.streams == ["run:x"] and "nothing was appended" in str(c.value)
            assert store.append([Append("run:x", 1, e)], resend=True) == [pos]
            other = RunQueued(at=T0, run="x", status=Status.QUEUED, workflow="other")
            with pytest.raises(ConflictError) as refused:  # a resend whose bytes differ is a conflict, not a success
                store.append([Append("run:x", 1, other)], resend=True)
            assert refused.value.streams == ["run:x"]
            assert store.max_position() == pos
        finally:
            store.close()

    def test_A1_read_lines_are_read_raws_batches_as_lines_of_their_rows(self, ledger) -> None:
        """The audit copy's feed (Store.read_lines, docs/audit.md): the same batches as
        read_raw, each the bytes lines_of makes of its rows, whatever the payloads hold
        (a NUL, a tab, a newline, bytes that are not UTF-8, nothing at all), on every
        backend and wherever the keyset starts and stops."""
        random_history(ledger, 5, runs=6, ops=60)
        for position, payload in enumerate([b'{"a":"x\x00y"}', b"\t\n", b"\xff\xfe{", b"", b"\x00"], start=3):
            corrupt(ledger._store.url, position, payload)
        top = ledger._store.max_position()
        for after, upto, batch in [(0, None, 7), (0, None, 10_000), (2, 9, 3), (5, top, 1), (top, None, 4), (0, 0, 5)]:
            raw = list(ledger._store.read_raw(after, upto, batch))
            lines = list(ledger._store.read_lines(after, upto, batch))
            assert lines == [Lines(len(rows), rows[-1][0], lines_of(rows)) for rows in raw], (after, upto, batch)
        assert b"".join(x.data for x in ledger._store.read_lines())[:2] == b"1\t"

    def test_L5_read_streams_equals_read_stream_per_stream(self, ledger) -> None:
        random_history(ledger, 21, runs=12, ops=200)
        streams = [run_stream(f"run-{i:03d}") for i in range(14)]  # two never written
        got = ledger._store.read_streams(streams)
        assert list(got) == streams
        assert got == {s: ledger._store.read_stream(s) for s in streams}
        ledger._store.streams_per_read = 5  # three queries, a stream's events never split
        after = {s: 2 for s in streams[::3]}
        assert ledger._store.read_streams(streams, after) == {
            s: ledger._store.read_stream(s, after.get(s, 0)) for s in streams
        }
        ledger._store.whole_streams_per_read = 4  # streams read from their start: in queries of their own
        assert ledger._store.read_streams(streams, after) == {
            s: ledger._store.read_stream(s, after.get(s, 0)) for s in streams
        }

    def test_L5_read_streams_finds_ids_a_json_list_would_escape(self, ledger) -> None:
        """SQLite reads streams from their start by one JSON list of ids: an id that is
        not printable (a tab, a newline) takes the VALUES form, escapes and non-ASCII
        text still match the stored id exactly, on every backend."""
        from epochledger.ledger.events import RunQueued, Status
        from epochledger.ledger.store import Append
        from tests.conftest import T0

        odd = ["run:tab\there", "run:line\nbreak", "run:é∂ß", 'run:"quoted"\\', "run:\u2028sep"]
        ledger._store.append([Append(s, 1, RunQueued(at=T0, run="x", status=Status.QUEUED)) for s in odd])
        for wanted in (odd, odd[2:4], [*odd, "run:never"]):
            got = ledger._store.read_streams(wanted)
            assert got == {s: ledger._store.read_stream(s) for s in wanted}
            assert [len(got[s]) for s in wanted] == [1 if s in odd else 0 for s in wanted]

    def test_L5_prefetched_batch_decides_like_an_unprefetched_one(self, ledger) -> None:
        ledger.queue("old")
        with ledger.batch() as b:
            b.prefetch([run_stream("old"), run_stream("new"), run_stream("old")])
            assert b.start("old").status == "running"
            assert b.queue("new").version == 1
            with pytest.raises(IllegalTransition) as refused:
                b.queue("old")
            assert (refused.value.run, refused.value.status, refused.value.attempted) == (
                "old",
                Status.RUNNING,
                "run.queued",
            )
        assert [r.event.status for r in ledger.history("old")] == ["queued", "running"]
        # the optimistic lock still holds: another writer moves a prefetched stream
        b = ledger.batch()
        b.prefetch([run_stream("new")])
        ledger.start("new")
        b.cancel("new")
        with pytest.raises(ConflictError) as refused:
            b.commit()
        assert refused.value.streams == ["run:new"]
        assert ledger.get_run("new").status == "running"

    def test_L5_a_conflict_on_the_last_row_of_a_batch_rolls_back_every_row_before_it(self, store_url: str) -> None:
        """The append inserts a batch's rows in one statement (SQLite: one executemany;
        PostgreSQL: one INSERT per chunk) before the conflicting row is reached: the
        whole transaction rolls back, the ConflictError names that stream alone, the
        log and its chain are as before, and the next batch's positions are the ones
        it is given back (rule L5, S1)."""
        store = open_store(store_url)
        try:

            def queued(run: str) -> RunQueued:
                return RunQueued(at=T0, run=run, status=Status.QUEUED)

            [first] = store.append([Append("run:taken", 1, queued("taken"))])
            batch = [Append(f"run:b{i}", 1, queued(f"b{i}")) for i in range(7)] + [
                Append("run:taken", 1, queued("taken"))
            ]
            with pytest.raises(ConflictError) as c:
                store.append(batch)
            assert c.value.streams == ["run:taken"]
            assert store.max_position() == first
            assert [store.stream_version(f"run:b{i}") for i in range(7)] == [0] * 7
            got = store.append(batch[:-1])
            assert got == sorted(set(got)) and got[0] > first
            assert [(r.position, r.stream, r.version) for r in store.read_all()] == [(first, "run:taken", 1)] + [
                (p, a.stream, 1) for p, a in zip(got, batch, strict=False)
            ]
            report = store.check_chain()
            assert report.failure is None and report.events == 8 and report.position == got[-1]
        finally:
            store.close()

    def test_L5_threads_appending_through_one_store_each_land_once_in_one_chain(self, store_url: str) -> None:
        """Each thread writes on a connection of its own (SQLite: taking turns on the
        store's write lock; PostgreSQL: on the writers' lock): every event lands once,
        at the position its append returned, and the chain verifies (rules L5, S1)."""
        import threading

        store = open_store(store_url)
        results: dict[int, list[int]] = {}
        errors: list[BaseException] = []

        def writer(t: int) -> None:
            try:
                mine = []
                for i in range(20):
                    size = 1 + i % 3
                    mine += store.append(
                        [
                            Append(f"run:t{t}-{i}-{k}", 1, RunQueued(at=T0, run=f"t{t}-{i}-{k}", status=Status.QUEUED))
                            for k in range(size)
                        ]
                    )
                results[t] = mine
            except BaseException as e:  # reported below
                errors.append(e)

        try:
            threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
            for th in threads:
                th.start()
            for th in threads:
                th.join(60)
            assert not errors, errors
            positions = sorted(p for mine in results.values() for p in mine)
            assert len(positions) == len(set(positions)) == 4 * sum(1 + i % 3 for i in range(20))
            stored = {r.position: r.stream for r in store.read_all()}
            assert sorted(stored) == positions
            report = store.check_chain()
            assert report.failure is None and report.events == len(positions)
        finally:
            store.close()
