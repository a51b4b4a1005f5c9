"""One contract suite per store port (ledger/store/ports.py: EventLog, HashChain;
projections/tables.py: ViewTables), as eventsourcing's tests/persistence.py has one
per recorder role. A backend's test class implements `create_store()` (the URL of a
new, empty store) and gets all three: tests/ledger/test_store_ports.py runs them on SQLite and
PostgreSQL. They speak to a store through its port alone, so a port whose behaviour
one backend lacks fails there.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest

from epochledger.ledger.errors import ConflictError
from epochledger.ledger.events import RunFailed, RunQueued, RunStarted, Status
from epochledger.ledger.store import Append, Poison, Store, lines_of, open_store
from epochledger.ledger.store.ports import EventLog, HashChain
from epochledger.projections.tables import ViewTables
from tests.conftest import T0
from tests.helpers.engine_helpers import corrupt
from tests.helpers.store_contract import NewStores


class PortContract(NewStores):
    """A port's suite: a fresh store of the backend per test (NewStores)."""

    @pytest.fixture
    def url(self) -> str:
        return self.create_store()

    @pytest.fixture
    def store(self, url: str) -> Iterator[Store]:
        s = open_store(url, init=True)
        yield s
        s.close()


def _history(log: EventLog) -> list[int]:
    """Three runs' events through the port: r1 queued, started, failed; r2 queued; r3 queued."""
    q = [RunQueued(at=T0 + timedelta(seconds=i), run=f"r{i}", status=Status.QUEUED) for i in (1, 2, 3)]
    positions = log.append([Append("run:r1", 1, q[0]), Append("run:r2", 1, q[1])])
    positions += log.append(
        [Append("run:r1", 2, RunStarted(at=T0 + timedelta(seconds=5), run="r1", status=Status.RUNNING))]
    )
    positions += log.append(
        [
            Append("run:r3", 1, q[2]),
            Append(
                "run:r1",
                3,
                RunFailed(
                    at=T0 + timedelta(seconds=9),
                    run="r1",
                    status=Status.FAILED_RESUMABLE,
                    code="TIMEOUT",
                    resumable=True,
                ),
            ),
        ]
    )
    return positions


class EventLogContract(PortContract):
    """The log: appends at exact versions, all or nothing; reads in version and log
    order, in every shape; the W1 token (rules L1, L5, R1, T4, W1)."""

    def test_L5_eventlog_is_the_ports_of_every_store(self, store: Store) -> None:
        assert isinstance(store, EventLog)

    def test_L5_eventlog_appends_at_exact_versions_all_or_nothing(self, store: EventLog) -> None:
        positions = _history(store)
        assert positions == sorted(positions) and store.max_position() == positions[-1]
        head = store.max_position()
        late = RunQueued(at=T0, run="r9", status=Status.QUEUED)
        with pytest.raises(ConflictError) as e:  # r9 is new, r1 is not at version 3 any more
            store.append([Append("run:r9", 1, late), Append("run:r1", 3, late)])
        assert e.value.streams == ["run:r1"]
        assert store.max_position() == head and store.stream_version("run:r9") == 0  # nothing of it landed
        assert store.stream_version("run:r1") == 3

    def test_R1_eventlog_reads_agree_in_every_shape(self, store: EventLog) -> None:
        _history(store)
        every = list(store.read_all())
        assert [r.position for r in every] == sorted(r.position for r in every)
        assert [r.stream for r in every] == ["run:r1", "run:r2", "run:r1", "run:r3", "run:r1"]
        assert [r for b in store.read_batches(0, None, 2) for r in b] == every
        assert store.read_stream("run:r1") == [r for r in every if r.stream == "run:r1"]
        assert store.read_stream("run:r1", 1) == [r for r in every if r.stream == "run:r1"][1:]
        assert store.read_streams(["run:r1", "run:r3"], {"run:r1": 2}) == {
            "run:r1": store.read_stream("run:r1", 2),
            "run:r3": store.read_stream("run:r3"),
        }
        raw = [row for b in store.read_raw(0, None, 2) for row in b]
        assert [(p, s, v) for p, s, v, _ in raw] == [(r.position, r.stream, r.version) for r in every]
        assert b"".join(b.data for b in store.read_lines(0, None, 2)) == lines_of(raw)
        cut = every[2].position
        assert list(store.read_all(every[0].position, cut)) == every[1:3]

    def test_T4_eventlog_gives_an_undecodable_event_as_poison_in_place(self, store: EventLog, url: str) -> None:
        positions = _history(store)
        corrupt(url, positions[1], b'{"type":"run.queued","at":"yesterday"}')
        [batch] = list(store.read_batches())
        assert [type(r) for r in batch].count(Poison) == 1 and isinstance(batch[1], Poison)
        assert batch[1].position == positions[1] and batch[1].tag == "run.queued"

    def test_W1_eventlog_tokens_are_equal_only_while_nothing_is_appended(self, store: EventLog, url: str) -> None:
        _history(store)
        before = store.log_token()
        if before is None:  # a backend without a cheap token (PostgreSQL): writes read, as the port allows
            assert store.token_after_append(None) is None
            return
        assert store.log_token() == before
        other = open_store(url)
        try:  # another writer's append: the token moves
            other.append([Append("run:r7", 1, RunQueued(at=T0, run="r7", status=Status.QUEUED))])
        finally:
            other.close()
        assert store.log_token() != before

    def test_L5_eventlog_wake_ups_or_says_it_has_none(self, store: EventLog) -> None:
        stop = threading.Event()
        try:
            ups = store.wake_ups(0, stop)
            _history(store)
            assert next(iter(ups)) >= 0
        except NotImplementedError:
            pass  # SQLite: the port's documented answer, the caller polls
        finally:
            stop.set()


