"""The backends' shared internals: how one event is stored as a row, how an append's
outcome is told apart, and how a driver's error becomes a ledger error. Used by
ledger/store/base.py, sqlite.py and postgres.py alone (nothing outside the store
package imports this module); the names keep their underscores, as internals.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from epochledger.ledger.errors import (
    LedgerError,
    LockTimeout,
    NotCommitted,
    PermissionDenied,
    StatementTimeout,
    StoreError,
)

_MAX_POS = (1 << 63) - 1
_Row = tuple[str, int, str, bytes]  # (stream, version, topic, encoded state): one event as stored


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _driver_error(e: Exception, what: str, store: Any = None) -> LedgerError:
    """A psycopg error as a ledger error, by SQLSTATE: a lock or statement timeout and
    a refused privilege are typed (they say what to do); the rest is a StoreError."""
    state = getattr(e, "sqlstate", None)
    if state == "55P03":  # lock_not_available: lock_timeout expired
        context = getattr(getattr(e, "diag", None), "context", None)
        lock = context.strip().splitlines()[0] if context else "a lock this statement needed"
        return LockTimeout(what, lock, getattr(store, "lock_timeout", None))
    if state == "57014" and "statement timeout" in str(e):
        return StatementTimeout(what, getattr(store, "statement_timeout", None))
    if state == "42501":  # insufficient_privilege
        return PermissionDenied(
            what, getattr(store, "role", None), _first_line(e), getattr(store, "privilege_hint", "")
        )
    if state in ("40P01", "40001"):  # deadlock, serialization failure: the transaction rolled back
        return NotCommitted(what, _first_line(e))
    return StoreError(f"{what}: {_first_line(e)}")


class _Duplicate(Exception):
    """A row of the batch is already at its (stream, version); the batch rolled back."""


class _Unsure(Exception):
    """The connection failed while the database was committing the batch."""

    def __init__(self, error: str):
        self.error = error


def _landed(rows: Sequence[_Row], found: dict[tuple[str, int], tuple[int, str, bytes]]) -> list[int] | None:
    """The positions of `rows` if every one is stored with exactly these bytes, else None."""
    ids = []
    for stream, version, topic, state in rows:
        got = found.get((stream, version))
        if got is None or got[1] != topic or bytes(got[2]) != state:
            return None
        ids.append(got[0])
    return ids


def _versions(rows: Sequence[_Row]) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for stream, version, _, _ in rows:
        first, last = out.get(stream, (version, version))
        out[stream] = (min(first, version), max(last, version))
    return out
