"""The projection engine's SQL: the views' tables, their tracking rows and parked
events (rules R3, T4; docs/projections.md).

A view is one table `view_<name>(k TEXT PRIMARY KEY, <columns>, state BLOB)`; its
tracking position lives in TRACKING_TABLE and is written in the same transaction as its
rows, with a compare-and-set on the old position, so a batch is applied exactly once
(R3). Events a view could not apply are kept in PARKED_TABLE (T4).

The SQL is shared by both backends; what differs (quoting, row locks, bulk upserts, how
a swap's rename is carried) is the store's dialect (ledger/store/base.py). One lock
order for every transaction on views: the tracking rows it will touch, all of them,
sorted by key, then the tables (the other order deadlocked on PostgreSQL:
tests/ledger/test_pg_locks.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from epochledger.ledger.errors import ConflictError, StoreError
from epochledger.ledger.store import translated
from epochledger.projections.view import Counts


@runtime_checkable
class ViewTables(Protocol):
    """What the projection engine's SQL needs of a store: the read side's port (rules
    R3, T4). Both backends' stores provide it (ledger/store/base.py, the dialect;
    SQLite's answers are its defaults), so the engine keeps its tables through this
    and nothing of the log; tests/helpers/port_contracts.py holds each backend to it."""

    projection_tables_ready: bool  # the tracking and parked tables are known to exist (ensure)

    @property
    def read_only(self) -> bool:
        """Opened for reading only: nothing may be created or written."""
        ...

    @property
    def for_update(self) -> str:
        """The row-lock suffix of a SELECT ("" where one writer at a time holds anyway)."""
        ...

    @property
    def blob_type(self) -> str:
        """The column type of a stored state."""
        ...

    @property
    def column_types(self) -> Mapping[str, str]:
        """A view column's SQL type by its kind ("text", "int")."""
        ...

    def transaction(self, commit: bool = True, *, durable: bool = True) -> AbstractContextManager[Any]:
        """A transaction on this thread's connection, yielding a cursor that takes qmark
        (`?`) placeholders; commit=False: a read-only transaction on one snapshot;
        durable=False: a write whose COMMIT does not wait for the disk (commit_view)."""
        ...

    def quote(self, table: str) -> str:
        """The table's name as SQL (schema-qualified where the store has a schema)."""
        ...

    def table_exists(self, table: str) -> bool:
        """Does this table exist? A read: no DDL, no lock."""
        ...

    def lock_for_read(self, cur: Any, table: str) -> None:
        """Before a read of `table` that must see one snapshot with its tracking row."""
        ...

    def is_missing_table(self, e: Exception) -> bool:
        """Is this driver error "no such table"?"""
        ...

    def after_rename(self, cur: Any, old: str, new: str) -> None:
        """After `ALTER TABLE old RENAME TO new`: what else the rename must carry."""
        ...

    def ddl_lock(self, cur: Any) -> None:
        """Serialize schema changes of the projection tables between processes."""
        ...

    def drop_view_table(self, cur: Any, table: str) -> None:
        """`DROP TABLE IF EXISTS` of a view's table (a rebuild's swap, a shadow's reset)."""
        ...

    def upsert_many(
        self, cur: Any, table: str, names: Sequence[str], rows: Sequence[tuple[Any, ...]], upsert: str
    ) -> None:
        """Run `upsert` (an INSERT .. ON CONFLICT with qmarks) for every row."""
        ...


TRACKING_TABLE = "epochledger_tracking"
PARKED_TABLE = "epochledger_parked"


class _NoTable(Exception):
    """The view's table does not exist (never built)."""


def ensure(store: ViewTables) -> None:
    """The tracking and parked tables exist: created if missing (by the owner's
    `epochledger init`, or by the first writer of a store made before they were part of
    it). When they exist, nothing is run that needs more than reading: a writer or a
    read-only role may open a store it may not alter."""
    if store.projection_tables_ready:
        return
    if not (store.table_exists(TRACKING_TABLE) and store.table_exists(PARKED_TABLE)):
        if store.read_only:
            return  # nothing was ever materialized here: every view reads as never built
        with translated("create projection tables", store), store.transaction() as cur:
            store.ddl_lock(cur)
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {store.quote(TRACKING_TABLE)} "
                "(view TEXT PRIMARY KEY, version BIGINT NOT NULL, position BIGINT NOT NULL)"
            )
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {store.quote(PARKED_TABLE)} "
                "(view TEXT NOT NULL, position BIGINT NOT NULL, stream TEXT NOT NULL, tag TEXT, "
                "error TEXT NOT NULL, attempts BIGINT NOT NULL, parked_at TEXT, "
                "PRIMARY KEY (view, position))"
            )
    store.projection_tables_ready = True


