"""The audit edge: the ledger's whole history as a DuckDB file (rule A1, docs/audit.md).

`sync` copies the events after the file's sync position into the `events` table, in
chunks, each chunk one DuckDB transaction together with the new sync position (so a
crash mid-sync loses nothing and doubles nothing, rule R3). The rows are the bytes
the ledger stored, not a re-encoding of a typed decode: a field written by a newer
version, or a tag this version does not know, survives (rule L3).

Feeding DuckDB: one tab-separated line per event (position, stream, version, and the
stored payload bytes verbatim), as the store gives them (Store.read_lines: on SQLite
SQLite builds a batch's lines itself, no Python object per event), loaded with
DuckDB's strict CSV reader, quoting and escaping off; DuckDB extracts the common
columns from the payload in C (json_extract_string). A chunk whose payloads would
split or widen its lines (a raw newline or tab), or that DuckDB refuses (not JSON, not
UTF-8), is read again as rows and goes the checked way instead: one NDJSON line per
event, each payload checked and carried as a JSON string, read with `read_ndjson`
(_write_chunk says why nothing can slip between the two). Measured in
docs/benchmarks.md: executemany ~1k rows/s; this path is bounded by DuckDB storing the
rows, not by parsing them. DuckDB cannot read the ledger itself here (its
sqlite/postgres extensions are not installable offline), so the store feeds it. The
next chunk's file is written while DuckDB loads the previous one.

Every other table in the file is a view over `events` (projections/audit/views.sql)
except `lifecycle_predicates`, which sync computes from ledger/lifecycle.py for
every (status, code) pair seen: the lifecycle module stays the only home of status
sets (rule P3); no SQL here names a status; and the tables sync derives from `events`
in each chunk's transaction (_derive), so that no report sorts or aggregates every run
event again (issue 23): `transitions` (each run event with the status and code it
left) with its lookup `run_stream_heads`, `run_queued` (what each run was queued
with, which the runs view reads) and `stays` (each stay of a run in a status, which
time_in_status reads).

`query` runs arbitrary SQL on a read-only connection with file-system access
disabled and the configuration locked: no statement can change the audit file, write
another file, attach a database or load an extension. Audit commands never open the
ledger store for writing (sync only reads it).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import math
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from importlib import resources
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

if TYPE_CHECKING:  # annotations only: DuckDB is imported where it is used (rule W2)
    import duckdb

from epochledger.ledger import lifecycle
from epochledger.ledger.codes import KNOWN_CODES
from epochledger.ledger.errors import InvalidInput, LedgerError, QueryInterrupted, QueryRefused, StoreError
from epochledger.ledger.events import Status
from epochledger.ledger.store import Store, resolve_url
from epochledger.projections.audit.results import AuditStatus, ParquetExport, Result, SyncResult

# 2: the transitions table and run_stream_heads (version 1 had a transitions view);
# 3: run_queued and stays (issue 23: failures_by_label and time_in_status read them)
SCHEMA_VERSION = 3
DEFAULT_FILE = "epochledger.duckdb"
CHUNK = 100_000  # events per DuckDB transaction

# Bounds (docs/audit.md, "Bounds"). A query or report is interrupted after
# QUERY_TIMEOUT_S and may use QUERY_MEMORY_LIMIT; it never spills to disk. A sync waits
# up to SYNC_WAIT_S for readers to close the file, longer than a query's default
# timeout, so a default-bounded query delays a sync but never fails it.
QUERY_TIMEOUT_S = 60.0
QUERY_MEMORY_LIMIT = "1GB"
SYNC_WAIT_S = 90.0
# An error's `where` for the audit file itself when no path says more (the CLI names
# its flag, --duckdb, when it shows the error: epochledger/cli/__init__.py, FLAGS).
AUDIT_FILE = "audit file"
_LOCK_RETRY_S = 0.25

# Sync's DuckDB works in one thread: the other core is the one reading the store and
# writing the next chunk (docs/benchmarks.md, "Audit: `audit sync`").
SYNC_THREADS = 1

# The two ways a chunk reaches DuckDB, each read into (position, stream, version,
# payload). The fast one (.tsv, see _write_chunk) carries the payload as stored, byte
# for byte: quoting and escaping off, strict (a line of other than four fields is an
# error, never a guess). The checked one (.ndjson) carries each payload, checked, as a
# JSON string in a JSON line. Either way the payload is a field of its own, never
# spliced into the line: an event field named like one of ours (a future "version")
# cannot shadow it.
_SOURCES = {
    ".tsv": "read_csv(?, delim = '\t', quote = '', escape = '', header = false, auto_detect = false, "
    "strict_mode = true, new_line = '\\n', "
    "columns = {'position': 'BIGINT', 'stream': 'VARCHAR', 'version': 'BIGINT', 'payload': 'VARCHAR'})",
    ".ndjson": "read_ndjson(?, columns = {position: 'BIGINT', stream: 'VARCHAR', version: 'BIGINT', payload: 'VARCHAR'}, "
    "format = 'newline_delimited')",
}


# What DuckDB raises for a chunk it cannot take as it is (a payload that is not JSON or
# not UTF-8, an empty one): the chunk is then rewritten the checked way.
@functools.cache
def _refused_chunk() -> tuple[type[Exception], ...]:
    import duckdb  # on first use (rule W2)

    return (duckdb.InvalidInputException, duckdb.ConversionException, duckdb.ConstraintException)


def _insert(source: str) -> str:
    return f"""
