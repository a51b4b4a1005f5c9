"""View tables are made by `init`, so a read never runs DDL (rule R3): on a store that
init made, neither the writes nor any read of the library or the CLI creates, drops or
alters a table or an index. On PostgreSQL the views are the writer role's, so the
writer's `epochledger rebuild` right after init makes them (docs/operations.md,
PostgreSQL roles); from then on the same holds."""

from __future__ import annotations

import contextlib
import io

from epochledger import ManualClock, open_ledger
from epochledger.cli import main
from epochledger.projections import engine, registry


def schema(store) -> list[tuple[str, ...]]:
    """Every table and index of the store, with its definition, from the catalogue."""
    with store.transaction(commit=False) as cur:
        if store.kind == "sqlite":
            cur.execute("SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master ORDER BY type, name")
        else:
            cur.execute(
                "SELECT 'table', table_name, table_name, '' FROM information_schema.tables WHERE table_schema = ? "
                "UNION ALL SELECT 'index', indexname, tablename, indexdef FROM pg_indexes WHERE schemaname = ? "
                "ORDER BY 1, 2",
                (store.schema, store.schema),
            )
        return [tuple(str(c) for c in row) for row in cur.fetchall()]


def test_R3_init_builds_every_view_so_a_read_never_runs_ddl(store_url: str, clock: ManualClock) -> None:
    """Mutation caught: init that made only the tracking and parked tables (as before),
    which left each view's table (and the runs view's index) to the first read."""
    with open_ledger(store_url, clock=clock, init=True) as ledger:
        if ledger._store.kind == "postgresql":  # the writer's set-up step (here one role is both)
            assert main(["--store", store_url, "rebuild"]) == 0
        made = schema(ledger._store)
        for v in registry.VIEWS:
            assert engine.is_current(ledger._store, v), v.NAME
    with open_ledger(store_url, clock=clock, create=False) as ledger:
        w1 = ledger.boot("worker-1", epoch="w1.e1", host="h", pid=10)
        for i in range(4):
            ledger.queue(f"r{i}", process="worker-1")
            ledger.start(f"r{i}", epoch=w1.epoch, process="worker-1")
            clock.advance(60)
        ledger.fail("r1", "TIMEOUT", resumable=True, epoch=w1.epoch)
        ledger.finish("r2", epoch=w1.epoch)
        clock.restart(after=5)
        ledger.boot("worker-1", epoch="w1.e2", host="h", pid=11)  # r0, r3: orphans (O2), not swept
        assert schema(ledger._store) == made
        ledger.runs()
        ledger.get_run("r1")
        ledger.history("r1")
        ledger.epochs()
        ledger.liveness()
        assert {s.run for s, _ in ledger.orphans()} == {"r0", "r3"}
        assert schema(ledger._store) == made
    for args in (
        ["runs", "--json"],
        ["runs", "--status", "running", "--json"],
        ["runs", "--orphaned", "--json"],
        ["runs", "--streaking", "--json"],
        ["show", "r1", "--json"],
        ["history", "r1", "--json"],
        ["epochs", "--json"],
        ["tick-health", "--json"],
        ["parked", "--json"],
        ["verify", "--json"],
        ["chain", "--json"],
        ["replay", "--json"],
        ["whatif", "--policy", "clamp", "--json"],
    ):
        stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)  # out_json writes bytes
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(io.StringIO()):
            assert main(["--store", store_url, *args]) == 0, args
    with open_ledger(store_url, clock=clock, create=False) as ledger:
        assert schema(ledger._store) == made


def test_R2_R3_a_store_init_made_verifies_clean_before_its_first_event(store_url: str, clock: ManualClock) -> None:
    """`init` builds every view's table over an empty log, so a view stored whole
    (tick health: one row) has no row until its first event; its replay from zero is
    its initial state. Verify reads the empty table as that state, on both stores.
    Mutation caught: replay/verify.py comparing the raw rows (a fresh ledger failed
    `verify` with exit 10, "row '*' is in the replay but not live")."""
    with open_ledger(store_url, clock=clock, init=True) as ledger:
        if ledger._store.kind == "postgresql":
            assert main(["--store", store_url, "rebuild"]) == 0
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["--store", store_url, "verify"]) == 0
