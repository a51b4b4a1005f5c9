"""Each store port's contract (tests/port_contracts.py) on both backends: SQLite (a
file) and PostgreSQL (the real server, in a schema of its own per test)."""

from __future__ import annotations

import uuid

from tests.conftest import PG_BASE, need_pg
from tests.port_contracts import EventLogContract, HashChainContract, ViewTablesContract


class SQLite:
    tmp_path: object

    def create_store(self) -> str:
        return f"sqlite:///{self.tmp_path}/ports.db"


class Postgres:
    cleanups: list

    def create_store(self) -> str:
        need_pg()
        import psycopg

        schema = "t_" + uuid.uuid4().hex[:16]

        def drop() -> None:
            with psycopg.connect(PG_BASE, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

        self.cleanups.append(drop)
        return f"{PG_BASE}?schema={schema}"


class TestSQLiteEventLog(SQLite, EventLogContract): ...


class TestSQLiteHashChain(SQLite, HashChainContract): ...


class TestSQLiteViewTables(SQLite, ViewTablesContract): ...


class TestPostgresEventLog(Postgres, EventLogContract): ...


class TestPostgresHashChain(Postgres, HashChainContract): ...


class TestPostgresViewTables(Postgres, ViewTablesContract): ...