INSERT INTO events
SELECT
    position, stream, version,
    j[1], TRY_CAST(j[2] AS TIMESTAMPTZ), j[3], j[4], j[5], j[6],
    CASE WHEN starts_with(stream, 'run:') THEN coalesce(j[7], '') ELSE j[7] END,
    j[8], j[9], payload
FROM (
    SELECT position, stream, version, payload,
           json_extract_string(payload, ['$.type', '$.at', '$.run', '$.process', '$.epoch',
                                         '$.status', '$.code', '$.actor', '$.reason']) AS j
    FROM {_SOURCES[source]}
)
"""


_INSERTS = {source: _insert(source) for source in _SOURCES}
_encode = msgspec.json.Encoder().encode


# ------------------------------------------------------------------ files
def default_path(store_url: str | None) -> str:
    """Beside a SQLite store (runs.db -> runs.duckdb), else ./epochledger.duckdb."""
    url = resolve_url(store_url)
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme == "sqlite" and url.lower().startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
    elif not scheme:
        path = url
    else:
        return DEFAULT_FILE
    root, ext = os.path.splitext(path)
    return (root if ext in (".db", ".sqlite", ".sqlite3") else path) + ".duckdb"


def _sql(name: str) -> str:
    return resources.files("epochledger.projections.audit").joinpath(name).read_text(encoding="utf-8")


def report_names() -> list[str]:
    """Every canned report: one projections/audit/report_<name>.sql file each."""
    names = [p.name for p in resources.files("epochledger.projections.audit").iterdir()]
    return sorted(n[len("report_") : -len(".sql")] for n in names if n.startswith("report_") and n.endswith(".sql"))


@contextmanager
def _translated(what: str, path: str) -> Iterator[None]:
    import duckdb  # on first use: the audit's one import of DuckDB, never at module load (rule W2)

    try:
        yield
    except LedgerError:
        raise
    except duckdb.IOException as e:
        raise StoreError(f"{what} {path}: {e}") from None
    except duckdb.Error as e:
        raise StoreError(f"{what} {path}: {type(e).__name__}: {e}") from None


def _require_duckdb_file(path: str) -> None:
    """An audit file path that names another kind of file (the SQLite ledger itself, say) is
    refused before DuckDB opens it: DuckDB would try to fetch a scanner extension for
    it, or fail with a less helpful message. DuckDB files carry "DUCK" at byte 8."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:  # a non-UTF-8 file name from argv: DuckDB cannot take it (std::bad_cast)
        raise InvalidInput(
            "DuckDB needs a file name that is valid UTF-8", where=path.encode("utf-8", "backslashreplace").decode()
        ) from None
    if os.path.isdir(path):
        raise InvalidInput("is a directory, not a DuckDB audit file", where=path)
    if os.path.exists(path) and os.path.getsize(path) > 0:
        try:
            with open(path, "rb") as f:
                head = f.read(12)
        except OSError as e:
            raise InvalidInput(f"cannot read: {e.strerror}", where=path) from None
        if head[8:12] != b"DUCK":
            raise InvalidInput("not a DuckDB audit file (is it the ledger itself?)", where=path)


def scratch_dir(path: str) -> str:
    """The one directory a sync of `path` keeps temporary files in: its chunk files
    and DuckDB's own spill files. Emptied at the start of every sync while the sync
    holds DuckDB's write lock (so never under another sync), and removed at its end.
    A killed sync leaves at most one chunk pair there (up to ~45 MB), which the next
    sync removes: kills do not accumulate files (they used to leave a fresh
    epochledger-audit-* directory each)."""
    return os.path.abspath(path) + ".sync-tmp"


def _connect(path: str, *, read_only: bool, config: dict[str, Any], wait: float) -> duckdb.DuckDBPyConnection:
    """duckdb.connect, retried while another process holds a conflicting lock on the
    file (DuckDB allows one writing process, or any number of readers), for up to
    `wait` seconds; then StoreError naming the holder."""
    import duckdb  # on first use: the audit's one import of DuckDB, never at module load (rule W2)

    tries = max(1, math.ceil(wait / _LOCK_RETRY_S) + 1)
    for attempt in range(tries):
        try:
            con = duckdb.connect(path, read_only=read_only, config=config)
            # DuckDB draws a progress bar on standard output for a statement that runs
            # more than 2 s (a chunk's derivation on a loaded machine, a long report): it
            # would corrupt the --json of `audit sync` and `audit report`.
            con.execute("SET enable_progress_bar = false")
            return con
        except duckdb.IOException as e:
            if "lock" not in str(e).lower():
                raise
            holder = m.group(0) if (m := re.search(r"PID \d+", str(e))) else "another process"
            if attempt == tries - 1:
                doing = (
                    "holds it open (a query, or DuckDB itself)"
                    if not read_only
                    else "is writing it (a sync); try again when it is done"
                )
                raise StoreError(
                    f"audit file {path}: {holder} {doing}" + (f"; waited {wait:g} s (the sync's wait)" if wait else "")
                ) from None
            time.sleep(_LOCK_RETRY_S)
    raise AssertionError  # pragma: no cover