def _absent(store: ViewTables) -> bool:
    """A read-only store that has no projection tables: nothing was materialized."""
    ensure(store)
    return not store.projection_tables_ready


def tracking(store: ViewTables, view: str) -> tuple[int, int] | None:
    """(version, position) of a view, None if it was never materialized."""
    if _absent(store):
        return None
    with translated("read tracking", store), store.transaction(commit=False) as cur:
        cur.execute(f"SELECT version, position FROM {store.quote(TRACKING_TABLE)} WHERE view=?", (view,))
        row = cur.fetchone()
    return None if row is None else (int(row[0]), int(row[1]))


def reset_view(store: ViewTables, view: str, table: str, columns: Sequence[tuple[str, str]], version: int) -> None:
    """Empty `table` (created if absent) and set the view's tracking to position 0,
    in one transaction, dropping the view's parked events."""
    cols = "".join(f", {c} {store.column_types[t]}" for c, t in columns)
    with translated(f"reset {view}", store), store.transaction() as cur:
        store.ddl_lock(cur)
        # tracking row before table, as commit_view and swap_view take them
        cur.execute(f"SELECT position FROM {store.quote(TRACKING_TABLE)} WHERE view=?{store.for_update}", (view,))
        store.drop_view_table(cur, table)
        cur.execute(f"CREATE TABLE {store.quote(table)} (k TEXT PRIMARY KEY{cols}, state {store.blob_type} NOT NULL)")
        cur.execute(f"DELETE FROM {store.quote(TRACKING_TABLE)} WHERE view=?", (view,))
        cur.execute(
            f"INSERT INTO {store.quote(TRACKING_TABLE)} (view, version, position) VALUES (?, ?, 0)", (view, version)
        )
        cur.execute(f"DELETE FROM {store.quote(PARKED_TABLE)} WHERE view=?", (view,))


def commit_view(
    store: ViewTables,
    view: str,
    expected: int,
    position: int,
    table: str,
    columns: Sequence[str],
    upserts: Sequence[tuple[Any, ...]],
    deletes: Sequence[str],
    parked: Sequence[tuple[Any, ...]] = (),
    counts: Counts | None = None,
) -> None:
    """One transaction: move the view's tracking from `expected` to `position`, upsert
    and delete its rows, record parked events. Raises ConflictError if the tracking
    position is not `expected` (another runner applied these events): nothing is
    written, so no event is ever applied twice (rule R3). `counts` (a live view's
    COUNTS): its counts table moves by the groups of the rows written less those of the
    rows they replace, read from the table in this transaction, so the counts are
    always the table's (keep_counts).

    Not waited onto the disk (`durable=False`): a view is the log's fold, and its rows
    move only with its tracking position, so a crash that loses this commit leaves the
    view at the position before it, from which the next catch-up applies the same
    events again, once (rule R3). The fsync it skipped was paid under the writers' lock,
    which the next append waits for (docs/benchmarks.md, "The service over HTTP")."""
    names = ("k", *columns, "state")
    upsert = (
        f"INSERT INTO {store.quote(table)} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))}) "
        f"ON CONFLICT (k) DO UPDATE SET " + ", ".join(f"{c}=excluded.{c}" for c in names[1:])
    )
    with translated(f"write view {view}", store), store.transaction(durable=False) as cur:
        cur.execute(
            f"UPDATE {store.quote(TRACKING_TABLE)} SET position=? WHERE view=? AND position=?",
            (position, view, expected),
        )
        if cur.rowcount != 1:
            raise ConflictError([view], f"tracking position is no longer {expected}")
        delta = _replaced(store, cur, table, counts, [*(r[0] for r in upserts), *deletes]) if counts else None
        if deletes:
            cur.executemany(f"DELETE FROM {store.quote(table)} WHERE k=?", [(k,) for k in deletes])
        if upserts:
            store.upsert_many(cur, table, names, upserts, upsert)
        if counts is not None and delta is not None:
            at = [names.index(c) for c in counts.reads]
            for row in upserts:
                if (group := counts.key(*(row[i] for i in at))) is not None:
                    delta[group] = delta.get(group, 0) + 1
            _add_counts(store, cur, table, counts, delta)
        if parked:
            cur.executemany(
                f"INSERT INTO {store.quote(PARKED_TABLE)} (view, position, stream, tag, error, attempts, parked_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (view, position) DO UPDATE SET "
                "tag=excluded.tag, error=excluded.error, attempts=excluded.attempts, parked_at=excluded.parked_at",
                parked,
            )


