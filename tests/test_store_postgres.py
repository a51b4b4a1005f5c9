"""The store contract on the PostgreSQL backend (tests/store_contract.py), against the
real server, in a schema of its own per test."""

from __future__ import annotations

import uuid

from tests.conftest import PG_BASE, need_pg
from tests.store_contract import StoreContract


class TestPostgresStore(StoreContract):
    def create_store(self) -> str:
        need_pg()
        import psycopg

        schema = "t_" + uuid.uuid4().hex[:16]

        def drop() -> None:
            with psycopg.connect(PG_BASE, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

        self.cleanups.append(drop)
        return f"{PG_BASE}?schema={schema}"
