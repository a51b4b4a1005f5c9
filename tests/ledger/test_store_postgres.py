"""The store contract on the PostgreSQL backend (tests/helpers/store_contract.py), against the
real server, in a schema of its own per test."""

from __future__ import annotations

from tests.conftest import new_pg_store
from tests.helpers.store_contract import StoreContract


class TestPostgresStore(StoreContract):
    def create_store(self) -> str:
        return new_pg_store(self.cleanups)