def counts_table(table: str) -> str:
    """The table of a view's kept counts (a view's COUNTS): `<table>__counts`."""
    return f"{table}__counts"


def _replaced(
    store: ViewTables, cur: Any, table: str, counts: Counts, keys: Sequence[str]
) -> dict[tuple[Any, ...], int]:
    """Minus one for the group of each stored row of these keys (the rows a commit
    replaces or deletes), read in the commit's transaction before it writes."""
    delta: dict[tuple[Any, ...], int] = {}
    for i in range(0, len(keys), 500):
        chunk = keys[i : i + 500]
        cur.execute(
            f"SELECT {', '.join(counts.reads)} FROM {store.quote(table)} WHERE k IN ({', '.join('?' * len(chunk))})",
            chunk,
        )
        for values in cur.fetchall():
            if (group := counts.key(*values)) is not None:
                delta[group] = delta.get(group, 0) - 1
    return delta


def _add_counts(store: ViewTables, cur: Any, table: str, counts: Counts, delta: Mapping[tuple[Any, ...], int]) -> None:
    cols = [c for c, _ in counts.COLUMNS]
    changed = [(*group, n) for group, n in sorted(delta.items()) if n]
    if changed:
        cur.executemany(
            f"INSERT INTO {store.quote(counts_table(table))} AS c ({', '.join(cols)}, n) "
            f"VALUES ({', '.join('?' * (len(cols) + 1))}) ON CONFLICT ({', '.join(cols)}) DO UPDATE SET n = c.n + excluded.n",
            changed,
        )


def keep_counts(store: ViewTables, cur: Any, table: str, counts: Counts) -> None:
    """The counts table of `table` made anew from the table's rows (a rebuild's swap):
    each row's group counted once, by the view's own `counts.key`."""
    ct = counts_table(table)
    cols = ", ".join(f"{c} {store.column_types[t]} NOT NULL" for c, t in counts.COLUMNS)
    store.drop_view_table(cur, ct)
    cur.execute(
        f"CREATE TABLE {store.quote(ct)} ({cols}, n BIGINT NOT NULL, "
        f"PRIMARY KEY ({', '.join(c for c, _ in counts.COLUMNS)}))"
    )
    reads = ", ".join(counts.reads)
    # Grouped by the columns the key reads (the key is a function of them), each group's
    # rows counted by the database: a million rows become a few hundred.
    cur.execute(f"SELECT {reads}, COUNT(*) FROM {store.quote(table)} GROUP BY {reads}")
    delta: dict[tuple[Any, ...], int] = {}
    for *values, n in cur.fetchall():
        if (group := counts.key(*values)) is not None:
            delta[group] = delta.get(group, 0) + int(n)
    _add_counts(store, cur, table, counts, delta)


def load_states(store: ViewTables, table: str, keys: Sequence[str]) -> dict[str, bytes]:
    """The state column of the rows with these keys (absent keys are left out)."""
    found: dict[str, bytes] = {}
    with translated(f"read {table}", store), store.transaction(commit=False) as cur:
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            cur.execute(f"SELECT k, state FROM {store.quote(table)} WHERE k IN ({', '.join('?' * len(chunk))})", chunk)
            found.update((k, bytes(v)) for k, v in cur.fetchall())
    return found