def _is_audit_file(con: duckdb.DuckDBPyConnection) -> tuple[bool, bool]:
    """(has the audit_sync table, holds anything at all)."""
    marker, objects = con.execute(
        "SELECT (SELECT count(*) FROM duckdb_tables() WHERE NOT internal AND schema_name = 'main' AND table_name = 'audit_sync'),"
        " (SELECT count(*) FROM duckdb_tables() WHERE NOT internal) + (SELECT count(*) FROM duckdb_views() WHERE NOT internal)"
        " + (SELECT count(*) FROM duckdb_sequences())"
    ).fetchone()  # type: ignore[misc]
    return bool(marker), bool(objects)


def _drop_empty(path: str) -> None:
    """An empty audit file is an absent one (rule A1): DuckDB refuses to open a 0-byte
    file ("exists, but it is not a valid DuckDB database file"), and a first sync that
    failed while creating its file (a full disk) leaves one, which blocked every later
    sync until removed by hand. It is removed unless a process holds DuckDB's lock on
    it (a DuckDB creating it this instant: left to that process). Only a 0-byte file
    is opened here: closing a descriptor drops every POSIX record lock this process
    holds on the file, DuckDB's included."""
    try:
        if os.stat(path).st_size != 0 or os.path.exists(path + ".wal"):
            return
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    except OSError:
        return  # absent, unreadable or a symlink: DuckDB (or _require_duckdb_file) says so
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(fd).st_size == 0:
            os.unlink(path)
    except OSError:
        return  # locked (EACCES, EAGAIN), or not ours to remove: DuckDB then says what it says
    finally:
        os.close(fd)


def _connect_rw(path: str, *, wait: float = SYNC_WAIT_S) -> duckdb.DuckDBPyConnection:
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise InvalidInput(f"directory {parent} does not exist", where=AUDIT_FILE)
    _require_duckdb_file(path)
    _drop_empty(path)
    if os.path.exists(path) and os.path.getsize(path) > 0:
        # Another DuckDB database (not ours) must not receive audit tables: look on a
        # read-only connection first, so a refused file is not even opened for writing.
        con = _connect(path, read_only=True, config={"enable_external_access": False}, wait=wait)
        try:
            ours, anything = _is_audit_file(con)
        finally:
            con.close()
        if not ours and anything:
            raise InvalidInput(
                "a DuckDB database that is not an epochledger audit file (no audit_sync table): "
                "refusing to write audit tables into it; give another audit file",
                where=path,
            )
    con = _connect(
        path,
        read_only=False,
        wait=wait,
        config={"autoinstall_known_extensions": False, "temp_directory": os.path.join(scratch_dir(path), "duckdb")},
    )
    con.execute("SET TimeZone = 'UTC'")
    # Row order within the table carries no meaning (position does): DuckDB may load
    # the chunk in parallel.
    con.execute("SET preserve_insertion_order = false")
    con.execute(f"SET threads = {SYNC_THREADS}")
    return con


_MEMORY = re.compile(r"\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)", re.IGNORECASE)


def _connect_ro(
    path: str, *, external_access: bool = False, memory_limit: str | None = QUERY_MEMORY_LIMIT
) -> duckdb.DuckDBPyConnection:
    """A read-only connection. With `memory_limit` (queries, reports), DuckDB may use
    that much memory and never spills to disk (no temporary directory): a query beyond
    it fails instead of filling the disk or leaving FILE.tmp behind."""
    import duckdb  # on first use: the audit's one import of DuckDB, never at module load (rule W2)

    if not os.path.exists(path) or os.path.getsize(path) == 0:  # an empty file is an absent one (_drop_empty)
        raise InvalidInput("no audit file here; run `epochledger audit sync` first", where=path)
    _require_duckdb_file(path)
    config: dict[str, Any] = {"enable_external_access": external_access}
    if memory_limit is not None:
        if not isinstance(memory_limit, str) or not _MEMORY.fullmatch(memory_limit.strip()):
            raise InvalidInput(f"a size such as 512MB or 2GB, got {memory_limit!r}", where="memory_limit")
        config |= {"memory_limit": memory_limit, "temp_directory": ""}
    try:
        con = _connect(path, read_only=True, config=config, wait=0)
        con.execute("SET TimeZone = 'UTC'")
    except (duckdb.OutOfMemoryException, duckdb.ParserException, duckdb.InvalidInputException) as e:
        if memory_limit is None:
            raise
        # "1b" opens and cannot allocate anything; "99999999TB" is out of DuckDB's range
        raise InvalidInput(
            f"DuckDB cannot work within {memory_limit!r}: {str(e).splitlines()[0]}", where="memory_limit"
        ) from None
    try:
        con.execute("SET lock_configuration = true")  # no SET can re-enable file access
        if not _is_audit_file(con)[0]:
            raise InvalidInput(
                "not an epochledger audit file (no audit_sync table); `epochledger audit sync` makes one", where=path
            )
        if (version := _schema_version(con)) not in (None, SCHEMA_VERSION):
            raise _old_schema(version)
    except BaseException:
        con.close()
        raise
    return con


