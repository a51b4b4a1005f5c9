"""The audit file (rule A1, docs/audit.md): incremental sync, the schema, the canned
reports against a golden history, read-only ad-hoc SQL, Parquet export."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochledger import open_ledger
from epochledger.app import Ledger
from epochledger.cli import main
from epochledger.ledger.errors import InvalidInput, QueryRefused, RunNotFound, StaleEpoch, StoreError
from epochledger.ledger.events import TAGS, Status
from epochledger.projections import audit
from epochledger.projections.audit import duck
from epochledger.projections.audit.results import cell

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
AS_OF = datetime(2026, 9, 10, 23, 59, 59, tzinfo=UTC)


def day(ledger: Ledger, runs: int, *, prefix: str = "r", epoch: str = "w1.e1") -> None:
    """A few runs through the API: queued, started, then finished or failed."""
    for i in range(runs):
        run = f"{prefix}{i}"
        with ledger.batch() as b:
            b.queue(run, workflow="nightly", process="worker-1")
            b.start(run, epoch=epoch, process="worker-1", actor=epoch)
        ledger.clock.advance(60)  # type: ignore[attr-defined]
        if i % 3 == 2:
            ledger.fail(run, "TIMEOUT", resumable=True, actor=epoch)
        else:
            ledger.finish(run, actor=epoch)


def positions(path: str) -> list[int]:
    return [p for (p,) in audit.query(path, "SELECT position FROM events ORDER BY position").rows]


def file_digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ------------------------------------------------------------------- sync
def test_A1_sync_twice_appends_nothing_the_second_time(ledger: Ledger, tmp_path: Path) -> None:
    ledger.boot("worker-1", epoch="w1.e1")
    day(ledger, 5)
    path = str(tmp_path / "audit.duckdb")
    first = audit.sync(ledger._store, path)
    assert first.appended == first.events == len(list(ledger.events())) == 16
    second = audit.sync(ledger._store, path)
    assert second.appended == 0
    assert second.events == first.events
    assert positions(path) == [r.position for r in ledger.events()]


def test_A1_audit_sync_from_the_command_line_on_both_stores(
    ledger: Ledger, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger.boot("worker-1", epoch="w1.e1")
    day(ledger, 2)
    path = str(tmp_path / "cli.duckdb")
    assert main(["--store", ledger.url, "audit", "sync", "--duckdb", path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["appended"] == 7
    assert main(["--store", ledger.url, "audit", "sync", "--duckdb", path]) == 0
    assert "appended 0 events" in capsys.readouterr().out
    assert (
        main(["--store", ledger.url, "audit", "query", "SELECT count(*) AS n FROM runs", "--duckdb", path, "--json"])
        == 0
    )
    assert json.loads(capsys.readouterr().out) == [{"n": 2}]


def test_A1_sync_after_more_events_appends_exactly_those(ledger: Ledger, tmp_path: Path) -> None:
    ledger.boot("worker-1", epoch="w1.e1")
    day(ledger, 4)
    path = str(tmp_path / "audit.duckdb")
    first = audit.sync(ledger._store, path)
    day(ledger, 3, prefix="later")
    new = [r.position for r in ledger.events(first.position)]
    second = audit.sync(ledger._store, path)
    assert second.appended == len(new) > 0
    assert positions(path) == [r.position for r in ledger.events()]
    got = audit.query(path, f"SELECT position FROM events WHERE position > {first.position} ORDER BY 1").rows
    assert [p for (p,) in got] == new


def test_A1_R3_a_failed_chunk_keeps_the_chunks_before_it_and_a_resync_doubles_nothing(
    sqlite_ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mutation caught (applied, seen failing): not recording the sync position with
    the chunk's rows; the re-sync then appends the first chunk a second time."""
    sqlite_ledger.boot("worker-1", epoch="w1.e1")
    day(sqlite_ledger, 6)  # 1 boot + 6 x 3 events
    path = str(tmp_path / "audit.duckdb")
    real = duck._load
    calls = []

    def failing(con, file, rows, before):
        calls.append(before)
        if len(calls) == 2:
            raise StoreError("disk full (injected)")
        return real(con, file, rows, before)

    monkeypatch.setattr(duck, "_load", failing)
    with pytest.raises(StoreError, match="injected"):
        audit.sync(sqlite_ledger._store, path, chunk=5)
    assert positions(path) == [1, 2, 3, 4, 5]
    assert audit.status(path).position == 5
    monkeypatch.setattr(duck, "_load", real)
    result = audit.sync(sqlite_ledger._store, path, chunk=5)
    assert result.appended == 19 - 5
    assert positions(path) == list(range(1, 20))