def rows_query(
    store: ViewTables,
    table: str,
    columns: Sequence[str],
    where: Sequence[tuple[str, Any]] = (),
    *,
    after: str | None = None,
    limit: int | None = None,
) -> tuple[str, list[Any]]:
    """view_rows' SELECT and its parameters. `after`, `limit`: a page in key order, the
    keys after `after` (the primary key's range: a page of a million rows reads its
    own rows, not the table)."""
    terms = [f"{c} IN ({', '.join('?' * len(v))})" if isinstance(v, tuple) else f"{c}=?" for c, v in where]
    params = [x for _, v in where for x in (v if isinstance(v, tuple) else (v,))]
    if after is not None:
        terms.append("k > ?")
        params.append(after)
    cond = (" WHERE " + " AND ".join(terms)) if terms else ""
    page = ""
    if limit is not None:
        page = " LIMIT ?"
        params.append(limit)
    return (
        f"SELECT k, {''.join(c + ', ' for c in columns)}state FROM {store.quote(table)}{cond} ORDER BY k{page}",
        params,
    )


def view_rows(
    store: ViewTables,
    view: str,
    table: str,
    columns: Sequence[str],
    where: Sequence[tuple[str, Any]] = (),
    *,
    after: str | None = None,
    limit: int | None = None,
) -> tuple[tuple[int, int] | None, list[tuple[Any, ...]]]:
    """(tracking, rows sorted by key) read in one snapshot, so the rows are exactly
    the view as of its tracking position. `where`: (column, value) equalities.

    On PostgreSQL the transaction first locks the table (ACCESS SHARE: it waits out
    a swap in progress, and then names the swapped-in table), and only then takes
    its snapshot (repeatable read), at the first SELECT. A SELECT first would take
    the snapshot before its lock, and a swap committing during the wait would pair
    the old view's tracking with the new table's rows (tests/ledger/test_pg_locks.py).
    A value that is a tuple means any of its members (`IN`). `after`, `limit`: one page
    in key order (rows_query)."""
    if _absent(store):
        return None, []
    tracked, (rows,) = _snapshot(
        store, view, table, [rows_query(store, table, columns, where, after=after, limit=limit)]
    )
    if rows and type(rows[0][-1]) is not bytes:  # a driver's memoryview: bytes, as SQLite's
        rows = [(*r[:-1], bytes(r[-1])) for r in rows]
    return tracked, rows


def _counts_query(store: ViewTables, table: str, counts: Counts) -> tuple[str, tuple[()]]:
    cols = ", ".join(c for c, _ in counts.COLUMNS)
    return f"SELECT {cols}, n FROM {store.quote(counts_table(table))} WHERE n <> 0 ORDER BY {cols}", ()


def kept_counts(
    store: ViewTables, view: str, table: str, counts: Counts
) -> tuple[tuple[int, int] | None, list[tuple[Any, ...]]]:
    """(tracking, the rows of the view's counts table: its COLUMNS' values and n) read in
    one snapshot with the tracking row, as view_rows reads its rows: the counts are the
    view's as of its tracking position (commit_view and swap_view keep them)."""
    if _absent(store):
        return None, []
    tracked, (rows,) = _snapshot(store, view, table, [_counts_query(store, table, counts)])
    return tracked, [(*r[:-1], int(r[-1])) for r in rows]