def _check_timeout(timeout: float) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
        raise InvalidInput(f"a finite number of seconds > 0, got {timeout!r}", where="timeout")
    return timeout


def _bounded(
    con: duckdb.DuckDBPyConnection, sql: str, params: Any, *, timeout: float, memory_limit: str | None
) -> Result:
    """Run one statement and fetch its rows, interrupted (con.interrupt from a timer)
    once it has run `timeout` seconds: QueryInterrupted, nothing changed."""
    import duckdb  # on first use: the audit's one import of DuckDB, never at module load (rule W2)

    timer = threading.Timer(timeout, con.interrupt)
    timer.daemon = True
    timer.start()
    try:
        return _result(con.execute(sql, params) if params else con.execute(sql))
    except duckdb.InterruptException:
        raise QueryInterrupted(
            f"ran longer than {timeout:g} s (its timeout) and was interrupted; nothing was changed", sql, "timeout"
        ) from None
    except duckdb.OutOfMemoryException as e:
        raise QueryInterrupted(
            f"needs more memory than {memory_limit} (its memory limit): {str(e).splitlines()[0]}", sql, "memory"
        ) from None
    finally:
        timer.cancel()


# -------------------------------------------------------- lifecycle table
def _predicate_columns() -> list[str]:
    return ["is_failure", *lifecycle.PREDICATES]


def _predicate_rows(status: str, code: str) -> list[list[Any]]:
    """The two rows of one (status, code): without and with fenced evidence of an end
    (`fenced_end`, rule F2: only can_auto_resume differs)."""
    try:
        s = Status(status)
    except ValueError:
        return []  # a status this version does not know: its predicates stay NULL
    return [
        [
            status,
            code,
            fenced_end,
            lifecycle.is_failure(s, code),
            *lifecycle.predicates(s, code, fenced_end=fenced_end).values(),
        ]
        for fenced_end in (False, True)
    ]


def _predicate_signature() -> str:
    """Changes whenever lifecycle's answers change, so sync rebuilds the table."""
    codes = ["", *sorted(KNOWN_CODES), "A_CODE_NOBODY_KNOWS"]
    table = [_predicate_columns(), [_predicate_rows(s, code) for s in Status for code in codes]]
    return hashlib.sha256(msgspec.json.encode(table)).hexdigest()[:16]


def _create_predicates(con: duckdb.DuckDBPyConnection) -> None:
    cols = ", ".join(f"{c} BOOLEAN" for c in _predicate_columns())
    con.execute("DROP TABLE IF EXISTS lifecycle_predicates")
    con.execute(
        f"CREATE TABLE lifecycle_predicates (status VARCHAR NOT NULL, code VARCHAR NOT NULL, "
        f"fenced_end BOOLEAN NOT NULL, {cols}, PRIMARY KEY (status, code, fenced_end))"
    )


def _add_predicates(con: duckdb.DuckDBPyConnection, after: int) -> None:
    pairs = con.execute(
        "SELECT DISTINCT e.status, e.code FROM events e WHERE e.position > ? AND e.status IS NOT NULL "
        "AND e.code IS NOT NULL AND NOT EXISTS (SELECT 1 FROM lifecycle_predicates p "
        "WHERE p.status = e.status AND p.code = e.code) ORDER BY 1, 2",
        [after],
    ).fetchall()
    rows = [r for s, c in pairs for r in _predicate_rows(s, c)]
    width = 3 + len(_predicate_columns())
    for i in range(0, len(rows), 500):
        part = rows[i : i + 500]
        marks = ", ".join("(" + ", ".join("?" * width) + ")" for _ in part)
        con.execute(f"INSERT INTO lifecycle_predicates VALUES {marks}", [v for r in part for v in r])


# ------------------------------------------------------------------- sync
def _old_schema(version: object) -> InvalidInput:
    """An audit file of another schema version: derived, so it is rebuilt, never read or
    written as if it were this version's (docs/audit.md, "What sync does")."""
    return InvalidInput(
        f"audit schema version {version}, this epochledger writes {SCHEMA_VERSION}: "
        "the file is derived, delete it and sync again",
        where=AUDIT_FILE,
    )


def _schema_version(con: duckdb.DuckDBPyConnection) -> int | None:
    """The file's schema version; None for a file without its sync row yet."""
    row = con.execute("SELECT schema_version FROM audit_sync").fetchone()
    return None if row is None else int(row[0])


