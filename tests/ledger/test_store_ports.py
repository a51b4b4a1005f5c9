"""Each store port's contract (tests/helpers/port_contracts.py) on both backends: SQLite (a
file) and PostgreSQL (the real server, in a schema of its own per test)."""

from __future__ import annotations

from tests.conftest import new_pg_store
from tests.helpers.port_contracts import EventLogContract, HashChainContract, ViewTablesContract


class SQLite:
    tmp_path: object

    def create_store(self) -> str:
        return f"sqlite:///{self.tmp_path}/ports.db"


class Postgres:
    cleanups: list

    def create_store(self) -> str:
        return new_pg_store(self.cleanups)


class TestSQLiteEventLog(SQLite, EventLogContract): ...


class TestSQLiteHashChain(SQLite, HashChainContract): ...


class TestSQLiteViewTables(SQLite, ViewTablesContract): ...


class TestPostgresEventLog(Postgres, EventLogContract): ...


class TestPostgresHashChain(Postgres, HashChainContract): ...


class TestPostgresViewTables(Postgres, ViewTablesContract): ...
