"""NDJSON import/export (BRIEF L3, L4): any bad line rejects the whole file, naming the
line and the reason, and appends nothing; export -> import -> export is byte-identical."""

from __future__ import annotations

import io
import json

import pytest

from ledger import ImportRejected, open_ledger
from ledger.ndjson import export_to, import_lines
from ledger.service import Ledger

GOOD = [
    {"type": "process.booted", "at": "2026-09-09T14:00:00Z", "process": "w-1", "epoch": "w-1.e1", "booted_at": "2026-09-09T13:59:58Z", "host": "h", "pid": 42},
    {"type": "run.queued", "at": "2026-09-09T14:00:01Z", "run": "r1", "workflow": "nightly", "actor": "api"},
    {"type": "run.started", "at": "2026-09-09T14:00:02+02:00", "run": "r1", "epoch": "w-1.e1", "process": "w-1"},
    {"type": "run.checkpointed", "at": "2026-09-09T14:00:03Z", "run": "r1", "node": "extract", "ref": "s3://b/1"},
    {"type": "run.paused", "at": "2026-09-09T14:00:04Z", "run": "r1", "kind": "waiting_human", "interaction": "i1", "questions": ["ship?"]},
    {"type": "run.resumed", "at": "2026-09-09T14:00:05Z", "run": "r1", "by": "operator", "answers": {"ship?": "yes"}, "actor": "alice", "reason": "approved"},
    {"type": "run.started", "at": "2026-09-09T14:00:06Z", "run": "r1", "epoch": "w-1.e1"},
    {"type": "run.failed", "at": "2026-09-09T14:00:07Z", "run": "r1", "code": "GPU_XID_79", "resumable": True, "error": "xid"},
    {"type": "run.queued", "at": "2026-09-09T14:00:08Z", "run": "r2"},
    {"type": "run.cancelled", "at": "2026-09-09T14:00:09Z", "run": "r2", "actor": "bob"},
    {"type": "run.queued", "at": "2026-09-09T14:00:10Z", "run": "r3"},
    {"type": "run.started", "at": "2026-09-09T14:00:11Z", "run": "r3"},
    {"type": "run.failed", "at": "2026-09-09T14:00:12Z", "run": "r3", "code": "", "resumable": False},
    {"type": "run.deleted", "at": "2026-09-09T14:00:13Z", "run": "r2"},
    {"type": "process.stopping", "at": "2026-09-09T14:00:14Z", "process": "w-1", "epoch": "w-1.e1"},
    {"type": "process.stopped", "at": "2026-09-09T14:00:15Z", "process": "w-1", "epoch": "w-1.e1"},
]


def lines(rows: list[dict]) -> list[bytes]:
    return [json.dumps(r).encode() + b"\n" for r in rows]


def export(ledger: Ledger) -> bytes:
    buf = io.BytesIO()
    export_to(ledger, buf)
    return buf.getvalue()


def test_L3_import_then_export_then_import_is_byte_identical(ledger: Ledger, tmp_path) -> None:  # noqa: ANN001
    assert import_lines(ledger, lines(GOOD)) == len(GOOD)
    first = export(ledger)
    assert first.count(b"\n") == len(GOOD)
    with open_ledger(f"sqlite:///{tmp_path / 'copy.db'}") as copy:
        import_lines(copy, first.splitlines(keepends=True))
        assert export(copy) == first
    assert ledger.get_run("r1").code == "GPU_XID_79"
    assert ledger.get_run("r3").code == ""  # UNKNOWN, kept as written


def test_L3_interleaved_streams_keep_log_order_through_import_and_export(ledger: Ledger) -> None:
    """A batch appends in submission order, not grouped by stream. Catches the mutation
    (an earlier bug) of writing a group commit stream by stream, which reordered an
    imported history whose runs interleave."""
    rows = [
        {"type": "run.queued", "at": "2026-09-09T14:00:01Z", "run": "a"},
        {"type": "run.queued", "at": "2026-09-09T14:00:02Z", "run": "b"},
        {"type": "run.started", "at": "2026-09-09T14:00:03Z", "run": "a"},
        {"type": "run.started", "at": "2026-09-09T14:00:04Z", "run": "b"},
    ]
    import_lines(ledger, lines(rows))
    assert [(r.event.run, r.version) for r in ledger.events()] == [("a", 1), ("b", 1), ("a", 2), ("b", 2)]
    assert [json.loads(x)["at"] for x in export(ledger).splitlines()] == [r["at"] for r in rows]


def test_L8_import_stamps_the_files_time_not_the_wall_clock(ledger: Ledger) -> None:
    import_lines(ledger, lines(GOOD[:3]))
    started = ledger.history("r1")[1].event
    assert started.at.isoformat() == "2026-09-09T12:00:02+00:00"  # +02:00 normalised to UTC


BAD = [
    ({"type": "run.exploded", "at": "2026-09-09T14:00:05Z", "run": "r1"}, "unknown type 'run.exploded'"),
    ({"at": "2026-09-09T14:00:05Z", "run": "r1"}, "missing field 'type'"),
    ({"type": "run.failed", "at": "2026-09-09T14:00:05Z", "run": "r1", "code": "X"}, "missing required field `resumable`"),
    ({"type": "run.failed", "at": "2026-09-09T14:00:05Z", "run": "r1", "resumabel": True}, "unknown field 'resumabel'"),
    ({"type": "run.finished", "at": "2026-09-09 14:00", "run": "r1"}, "$.at"),
    ({"type": "run.finished", "at": "2026-09-09T14:00:05", "run": "r1"}, "timezone"),
    ({"type": "run.finished", "at": "2026-09-09T14:00:05Z", "run": "r1"}, "run 'r1' is queued: run.finished refused"),
    ({"type": "run.cancelled", "at": "2026-09-09T14:00:05Z", "run": "r1", "reason": "x" * 70000}, "$.reason"),
    ({"type": "run.started", "at": "2026-09-09T14:00:05Z", "run": "r1", "status": "finished"}, "transition gives running"),
]


@pytest.mark.parametrize(("bad", "reason"), BAD, ids=[r for _, r in BAD])
def test_L4_one_bad_line_in_the_middle_rejects_the_file_and_appends_nothing(ledger: Ledger, bad: dict, reason: str) -> None:
    rows = [*GOOD[:2], {"type": "run.queued", "at": "2026-09-09T14:00:02Z", "run": "r9"}, bad, *GOOD[2:]]
    rows[1] = {"type": "run.queued", "at": "2026-09-09T14:00:01Z", "run": "r1"}
    with pytest.raises(ImportRejected) as e:
        import_lines(ledger, lines(rows))
    assert e.value.line == 4
    assert "line 4" in str(e.value) and reason in str(e.value)
    assert ledger.store.max_position() == 0


def test_L4_not_json_names_the_line(ledger: Ledger) -> None:
    with pytest.raises(ImportRejected, match="line 2: not JSON"):
        import_lines(ledger, [lines(GOOD[:1])[0], b"{oops\n"])
    assert ledger.store.max_position() == 0