def _ensure_schema(con: duckdb.DuckDBPyConnection, store_url: str) -> int:
    """Create or check the file; return its sync position."""
    con.execute("BEGIN")
    if _is_audit_file(con)[0] and (version := _schema_version(con)) not in (None, SCHEMA_VERSION):
        # checked before schema.sql runs: an older file's objects may not be this version's
        # (version 1 had a view named transitions)
        con.execute("ROLLBACK")
        raise _old_schema(version)
    con.execute(_sql("schema.sql"))
    row = con.execute("SELECT store, position, schema_version, predicates FROM audit_sync").fetchall()
    signature = _predicate_signature()
    if not row:
        con.execute("INSERT INTO audit_sync VALUES (?, 0, ?, '')", [store_url, SCHEMA_VERSION])
        row = [(store_url, 0, SCHEMA_VERSION, "")]
    store, position, version, predicates = row[0]
    if store != store_url:
        con.execute("ROLLBACK")
        raise InvalidInput(
            f"this audit file mirrors {store}, not {store_url}; use another audit file", where=AUDIT_FILE
        )
    if predicates != signature:
        # lifecycle changed (or first sync): recompute every pair seen so far.
        _create_predicates(con)
        _add_predicates(con, 0)
        con.execute("UPDATE audit_sync SET predicates = ?", [signature])
    con.execute(_sql("views.sql"))
    con.execute("COMMIT")
    return int(position)


def _checked_line(row: tuple[int, str, int, Any]) -> bytes:
    """One NDJSON line, the payload nested as a JSON string: DuckDB reads back its text
    exactly (a nested object would come back re-serialized). A stored payload that is
    not JSON (tampering, a poison write) is kept, as text, rather than dropped or
    allowed to wedge every later sync (rules T4, S1)."""
    position, stream, version, state = row
    try:
        msgspec.json.decode(state)
        text = bytes(state).decode("utf-8")  # JSON, so UTF-8
    except msgspec.DecodeError:
        text = _encode({"undecodable": bytes(state).decode("utf-8", "replace")}).decode()
    return b'{"position":%d,"stream":%b,"version":%d,"payload":%b}\n' % (
        position,
        _encode(stream),
        version,
        _encode(text),
    )


def _chunk_files(stem: str) -> list[str]:
    return [stem + source for source in _SOURCES]


class _Chunk(NamedTuple):
    """The events after < position <= last, `events` of them: one DuckDB transaction."""

    after: int
    last: int
    events: int
    rows: Callable[[], list[tuple[int, str, int, Any]]]  # read again, for the checked way only


def _write_chunk(data: bytes, chunk: _Chunk, stem: str) -> str:
    """Write the chunk's file and return its path: `stem`.tsv, the store's lines as they
    are (Store.read_lines: position, stream, version, the payload as stored,
    tab-separated), when they hold exactly one newline a row; else the checked
    `stem`.ndjson, from the chunk's rows read again.

    Why the newline count is enough: with exactly n newlines the file has exactly n
    lines, one per row, so no payload can split into a line of its own (a forged row).
    A tab in a stream or payload then gives its line more than four fields, and DuckDB's
    strict CSV reader refuses the chunk; a stray CR or NUL, bytes that are not UTF-8 and
    payloads that are not JSON are refused too (tests/projections/test_audit.py): each sends the
    chunk the checked way (_load)."""
    for old in _chunk_files(stem):  # this slot's previous chunk, loaded and committed
        if os.path.exists(old):
            os.remove(old)
    if data.count(b"\n") == chunk.events:
        path = stem + ".tsv"
        with open(path, "wb") as f:
            f.write(data)
        return path
    path = stem + ".ndjson"
    _rewrite_checked(chunk.rows(), path)
    return path


def _rewrite_checked(rows: list[tuple[int, str, int, Any]], path: str) -> None:
    """The checked way, only for a chunk the fast one cannot carry: each payload is
    checked, and one that is not JSON is kept as text."""
    with open(path, "wb") as f:
        f.write(b"".join(map(_checked_line, rows)))


