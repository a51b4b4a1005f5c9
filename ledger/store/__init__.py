"""The store adapter: the only package that speaks eventsourcing and SQL for the log.

`open_store(url)` opens one ledger's log on its backend: `ledger/store/sqlite.py` (a
file, the embedded default) or `ledger/store/postgres.py` (several scheduler replicas
sharing one ledger). Both implement the contract of `ledger/store/base.py`; URLs are
parsed once, in `ledger/store/url.py`.
"""

from __future__ import annotations

from epochledger.ledger.store.base import (
    EVENTS_TABLE,
    READ_BATCH,
    Append,
    Lines,
    Poison,
    Store,
    check_position,
    lines_of,
    translated,
)
from epochledger.ledger.store.url import DEFAULT_PATH, PostgresURL, SQLiteURL, parse_url, resolve_url

__all__ = [
    "DEFAULT_PATH",
    "EVENTS_TABLE",
    "READ_BATCH",
    "Append",
    "Lines",
    "Poison",
    "PostgresURL",
    "SQLiteURL",
    "Store",
    "check_position",
    "lines_of",
    "open_store",
    "parse_url",
    "resolve_url",
    "translated",
]


def open_store(url: str | None = None, *, create: bool = True, init: bool = False) -> Store:
    """Open the store at `url` (ledger/store/url.py says which URLs mean what). A store
    that exists is opened without any DDL, so a writer or a read-only role can open it,
    and a read-only SQLite file (a 0444 file, a read-only mount, a backup copy) opens for
    reading. A store that does not exist is created (create=True) or refused
    (create=False: opening writes nothing, for the commands that only read). init=True
    runs the owner's idempotent create-or-upgrade even when the store exists
    (`epochledger init`; on PostgreSQL it adds what an older store lacks, e.g. the
    append-only trigger)."""
    parsed = parse_url(url)
    if isinstance(parsed, PostgresURL):
        from epochledger.ledger.store.postgres import PostgresStore

        return PostgresStore(parsed, create=create, init=init)
    from epochledger.ledger.store.sqlite import SQLiteStore

    return SQLiteStore(parsed.path, create=create, init=init)
