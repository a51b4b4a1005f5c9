"""The store contract on the SQLite backend (tests/store_contract.py)."""

from __future__ import annotations

from tests.store_contract import StoreContract


class TestSQLiteStore(StoreContract):
    def create_store(self) -> str:
        return f"sqlite:///{self.tmp_path / 'ledger.db'}"