class HashChainContract(PortContract):
    """The hash chain (rule S1): linked by every append, checked against the log."""

    def test_S1_hashchain_is_the_ports_of_every_store(self, store: Store) -> None:
        assert isinstance(store, HashChain)

    def test_S1_hashchain_links_every_append_and_names_an_edit(self, store: Store, url: str) -> None:
        assert store.has_chain()
        positions = _history(store)
        report = store.check_chain()
        assert report.failure is None and (report.events, report.links) == (len(positions), len(positions))
        assert store.upgrade_chain().sealed == 0  # nothing past the chain's end
        corrupt(url, positions[2], b'{"type":"run.queued","at":"2026-09-09T00:00:00Z","run":"r1","status":"queued"}')
        failure = store.check_chain().failure
        assert failure is not None and failure.position == positions[2]


class ViewTablesContract(PortContract):
    """What the engine's SQL needs of a store (rule R3): tables made, found, dropped;
    rows upserted in a transaction that commits or rolls back whole; a missing table
    told apart from other errors."""

    def test_R3_viewtables_is_the_port_of_every_store(self, store: Store) -> None:
        assert isinstance(store, ViewTables)

    def test_R3_viewtables_makes_finds_fills_and_drops_a_table(self, store: ViewTables) -> None:
        table = "view_port_contract"
        assert not store.table_exists(table)
        names = ("k", "n", "state")
        upsert = (
            f"INSERT INTO {store.quote(table)} (k, n, state) VALUES (?, ?, ?) "
            "ON CONFLICT (k) DO UPDATE SET n=excluded.n, state=excluded.state"
        )
        with store.transaction() as cur:
            store.ddl_lock(cur)
            cur.execute(
                f"CREATE TABLE {store.quote(table)} (k TEXT PRIMARY KEY, n {store.column_types['int']}, "
                f"state {store.blob_type} NOT NULL)"
            )
            store.upsert_many(cur, table, names, [("a", 1, b"x"), ("b", 2, b"y")], upsert)
        assert store.table_exists(table)
        with store.transaction() as cur:
            store.upsert_many(cur, table, names, [("a", 3, b"z")], upsert)
        with pytest.raises(RuntimeError), store.transaction() as cur:  # rolled back whole
            store.upsert_many(cur, table, names, [("c", 4, b"w")], upsert)
            raise RuntimeError("the caller fails mid-transaction")
        with store.transaction() as cur:  # a locking read, as commit_view and swap_view take rows
            store.lock_for_read(cur, table)
            cur.execute(f"SELECT k, n, state FROM {store.quote(table)} ORDER BY k{store.for_update}")
            assert [(k, n, bytes(s)) for k, n, s in cur.fetchall()] == [("a", 3, b"z"), ("b", 2, b"y")]
        renamed = table + "_renamed"
        with store.transaction() as cur:
            store.ddl_lock(cur)
            cur.execute(f"ALTER TABLE {store.quote(table)} RENAME TO {renamed}")
            store.after_rename(cur, table, renamed)
        assert store.table_exists(renamed) and not store.table_exists(table)
        with store.transaction() as cur:
            store.drop_view_table(cur, renamed)
        assert not store.table_exists(renamed)

    def test_R3_viewtables_tells_a_missing_table_from_another_error(self, store: ViewTables) -> None:
        errors = []
        for sql in (f"SELECT * FROM {store.quote('view_never_made')}", "SELECT no_such_function()"):
            try:
                with store.transaction(commit=False) as cur:
                    cur.execute(sql)
            except Exception as e:  # the driver's own error: what the port classifies
                errors.append(store.is_missing_table(e))
        assert errors == [True, False]