# The derived tables (schema.sql: transitions, run_stream_heads, run_queued, stays)
# after a chunk's rows, in the chunk's transaction. A transition's from_status and from_code are those of the
# previous event of its stream by version, over the whole history: the new rows of a
# stream whose versions all follow its head (as every ledger appends them) follow the
# head, then each other; a stream with a new version at or below its head (a store
# written past the ledger) has its every row derived again, as if synced at once. So
# the tables are always what one sync of the whole history gives (tests/projections/
# test_audit.py, the laws against the former views). run_queued follows the log by
# position alone. A run's stays follow its transitions: its new status changes follow
# its stays so far, the open one closed by the first; a run with a stream derived again
# has its stays derived again.
_DERIVE = (
    """
CREATE OR REPLACE TEMP TABLE audit_fresh AS
SELECT e.run, e.position, e.stream, e.version, e.occurred_at, e.type, e.status, e.code, e.actor, e.reason,
       h.version AS head_version, h.status AS head_status, h.code AS head_code
FROM events e LEFT JOIN run_stream_heads h ON h.stream = e.stream
WHERE e.position > $before AND starts_with(e.stream, 'run:')
""",
    """
CREATE OR REPLACE TEMP TABLE audit_redone AS
SELECT DISTINCT stream FROM audit_fresh WHERE version <= head_version
""",
    """
DELETE FROM transitions WHERE position IN (
    SELECT e.position FROM events e SEMI JOIN audit_redone r ON r.stream = e.stream WHERE e.position <= $before
)
""",
    """
CREATE OR REPLACE TEMP TABLE audit_steps AS
SELECT f.* EXCLUDE (head_version) FROM audit_fresh f ANTI JOIN audit_redone r ON r.stream = f.stream
UNION ALL
SELECT e.run, e.position, e.stream, e.version, e.occurred_at, e.type, e.status, e.code, e.actor, e.reason,
       NULL, NULL
FROM events e SEMI JOIN audit_redone r ON r.stream = e.stream
""",
    """
INSERT INTO transitions
SELECT run, position, version, occurred_at, type,
       CASE WHEN row_number() OVER w = 1 THEN head_status ELSE lag(status) OVER w END,
       status,
       CASE WHEN row_number() OVER w = 1 THEN head_code ELSE lag(code) OVER w END,
       code, actor, reason
FROM audit_steps
WINDOW w AS (PARTITION BY stream ORDER BY version)
ORDER BY position
""",
    "DELETE FROM run_stream_heads WHERE stream IN (SELECT stream FROM audit_steps)",
    """
INSERT INTO run_stream_heads
SELECT stream, max(version), arg_max_null(status, version), arg_max_null(code, version)
FROM audit_steps GROUP BY stream
""",
    # run_queued: by position alone, so the chunk's run.queued events follow the row so
    # far (the workflow of the last that names one, the labels and parent of the last)
    """
CREATE OR REPLACE TEMP TABLE audit_queued AS
SELECT q.run,
       coalesce(q.workflow, o.workflow) AS workflow,
       TRY_CAST(q.labels_json AS MAP(VARCHAR, VARCHAR)) AS labels,
       q.parent,
       coalesce(q.workflow, o.workflow) IS DISTINCT FROM o.workflow AS moved
FROM (
    SELECT run,
           arg_max(payload->>'workflow', position) AS workflow,
           arg_max_null(payload->'labels', position) AS labels_json,
           arg_max_null(payload->>'parent', position) AS parent
    FROM events
    WHERE position > $before AND type = 'run.queued' AND starts_with(stream, 'run:')
    GROUP BY run
) q LEFT JOIN run_queued o ON o.run IS NOT DISTINCT FROM q.run
""",
    "DELETE FROM run_queued o USING audit_queued q WHERE o.run IS NOT DISTINCT FROM q.run",
    "INSERT INTO run_queued SELECT run, workflow, labels, parent FROM audit_queued",
    # the stays synced before: a run queued again under another workflow takes it
    """
UPDATE stays SET workflow = q.workflow FROM audit_queued q WHERE q.moved AND stays.run = q.run
""",
    # stays: a run with a stream derived again (above) has its every stay derived again;
    # another run's new changes follow its stays so far (its open one closed by the first)
    """
CREATE OR REPLACE TEMP TABLE audit_rerun AS
SELECT DISTINCT s.run FROM audit_steps s SEMI JOIN audit_redone r ON r.stream = s.stream WHERE s.run IS NOT NULL
""",
    "DELETE FROM stays WHERE run IN (SELECT run FROM audit_rerun)",
    """
CREATE OR REPLACE TEMP TABLE audit_changes AS
SELECT run, position, CASE WHEN type = 'run.deleted' THEN NULL ELSE to_status END AS status, occurred_at AS entered_at
FROM (
    SELECT t.* FROM transitions t ANTI JOIN audit_rerun r ON r.run = t.run WHERE t.position > $before
    UNION ALL
    SELECT t.* FROM transitions t SEMI JOIN audit_rerun r ON r.run = t.run
)
WHERE (from_status IS DISTINCT FROM to_status OR type = 'run.deleted')
  AND occurred_at IS NOT NULL AND run IS NOT NULL
""",
    """
UPDATE stays SET left_at = f.first_at
FROM (SELECT run, arg_min(entered_at, position) AS first_at FROM audit_changes GROUP BY run) f
WHERE stays.run = f.run AND stays.left_at IS NULL
""",
    """
INSERT INTO stays
SELECT c.run, c.position, q.workflow, c.status, c.entered_at,
       lead(c.entered_at) OVER (PARTITION BY c.run ORDER BY c.position)
FROM audit_changes c LEFT JOIN run_queued q ON q.run = c.run
ORDER BY c.position
""",
    "DROP TABLE audit_fresh; DROP TABLE audit_redone; DROP TABLE audit_steps",
    "DROP TABLE audit_queued; DROP TABLE audit_rerun; DROP TABLE audit_changes",
)


def _derive(con: duckdb.DuckDBPyConnection, before: int) -> None:
    """Derive transitions, run_stream_heads, run_queued and stays for the events after
    position `before` (the caller's transaction; before = 0 on empty tables derives
    them whole)."""
    for statement in _DERIVE:
        con.execute(statement, {"before": before} if "$before" in statement else None)


def _load(con: duckdb.DuckDBPyConnection, path: str, chunk: _Chunk, before: int) -> int:
    """One chunk, one transaction: the rows, what is derived from them, their predicates,
    the new position."""
    con.execute("BEGIN")
    try:
        (position,) = con.execute("SELECT position FROM audit_sync").fetchone()  # type: ignore[misc]
        if position != before:
            raise StoreError(f"audit file moved from position {before} to {position} during this sync")
        stem, source = os.path.splitext(path)
        try:
            con.execute(_INSERTS[source], [path])
        except _refused_chunk():
            if source == ".ndjson":
                raise
            con.execute("ROLLBACK")
            con.execute("BEGIN")
            os.remove(path)
            _rewrite_checked(chunk.rows(), stem + ".ndjson")
            con.execute(_INSERTS[".ndjson"], [stem + ".ndjson"])
        _derive(con, before)
        _add_predicates(con, before)
        con.execute("UPDATE audit_sync SET position = ?", [chunk.last])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return chunk.last


