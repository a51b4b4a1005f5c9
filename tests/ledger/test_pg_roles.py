"""PostgreSQL roles (issue 10 item 14), with real roles created for the test and dropped
after: the SQL is taken from docs/operations.md ("Three roles"), so the set-up the guide
tells an operator to paste is the one proven here.

Before: every open ran DDL (CREATE SCHEMA/TABLE/TYPE/FUNCTION) and every append took
`LOCK TABLE ... IN EXCLUSIVE MODE`, which needs UPDATE, DELETE or TRUNCATE on the table:
a role without those rights could not even open the store, and a writer's credential
could rewrite or erase history."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import psycopg
import pytest

from epochledger import ManualClock, open_ledger
from epochledger.cli import main
from epochledger.ledger.errors import PermissionDenied
from epochledger.ledger.store import open_store
from epochledger.projections import engine, runs
from epochledger.replay import verify as verify_mod
from tests.conftest import PG_BASE, need_pg

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def doc_sql() -> list[str]:
    """The ```sql blocks of the guide's PostgreSQL section, in order: the superuser's
    set-up, the owner's grants, the migration path."""
    text = DOC.read_text()
    section = text[text.index("## PostgreSQL: roles, retries and time bounds") :]
    return re.findall(r"```sql\n(.*?)```", section, flags=re.S)


class Roles(NamedTuple):
    schema: str
    owner: str
    writer: str
    auditor: str

    def url(self, role: str) -> str:
        return f"postgresql://{role}@127.0.0.1:5432/test?schema={self.schema}"

    def sql(self, block: str) -> str:
        block = block.replace("ledger_owner", self.owner).replace("ledger_writer", self.writer)
        block = block.replace("ledger_auditor", self.auditor)
        return re.sub(r"\bledger\b", self.schema, block)


def run_as(role: str | None, sql: str) -> None:
    with psycopg.connect(PG_BASE, autocommit=True) as conn:
        if role:
            conn.execute(f'SET ROLE "{role}"')
        conn.execute(sql)


@pytest.fixture
def roles() -> Iterator[Roles]:
    need_pg()
    tag = uuid.uuid4().hex[:8]
    r = Roles(f"t_roles_{tag}", f"el_{tag}_owner", f"el_{tag}_writer", f"el_{tag}_auditor")
    try:
        run_as(None, r.sql(doc_sql()[0]))
        yield r
    finally:
        with psycopg.connect(PG_BASE, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{r.schema}" CASCADE')
            for role in (r.owner, r.writer, r.auditor):
                if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
                    conn.execute(f'DROP OWNED BY "{role}"')
                    conn.execute(f'DROP ROLE "{role}"')


def refused(role: str, sql: str) -> str:
    with pytest.raises(psycopg.errors.InsufficientPrivilege) as e:
        run_as(role, sql)
    return str(e.value)


def test_O5_L1_owner_inits_writer_appends_and_keeps_views_the_database_refuses_rewrites(
    roles: Roles, clock: ManualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    events = f'"{roles.schema}".epochledger_events'
    # A writer cannot create the store: the owner's job.
    with pytest.raises(PermissionDenied, match="the owner runs `epochledger init`"):
        open_store(roles.url(roles.writer))
    assert main(["--store", roles.url(roles.owner), "init"]) == 0
    run_as(roles.owner, roles.sql(doc_sql()[1]))

    # The writer: opens without DDL, appends, boots and sweeps, catches views up, rebuilds.
    with open_ledger(roles.url(roles.writer), clock=clock) as w:
        w.boot("worker-1", epoch="e1")
        w.queue("r1", process="worker-1")
        w.start("r1", epoch="e1", process="worker-1")
        clock.advance(60)
        _, report = w.startup("worker-1", epoch="e2")
        assert [v.run for v in report.recovered] == ["r1"]
        assert [s.run for s in w.runs()] == ["r1"]  # catch-up as the writer
        assert engine.rebuild(w._store, runs).rebuilt  # drop + rename: the writer owns views
        assert verify_mod.verify_view(w._store, runs).difference is None
        head = w._store.max_position()

    # The server refuses the writer's rewrites, by privilege.
    for sql in (
        f"UPDATE {events} SET state = state",
        f"DELETE FROM {events}",
        f"TRUNCATE {events}",
        f"BEGIN; LOCK TABLE {events} IN EXCLUSIVE MODE; ROLLBACK",
    ):
        assert "permission denied" in refused(roles.writer, sql)

    # The auditor: reads the log and the views without catching up; no DDL on open.
    with open_ledger(roles.url(roles.auditor), clock=clock) as a:
        assert [r.position for r in a.events()][-1] == head
        assert [s.run for s in engine.read_runs(a._store, catch_up_first=False)[0]] == ["r1"]
        assert main(["--store", roles.url(roles.auditor), "show", "r1", "--no-catch-up"]) == 0
        assert "failed_resumable" in capsys.readouterr().out
        assert main(["--store", roles.url(roles.auditor), "verify"]) == 0  # the chain too (rule S1)
        assert f"head at position {head}," in capsys.readouterr().out
    with open_ledger(roles.url(roles.writer), clock=clock) as w:
        w.queue("r2")  # the views are now behind
    with open_ledger(roles.url(roles.auditor), clock=clock) as a:
        with pytest.raises(PermissionDenied) as e:
            a.runs()  # a catch-up would write the view
        assert e.value.role == roles.auditor and "--no-catch-up" in str(e.value)
        assert main(["--store", roles.url(roles.auditor), "runs"]) == 7
        assert "PermissionDenied" in capsys.readouterr().err
    for sql in (
        f"INSERT INTO {events} (originator_id, originator_version) VALUES ('x', 1)",
        f"DELETE FROM {events}",
        f'DELETE FROM "{roles.schema}".view_runs',
    ):
        assert "permission denied" in refused(roles.auditor, sql)

    # The owner too is refused by the trigger, except through the documented migration.
    for sql in (f"DELETE FROM {events}", f"UPDATE {events} SET topic = topic", f"TRUNCATE {events}"):
        assert "the event log is append-only" in refused(roles.owner, sql)
    migration = (
        roles.sql(doc_sql()[2])
        .replace("-- the migration, e.g. ", "")
        .replace("state = ... WHERE notification_id = ...", "topic = topic WHERE false")
    )
    run_as(roles.owner, migration)
    assert "the event log is append-only" in refused(roles.owner, f"DELETE FROM {events}")  # enabled again


def test_O5_init_upgrades_a_store_made_without_the_trigger(pg_url: str) -> None:
    """A store created before this change (no trigger): a writer's open adds nothing;
    `init` (the owner) adds the trigger, idempotently."""
    schema = pg_url.rsplit("schema=", 1)[1]
    open_store(pg_url).close()
    run_as(None, f'DROP TRIGGER epochledger_append_only ON "{schema}".epochledger_events')
    open_store(pg_url).close()
    run_as(None, f'DELETE FROM "{schema}".epochledger_events WHERE false')  # no trigger: not refused
    open_store(pg_url, init=True).close()
    open_store(pg_url, init=True).close()
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
        run_as(None, f'DELETE FROM "{schema}".epochledger_events WHERE false')