def test_A1_audit_status_says_how_far_behind_the_file_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store, _ = _golden_file(tmp_path, capsys)
    with open_ledger(store) as lg:
        lg.queue("late", at=datetime(2026, 9, 11, tzinfo=UTC))
    assert main(["--store", store, "audit", "status", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["position"], got["ledger_position"], got["behind"], got["events"]) == (51, 52, 1, 51)
    assert main(["--store", store, "audit", "sync"]) == 0
    assert main(["--store", store, "audit", "status"]) == 0
    assert "position 52 of 52 (0 behind)" in capsys.readouterr().out


def test_A1_an_audit_file_mirrors_one_ledger(tmp_path: Path, clock) -> None:
    path = str(tmp_path / "audit.duckdb")
    with open_ledger(str(tmp_path / "a.db"), clock=clock) as a, open_ledger(str(tmp_path / "b.db"), clock=clock) as b:
        a.boot("worker-1", epoch="a.e1")
        b.boot("worker-1", epoch="b.e1")
        audit.sync(a._store, path)
        with pytest.raises(InvalidInput, match="mirrors"):
            audit.sync(b._store, path)
    assert positions(path) == [1]


@pytest.mark.parametrize(
    ("store", "expected"),
    [
        ("runs.db", "runs.duckdb"),
        ("sqlite:///data/runs.db", "data/runs.duckdb"),
        ("sqlite:////var/lib/runs.sqlite3", "/var/lib/runs.duckdb"),
        ("ledger", "ledger.duckdb"),
        ("postgresql://postgres@127.0.0.1:5432/test", "epochledger.duckdb"),
    ],
)
def test_A1_default_audit_file_sits_beside_a_sqlite_store(store: str, expected: str) -> None:
    assert audit.default_path(store) == expected


# ---------------------------------------------------- schema and survival
def test_L3_A1_unknown_codes_survive_into_every_table_and_report(ledger: Ledger, tmp_path: Path) -> None:
    ledger.boot("worker-1", epoch="w1.e1")
    ledger.queue("x", workflow="nightly")
    ledger.start("x", epoch="w1.e1")
    ledger.fail("x", "QUANTUM_DECOHERENCE_7", resumable=True, error="a code nobody listed")
    path = str(tmp_path / "audit.duckdb")
    audit.sync(ledger._store, path)
    assert audit.query(path, "SELECT code FROM events WHERE type = 'run.failed'").rows == [("QUANTUM_DECOHERENCE_7",)]
    assert audit.query(path, "SELECT failure_code FROM transitions WHERE type = 'run.failed'").rows == [
        ("QUANTUM_DECOHERENCE_7",)
    ]
    assert audit.query(path, "SELECT code, can_auto_resume FROM runs").rows == [("QUANTUM_DECOHERENCE_7", True)]
    codes = audit.report(path, "failure_codes").records()
    assert [(r["code"], r["failures"]) for r in codes] == [("QUANTUM_DECOHERENCE_7", 1)]


def test_L3_A1_fields_and_tags_from_a_newer_version_survive(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    """Mutation caught: feeding DuckDB from the typed decode (Ledger.events) drops the
    unknown field and refuses the unknown tag."""
    sqlite_ledger.queue("x", workflow="nightly")
    db = sqlite_ledger._store.path  # type: ignore[attr-defined]
    newer = [
        (
            "run:x",
            2,
            "run.started",
            {
                "type": "run.started",
                "at": "2026-09-09T14:01:00Z",
                "run": "x",
                "status": "running",
                "epoch": "w9",
                "gpu": "H100",
                "priority": 7,
            },
        ),
        (
            "run:x",
            3,
            "run.teleported",
            {
                "type": "run.teleported",
                "at": "2026-09-09T14:02:00Z",
                "run": "x",
                "status": "running",
                "code": "",
                "destination": "mars",
            },
        ),
    ]
    with sqlite3.connect(db) as conn:
        for stream, version, topic, payload in newer:
            conn.execute(
                "INSERT INTO epochledger_events (originator_id, originator_version, topic, state) VALUES (?,?,?,?)",
                (stream, version, topic, json.dumps(payload).encode()),
            )
    path = str(tmp_path / "audit.duckdb")
    audit.sync(sqlite_ledger._store, path)
    rows = audit.query(
        path, "SELECT type, epoch, payload->>'gpu', payload->>'destination' FROM events ORDER BY position"
    ).rows
    assert rows == [
        ("run.queued", None, None, None),
        ("run.started", "w9", "H100", None),
        ("run.teleported", None, None, "mars"),
    ]
    assert audit.query(path, "SELECT to_status FROM transitions WHERE type = 'run.teleported'").rows == [("running",)]


def test_T4_A1_an_undecodable_payload_is_kept_and_does_not_wedge_the_sync(
    sqlite_ledger: Ledger, tmp_path: Path
) -> None:
    sqlite_ledger.queue("x")
    with sqlite3.connect(sqlite_ledger._store.path) as conn:  # type: ignore[attr-defined]
        conn.execute(
            "INSERT INTO epochledger_events (originator_id, originator_version, topic, state) VALUES (?,?,?,?)",
            ("run:x", 2, "run.started", b'{"type":"run.started", garbage'),
        )
    sqlite_ledger.queue("y")
    path = str(tmp_path / "audit.duckdb")
    assert audit.sync(sqlite_ledger._store, path).appended == 3
    rows = audit.query(path, "SELECT position, type, payload->>'undecodable' FROM events ORDER BY position").rows
    assert rows == [(1, "run.queued", None), (2, None, '{"type":"run.started", garbage'), (3, "run.queued", None)]


def test_T4_A1_odd_but_valid_payloads_do_not_wedge_the_sync(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    """JSON spread over several lines would split an NDJSON line; an `at` that is not a
    time would fail the column cast. Both are kept (the payload as stored) and later
    events still arrive."""
    sqlite_ledger.queue("x")
    odd = [
        (2, b'{\n  "type": "run.started",\n  "at": "2026-09-09T14:01:00Z",\n  "run": "x",\n  "status": "running"\n}'),
        (3, b'{"type":"run.checkpointed","at":"yesterday","run":"x","status":"running","node":"n","ref":"r"}'),
    ]
    with sqlite3.connect(sqlite_ledger._store.path) as conn:  # type: ignore[attr-defined]
        for version, state in odd:
            conn.execute(
                "INSERT INTO epochledger_events (originator_id, originator_version, topic, state) VALUES (?,?,?,?)",
                ("run:x", version, "run.x", state),
            )
    sqlite_ledger.queue("y")
    path = str(tmp_path / "audit.duckdb")
    assert audit.sync(sqlite_ledger._store, path).appended == 4
    rows = audit.query(path, "SELECT type, occurred_at IS NULL, payload->>'at' FROM events ORDER BY position").rows
    assert rows == [
        ("run.queued", False, "2026-09-09T14:00:00Z"),
        ("run.started", False, "2026-09-09T14:01:00Z"),
        ("run.checkpointed", True, "yesterday"),
        ("run.queued", False, "2026-09-09T14:00:00Z"),
    ]


# Stored payloads the fast (tab-separated) feed cannot carry as they are, each with
# what the audit must hold: the stored text itself, or the text kept as undecodable.
ODD_PAYLOADS = [
    (
        "tab as JSON whitespace",
        b'{"type":\t"run.started","at":"2026-09-09T14:01:00Z","run":"x","status":"running"}',
        "as stored",
    ),
    (
        "CR as JSON whitespace",
        b'{"type":"run.started",\r"at":"2026-09-09T14:01:00Z","run":"x","status":"running"}',
        "as stored",
    ),
    (
        "CRLF lines",
        b'{\r\n"type":"run.started",\r\n"at":"2026-09-09T14:01:00Z","run":"x","status":"running"}',
        "as stored",
    ),
    (
        "NUL after the JSON",
        b'{"type":"run.started","at":"2026-09-09T14:01:00Z","run":"x","status":"running"}\x00',
        "undecodable",
    ),
    (
        "not UTF-8",
        b'{"type":"run.started","at":"2026-09-09T14:01:00Z","run":"x\xff","status":"running"}',
        "undecodable",
    ),
    ("empty", b"", "undecodable"),
    (
        "a tab-separated tail",
        b'{"type":"run.started","at":"2026-09-09T14:01:00Z","run":"x","status":"running"}\t{"x":1}',
        "undecodable",
    ),
    # a newline and a tab-separated line, then an NDJSON line: either would be a forged
    # row if the feed split the payload where it splits events
    (
        "a forged tab-separated row",
        b'{"type":"run.started","at":"2026-09-09T14:01:00Z","run":"x","status":"running"}\n'
        b'99\trun:forged\t1\t{"type":"run.queued","run":"forged","status":"queued"}',
        "undecodable",
    ),
    (
        "a forged NDJSON row",
        b'{"type":"run.started","at":"2026-09-09T14:01:00Z"}}\n{"position":99,"stream":"run:forged",'
        b'"version":1,"payload":{"type":"run.queued","run":"forged","status":"queued"}',
        "undecodable",
    ),
]


@pytest.mark.parametrize(("state", "kept"), [p[1:] for p in ODD_PAYLOADS], ids=[p[0] for p in ODD_PAYLOADS])
def test_T4_L3_A1_a_payload_the_fast_feed_cannot_carry_is_kept_and_forges_nothing(
    sqlite_ledger: Ledger, tmp_path: Path, state: bytes, kept: str
) -> None:
    """Its chunk goes the checked way; every payload of that chunk, the odd one and its
    neighbours alike, is still the stored text, and no row is added, lost or moved."""
    sqlite_ledger.queue("x")
    with sqlite3.connect(sqlite_ledger._store.path) as conn:  # type: ignore[attr-defined]
        conn.execute(
            "INSERT INTO epochledger_events (originator_id, originator_version, topic, state) VALUES (?,?,?,?)",
            ("run:x", 2, "run.started", state),
        )
    sqlite_ledger.queue("y")
    stored = [bytes(r[3]).decode("utf-8", "replace") for b in sqlite_ledger._store.read_raw(0) for r in b]
    path = str(tmp_path / "audit.duckdb")
    assert audit.sync(sqlite_ledger._store, path).appended == 3
    rows = audit.query(path, "SELECT position, stream, version, payload FROM events ORDER BY position").rows
    assert [(p, s, v) for p, s, v, _ in rows] == [(1, "run:x", 1), (2, "run:x", 2), (3, "run:y", 1)]
    assert rows[0][3] == stored[0] and rows[2][3] == stored[2]
    if kept == "as stored":
        assert rows[1][3] == stored[1]
        assert audit.query(path, "SELECT type, occurred_at IS NULL FROM events WHERE position = 2").rows == [
            ("run.started", False)
        ]
    else:
        assert json.loads(rows[1][3]) == {"undecodable": stored[1]}


def test_A1_a_stream_name_with_a_tab_does_not_shift_the_columns(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    """Stream names are checked on write (no whitespace); one written behind the
    ledger's back still lands in its own column, whole."""
    sqlite_ledger.queue("x")
    with sqlite3.connect(sqlite_ledger._store.path) as conn:  # type: ignore[attr-defined]
        conn.execute(
            "INSERT INTO epochledger_events (originator_id, originator_version, topic, state) VALUES (?,?,?,?)",
            (
                "run:a\tb",
                1,
                "run.queued",
                b'{"type":"run.queued","at":"2026-09-09T14:00:00Z","run":"a\\tb","status":"queued"}',
            ),
        )
    path = str(tmp_path / "audit.duckdb")
    assert audit.sync(sqlite_ledger._store, path).appended == 2
    assert audit.query(path, "SELECT stream, version, run FROM events ORDER BY position").rows == [
        ("run:x", 1, "x"),
        ("run:a\tb", 1, "a\tb"),
    ]


def test_L3_A1_payloads_are_the_stored_text_byte_for_byte_on_both_feeds(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    """Spacing, escapes and number spellings as the store holds them, whether the chunk
    goes the fast way or, because of one multi-line payload in it, the checked way
    (which used to re-serialize every payload of the chunk: 1.50 became 1.5)."""
    odd = b'{"type": "run.started", "at":  "2026-09-09T14:01:00Z", "run": "x", "status": "running", "caf\\u00e9": 1.50}'
    multi = b'{"type":"run.checkpointed",\n"at":"2026-09-09T14:02:00Z","run":"x","status":"running"}'
    for feed, extra in (("fast", []), ("checked", [multi])):
        with open_ledger(str(tmp_path / f"{feed}.db"), clock=sqlite_ledger.clock) as lg:
            lg.queue("x")
            with sqlite3.connect(lg._store.path) as conn:  # type: ignore[attr-defined]
                for version, state in enumerate([odd, *extra], start=2):
                    conn.execute(
                        "INSERT INTO epochledger_events (originator_id, originator_version, topic, state) VALUES (?,?,?,?)",
                        ("run:x", version, "run.x", state),
                    )
            stored = [bytes(r[3]).decode() for b in lg._store.read_raw(0) for r in b]
            path = str(tmp_path / f"{feed}.duckdb")
            audit.sync(lg._store, path)
        assert [p for (p,) in audit.query(path, "SELECT payload FROM events ORDER BY position").rows] == stored, feed
        assert audit.query(path, "SELECT type FROM events ORDER BY position").rows == [
            ("run.queued",),
            ("run.started",),
        ] + [("run.checkpointed",)] * len(extra)


def test_A1_read_raw_returns_the_stored_bytes_in_log_order(ledger: Ledger) -> None:
    ledger.boot("worker-1", epoch="w1.e1")
    day(ledger, 3)
    typed = list(ledger.events())
    batches = list(ledger._store.read_raw(0, batch=4))
    assert [len(b) for b in batches][:-1] == [4] * (len(batches) - 1)
    raw = [r for b in batches for r in b]
    from epochledger.ledger import codec

    assert [(p, s, v, bytes(b)) for p, s, v, b in raw] == [
        (r.position, r.stream, r.version, codec.encode(r.event)) for r in typed
    ]
    upto = typed[5].position
    assert [r[0] for b in ledger._store.read_raw(typed[1].position, upto, batch=2) for r in b] == [
        r.position for r in typed[2:6]
    ]


def test_A1_P1_runs_view_equals_the_fold_with_lifecycle_predicates(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    """The runs view takes status and code from each run's last event (L1) and its
    predicates from ledger/lifecycle.py; it must agree with Ledger.runs()."""
    from epochledger.demo import record_day

    record_day(sqlite_ledger, sqlite_ledger.clock)  # type: ignore[arg-type]
    sqlite_ledger.delete("report-0003")
    path = str(tmp_path / "audit.duckdb")
    audit.sync(sqlite_ledger._store, path)
    from epochledger.ledger import lifecycle

    fields = [
        "run",
        "status",
        "code",
        "workflow",
        "process",
        "epoch",
        "queued_at",
        "started_at",
        "updated_at",
        "actor",
        "reason",
        "version",
        "attempt",
    ]
    got = {r["run"]: r for r in audit.query(path, "SELECT * FROM runs WHERE NOT deleted ORDER BY run").records()}
    want = sqlite_ledger.runs()
    assert sorted(got) == [s.run for s in want]
    for s in want:
        row = got[s.run]
        assert {f: row[f] for f in fields} == {f: cell(getattr(s, f)) for f in fields}  # JSON values (docs/audit.md)
        assert {p: row[p] for p in lifecycle.PREDICATES} == lifecycle.predicates(
            s.status, s.code, fenced_end=s.fenced_end is not None
        )
    assert audit.query(path, "SELECT deleted FROM runs WHERE run = 'report-0003'").rows == [(True,)]


def test_A1_O3_runs_view_follows_the_log_not_the_clock(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    """A restart after the wall clock stepped back: the run's started_at is its last
    start, as in the fold, even though an earlier start has a later instant.
    Mutation caught: started_at as max(occurred_at)."""
    lg = sqlite_ledger
    lg.boot("w", epoch="e1")
    lg.boot("v", epoch="e2")
    lg.queue("x")
    lg.start("x", epoch="e1")
    lg.fail("x", "TIMEOUT", resumable=True)
    lg.resume("x", "auto")
    lg.clock.step_wall(-3600)  # type: ignore[attr-defined]
    lg.start("x", epoch="e2")
    path = str(tmp_path / "audit.duckdb")
    audit.sync(lg._store, path)
    s = lg.get_run("x")
    assert audit.query(path, "SELECT epoch, started_at, updated_at FROM runs").rows == [
        ("e2", cell(s.started_at), cell(s.updated_at))
    ]


def test_P3_audit_sql_names_no_status() -> None:
    """Status sets live in ledger/lifecycle.py alone; SQL asks lifecycle_predicates."""
    sql_dir = Path(duck.__file__).parent
    files = sorted(sql_dir.glob("*.sql"))
    assert len(files) >= 8
    statuses = "|".join(re.escape(s.value) for s in Status)
    for f in files:
        text = f.read_text()
        hits = re.findall(rf"'({statuses})'", text)
        assert not hits, f"{f.name} names statuses {hits}: ask lifecycle_predicates instead"


# ---------------------------------------------------------------- reports
def _golden_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    store = str(tmp_path / "golden.db")
    assert main(["--store", store, "init"]) == 0
    assert main(["--store", store, "import", str(GOLDEN / "audit_history.ndjson")]) == 0
    assert main(["--store", store, "audit", "sync"]) == 0
    capsys.readouterr()
    return store, str(tmp_path / "golden.duckdb")


def test_A1_golden_history_gives_the_known_report_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The golden history is imported through the CLI, synced, and every report is
    compared with tests/golden/audit_reports.json (figures checked by hand: see the
    comments in tests/golden/README.md)."""
    store, _ = _golden_file(tmp_path, capsys)
    expected = json.loads((GOLDEN / "audit_reports.json").read_text())
    assert sorted(expected) == audit.report_names()
    for name in audit.report_names():
        assert main(["--store", store, "audit", "report", name, "--as-of", "2026-09-10T23:59:59Z", "--json"]) == 0
        assert json.loads(capsys.readouterr().out) == expected[name], name


def test_A1_a_divergent_history_fails_the_golden_comparison(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The golden comparison can fail: one more TIMEOUT changes failure_codes."""
    store, path = _golden_file(tmp_path, capsys)
    with open_ledger(store) as lg:
        at = datetime(2026, 9, 10, 14, 0, tzinfo=UTC)
        lg.queue("j", workflow="nightly", at=at)
        lg.start("j", epoch="w1.e2", at=at)
        lg.fail("j", "TIMEOUT", resumable=True, at=at)
    assert main(["--store", store, "audit", "sync"]) == 0
    expected = json.loads((GOLDEN / "audit_reports.json").read_text())
    got = json.loads(json.dumps(audit.report(path, "failure_codes", as_of=AS_OF).records(), default=str))
    assert got != expected["failure_codes"]


def test_A1_report_as_of_defaults_to_the_newest_event_not_the_clock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, path = _golden_file(tmp_path, capsys)
    newest = datetime(2026, 9, 10, 13, 0, 0, tzinfo=UTC)
    for name in audit.report_names():
        assert audit.report(path, name) == audit.report(path, name, as_of=newest)
    early = audit.report(path, "failure_codes", as_of=datetime(2026, 9, 9, 9, 0, tzinfo=UTC)).records()
    assert sorted((r["code"], r["failures"]) for r in early) == [
        ("CANCELLED", 1),
        ("DISK_QUOTA_EXCEEDED", 1),
        ("TIMEOUT", 1),
    ]


def test_L2_A1_failure_entries_count_each_failure_once_and_both_reports_count_them(
    sqlite_ledger: Ledger, tmp_path: Path
) -> None:
    """One definition of "entering a failure status" (the view failure_entries), used by
    failure_codes and failures_by_label: from a status that is not a failure, or with a
    new code. A correction between failure statuses that keeps the code, or a fenced
    report that keeps the status, is the same failure."""
    lg = sqlite_ledger
    w1 = lg.boot("worker-1", epoch="w1.e1")
    for run in "abcdef":
        lg.queue(run, workflow="nightly", labels={"team": "data" if run in "abc" else "ops"})
        lg.start(run, epoch="w1.e1", process="worker-1")
    lg.fail("a", "TIMEOUT", resumable=False)  # entry: running -> failed TIMEOUT
    lg.correct(
        "a", Status.FAILED_RESUMABLE, code="TIMEOUT", actor="alice", reason="retryable after all"
    )  # same failure
    lg.fail("b", "", resumable=True)  # entry: UNKNOWN
    lg.resume("b", "auto")
    lg.start("b", epoch="w1.e1", process="worker-1")
    lg.fail("b", "", resumable=True)  # entry again: it left the failure in between
    lg.finish("c")
    lg.correct("c", Status.FAILED, code="FAIL_NODE", actor="alice", reason="output was wrong")  # entry from finished
    lg.fail("d", "TIMEOUT", resumable=False)  # entry
    lg.correct("d", Status.FAILED, code="NODE_NOT_FOUND", actor="alice", reason="misclassified")  # entry: a new code
    lg.cancel("e", actor="bob")  # entry: cancelled is a failure status (L2)
    lg.fail("f", "TIMEOUT", resumable=True, epoch=w1)  # entry
    lg.boot("worker-1", epoch="w1.e2")
    with pytest.raises(StaleEpoch) as refused:  # a stale epoch's report: fenced, kept as evidence, the status kept
        lg.fail("f", "FAIL_NODE", resumable=False, epoch=w1)
    assert (refused.value.run, refused.value.attempted, refused.value.epoch) == ("f", "run.failed", "w1.e1")
    assert [
        t
        for (t,) in audit.query(_synced(lg, tmp_path), "SELECT type FROM events WHERE run = 'f' ORDER BY position").rows
    ][-1] == "run.fenced"
    path = str(tmp_path / "audit.duckdb")
    got = audit.query(path, "SELECT run, type, from_status, status, code FROM failure_entries ORDER BY position").rows
    assert got == [
        ("a", "run.failed", "running", "failed", "TIMEOUT"),
        ("b", "run.failed", "running", "failed_resumable", ""),
        ("b", "run.failed", "running", "failed_resumable", ""),
        ("c", "run.corrected", "finished", "failed", "FAIL_NODE"),
        ("d", "run.failed", "running", "failed", "TIMEOUT"),
        ("d", "run.corrected", "failed", "failed", "NODE_NOT_FOUND"),
        ("e", "run.cancelled", "running", "cancelled", "CANCELLED"),
        ("f", "run.failed", "running", "failed_resumable", "TIMEOUT"),
    ]
    codes = {(r["code"], r["failures"], r["runs"]) for r in audit.report(path, "failure_codes").records()}
    assert codes == {
        ("TIMEOUT", 3, 3),
        ("UNKNOWN", 2, 1),
        ("FAIL_NODE", 1, 1),
        ("NODE_NOT_FOUND", 1, 1),
        ("CANCELLED", 1, 1),
    }
    by_team = {
        (r["value"], r["code"], r["failures"]) for r in audit.report(path, "failures_by_label", label="team").records()
    }
    assert by_team == {
        ("data", "TIMEOUT", 1),
        ("data", "UNKNOWN", 2),
        ("data", "FAIL_NODE", 1),
        ("ops", "TIMEOUT", 2),
        ("ops", "NODE_NOT_FOUND", 1),
        ("ops", "CANCELLED", 1),
    }


def test_A1_the_reports_that_count_failures_ask_the_view_and_no_other_sql_repeats_its_rule() -> None:
    """The rule lives in failure_entries alone: a report that re-derived it could drift."""
    for name in ("failure_codes", "failures_by_label"):
        assert "FROM failure_entries" in duck._sql(f"report_{name}.sql"), name
    sql = {f"report_{n}.sql": duck._sql(f"report_{n}.sql") for n in audit.report_names()} | {
        "views.sql": duck._sql("views.sql")
    }
    rule = "pf.is_failure IS NOT TRUE OR t.from_code IS DISTINCT FROM t.failure_code"
    assert {name: text.count(rule) for name, text in sql.items() if rule in text} == {"views.sql": 1}


def _synced(lg: Ledger, tmp_path: Path) -> str:
    path = str(tmp_path / "audit.duckdb")
    audit.sync(lg._store, path)
    return path


def test_A1_failure_codes_by_week_and_unknown_period_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, path = _golden_file(tmp_path, capsys)
    weekly = audit.report(path, "failure_codes", as_of=AS_OF, period="week").records()
    assert {r["code"]: r["failures"] for r in weekly} == {
        "TIMEOUT": 3,
        "CANCELLED": 1,
        "DISK_QUOTA_EXCEEDED": 1,
        "PROCESS_ORPHANED": 2,
        "UNKNOWN": 1,
        "TICK_DEADLINE_EXCEEDED": 1,
    }
    with pytest.raises(InvalidInput, match="period"):
        audit.report(path, "failure_codes", period="fortnight; DROP TABLE events")
    with pytest.raises(InvalidInput, match="unknown report"):
        audit.report(path, "nope")


def test_O2_A1_orphaned_while_live_lists_a_run_marked_orphaned_under_a_live_epoch(
    sqlite_ledger: Ledger, tmp_path: Path
) -> None:
    """The invariant report returns the offending marks: a run whose owner epoch is
    still live but was marked PROCESS_ORPHANED (what a flat age threshold did to the
    healthy nightly). A mark after the owner was superseded is not listed.
    Mutation caught: dropping the liveness conditions lists the legitimate mark too."""
    lg = sqlite_ledger
    lg.boot("worker-1", epoch="w1.e1")
    lg.boot("worker-2", epoch="w2.e1")
    for run, epoch, process in [("healthy-nightly", "w1.e1", "worker-1"), ("true-orphan", "w2.e1", "worker-2")]:
        lg.queue(run, workflow="nightly")
        lg.start(run, epoch=epoch, process=process)
    lg.clock.advance(88 * 60)  # type: ignore[attr-defined]
    lg.boot("worker-2", epoch="w2.e2")
    lg.clock.advance(1)  # type: ignore[attr-defined]
    lg.fail("true-orphan", "PROCESS_ORPHANED", resumable=True, actor="w2.e2")
    lg.fail("healthy-nightly", "PROCESS_ORPHANED", resumable=True, actor="w2.e2", reason="flat 30-minute threshold")
    path = str(tmp_path / "audit.duckdb")
    audit.sync(lg._store, path)
    rows = audit.report(path, "orphaned_while_live").records()
    assert [(r["run"], r["owner_epoch"], r["marked_by"]) for r in rows] == [("healthy-nightly", "w1.e1", "w2.e2")]


def test_O2_O5_A1_a_real_sweep_shows_in_recoveries_and_keeps_the_invariant(ledger: Ledger, tmp_path: Path) -> None:
    """Real data through the real sweep (ledger.startup): the healthy run under the live
    worker-2 is never touched, the orphan of the superseded worker-1 epoch is recovered
    at boot, and the invariant report proves it on both backends."""
    ledger.boot("worker-1", epoch="w1.e1")
    ledger.boot("worker-2", epoch="w2.e1")
    for run, epoch, process in [("orphan", "w1.e1", "worker-1"), ("healthy-nightly", "w2.e1", "worker-2")]:
        ledger.queue(run, workflow="nightly")
        ledger.start(run, epoch=epoch, process=process, actor=epoch)
    ledger.clock.advance(88 * 60)  # type: ignore[attr-defined]
    ledger.clock.restart()  # type: ignore[attr-defined]
    ledger.startup("worker-1", epoch="w1.e2")
    path = str(tmp_path / "audit.duckdb")
    audit.sync(ledger._store, path)
    rows = audit.query(path, "SELECT run, recovered_by, rule, owner_epoch FROM recoveries").rows
    assert rows == [("orphan", "w1.e2", "O2-superseded", "w1.e1")]
    assert audit.report(path, "orphaned_while_live").rows == []
    assert audit.query(path, "SELECT run, status FROM runs ORDER BY run").rows == [
        ("healthy-nightly", "running"),
        ("orphan", "failed_resumable"),
    ]


def _insert(path: str, rows: list[dict]) -> None:
    """Rows for event tags other issues are adding (run.recovered, run.dead_lettered,
    run.corrected, ...), written straight into the events table as sync would, with
    what sync derives from them (duck._derive, the rows after the first one's position)."""
    con = duckdb.connect(path)
    try:
        con.execute("BEGIN")
        before = min(r["position"] for r in rows) - 1
        for r in rows:
            payload = json.dumps(r)
            con.execute(
                "INSERT INTO events VALUES (?, ?, ?, ?, ?::TIMESTAMPTZ, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    r.pop("position"),
                    r.pop("stream"),
                    r.pop("version"),
                    r["type"],
                    r["at"],
                    r.get("run"),
                    r.get("process"),
                    r.get("epoch"),
                    r.get("status"),
                    r.get("code", ""),
                    r.get("actor"),
                    r.get("reason"),
                    payload,
                ],
            )
        duck._derive(con, before)
        con.execute("COMMIT")
    finally:
        con.close()


def test_O5_A1_recoveries_per_epoch_lists_each_sweep_with_its_evidence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The golden history's sweep (w1.e2 recovers k from the superseded w1.e1), plus a
    recovery that breaks O2, written straight into the file: w1.e2 "recovers" y, a run
    it owns itself while it is live. The invariant report lists exactly that one."""
    _, path = _golden_file(tmp_path, capsys)
    _insert(
        path,
        [
            {
                "position": 101,
                "stream": "run:y",
                "version": 3,
                "type": "run.recovered",
                "at": "2026-09-10T12:31:00Z",
                "run": "y",
                "status": "failed_resumable",
                "code": "PROCESS_ORPHANED",
                "actor": "w1.e2",
                "swept_by": "w1.e2",
                "swept_by_process": "worker-1",
                "owner_process": "worker-1",
                "owner_epoch": "w1.e2",
                "rule": "O3-fallback",
                "cutoff": "2026-09-09T09:59:57Z",
                "margin": 1.0,
            },
        ],
    )
    rows = audit.report(path, "recoveries_per_epoch", as_of=AS_OF).records()
    assert [(r["epoch"], r["process"], r["recovered"], r["runs"], r["owner_epochs"]) for r in rows] == [
        ("w1.e2", "worker-1", 2, ["k", "y"], ["w1.e1", "w1.e2"])
    ]
    evidence = json.loads(rows[0]["evidence"])
    assert [e["evidence"]["rule"] for e in evidence] == ["O2-superseded", "O3-fallback"]
    assert evidence[0]["evidence"]["superseded_by"] == "w1.e2"
    live = audit.report(path, "orphaned_while_live", as_of=AS_OF).records()
    assert [(r["run"], r["type"], r["owner_epoch"]) for r in live] == [("y", "run.recovered", "w1.e2")]


def test_T2_A1_dead_letters_report_the_streak_and_the_bound(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, path = _golden_file(tmp_path, capsys)
    rows = audit.report(path, "dead_letters", as_of=AS_OF).records()
    assert [(r["run"], r["code"], r["step"], r["failures"], r["failing_since"], r["deadline_s"]) for r in rows] == [
        ("i", "TICK_DEADLINE_EXCEEDED", "advance", 3, "2026-09-10T11:03:00Z", 300.0)
    ]
    assert audit.query(path, "SELECT status FROM runs WHERE run = 'i'").rows == [("failed",)]
    assert audit.report(path, "dead_letters", as_of=datetime(2026, 9, 10, 11, 8, tzinfo=UTC)).rows == []


def test_A1_corrections_report_who_moved_a_final_run_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, path = _golden_file(tmp_path, capsys)
    rows = audit.report(path, "corrections", as_of=AS_OF).records()
    assert [(r["run"], r["from_status"], r["to_status"], r["actor"], r["reason"]) for r in rows] == [
        ("c", "failed", "failed_resumable", "alice", "quota raised; INC-42")
    ]
    assert audit.report(path, "corrections", as_of=datetime(2026, 9, 10, 12, tzinfo=UTC)).rows == []


# ------------------------------------------------------- read-only query
WRITES = [
    "INSERT INTO events SELECT * FROM events",
    "UPDATE events SET code = 'X'",
    "DELETE FROM events",
    "DROP VIEW runs",
    "CREATE TABLE t AS SELECT 1",
    "CREATE OR REPLACE VIEW runs AS SELECT 1",
    "ALTER TABLE events ADD COLUMN x INT",
    "COPY events TO '{tmp}/leak.csv'",
    "COPY (SELECT * FROM events) TO '{tmp}/leak.parquet' (FORMAT parquet)",
    "EXPORT DATABASE '{tmp}/dump'",
    "ATTACH '{tmp}/other.duckdb' AS other",
    "ATTACH '{store}' AS ledger (TYPE sqlite)",
    "INSTALL sqlite",
    "LOAD '{tmp}/evil.duckdb_extension'",
    "SET enable_external_access = true",
    "PRAGMA enable_profiling",
    "CHECKPOINT",
    "SELECT 1; DELETE FROM events",
    "CALL pragma_version()",
    "EXPLAIN ANALYZE DELETE FROM events",
    "SELECT * FROM read_csv('{store}')",
    "WITH d AS (DELETE FROM events RETURNING *) SELECT * FROM d",
]


@pytest.mark.parametrize("statement", WRITES)
def test_A1_a_write_through_audit_query_is_refused_and_changes_nothing(
    statement: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, path = _golden_file(tmp_path, capsys)
    before = (file_digest(path), file_digest(store), sorted(os.listdir(tmp_path)))
    sql = statement.format(tmp=tmp_path, store=store)
    assert main(["--store", store, "audit", "query", sql]) == 3
    assert "QueryRefused" in capsys.readouterr().err
    assert (file_digest(path), file_digest(store), sorted(os.listdir(tmp_path))) == before


@pytest.mark.parametrize(
    "statement", [w for w in WRITES if not w.startswith(("SELECT 1;", "CALL", "PRAGMA", "CHECKPOINT"))]
)
def test_A1_the_read_only_connection_refuses_writes_on_its_own(
    statement: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The second lock, without the statement check: the connection itself refuses.
    Mutation caught: opening without read_only / enable_external_access=false."""
    store, path = _golden_file(tmp_path, capsys)
    before = (file_digest(path), file_digest(store), sorted(os.listdir(tmp_path)))
    con = duck._connect_ro(path)
    try:
        with pytest.raises(duckdb.Error):
            con.execute(statement.format(tmp=tmp_path, store=store))
    finally:
        con.close()
    assert (file_digest(path), file_digest(store), sorted(os.listdir(tmp_path))) == before


def test_A1_the_statement_check_refuses_writes_on_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first lock, with a writable connection: still refused before running.
    Mutation caught: dropping the statement-type check."""
    _, path = _golden_file(tmp_path, capsys)
    monkeypatch.setattr(duck, "_connect_ro", lambda p, **kw: duckdb.connect(p))
    for sql in ["DELETE FROM events", "CREATE TABLE t AS SELECT 1", "SELECT 1; DELETE FROM events"]:
        with pytest.raises(QueryRefused) as refused:
            audit.query(path, sql)
        assert refused.value.sql == sql and refused.value.reason, refused.value
    assert audit.query(path, "SELECT count(*) FROM events").rows == [(51,)]


def test_A1_audit_query_answers_in_table_csv_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store, _ = _golden_file(tmp_path, capsys)
    sql = "SELECT workflow, count(*) AS runs FROM runs GROUP BY ALL ORDER BY workflow"
    assert main(["--store", store, "audit", "query", sql, "--format", "csv"]) == 0
    assert capsys.readouterr().out == "workflow,runs\nhourly,6\nnightly,4\n"
    assert main(["--store", store, "audit", "query", sql, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"workflow": "hourly", "runs": 6},
        {"workflow": "nightly", "runs": 4},
    ]
    assert main(["--store", store, "audit", "query", sql]) == 0
    assert capsys.readouterr().out.splitlines() == ["workflow  runs", "hourly    6", "nightly   4"]
    assert main(["--store", store, "audit", "query", "SELECT nope FROM runs"]) == 3
    assert "nope" in capsys.readouterr().err


def test_A1_audit_commands_never_create_a_ledger(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "typo.db")
    assert main(["--store", missing, "audit", "sync"]) == 3
    assert main(["--store", missing, "audit", "query", "SELECT 1"]) == 3
    assert os.listdir(tmp_path) == []
    assert "audit sync" in capsys.readouterr().err


def test_A1_audit_sync_writes_nothing_to_a_file_that_is_not_a_ledger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Mutation caught (applied, seen failing): opening the store with create=True
    (the library creates its table, and switches the file to WAL)."""
    other = tmp_path / "inventory.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE parts (id INTEGER)")
    conn.close()
    before = file_digest(str(other))
    assert main(["--store", str(other), "audit", "sync"]) == 3
    assert "not an epochledger store" in capsys.readouterr().err
    assert file_digest(str(other)) == before
    assert sorted(os.listdir(tmp_path)) == ["inventory.db"]


def test_A1_a_duckdb_path_naming_the_ledger_itself_is_refused_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, _ = _golden_file(tmp_path, capsys)
    before = file_digest(store)
    for argv in (["audit", "sync"], ["audit", "query", "SELECT 1"], ["audit", "report", "corrections"]):
        assert main(["--store", store, *argv, "--duckdb", store]) == 3
        assert "not a DuckDB audit file" in capsys.readouterr().err
    assert file_digest(store) == before


def test_A1_audit_sync_creates_no_postgresql_schema(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg

    from tests.conftest import PG_BASE

    schema = pg_url.rsplit("schema=", 1)[1]
    assert main(["--store", pg_url, "audit", "sync", "--duckdb", str(tmp_path / "a.duckdb")]) == 3
    assert "no epochledger store" in capsys.readouterr().err
    with psycopg.connect(PG_BASE) as conn:
        assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() == (0,)


# ---------------------------------------------------------------- parquet
def test_A1_parquet_export_is_partitioned_by_date_and_reads_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, path = _golden_file(tmp_path, capsys)
    out = tmp_path / "parquet"
    assert main(["--store", store, "audit", "export-parquet", str(out)]) == 0
    assert sorted(p.name for p in (out / "events").iterdir()) == ["event_date=2026-09-09", "event_date=2026-09-10"]
    con = duckdb.connect()
    got = con.execute(
        f"SELECT count(*), count(DISTINCT position), sum(CASE WHEN payload->>'code' = 'DISK_QUOTA_EXCEEDED' "
        f"THEN 1 ELSE 0 END) FROM read_parquet('{out}/events/**/*.parquet', hive_partitioning = true)"
    ).fetchall()
    assert got == [(51, 51, 2)]
    derived = con.execute(f"SELECT * FROM read_parquet('{out}/transitions.parquet') ORDER BY position")
    cells = [tuple(map(cell, row)) for row in derived.fetchall()]  # the audit's values (docs/audit.md, "Values")
    assert cells == audit.query(path, "SELECT * FROM transitions ORDER BY position").rows  # views.sql reads it
    queued = con.execute(f"SELECT * FROM read_parquet('{out}/run_queued.parquet') ORDER BY run")
    assert [tuple(map(cell, row)) for row in queued.fetchall()] == audit.query(
        path, "SELECT * FROM run_queued ORDER BY run"
    ).rows  # and this one, for the runs view
    assert main(["--store", store, "audit", "export-parquet", str(out)]) == 3  # not empty: refused


def test_A1_epochs_view_supersede_and_stop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, path = _golden_file(tmp_path, capsys)
    rows = audit.query(
        path, "SELECT epoch, superseded_by, stopped_at IS NOT NULL, live FROM epochs ORDER BY epoch"
    ).rows
    assert rows == [("api.e1", None, True, False), ("w1.e1", "w1.e2", False, False), ("w1.e2", None, False, True)]


def test_A1_transitions_carry_from_and_to_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, path = _golden_file(tmp_path, capsys)
    rows = audit.query(
        path,
        "SELECT type, from_status, to_status, failure_code, actor FROM transitions WHERE run = 'b' ORDER BY version",
    ).rows
    assert rows == [
        ("run.queued", None, "queued", "", "api-1"),
        ("run.started", "queued", "running", "", "w1.e1"),
        ("run.failed", "running", "failed_resumable", "TIMEOUT", "w1.e1"),
        ("run.resumed", "failed_resumable", "queued", "", "alice"),
        ("run.started", "queued", "running", "", "w1.e1"),
        ("run.finished", "running", "finished", "", "w1.e1"),
    ]


def test_A1_every_sql_example_in_docs_audit_runs(tmp_path: Path) -> None:
    """docs/audit.md is part of the feature: each of its SQL examples runs through
    `audit query` on the demo's audit file (the Parquet ones on an export of it)."""
    from epochledger.demo import DAY, record_day
    from epochledger.ledger.clock import ManualClock

    store = str(tmp_path / "demo.db")
    with open_ledger(store, clock=ManualClock(DAY, uptime=12.0)) as lg:
        record_day(lg, lg.clock)  # type: ignore[arg-type]
        path = str(tmp_path / "demo.duckdb")
        audit.sync(lg._store, path)
    doc = (Path(__file__).resolve().parents[2] / "docs" / "audit.md").read_text()
    blocks = re.findall(r"```sql\n(.*?)```", doc, re.S)
    statements = [s.strip() for b in blocks for s in re.sub(r"--[^\n]*", "", b).split(";") if s.strip()]
    assert len(statements) >= 10
    parquet = tmp_path / "audit-parquet"
    audit.export_parquet(path, str(parquet))
    for sql in statements:
        if "read_parquet" in sql:
            con = duckdb.connect()
            assert con.execute(sql.replace("audit-parquet/", f"{parquet}/")).fetchall()
        else:
            audit.query(path, sql)
    for sql in re.findall(r'audit query "((?:SELECT|DESCRIBE|SHOW) [^"]+)"', doc):
        audit.query(path, sql)


_OPS = [
    "queue",
    "start",
    "checkpoint",
    "pause",
    "resume",
    "fail",
    "cancel",
    "finish",
    "rewind",
    "delete",
    "correct",
    "sync",
    "reboot",
]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=st.lists(st.tuples(st.sampled_from(_OPS), st.integers(0, 3), st.integers(-120, 600)), min_size=1, max_size=40)
)
def test_A1_R3_syncing_in_parts_equals_the_log_and_runs_equal_the_fold(
    steps: list[tuple[str, int, int]], tmp_path_factory
) -> None:
    """Law: whatever the history and wherever the syncs fall (clock steps back
    included), the events table is the log, position for position, and the runs view
    is Ledger.runs()."""
    from epochledger.ledger import lifecycle
    from epochledger.ledger.clock import ManualClock
    from epochledger.ledger.errors import IllegalTransition

    tmp = tmp_path_factory.mktemp("law")
    clock = ManualClock(datetime(2026, 9, 9, tzinfo=UTC), uptime=5.0)
    path = str(tmp / "audit.duckdb")
    with open_ledger(str(tmp / "ledger.db"), clock=clock) as lg:
        epoch = lg.boot("worker-1", epoch="e0").epoch
        for n, (op, i, dt) in enumerate(steps):
            clock.step_wall(dt)
            run = f"r{i}"
            try:
                match op:
                    case "sync":
                        audit.sync(lg._store, path, chunk=3)
                    case "reboot":
                        clock.restart()
                        epoch = lg.boot("worker-1", epoch=f"e{n + 1}").epoch
                    case "queue":
                        lg.queue(run, workflow=f"wf{i % 2}", process="worker-1")
                    case "start":
                        lg.start(run, epoch=epoch, process="worker-1", actor=epoch)
                    case "checkpoint":
                        lg.checkpoint(run, "node", f"ref{n}")
                    case "pause":
                        lg.pause(run, "operator", actor="op")
                    case "resume":
                        lg.resume(run, "operator", actor="op", reason=f"step {n}")
                    case "fail":
                        lg.fail(run, ["TIMEOUT", "", "NEW_CODE_X"][n % 3], resumable=bool(n % 2))
                    case "cancel":
                        lg.cancel(run, actor="bob")
                    case "finish":
                        lg.finish(run)
                    case "rewind":
                        lg.rewind(run, to_ref=None if n % 2 else f"ref{n}")
                    case "delete":
                        lg.delete(run)
                    case "correct":
                        to = [Status.FAILED_RESUMABLE, Status.FINISHED, Status.FAILED][n % 3]
                        lg.correct(run, to, actor="alice", reason=f"step {n}", code="LATE_CODE" if n % 3 == 0 else "")
            except (IllegalTransition, RunNotFound) as e:  # a refusal of this very run, never of another
                assert e.run == run, (op, run, e)
        audit.sync(lg._store, path, chunk=3)
        assert positions(path) == [r.position for r in lg.events()]
        fields = [
            "status",
            "code",
            "workflow",
            "process",
            "epoch",
            "queued_at",
            "started_at",
            "updated_at",
            "actor",
            "reason",
            "version",
        ]
        got = {r["run"]: r for r in audit.query(path, "SELECT * FROM runs WHERE NOT deleted").records()}
        want = {s.run: s for s in lg.runs()}
        assert sorted(got) == sorted(want)
        for run, s in want.items():
            assert {f: got[run][f] for f in fields} == {f: cell(getattr(s, f)) for f in fields}, run
            assert {p: got[run][p] for p in lifecycle.PREDICATES} == lifecycle.predicates(s.status, s.code)


# ------------------------------------------- issue 10 item 16: a killed sync
KILLED_SYNC = """
import os, sys, time
from epochledger.projections import audit
from epochledger.projections.audit import duck
from epochledger.ledger.store import open_store
real, calls = duck._load, []
def load(con, file, rows, before):
    calls.append(before)
    if len(calls) == 2:  # the first chunk is committed, the next chunk files are written
        open(sys.argv[3], "w").close()
        time.sleep(600)
    return real(con, file, rows, before)
duck._load = load
audit.sync(open_store(sys.argv[1], create=False), sys.argv[2], chunk=int(sys.argv[4]))
"""


def _kill_a_sync(store: str, path: str, marker: Path, chunk: int) -> None:
    child = subprocess.Popen([sys.executable, "-c", KILLED_SYNC, store, path, str(marker), str(chunk)])
    try:
        for _ in range(600):
            if marker.exists() or child.poll() is not None:
                break
            time.sleep(0.1)
        assert marker.exists(), "the child never reached its second chunk"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    marker.unlink()


def test_A1_R3_killed_syncs_leave_nothing_that_accumulates(tmp_path: Path) -> None:
    """Repro (before the fix): every SIGKILLed sync left its own
    epochledger-audit-XXXX directory (two chunk files, up to 34 MB) beside the audit
    file, and no later sync removed them. Now one scratch directory per audit file,
    emptied by the next sync under DuckDB's write lock, and removed at its end."""
    from bench.common import make_history
    from epochledger.ledger.store import open_store

    db = tmp_path / "runs.db"
    store = open_store(str(db))
    total = make_history(store, runs=400, per_run=5, window=200)
    store.close()
    path = str(tmp_path / "runs.duckdb")
    beside = set(os.listdir(tmp_path))
    for _ in range(2):  # two kills in a row: still one scratch directory, not two
        _kill_a_sync(str(db), path, tmp_path / "marker", chunk=300)
        left = (
            {f for f in os.listdir(tmp_path) if not f.startswith("runs.db")}
            - beside
            - {"runs.duckdb", "runs.duckdb.wal"}
        )
        assert left == {"runs.duckdb.sync-tmp"}, left
        assert os.listdir(tmp_path / "runs.duckdb.sync-tmp")  # what a kill leaves: the chunk being loaded
    with open_ledger(str(db)) as lg:
        result = audit.sync(lg._store, path)
        assert result.events == total and positions(path) == [r.position for r in lg.events()]
    assert {f for f in os.listdir(tmp_path) if not f.startswith("runs.db")} - beside == {"runs.duckdb"}


def test_A1_an_empty_audit_file_is_an_absent_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Repro (before the fix): a 0-byte audit file made every sync fail, exit 7 "exists,
    but it is not a valid DuckDB database file!", until someone deleted it by hand. Reads
    of it say there is no audit file yet (exit 3), and leave it; a sync makes it."""
    store, synced = _golden_file(tmp_path, capsys)
    for made in Path(synced).parent.glob("golden.duckdb*"):
        made.unlink()
    empty = Path(synced)
    empty.touch()
    assert main(["--store", store, "audit", "status"]) == 3
    assert "run `epochledger audit sync` first" in capsys.readouterr().err and empty.stat().st_size == 0
    assert main(["--store", store, "audit", "sync"]) == 0
    assert "appended 51 events" in capsys.readouterr().out


def test_A1_a_first_sync_that_fills_the_disk_leaves_no_file_that_blocks_the_next(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Repro (before the fix): a first sync onto a full disk failed (StoreError, exit 7,
    right) and left a 0-byte audit file; every later sync, with space freed, failed on
    it. Now the failed sync removes it, and the next sync after space is freed works."""
    from tests.conftest import fill_disk, small_disk

    store, _ = _golden_file(tmp_path, capsys)
    with small_disk(tmp_path / "full") as disk:
        path = disk / "audit.duckdb"
        filler = fill_disk(disk)
        assert main(["--store", store, "audit", "sync", "--duckdb", str(path)]) == 7
        assert "No space left on device" in capsys.readouterr().err
        assert sorted(p.name for p in disk.iterdir()) == ["filler"]
        filler.unlink()
        assert main(["--store", store, "audit", "sync", "--duckdb", str(path)]) == 0
        assert "appended 51 events" in capsys.readouterr().out


# ------------------------------- issue 10 item 16: foreign DuckDB files, bounds, waits
def test_A1_a_duckdb_database_that_is_not_an_audit_file_is_refused_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Repro (before the fix): `audit sync --duckdb warehouse.duckdb` wrote the audit
    tables (events, audit_sync, views) into someone else's DuckDB database."""
    store, _ = _golden_file(tmp_path, capsys)
    other = tmp_path / "warehouse.duckdb"
    con = duckdb.connect(str(other))
    con.execute("CREATE TABLE inventory AS SELECT range AS id FROM range(10)")
    con.close()

    def listing() -> list[str]:
        return sorted(f for f in os.listdir(tmp_path) if not f.startswith("golden.db"))

    before = (file_digest(str(other)), listing())
    for argv in (
        ["audit", "sync"],
        ["audit", "status"],
        ["audit", "query", "SELECT 1"],
        ["audit", "report", "corrections"],
    ):
        assert main(["--store", store, *argv, "--duckdb", str(other)]) == 3
        assert "not an epochledger audit file" in capsys.readouterr().err
    assert main(["--store", store, "audit", "export-parquet", str(tmp_path / "pq"), "--duckdb", str(other)]) == 3
    assert (file_digest(str(other)), listing()) == before
    empty = tmp_path / "empty.duckdb"
    duckdb.connect(str(empty)).close()  # a DuckDB file with nothing in it becomes the audit file
    assert main(["--store", store, "audit", "sync", "--duckdb", str(empty)]) == 0
    assert "appended 51 events" in capsys.readouterr().out


def test_A1_a_query_is_interrupted_at_its_timeout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Repro (before the fix): a query had no time bound (and held the file, so no sync
    could run, for as long as it ran)."""
    from epochledger.ledger.errors import QueryInterrupted

    store, path = _golden_file(tmp_path, capsys)
    endless = "SELECT count(*) FROM range(1000000000000) a, range(1000) b"
    with pytest.raises(QueryInterrupted, match=r"ran longer than 0.5 s \(its timeout\)") as e:
        audit.query(path, endless, timeout=0.5)
    assert e.value.limit == "timeout"
    assert main(["--store", store, "audit", "query", endless, "--timeout", "0.5"]) == 3
    assert "QueryInterrupted" in capsys.readouterr().err
    assert audit.query(path, "SELECT count(*) FROM events").rows == [(51,)]  # the file is fine


def test_A1_a_query_is_stopped_at_its_memory_limit_and_writes_nothing_to_disk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Repro (before the fix): no memory bound, and DuckDB spilled a large sort into
    FILE.tmp beside the audit file (a directory left behind)."""
    from epochledger.ledger.errors import QueryInterrupted

    store, path = _golden_file(tmp_path, capsys)
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(QueryInterrupted, match=r"needs more memory than 64MB \(its memory limit\)") as e:
        audit.query(path, "SELECT * FROM range(40000000) ORDER BY random()", memory_limit="64MB")
    assert e.value.limit == "memory"
    assert sorted(os.listdir(tmp_path)) == before
    assert main(["--store", store, "audit", "report", "corrections", "--memory-limit", "64MB", "--timeout", "30"]) == 0


@pytest.mark.parametrize(
    ("argv", "where"),
    [
        (["audit", "query", "SELECT 1", "--timeout", "0"], "--timeout"),
        (["audit", "query", "SELECT 1", "--timeout", "nan"], "--timeout"),
        (["audit", "query", "SELECT 1", "--memory-limit", "lots"], "--memory-limit"),
        (["audit", "report", "corrections", "--memory-limit=-1GB"], "--memory-limit"),
        (["audit", "query", "SELECT 1", "--memory-limit", "1b"], "--memory-limit"),
        (["audit", "query", "SELECT 1", "--memory-limit", "99999999TB"], "--memory-limit"),
        (["audit", "sync", "--wait=-1"], "--wait"),
        (["audit", "sync", "--wait", "inf"], "--wait"),
    ],
)
def test_A1_bad_bounds_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], where: str
) -> None:
    store, _ = _golden_file(tmp_path, capsys)
    assert main(["--store", store, *argv]) == 3
    assert where in capsys.readouterr().err


HOLD = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == "ro")
print("holding", flush=True)
time.sleep(float(sys.argv[3]))
con.close()
"""


def _holder(path: str, mode: str, seconds: float) -> subprocess.Popen[str]:
    child = subprocess.Popen([sys.executable, "-c", HOLD, path, mode, str(seconds)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "holding\n"
    return child


def test_A1_sync_waits_a_bounded_time_for_a_reader_then_fails_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Repro (before the fix): a sync met by a reader failed at once with DuckDB's lock
    error, and a reader without bounds could hold the file for ever. Now sync waits
    (--wait) and, past the bound, fails naming the holder's PID."""
    store, path = _golden_file(tmp_path, capsys)
    with open_ledger(store) as lg:
        lg.queue("late", at=datetime(2026, 9, 11, tzinfo=UTC))
        reader = _holder(path, "ro", 2)  # a reader that finishes within the wait
        try:
            assert audit.sync(lg._store, path, wait=60).appended == 1
        finally:
            reader.wait(timeout=60)
        lg.queue("later", at=datetime(2026, 9, 12, tzinfo=UTC))
        reader = _holder(path, "ro", 600)  # one that does not
        try:
            with pytest.raises(StoreError, match=rf"PID {reader.pid} holds it open .*waited 1 s \(the sync's wait\)"):
                audit.sync(lg._store, path, wait=1)
        finally:
            reader.kill()
            reader.wait(timeout=60)
        assert audit.sync(lg._store, path, wait=0).appended == 1


def test_A1_a_query_during_a_sync_fails_at_once_saying_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, path = _golden_file(tmp_path, capsys)
    writer = _holder(path, "rw", 600)
    try:
        with pytest.raises(StoreError, match=rf"PID {writer.pid} is writing it \(a sync\); try again"):
            audit.query(path, "SELECT 1")
    finally:
        writer.kill()
        writer.wait(timeout=60)


def test_A1_the_documented_bounds_are_the_code_s() -> None:
    """docs/audit.md and each command's --help state the defaults projections/audit/ uses."""
    from epochledger.cli import build_parser

    doc = (Path(__file__).resolve().parents[2] / "docs" / "audit.md").read_text()
    assert f"| {audit.QUERY_TIMEOUT_S:g} s | `--timeout SECONDS`" in doc
    assert f"| {audit.QUERY_MEMORY_LIMIT} | `--memory-limit SIZE`" in doc
    assert f"| {audit.SYNC_WAIT_S:g} s | `--wait SECONDS`" in doc
    sub = {a.dest: a for a in build_parser()._actions if getattr(a, "choices", None)}["command"].choices["audit"]
    actions = {a.dest: a for a in sub._actions if getattr(a, "choices", None)}["audit_command"].choices

    def help_of(name: str) -> str:
        return " ".join(actions[name].format_help().split())

    for name in ("query", "report"):
        assert f"default {audit.QUERY_TIMEOUT_S:g};" in help_of(name)
        assert f"default {audit.QUERY_MEMORY_LIMIT};" in help_of(name)
    assert f"default {audit.SYNC_WAIT_S:g}," in help_of("sync")


# ------------------------------------- issue 12: the store's lines built in SQL
_TAGS = sorted(TAGS)
_value = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
    | st.sampled_from(
        [
            "2026-09-09T14:00:00Z",
            "2026-09-09T14:00:00+02:00",
            "yesterday",
            "",
            "queued",
            "failed_resumable",
            "TIMEOUT",
            "w1.e1",
            "a\tb",
            "line\nbreak",
        ]
    )
    | st.lists(st.integers(), max_size=2)
)
_field = st.sampled_from(["at", "run", "process", "epoch", "status", "code", "actor", "reason", "workflow", "zzz"])


@st.composite
def _stored(draw: st.DrawFn) -> bytes:
    """A payload as a store could hold it: an event of any tag with any of the audit's
    fields (any JSON value), spelled compactly or over several lines; or no JSON at all."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=30) | st.sampled_from([b"", b"\x00", b'{"type":"run.queued"', b"\xff\xfe"]))
    event = {"type": draw(st.sampled_from(_TAGS) | _value), **draw(st.dictionaries(_field, _value, max_size=6))}
    return json.dumps(event, indent=draw(st.sampled_from([None, None, 1]))).encode()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    seed=st.integers(0, 10**6),
    stored=st.lists(st.tuples(st.sampled_from(["run:x", "process:w1", "run:a\tb"]), _stored()), max_size=12),
    chunk=st.integers(1, 9),
    cut=st.integers(0, 400),
)
def test_A1_R3_sqlite_built_lines_give_the_audit_rows_the_python_lines_give(
    tmp_path_factory, monkeypatch: pytest.MonkeyPatch, seed: int, stored: list[tuple[str, bytes]], chunk: int, cut: int
) -> None:
    """Law (issue 12): the audit file synced from SQLite's own lines (Store.read_lines)
    holds exactly the rows and types of the one synced from lines_of(read_raw's rows),
    the feed before: for random histories of every event type (the ledger's own, then
    stored payloads of any tag with any field values, multi-line JSON and bytes that are
    not JSON), any chunk size, synced in two parts (the second resuming from the file's
    position) or at once."""
    from epochledger.app import open_ledger as open_
    from epochledger.ledger.clock import ManualClock
    from epochledger.ledger.store.base import Store
    from epochledger.ledger.store.sqlite import SQLiteStore
    from tests.helpers.engine_helpers import random_history

    tmp = tmp_path_factory.mktemp("lines")
    db = tmp / "ledger.db"
    with open_(str(db), clock=ManualClock(datetime(2026, 9, 9, tzinfo=UTC), uptime=5.0)) as lg:
        random_history(lg, seed, runs=5, ops=40)
        with sqlite3.connect(db) as conn:
            for n, (stream, state) in enumerate(stored):
                conn.execute(
                    "INSERT INTO epochledger_events (originator_id, originator_version, topic, state) VALUES (?,?,?,?)",
                    (stream, 1000 + n, "t", state),
                )
        conn.close()
        top = lg._store.max_position()
        split = min(cut, top)

        def synced(path: str) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
            class Upto:  # the store seen up to `split`, then whole: a second sync resumes
                url = lg._store.url

                def read_raw(self, after: int = 0, upto: int | None = None, batch: int = 10_000):
                    return lg._store.read_raw(after, split if upto is None else min(upto, split), batch)

                def read_lines(self, after: int = 0, upto: int | None = None, batch: int = 10_000):
                    return lg._store.read_lines(after, split if upto is None else min(upto, split), batch)

            audit.sync(Upto(), path, chunk=chunk)  # type: ignore[arg-type]
            audit.sync(lg._store, path, chunk=chunk)
            con = duckdb.connect(path, read_only=True)
            try:
                rows = con.execute("SELECT * FROM events ORDER BY position").fetchall()
                types = con.execute(
                    "SELECT column_name, data_type FROM information_schema.columns ORDER BY ALL"
                ).fetchall()
                predicates = con.execute("SELECT * FROM lifecycle_predicates ORDER BY ALL").fetchall()
                state = con.execute("SELECT * FROM audit_sync").fetchall()
            finally:
                con.close()
            return rows, [*types, *predicates, *state]

        new = synced(str(tmp / "new.duckdb"))
        with monkeypatch.context() as m:
            m.setattr(SQLiteStore, "_select_lines_after", Store._select_lines_after)  # the rows, formatted in Python
            old = synced(str(tmp / "old.duckdb"))
    assert new == old
    assert [r[0] for r in new[0]] == list(range(1, top + 1))  # every event, once


def test_A1_R3_a_chunk_read_again_for_the_checked_way_must_hold_the_same_events(
    sqlite_ledger: Ledger, tmp_path: Path
) -> None:
    """A chunk the fast feed cannot carry is read again as rows (the lines carry no
    rows): if those positions then hold other events than the first read counted, the
    sync stops with StoreError and commits nothing of that chunk, never a row twice or
    a row lost. Mutation caught: the count check dropped (the chunk lands short)."""
    sqlite_ledger.queue("x")
    with sqlite3.connect(sqlite_ledger._store.path) as conn:  # type: ignore[attr-defined]
        conn.execute(
            "INSERT INTO epochledger_events (originator_id, originator_version, topic, state) VALUES (?,?,?,?)",
            ("run:x", 2, "run.started", b'{"type":"run.started",\n"run":"x"}'),
        )
    sqlite_ledger.queue("y")
    store = sqlite_ledger._store

    class Shrinking:  # the second read of a range loses its last row
        url = store.url

        def read_lines(self, after: int = 0, upto: int | None = None, batch: int = 10_000):  # type: ignore[no-untyped-def]
            return store.read_lines(after, upto, batch)

        def read_raw(self, after: int = 0, upto: int | None = None, batch: int = 10_000):  # type: ignore[no-untyped-def]
            return [rows[:-1] for rows in store.read_raw(after, upto, batch)]

    path = str(tmp_path / "audit.duckdb")
    with pytest.raises(StoreError, match=r"positions 1\.\.3 held 3 events, now 2"):
        audit.sync(Shrinking(), path)  # type: ignore[arg-type]
    assert audit.status(path).position == 0 and positions(path) == []
    assert audit.sync(store, path).appended == 3


# ------------------------------------------------ issue 23: the reports made fast
# The former SQL of what issue 23 rewrote, kept here alone, as the oracle: the
# transitions view (a window over every run event, now the table sync derives), the
# views whose joins read every run or event, the runs view as it read each run's
# workflow, labels and parent from its run.queued payloads (now the table run_queued),
# orphaned_while_live's own window, and time_in_status and failures_by_label as they
# joined the runs view (time_in_status with its window over the status changes, now
# the table stays).
FORMER_VIEWS = """
CREATE OR REPLACE VIEW runs AS
WITH latest AS (
    SELECT
        run,
        arg_max(status, position) AS status,
        arg_max(code, position) AS code,
        arg_max(payload->>'workflow', position) FILTER (WHERE type = 'run.queued') AS workflow,
        arg_max_null(payload->'labels', position) FILTER (WHERE type = 'run.queued') AS labels_json,
        arg_max_null(payload->>'parent', position) FILTER (WHERE type = 'run.queued') AS parent,
        arg_max(process, position) FILTER (WHERE process IS NOT NULL) AS process,
        arg_max_null(epoch, position) FILTER (WHERE type = 'run.started') AS epoch,
        min(occurred_at) FILTER (WHERE type = 'run.queued') AS queued_at,
        arg_max(occurred_at, position) FILTER (WHERE type = 'run.started') AS started_at,
        -- a fenced report changes nothing but the stream's version (rule F1): not who
        -- made the last transition, nor when, nor why (as ledger/run.py folds it)
        arg_max(occurred_at, position) FILTER (WHERE type <> 'run.fenced') AS updated_at,
        arg_max_null(actor, position) FILTER (WHERE type <> 'run.fenced') AS actor,
        arg_max_null(reason, position) FILTER (WHERE type <> 'run.fenced') AS reason,
        max(version) AS version,
        max(position) AS last_position,
        bool_or(type = 'run.deleted') AS deleted,
        max(position) FILTER (WHERE type = 'run.started') AS last_start_position,
        -- a fenced outcome report (run.fenced carrying `reported`) binds automation until
        -- the run's next start (rule F2)
        max(position) FILTER (WHERE type = 'run.fenced' AND payload->>'reported' IS NOT NULL) AS fenced_end_position,
        arg_max(epoch, position) FILTER (WHERE type = 'run.fenced' AND payload->>'reported' IS NOT NULL) AS fenced_end_epoch_any,
        count(*) FILTER (WHERE type = 'run.fenced') AS fenced,
        -- starts so far: each start after a resume or retry is the next attempt
        count(*) FILTER (WHERE type = 'run.started') AS attempt
    FROM events
    WHERE starts_with(stream, 'run:')
    GROUP BY run
), bound AS (
    SELECT * EXCLUDE (fenced_end_epoch_any, fenced_end_position, last_start_position, labels_json, attempt),
           CASE WHEN fenced_end_position > coalesce(last_start_position, 0) THEN fenced_end_epoch_any END
               AS fenced_end_epoch,
           coalesce(TRY_CAST(labels_json AS MAP(VARCHAR, VARCHAR)), MAP {}::MAP(VARCHAR, VARCHAR)) AS labels,
           attempt
    FROM latest
)
SELECT l.*, p.* EXCLUDE (status, code, fenced_end)
FROM bound l
LEFT JOIN lifecycle_predicates p
    ON p.status = l.status AND p.code = l.code AND p.fenced_end = (l.fenced_end_epoch IS NOT NULL);

CREATE OR REPLACE VIEW transitions AS
SELECT
    run,
    position,
    version,
    occurred_at,
    type,
    lag(status) OVER w AS from_status,
    status AS to_status,
    lag(code) OVER w AS from_code,
    code AS failure_code,
    actor,
    reason
FROM events
WHERE starts_with(stream, 'run:')
WINDOW w AS (PARTITION BY stream ORDER BY version);

CREATE OR REPLACE VIEW fenced_reports AS
SELECT
    e.run,
    e.position,
    e.occurred_at,
    e.epoch,
    e.payload->>'refused' AS refused,
    e.payload->>'reported' AS reported,
    e.payload->>'why' AS why,
    e.payload->>'superseded_by' AS superseded_by,
    e.status AS status_kept,
    e.payload->>'reported' IS NOT NULL AND e.position > coalesce(s.last_start, 0) AS binds_automation,
    e.payload->'report' AS report
FROM events e
LEFT JOIN (
    SELECT run, max(position) AS last_start FROM events WHERE type = 'run.started' GROUP BY run
) s ON s.run = e.run
WHERE e.type = 'run.fenced';

CREATE OR REPLACE VIEW epochs AS
WITH boots AS (
    SELECT
        process,
        epoch,
        (payload->>'booted_at')::TIMESTAMPTZ AS booted_at,
        occurred_at AS recorded_at,
        payload->>'host' AS host,
        TRY_CAST(payload->>'pid' AS BIGINT) AS pid,
        payload->>'host_boot' AS host_boot,
        TRY_CAST(payload->>'pid_start' AS BIGINT) AS pid_start,
        payload->>'machine' AS machine,
        actor,
        position AS boot_position,
        lead(epoch) OVER w AS superseded_by,
        lead(occurred_at) OVER w AS superseded_at,
        lead(position) OVER w AS superseded_position
    FROM events
    WHERE type = 'process.booted'
    WINDOW w AS (PARTITION BY process ORDER BY position)
), stops AS (
    SELECT
        process,
        epoch,
        min(occurred_at) FILTER (WHERE type = 'process.stopping') AS stopping_at,
        min(occurred_at) FILTER (WHERE type = 'process.stopped') AS stopped_at,
        min(position) FILTER (WHERE type = 'process.stopped') AS stopped_position,
        min(occurred_at) FILTER (WHERE type = 'process.exited') AS exited_at,
        min(position) FILTER (WHERE type = 'process.exited') AS exited_position,
        arg_min(payload->>'observed_by', position) FILTER (WHERE type = 'process.exited') AS exited_by
    FROM events
    WHERE type IN ('process.stopping', 'process.stopped', 'process.exited')
    GROUP BY process, epoch
), host_boots AS (
    SELECT machine, host_boot, min(boot_position) AS first_position
    FROM boots WHERE machine IS NOT NULL AND host_boot IS NOT NULL
    GROUP BY machine, host_boot
), host_ends AS (
    SELECT machine, host_boot,
        lead(host_boot) OVER h AS rebooted_to,
        lead(first_position) OVER h AS rebooted_position
    FROM host_boots
    WINDOW h AS (PARTITION BY machine ORDER BY first_position)
)
SELECT
    b.*,
    s.stopping_at,
    s.stopped_at,
    s.stopped_position,
    s.exited_at,
    s.exited_position,
    s.exited_by,
    h.rebooted_to,
    r.occurred_at AS rebooted_at,
    h.rebooted_position,
    (b.superseded_by IS NULL AND s.stopped_at IS NULL AND s.exited_at IS NULL AND h.rebooted_position IS NULL) AS live
FROM boots b
LEFT JOIN stops s ON s.process = b.process AND s.epoch = b.epoch
LEFT JOIN host_ends h ON h.machine = b.machine AND h.host_boot = b.host_boot
LEFT JOIN events r ON r.position = h.rebooted_position;

CREATE OR REPLACE VIEW recoveries AS
SELECT
    e.run,
    e.position,
    e.occurred_at,
    coalesce(e.payload->>'swept_by', e.actor) AS recovered_by,
    e.payload->>'swept_by_process' AS recovered_by_process,
    e.payload->>'rule' AS rule,
    coalesce(e.payload->>'owner_epoch', s.epoch) AS owner_epoch,
    coalesce(e.payload->>'owner_process', s.process) AS owner_process,
    e.status,
    e.code,
    e.reason,
    e.payload AS evidence
FROM events e
ASOF LEFT JOIN (
    SELECT run, position, epoch, process FROM events WHERE type = 'run.started'
) s ON s.run = e.run AND e.position > s.position
WHERE e.type = 'run.recovered';
"""
FORMER_REPORTS = {
    "time_in_status": """
WITH changes AS (
    SELECT
        t.run,
        CASE WHEN t.type = 'run.deleted' THEN NULL ELSE t.to_status END AS status,
        t.occurred_at AS entered_at,
        lead(t.occurred_at) OVER (PARTITION BY t.run ORDER BY t.position) AS left_at
    FROM transitions t
    WHERE (t.from_status IS DISTINCT FROM t.to_status OR t.type = 'run.deleted')
      AND t.occurred_at <= $as_of
)
SELECT
    coalesce(r.workflow, '(none)') AS workflow,
    c.status,
    count(c.left_at) AS stays,
    round(quantile_cont(epoch(c.left_at) - epoch(c.entered_at), 0.5), 3) AS p50_seconds,
    round(quantile_cont(epoch(c.left_at) - epoch(c.entered_at), 0.95), 3) AS p95_seconds,
    round(max(epoch(c.left_at) - epoch(c.entered_at)), 3) AS max_seconds,
    count(*) FILTER (WHERE c.left_at IS NULL) AS still_in
FROM changes c
JOIN runs r ON r.run = c.run
WHERE c.status IS NOT NULL
GROUP BY ALL
ORDER BY workflow, c.status
""",
    "failures_by_label": """
WITH failures AS (
    SELECT run, code
    FROM failure_entries
    WHERE occurred_at <= $as_of
), labelled AS (
    SELECT f.run, f.code, l.key AS label, l.value AS value
    FROM failures f
    JOIN runs r ON r.run = f.run, unnest(map_entries(r.labels)) AS e(l)
    WHERE $label::VARCHAR IS NULL OR l.key = $label::VARCHAR
    UNION ALL
    SELECT f.run, f.code, $label::VARCHAR, NULL
    FROM failures f
    JOIN runs r ON r.run = f.run
    WHERE $label::VARCHAR IS NOT NULL AND NOT map_contains(r.labels, $label::VARCHAR)
)
SELECT
    label,
    value,
    CASE WHEN code = '' THEN 'UNKNOWN' ELSE code END AS code,
    count(*) AS failures,
    count(DISTINCT run) AS runs
FROM labelled
GROUP BY label, value, code
ORDER BY label, failures DESC, value NULLS LAST, code
""",
    "orphaned_while_live": """
WITH marked AS (
    SELECT
        run, position, occurred_at, type, code, actor,
        payload->>'owner_epoch' AS recorded_owner,
        lag(code) OVER (PARTITION BY stream ORDER BY version) AS previous_code
    FROM events
    WHERE starts_with(stream, 'run:')
), marks AS (
    SELECT m.*, coalesce(m.recorded_owner, s.epoch) AS owner_epoch
    FROM marked m
    ASOF LEFT JOIN (
        SELECT run, position, epoch, process FROM events WHERE type = 'run.started'
    ) s ON s.run = m.run AND m.position > s.position
    WHERE (m.type = 'run.recovered'
           OR (m.code = 'PROCESS_ORPHANED' AND m.previous_code IS DISTINCT FROM 'PROCESS_ORPHANED'))
      AND m.occurred_at <= $as_of
)
SELECT
    m.position,
    m.occurred_at,
    m.run,
    m.type,
    m.actor AS marked_by,
    m.owner_epoch,
    ep.process AS owner_process,
    ep.recorded_at AS owner_booted_at,
    ep.superseded_at AS owner_superseded_at,
    ep.stopped_at AS owner_stopped_at,
    ep.exited_at AS owner_exited_at,
    ep.rebooted_at AS owner_host_rebooted_at
FROM marks m
JOIN epochs ep ON ep.epoch = m.owner_epoch
WHERE ep.recorded_at <= m.occurred_at
  AND (ep.superseded_at IS NULL OR ep.superseded_at > m.occurred_at)
  AND (ep.stopped_at IS NULL OR ep.stopped_at > m.occurred_at)
  AND (ep.exited_at IS NULL OR ep.exited_at > m.occurred_at)
  AND (ep.rebooted_at IS NULL OR ep.rebooted_at > m.occurred_at)
ORDER BY m.position
""",
}

_RAW_TAGS = ["run.recovered", "run.failed", "run.corrected", "run.fenced", "run.started", "run.deleted", "run.queued"]


@st.composite
def _raw_event(draw: st.DrawFn) -> tuple[str, int, bytes]:
    """An event written into the store past the ledger (as a tampered or foreign store
    could hold it): a run event of a tag the reports read, with a version anywhere in
    its stream (below its head too, so sync derives the stream again), or a boot of a
    slot on a host, at any instant of the history's two days."""
    at = f"2026-09-{draw(st.sampled_from(['09', '10']))}T{draw(st.integers(0, 23)):02d}:{draw(st.integers(0, 59)):02d}:00Z"
    if draw(st.integers(0, 4)) == 0:
        process = f"w{draw(st.integers(0, 2))}"
        event = {
            "type": "process.booted",
            "at": at,
            "process": process,
            "epoch": f"{process}.x{draw(st.integers(0, 3))}",
            "booted_at": at,
            "machine": draw(st.sampled_from(["m1", "m2"])),
            "host_boot": draw(st.sampled_from(["hb1", "hb2", "hb3"])),
        }
        return f"process:{process}", draw(st.integers(-3, 60)), json.dumps(event).encode()
    run = f"run-{draw(st.integers(0, 4)):03d}"
    event = {
        "type": draw(st.sampled_from(_RAW_TAGS)),
        "at": at,
        "run": run,
        "status": draw(st.sampled_from([s.value for s in Status])),
        "code": draw(st.sampled_from(["", "PROCESS_ORPHANED", "TIMEOUT"])),
        "epoch": f"w{draw(st.integers(0, 2))}.e{draw(st.integers(0, 3))}",
        "actor": "someone",
        "owner_epoch": draw(st.sampled_from(["e0", "e1", "w1.x1"])),
        "swept_by": "e1",
        "reported": draw(st.sampled_from(["finished", "failed"])),
    }
    return f"run:{run}", draw(st.integers(-3, 60)), json.dumps(event).encode()


def _report_rows(con: duckdb.DuckDBPyConnection, sql: str, as_of: datetime, period: str, label: str | None) -> list:
    values = {"as_of": as_of, "period": period, "label": label}
    return con.execute(sql, {k: values[k] for k in sorted(set(duck._PARAM.findall(sql)))}).fetchall()


def _every_report(path: str, sql: dict[str, str]) -> dict[tuple[str, str, str, str | None], list]:
    """Every report, by the given SQL, at instants across the history, by day and by
    hour, for every label and for one."""
    con = duckdb.connect(path, read_only=True)
    try:
        con.execute("SET TimeZone = 'UTC'")
        instants = [datetime(2026, 9, 9, 12, tzinfo=UTC), datetime(2026, 9, 10, 6, tzinfo=UTC), AS_OF]
        return {
            (name, str(at), period, label): _report_rows(con, sql[name], at, period, label)
            for name in audit.report_names()
            for at in instants
            for period in ("day", "hour")
            for label in ((None, "team") if "$label" in sql[name] else (None,))
        }
    finally:
        con.close()


def _former_copy(path: str, copy: str) -> str:
    """`copy`: a copy of the audit file at `path` whose derived tables are replaced by
    the former views (the oracle's file)."""
    import shutil

    shutil.copyfile(path, copy)
    con = duckdb.connect(copy)
    try:
        con.execute("DROP TABLE transitions; DROP TABLE run_stream_heads; DROP TABLE run_queued; DROP TABLE stays")
        con.execute(FORMER_VIEWS)
    finally:
        con.close()
    return copy


def _former_reports(path: str, copy: str) -> dict[tuple[str, str, str, str | None], list]:
    """The reports as the former SQL computes them, on a copy of the file whose
    derived tables are replaced by the former views."""
    _former_copy(path, copy)
    return _every_report(copy, {n: FORMER_REPORTS.get(n, duck._sql(f"report_{n}.sql")) for n in audit.report_names()})


def _derived(path: str) -> list:
    con = duckdb.connect(path, read_only=True)
    try:
        return [
            con.execute("SELECT * FROM transitions ORDER BY position").fetchall(),
            con.execute("SELECT * FROM run_stream_heads ORDER BY stream").fetchall(),
            con.execute("SELECT * FROM run_queued ORDER BY run").fetchall(),
            con.execute("SELECT * FROM stays ORDER BY position").fetchall(),
        ]
    finally:
        con.close()


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    seed=st.integers(0, 10**6),
    raw=st.lists(_raw_event(), max_size=12),
    chunk=st.integers(1, 40),
    cut=st.integers(0, 300),
)
def test_A1_R3_every_report_equals_its_former_sql_and_a_sync_in_parts_equals_one_sync(
    tmp_path_factory, seed: int, raw: list[tuple[str, int, bytes]], chunk: int, cut: int
) -> None:
    """Law (issue 23): on random histories (the ledger's own, then events written past
    it: marks, recoveries, corrections and fenced reports, versions below a stream's
    head, boots of slots on rebooted hosts), every report equals what its former SQL
    (FORMER_VIEWS, FORMER_REPORTS: the windows over every event) gives, at instants
    across the history, by day and by hour; and the file synced in two parts (sync,
    append, sync again; any chunk size) holds the same derived tables and gives the
    same reports as one sync of the whole history."""
    from epochledger.app import open_ledger as open_
    from epochledger.ledger.clock import ManualClock
    from tests.helpers.engine_helpers import random_history

    tmp = tmp_path_factory.mktemp("former")
    db = tmp / "ledger.db"
    with open_(str(db), clock=ManualClock(datetime(2026, 9, 9, tzinfo=UTC), uptime=5.0)) as lg:
        random_history(lg, seed, runs=5, ops=60)
        top = lg._store.max_position()
        split = min(cut, top)

        class Upto:  # the store seen up to `split`: the first of the two syncs
            url = lg._store.url

            def read_raw(self, after: int = 0, upto: int | None = None, batch: int = 10_000):  # type: ignore[no-untyped-def]
                return lg._store.read_raw(after, split if upto is None else min(upto, split), batch)

            def read_lines(self, after: int = 0, upto: int | None = None, batch: int = 10_000):  # type: ignore[no-untyped-def]
                return lg._store.read_lines(after, split if upto is None else min(upto, split), batch)

        parts = str(tmp / "parts.duckdb")
        audit.sync(Upto(), parts, chunk=chunk)  # type: ignore[arg-type]
        random_history(lg, seed + 1, runs=5, ops=20)  # appended after the first sync
        with sqlite3.connect(db) as conn:  # and, last, written past the ledger
            for stream, version, state in raw:
                conn.execute(
                    "INSERT OR IGNORE INTO epochledger_events (originator_id, originator_version, topic, state) "
                    "VALUES (?,?,?,?)",
                    (stream, version, "t", state),
                )
        conn.close()
        audit.sync(lg._store, parts, chunk=chunk)
        once = str(tmp / "once.duckdb")
        audit.sync(lg._store, once)
    new = {n: duck._sql(f"report_{n}.sql") for n in audit.report_names()}
    assert _derived(parts) == _derived(once)
    got = _every_report(parts, new)
    assert got == _every_report(once, new)
    assert got == _former_reports(parts, str(tmp / "former.duckdb"))


def test_A1_the_former_sql_oracle_can_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The oracle sees a wrong derivation: the golden file's transitions with one
    from_code lost no longer give the former SQL's reports."""
    _, path = _golden_file(tmp_path, capsys)
    new = {n: duck._sql(f"report_{n}.sql") for n in audit.report_names()}
    former = _former_reports(path, str(tmp_path / "former.duckdb"))
    assert _every_report(path, new) == former
    con = duckdb.connect(path)
    try:
        con.execute("UPDATE transitions SET from_code = NULL WHERE from_code = 'PROCESS_ORPHANED'")
    finally:
        con.close()
    assert _every_report(path, new) != former


_WORKFLOWS = [None, "nightly", "backfill"]
_LABELS = [None, {}, {"team": "data"}, {"team": "ops", "env": "prod"}, {"env": "dev"}]


def _stay_history(lg: Ledger, rnd: random.Random, ops: int) -> None:
    """A ledger history for the two reports issue 23 made read derived tables: six runs
    queued under several workflows and labels (or none), started, failed with a code or
    with none (UNKNOWN), resumed, corrected, finished, cancelled, deleted, queued again
    (the ledger appends nothing for the same fields and refuses others); the wall clock
    stepped back now and then, so the instants leave the log's order."""
    from epochledger.ledger.errors import LedgerError

    for _ in range(ops):
        run = f"s{rnd.randrange(6)}"
        op = rnd.choice(["queue", "start", "start", "fail", "fail", "resume", "correct", "finish", "cancel", "delete"])
        try:
            match op:
                case "queue":
                    lg.queue(run, workflow=rnd.choice(_WORKFLOWS), labels=rnd.choice(_LABELS))
                case "start":
                    lg.start(run, process="w1")
                case "fail":
                    lg.fail(run, rnd.choice(["", "TIMEOUT", "FAIL_NODE"]), resumable=rnd.random() < 0.5)
                case "resume":
                    lg.resume(run, "operator")
                case "correct":
                    lg.correct(run, rnd.choice(list(Status)), code=rnd.choice(["", "TIMEOUT"]), actor="a", reason="r")
                case "finish":
                    lg.finish(run)
                case "cancel":
                    lg.cancel(run)
                case "delete":
                    lg.delete(run)
        except LedgerError:
            pass
        step = rnd.choice([1, 5, 60, 600, -30, -3600])
        if step < 0:
            lg.clock.step_wall(step)  # type: ignore[attr-defined]
        else:
            lg.clock.advance(step)  # type: ignore[attr-defined]


def _requeue_past_the_ledger(rnd: random.Random, versions: dict[str, int]) -> list[tuple[str, int, bytes]]:
    """run.queued events written past the ledger (a foreign or tampered store): a run
    queued again under another workflow and labels, labels that are not a map of text,
    one without a workflow, at any instant; versions after the stream's head or at or
    below it (its stays derived again)."""
    out = []
    for _ in range(rnd.randrange(4)):
        run = f"s{rnd.randrange(7)}"
        head = versions.get(f"run:{run}", 0)
        event: dict[str, object] = {
            "type": "run.queued",
            "at": f"2026-09-09T{rnd.randrange(24):02d}:{rnd.randrange(60):02d}:00Z",
            "run": run,
            "status": "queued",
            "code": "",
        }
        if (workflow := rnd.choice(_WORKFLOWS)) is not None:
            event["workflow"] = workflow
        event["labels"] = rnd.choice([*_LABELS, ["team"], {"team": 7}])
        out.append((f"run:{run}", rnd.choice([head + 1, head + 2, max(1, head - 1)]), json.dumps(event).encode()))
    return out


def _reports_at(path: str, sql: dict[str, str], instants: list[datetime]) -> dict[tuple[str, str, str | None], list]:
    con = duckdb.connect(path, read_only=True)
    try:
        con.execute("SET TimeZone = 'UTC'")
        return {
            (name, str(at), label): _report_rows(con, sql[name], at, "day", label)
            for name in ("time_in_status", "failures_by_label")
            for at in instants
            for label in ((None, "team", "env", "nobody") if name == "failures_by_label" else (None,))
        }
    finally:
        con.close()


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(seed=st.integers(0, 10**6), pieces=st.integers(1, 4), chunk=st.integers(1, 30))
def test_A1_R3_time_in_status_and_failures_by_label_equal_their_former_sql_as_of_any_instant(
    tmp_path_factory, seed: int, pieces: int, chunk: int
) -> None:
    """Law (issue 23, the stays and run_queued tables): on histories with the clock
    stepped back, deletions, runs queued again (under other workflows and labels: past
    the ledger, which refuses that), corrections, empty codes (UNKNOWN), runs with and without
    labels, time_in_status and failures_by_label (every label, and --label KEY for a
    key some runs carry and one none does) equal their former SQL (the window over the
    status changes, the join of the runs view) as of instants before, across, between
    and after the history's, out of the log's order included; the runs view equals
    its former SQL; and the file synced in `pieces` syncs (any chunk size) holds the
    same derived tables as one sync."""

    from epochledger.app import open_ledger as open_
    from epochledger.ledger.clock import ManualClock

    rnd = random.Random(seed)
    tmp = tmp_path_factory.mktemp("stays")
    db = tmp / "ledger.db"
    parts = str(tmp / "parts.duckdb")
    with open_(str(db), clock=ManualClock(datetime(2026, 9, 9, 12, tzinfo=UTC), uptime=5.0)) as lg:
        for _ in range(pieces):
            _stay_history(lg, rnd, 40 // pieces)
            audit.sync(lg._store, parts, chunk=chunk)
        versions = {
            stream: version
            for stream, version in sqlite3.connect(db)
            .execute("SELECT originator_id, max(originator_version) FROM epochledger_events GROUP BY 1")
            .fetchall()
        }
        with sqlite3.connect(db) as conn:
            for stream, version, state in _requeue_past_the_ledger(rnd, versions):
                conn.execute(
                    "INSERT OR IGNORE INTO epochledger_events (originator_id, originator_version, topic, state) "
                    "VALUES (?,?,?,?)",
                    (stream, version, "t", state),
                )
        conn.close()
        _stay_history(lg, rnd, 10)
        audit.sync(lg._store, parts, chunk=chunk)
        once = str(tmp / "once.duckdb")
        audit.sync(lg._store, once)
    assert _derived(parts) == _derived(once)
    con = duckdb.connect(once, read_only=True)
    try:
        con.execute("SET TimeZone = 'UTC'")
        seen = [
            at
            for (at,) in con.execute("SELECT DISTINCT occurred_at FROM events WHERE occurred_at IS NOT NULL").fetchall()
        ]
    finally:
        con.close()
    picked = rnd.sample(sorted(seen), min(6, len(seen)))
    instants = [
        datetime(2026, 9, 1, tzinfo=UTC),
        *picked,
        *(at + timedelta(seconds=1) for at in picked),
        max(seen, default=AS_OF) + timedelta(days=1),
    ]
    new = {n: duck._sql(f"report_{n}.sql") for n in ("time_in_status", "failures_by_label")}
    got = _reports_at(parts, new, instants)
    assert got == _reports_at(once, new, instants)
    former = _former_copy(once, str(tmp / "former.duckdb"))
    assert got == _reports_at(former, FORMER_REPORTS, instants)
    runs = {}
    for file in (once, former):
        con = duckdb.connect(file, read_only=True)
        try:
            con.execute("SET TimeZone = 'UTC'")
            runs[file] = con.execute("SELECT * FROM runs ORDER BY run").fetchall()
        finally:
            con.close()
    assert runs[once] == runs[former]  # the runs view reads run_queued as it read the payloads


def test_A1_the_stays_oracle_can_fail(tmp_path: Path) -> None:
    """The law sees a wrong derivation and a report that forgets the clock: a stay left
    open that was closed, stays of another workflow, labels of another value, or a
    time_in_status that takes each stay's left_at as it is (even of a run whose clock
    stepped back), give other rows than the former SQL."""
    import shutil

    from epochledger.app import open_ledger as open_
    from epochledger.ledger.clock import ManualClock

    db, path, former = tmp_path / "ledger.db", str(tmp_path / "a.duckdb"), str(tmp_path / "former.duckdb")
    with open_(str(db), clock=ManualClock(datetime(2026, 9, 9, 12, tzinfo=UTC), uptime=5.0)) as lg:
        for run in "ab":
            lg.queue(run, workflow="nightly", labels={"team": "data"})
        lg.clock.advance(60)  # type: ignore[attr-defined]
        for run in "ab":
            lg.start(run, process="w1")
        lg.clock.step_wall(-3600)  # type: ignore[attr-defined]
        lg.fail("a", "", resumable=True)  # a stay of a ends before it began: the clock stepped back
        lg.clock.advance(7200)  # type: ignore[attr-defined]
        lg.resume("a", "operator")
        lg.finish("b")  # b's stays are in the log's order
        audit.sync(lg._store, path)
    _former_copy(path, former)
    instants = [datetime(2026, 9, 9, h, m, tzinfo=UTC) for h in (11, 12, 13, 14) for m in (0, 30)]
    new = {n: duck._sql(f"report_{n}.sql") for n in ("time_in_status", "failures_by_label")}
    expected = _reports_at(former, FORMER_REPORTS, instants)
    assert _reports_at(path, new, instants) == expected
    naive = new | {"time_in_status": new["time_in_status"].replace("WHERE left_at < entered_at", "WHERE false")}
    assert _reports_at(path, naive, instants) != expected
    for wrong in (
        "UPDATE stays SET left_at = NULL WHERE run = 'b' AND status = 'queued'",
        "UPDATE stays SET workflow = 'backfill'",
        "UPDATE run_queued SET labels = MAP {'team': 'ops'}",
    ):
        broken = str(tmp_path / "broken.duckdb")
        shutil.copyfile(path, broken)
        con = duckdb.connect(broken)
        try:
            con.execute(wrong)
        finally:
            con.close()
        assert _reports_at(broken, new, instants) != expected, wrong


@pytest.mark.parametrize(
    ("version", "former"),
    [
        (1, "DROP TABLE transitions; DROP TABLE run_stream_heads; DROP TABLE run_queued; DROP TABLE stays"),
        (2, "DROP TABLE run_queued; DROP TABLE stays"),
    ],
    ids=["version 1: a transitions view", "version 2: no run_queued nor stays"],
)
def test_A1_an_audit_file_of_the_former_schema_is_refused_saying_to_sync_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: int, former: str
) -> None:
    """A file of a former version (1: a transitions view, no derived tables; 2: the
    runs view reading the queued payloads, no run_queued nor stays) is derived data of
    another schema: sync and the reads refuse it, naming both versions and what to do,
    and leave it as it was."""
    store, path = _golden_file(tmp_path, capsys)
    con = duckdb.connect(path)
    try:
        con.execute(former)
        con.execute(FORMER_VIEWS if version == 1 else FORMER_VIEWS.split("CREATE OR REPLACE VIEW transitions")[0])
        con.execute("UPDATE audit_sync SET schema_version = ?", [version])
    finally:
        con.close()
    before = file_digest(path)
    with open_ledger(store) as lg:
        with pytest.raises(
            InvalidInput, match=f"audit schema version {version}, this epochledger writes 3.*delete it and sync"
        ):
            audit.sync(lg._store, path)
    for read in (
        lambda: audit.report(path, "corrections"),
        lambda: audit.query(path, "SELECT 1"),
        lambda: audit.status(path),
    ):
        with pytest.raises(InvalidInput, match=f"audit schema version {version}"):
            read()
    assert file_digest(path) == before


PROGRESS_BAR = """
import sys
from epochledger.projections.audit import duck
for connect in (duck._connect_ro, duck._connect_rw):
    con = connect(sys.argv[1])
    print(con.execute("SELECT current_setting('enable_progress_bar')").fetchone()[0])
    con.close()
"""


def test_A1_no_audit_connection_draws_duckdbs_progress_bar(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Repro (issue 23's benchmark): DuckDB draws a progress bar on standard output for a
    statement that runs over 2 s, and a chunk's derivation did on a loaded machine,
    corrupting the JSON a sync's process printed; a long report would do the same to
    `audit report --json`. Every connection the audit opens, the sync's and the reads',
    turns it off. In a process of its own: DuckDB turns it on there (not under pytest's
    capture)."""
    _, path = _golden_file(tmp_path, capsys)
    out = subprocess.run([sys.executable, "-c", PROGRESS_BAR, path], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