def sync(
    store: Store,
    path: str,
    *,
    chunk: int = CHUNK,
    progress: Callable[[int, int], None] | None = None,
    wait: float = SYNC_WAIT_S,
) -> SyncResult:
    """Copy every event after the file's sync position into `path`. Reads the store only.
    If other processes hold the file (queries), waits up to `wait` seconds for them."""
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 <= wait < math.inf:
        raise InvalidInput(f"a finite number of seconds >= 0, got {wait!r}", where="wait")
    with _translated("audit file", path):
        try:
            con = _connect_rw(path, wait=wait)
        except BaseException:
            _drop_empty(path)  # DuckDB made the file, then could not write its header (a full disk)
            raise
        tmp = scratch_dir(path)
        try:
            shutil.rmtree(tmp, ignore_errors=True)  # what a killed sync left; we hold the write lock
            os.makedirs(tmp)
            position = _ensure_schema(con, store.url)
            appended = 0
            with ThreadPoolExecutor(max_workers=1) as pool:
                pending: Future[int] | None = None
                buffered: list[bytes] = []
                count, after, n = 0, position, 0

                def reread(after: int, last: int, count: int) -> Callable[[], list[tuple[int, str, int, Any]]]:
                    def rows() -> list[tuple[int, str, int, Any]]:
                        got = [r for rows in store.read_raw(after, last) for r in rows]
                        if len(got) != count:  # the log is append-only: the same positions hold the same rows
                            raise StoreError(f"positions {after + 1}..{last} held {count} events, now {len(got)}")
                        return got

                    return rows

                def flush(last: int) -> None:
                    nonlocal pending, position, appended, n, buffered, count, after
                    n += 1
                    piece = _Chunk(after, last, count, reread(after, last, count))
                    # two slots: one chunk loading, the next being written meanwhile
                    file = _write_chunk(b"".join(buffered), piece, os.path.join(tmp, f"chunk-{n % 2}"))
                    if pending is not None:  # at most one load in flight; errors surface here
                        position = pending.result()
                    pending = pool.submit(_load, con, file, piece, position)
                    appended += count
                    buffered, count, after = [], 0, last
                    if progress:
                        progress(appended, last)

                last = position
                for lines in store.read_lines(position, batch=min(chunk, 10_000)):
                    buffered.append(lines.data)
                    count += lines.events
                    last = lines.last
                    if count >= chunk:
                        flush(last)
                if count:
                    flush(last)
                if pending is not None:
                    position = pending.result()
            (events,) = con.execute("SELECT count(*) FROM events").fetchone()  # type: ignore[misc]
        finally:
            con.close()
            shutil.rmtree(tmp, ignore_errors=True)  # after close: DuckDB's spill files too
    return SyncResult(os.path.abspath(path), appended, position, int(events))


# ---------------------------------------------------------------- reading
def status(path: str, store: Store | None = None) -> AuditStatus:
    """The sync position, the store mirrored, the newest event's time; given the
    store, also its last position and how many positions the file is behind."""
    with _translated("audit file", path):
        con = _connect_ro(path)
        try:
            mirrored, position = con.execute("SELECT store, position FROM audit_sync").fetchone()  # type: ignore[misc]
            events, latest = con.execute("SELECT count(*), max(occurred_at) FROM events").fetchone()  # type: ignore[misc]
        finally:
            con.close()
    result = AuditStatus(duckdb=os.path.abspath(path), store=mirrored, position=position, events=events, latest=latest)
    if store is not None:
        if store.url != mirrored:
            raise InvalidInput(f"this audit file mirrors {mirrored}, not {store.url}", where=AUDIT_FILE)
        head = store.max_position()
        result = msgspec.structs.replace(result, ledger_position=head, behind=head - position)
    return result


def _result(rel: Any) -> Result:
    if rel is None:
        return Result([], [])
    return Result.of([d[0] for d in rel.description], [str(d[1]) for d in rel.description], rel.fetchall())


_PARAM = re.compile(r"\$([a-z_]+)")
PERIODS = ("hour", "day", "week", "month", "quarter", "year")