def rows_and_counts(
    store: ViewTables, view: str, table: str, columns: Sequence[str], counts: Counts
) -> tuple[tuple[int, int] | None, list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """view_rows and kept_counts in one snapshot (verify compares both with a replay)."""
    if _absent(store):
        return None, [], []
    tracked, (rows, kept) = _snapshot(
        store, view, table, [rows_query(store, table, columns), _counts_query(store, table, counts)]
    )
    if rows and type(rows[0][-1]) is not bytes:  # a driver's memoryview: bytes, as SQLite's
        rows = [(*r[:-1], bytes(r[-1])) for r in rows]
    return tracked, rows, [(*r[:-1], int(r[-1])) for r in kept]


def _snapshot(
    store: ViewTables, view: str, table: str, statements: Sequence[tuple[str, Sequence[Any]]]
) -> tuple[tuple[int, int] | None, list[list[tuple[Any, ...]]]]:
    """(tracking, each statement's rows): `statements` (SELECTs of `table`) and the view's
    tracking row, read in one snapshot (view_rows says how, on each backend); (None,
    empty lists) if the view was never built."""
    for attempt in (1, 2):
        results: list[list[tuple[Any, ...]]] = []
        try:
            with translated(f"read {table}", store), store.transaction(commit=False) as cur:
                try:
                    store.lock_for_read(cur, table)
                    for sql, params in statements:
                        cur.execute(sql, params)
                        results.append(cur.fetchall())
                except Exception as e:
                    if store.is_missing_table(e):
                        raise _NoTable from None
                    raise
                cur.execute(f"SELECT version, position FROM {store.quote(TRACKING_TABLE)} WHERE view=?", (view,))
                row = cur.fetchone()
        except _NoTable:
            # Never built (the table and its tracking row are created together), or
            # built by another writer between this read and the tracking row's: then
            # the table is there now, and the read is made again, once.
            if tracking(store, view) is None:
                return None, [[] for _ in statements]
            if attempt == 2:
                raise StoreError(f"read {table}: view {view} has a tracking row but no table {table}") from None
            continue
        if row is None:
            return None, [[] for _ in statements]
        return (int(row[0]), int(row[1])), results
    raise AssertionError("unreachable: the second attempt returns or raises")


def span_rows(
    store: ViewTables, view: str, table: str, lo: int, hi: int, *, open_level: int, levels: int, other: Sequence[int]
) -> tuple[tuple[int, int] | None, list[str], list[tuple[str, bytes]], list[tuple[str, bytes]]]:
    """(tracking, the keys of the spans view's rows whose hull meets [lo, hi], the (k,
    state) rows of the open hulls (`open_level`) that end before lo, the (k, state) rows
    of the levels `other`) read in one snapshot, as view_rows reads its rows
    (projections/spans.py says what the columns hold). A closed hull of level L meets
    the interval only if it starts after lo - 2**L: one range of the (level, lo, hi)
    index per level, so the read is the hulls near the interval, not the table; an open
    hull meets it if it starts by hi (those that end before lo, by their state)."""
    if _absent(store):
        return None, [], [], []
    floor = -(2**62)  # the lowest bound a range needs (an instant is above it), as a BIGINT
    parts = [f"SELECT k FROM {store.quote(table)} WHERE level = ? AND lo <= ? AND hi >= ?"]
    params: list[Any] = [open_level, hi, lo]
    for level in range(levels):
        parts.append(f"SELECT k FROM {store.quote(table)} WHERE level = ? AND lo >= ? AND lo <= ? AND hi >= ?")
        params += [level, max(floor, lo - 2**level), hi, lo]
    before = (f"SELECT k, state FROM {store.quote(table)} WHERE level = ? AND hi < ? ORDER BY k", [open_level, lo])
    others = (
        f"SELECT k, state FROM {store.quote(table)} WHERE level IN ({', '.join('?' * len(other))}) ORDER BY k",
        list(other),
    )
    tracked, (keys, ended, rows) = _snapshot(store, view, table, [(" UNION ALL ".join(parts), params), before, others])
    return (
        tracked,
        [k for (k,) in keys],
        [(k, bytes(state)) for k, state in ended],
        [(k, bytes(state)) for k, state in rows],
    )


def orphan_candidates(
    store: ViewTables, runs_table: str, epochs_table: str, statuses: Sequence[str], also_slots: Sequence[str] = ()
) -> list[tuple[str, bytes]]:
    """(k, state) of the runs view's rows that the orphan rule could judge orphaned:
    not deleted, in one of `statuses`, and not owned by the live current epoch of their
    slot (no owner epoch, another epoch, no slot row, or a current epoch that is not
    live, or a slot of `also_slots`), from the runs and epochs views' columns in one
    snapshot. Every other run is
    owned by a live epoch, which O2 never orphans: the sweep reads these rows, not the
    fleet (projections/orphans.py judges them)."""
    if _absent(store) or not statuses:
        return []
    with translated(f"read {runs_table}", store), store.transaction(commit=False) as cur:
        cur.execute(*candidates_query(store, runs_table, epochs_table, statuses, also_slots))
        return [(k, bytes(state)) for k, state in cur.fetchall()]


def candidates_query(
    store: ViewTables, runs_table: str, epochs_table: str, statuses: Sequence[str], also_slots: Sequence[str] = ()
) -> tuple[str, list[Any]]:
    """orphan_candidates' SELECT and its parameters. Every column of the runs view it
    filters on is in the view's status index (projections/runs.py, INDEXES): the
    filter is decided from the index, and the table is read for the candidates alone."""
    return (
        f"SELECT r.k, r.state FROM {store.quote(runs_table)} r LEFT JOIN {store.quote(epochs_table)} p "
        f"ON p.k = r.process WHERE r.deleted = 0 AND r.status IN ({', '.join('?' * len(statuses))}) "
        "AND (r.epoch IS NULL OR p.k IS NULL OR p.current_epoch IS NULL OR r.epoch <> p.current_epoch "
        "OR p.live = 0" + "".join(" OR r.process = ?" for _ in also_slots) + ") ORDER BY r.k",
        [*statuses, *also_slots],
    )


def index_name(table: str, name: str) -> str:
    """The name of a view table's index `name` (a view's INDEXES): `<table>__<name>`."""
    return f"{table}__{name}"


def swap_view(
    store: ViewTables,
    view: str,
    shadow_view: str,
    live: str,
    shadow: str,
    indexes: Mapping[str, Sequence[str]] | None = None,
    counts: Counts | None = None,
) -> tuple[int, int]:
    """Replace the live table by the rebuilt one, and the live tracking and parked
    rows by the rebuild's, in one transaction: readers see the old view or the new
    one, never a half-built one. Returns the new (version, position).

    `indexes` (name -> columns, the view's INDEXES) are created here, on the swapped-in
    table under the live table's names, once per rebuild: the shadow table is built
    without them (its upserts maintain no index) and the rename cannot carry them, as
    an index keeps its name when its table is renamed (SQLite has no ALTER INDEX ..
    RENAME) and a shadow index under the live name would collide with the live one
    until the DROP below removes it."""
    with translated(f"swap {view}", store), store.transaction() as cur:
        store.ddl_lock(cur)
        # Lock order, one for every transaction on views: the tracking rows it will
        # touch, all of them, sorted by key, then the tables. commit_view locks its
        # tracking row (its UPDATE) before it writes its table; the swap below drops
        # the live table and rewrites the live tracking row. Locking only the shadow's
        # row first (the last fix) still let the swap take the live table and then
        # wait for the live row that a catch-up held while waiting for the table:
        # a deadlock (tests/ledger/test_pg_locks.py).
        cur.execute(
            f"SELECT view FROM {store.quote(TRACKING_TABLE)} WHERE view IN (?, ?) ORDER BY view{store.for_update}",
            tuple(sorted((view, shadow_view))),
        )
        cur.execute(f"SELECT version, position FROM {store.quote(TRACKING_TABLE)} WHERE view=?", (shadow_view,))
        row = cur.fetchone()
        if row is None:
            raise StoreError(f"no rebuild of {view} to swap in")
        store.drop_view_table(cur, live)
        cur.execute(f"ALTER TABLE {store.quote(shadow)} RENAME TO {live}")
        store.after_rename(cur, shadow, live)
        for name, cols in (indexes or {}).items():
            cur.execute(f'CREATE INDEX "{index_name(live, name)}" ON {store.quote(live)} ({", ".join(cols)})')
        if counts is not None:  # the swapped-in rows counted once; commits keep them since
            keep_counts(store, cur, live, counts)
        cur.execute(f"DELETE FROM {store.quote(TRACKING_TABLE)} WHERE view=? OR view=?", (view, shadow_view))
        cur.execute(
            f"INSERT INTO {store.quote(TRACKING_TABLE)} (view, version, position) VALUES (?, ?, ?)",
            (view, row[0], row[1]),
        )
        cur.execute(f"DELETE FROM {store.quote(PARKED_TABLE)} WHERE view=?", (view,))
        cur.execute(f"UPDATE {store.quote(PARKED_TABLE)} SET view=? WHERE view=?", (view, shadow_view))
    return int(row[0]), int(row[1])


def parked(store: ViewTables, view: str | None = None) -> list[tuple[Any, ...]]:
    """(view, position, stream, tag, error, attempts, parked_at), by view and position."""
    if _absent(store):
        return []
    cond = " WHERE view=?" if view is not None else ""
    with translated("read parked events", store), store.transaction(commit=False) as cur:
        cur.execute(
            f"SELECT view, position, stream, tag, error, attempts, parked_at FROM {store.quote(PARKED_TABLE)}"
            f"{cond} ORDER BY view, position",
            (view,) if view is not None else (),
        )
        return [tuple(r) for r in cur.fetchall()]