def report(
    path: str,
    name: str,
    *,
    as_of: datetime | None = None,
    period: str = "day",
    label: str | None = None,
    timeout: float = QUERY_TIMEOUT_S,
    memory_limit: str = QUERY_MEMORY_LIMIT,
) -> Result:
    """Run one canned report (projections/audit/report_<name>.sql) as of an instant.
    Without `as_of`, the instant of the newest synced event: the report depends on the
    data alone, never on the wall clock. `label`: the label key of failures_by_label
    (None: every label). Bounded like `query`."""
    _check_timeout(timeout)
    if name not in report_names():
        raise InvalidInput(f"unknown report {name!r}; reports: {', '.join(report_names())}", where="report")
    if period not in PERIODS:
        raise InvalidInput(f"unknown period {period!r}; one of {', '.join(PERIODS)}", where="period")
    if as_of is not None and as_of.tzinfo is None:
        raise InvalidInput("as_of needs a time zone (e.g. 2026-09-09T23:59:59Z)", where="as_of")
    if label is not None and (not isinstance(label, str) or not label or "$label" not in _sql(f"report_{name}.sql")):
        raise InvalidInput(f"a label key for failures_by_label, got {label!r} for {name}", where="label")
    sql = _sql(f"report_{name}.sql")
    with _translated("audit file", path):
        con = _connect_ro(path, memory_limit=memory_limit)
        try:
            if as_of is None:
                (as_of,) = con.execute(
                    "SELECT coalesce(max(occurred_at), TIMESTAMPTZ '1970-01-01 00:00:00+00') FROM events"
                ).fetchone()  # type: ignore[misc]
            values = {"as_of": as_of, "period": period, "label": label}
            params = {k: values[k] for k in sorted(set(_PARAM.findall(sql)))}
            return _bounded(con, sql, params, timeout=timeout, memory_limit=memory_limit)
        finally:
            con.close()


@functools.cache
def _read_only_statements() -> frozenset[Any]:
    import duckdb  # on first use (rule W2)

    return frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})


def query(path: str, sql: str, *, timeout: float = QUERY_TIMEOUT_S, memory_limit: str = QUERY_MEMORY_LIMIT) -> Result:
    """One read-only statement (SELECT, WITH, FROM, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN).

    Two locks, either enough on its own: the statement type is checked before it runs,
    and the connection is read-only with file-system access disabled and its
    configuration locked (so COPY TO, ATTACH, INSTALL/LOAD from a path and SET fail).
    Two bounds: interrupted after `timeout` seconds, and at most `memory_limit` of
    memory with no spilling to disk (QueryInterrupted, exit 3)."""
    import duckdb  # on first use: the audit's one import of DuckDB, never at module load (rule W2)

    _check_timeout(timeout)
    with _translated("audit file", path):
        try:
            sql.encode("utf-8")
        except UnicodeEncodeError as e:
            raise QueryRefused(f"not valid UTF-8 ({e.reason} at character {e.start})", sql) from None
        con = _connect_ro(path, memory_limit=memory_limit)
        try:
            try:
                statements = con.extract_statements(sql)
            except duckdb.Error as e:
                raise QueryRefused(str(e).splitlines()[0], sql) from None
            if len(statements) != 1:
                raise QueryRefused(f"expected one statement, got {len(statements)}", sql)
            kind = statements[0].type
            if kind not in _read_only_statements():
                raise QueryRefused(f"{kind.name} statements are refused: the audit query is read-only", sql)
            try:
                return _bounded(con, sql, None, timeout=timeout, memory_limit=memory_limit)
            except (
                duckdb.ParserException,
                duckdb.BinderException,
                duckdb.CatalogException,
                duckdb.PermissionException,
                duckdb.InvalidInputException,
                duckdb.ConversionException,
            ) as e:
                raise QueryRefused(str(e).splitlines()[0], sql) from None
        finally:
            con.close()


def export_parquet(path: str, directory: str) -> ParquetExport:
    """Write the events table as Parquet under `directory`, partitioned by event date
    (events/event_date=YYYY-MM-DD/*.parquet), plus lifecycle_predicates.parquet,
    transitions.parquet and run_queued.parquet (derived by sync: views.sql reads the
    four). DuckDB
    streams the copy, so a history larger than memory exports (it spills to disk)."""
    if not directory:
        raise InvalidInput("needs a directory", where="directory")
    if os.path.exists(directory) and (not os.path.isdir(directory) or os.listdir(directory)):
        raise InvalidInput("exists and is not an empty directory", where=directory)
    with _translated("audit file", path):
        _connect_ro(path).close()  # a missing or foreign audit file is refused before the directory is made
    try:
        os.makedirs(directory, exist_ok=True)
    except (OSError, ValueError) as e:  # ValueError: a NUL in the name
        raise InvalidInput(f"cannot create: {getattr(e, 'strerror', None) or e}", where=directory) from None
    events_dir = os.path.join(directory, "events")
    with _translated("audit file", path):
        con = _connect_ro(
            path, external_access=True, memory_limit=None
        )  # streams, and may spill: histories larger than memory
        try:
            con.execute(
                "COPY (SELECT *, CAST(occurred_at AS DATE) AS event_date FROM events ORDER BY position) "
                "TO ? (FORMAT parquet, PARTITION_BY (event_date), COMPRESSION zstd)",
                [events_dir],
            )
            for table in ("lifecycle_predicates", "transitions", "run_queued"):  # views.sql reads them beside events
                con.execute(f"COPY {table} TO ? (FORMAT parquet)", [os.path.join(directory, f"{table}.parquet")])
            (events,) = con.execute("SELECT count(*) FROM events").fetchone()  # type: ignore[misc]
        finally:
            con.close()
    files = sum(len([f for f in fs if f.endswith(".parquet")]) for _, _, fs in os.walk(directory))
    return ParquetExport(directory=os.path.abspath(directory), events=events, files=files)
