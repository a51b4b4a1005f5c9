"""The NDJSON functions a caller uses directly (rules L3, L4): `parse_line` gives the
typed event or names the line it refuses; `export_lines`, `export_to` and `export_file`
write the log after a position, count what they wrote, and never write over the
ledger's own files."""

from __future__ import annotations

import errno
import io
import os
from pathlib import Path
from typing import Any

import pytest

from epochledger import ImportRejected, InvalidInput
from epochledger.app import Ledger
from epochledger.ledger.events import RunQueued
from epochledger.ndjson import MAX_LINE, export_file, export_lines, export_to, import_events, import_lines, parse_line
from tests.app.test_ndjson import GOOD, lines


def test_L4_parse_line_gives_the_typed_event_or_refuses_naming_the_line() -> None:
    event = parse_line('{"type": "run.queued", "at": "2026-09-09T14:00:01Z", "run": "r1"}', 7)
    assert isinstance(event, RunQueued) and event.run == "r1"
    with pytest.raises(ImportRejected) as e:
        parse_line(b'{"type": "run.queued", "at": "2026-09-09T14:00:01Z"}', 7)
    assert e.value.line == 7 and str(e.value).startswith("line 7: run.queued: ")


QUEUED = b'{"type": "run.queued", "at": "2026-09-09T14:00:01Z", "run": "r"'
NESTED = (
    b'{"type": "run.queued", "at": "2026-09-09T14:00:01Z", "run": "r", "labels": ' + b"[" * 5000 + b"]" * 5000 + b"}"
)
REFUSED = [
    ("\ud800", "not UTF-8: surrogates not allowed at character 0"),
    (b"x" * (MAX_LINE + 1), f"line is longer than {MAX_LINE} bytes"),
    (b"{oops", "not JSON: JSON is malformed: object keys must be strings (byte 1)"),
    (b"[1]", "expected a JSON object"),
    (NESTED, "JSON nested too deeply"),
    (b'{"type": "run.nope"}', "unknown type 'run.nope'"),
    (b'{"at": 1}', "missing field 'type'"),
    (QUEUED + b', "zzz": 1}', "unknown field 'zzz' for run.queued"),
    (QUEUED + b', "run": "s"}', "duplicate key 'run' (JSON would keep only its last value)"),
    (b'{"type": "run.queued", "at": "2026-09-09T14:00:01Z"}', "run.queued: Object missing required field `run`"),
    (
        b'{"type": "run.queued", "at": "2026-09-09T14:00:01.0000001Z", "run": "r"}',
        "run.queued: not stored as given: '2026-09-09T14:00:01.0000001Z' is finer than a microsecond; it would be "
        "stored as 2026-09-09T14:00:01+00:00 - at `$.at`",
    ),
]


@pytest.mark.parametrize(
    ("line", "reason"),
    REFUSED,
    ids=[
        "surrogate",
        "long",
        "not-json",
        "not-object",
        "nested",
        "unknown-type",
        "no-type",
        "unknown-field",
        "duplicate",
        "invalid",
        "finer",
    ],
)
def test_L4_parse_line_names_the_line_and_the_reason_of_every_refusal(line: bytes | str, reason: str) -> None:
    """Mutations caught: each refusal raised without the line's number, or with its
    reason missing or reworded."""
    with pytest.raises(ImportRejected) as e:
        parse_line(line, 3)
    assert (e.value.line, e.value.reason) == (3, reason)


def test_L4_an_escaped_colon_sends_a_line_to_the_exact_duplicate_check_which_finds_only_real_duplicates() -> None:
    """`\\u003a` in a line defeats the colon count (the re-encoding writes a plain
    colon), so the line takes the exact check: it passes without a duplicate key and is
    refused, naming the key, with one. Mutations caught: the exact check naming the first
    key of any object, or failing when it finds none."""
    line = '{"type": "run.queued", "at": "2026-09-09T14:00:01Z", "run": "r1", "reason": "a\\u003ab"}'
    event = parse_line(line, 1)
    assert isinstance(event, RunQueued) and event.reason == "a:b"
    twice = line.replace('"run": "r1"', '"run": "r1", "run": "r2"')
    with pytest.raises(ImportRejected, match="line 1: duplicate key 'run'"):
        parse_line(twice, 1)


def test_L3_export_writes_the_log_after_a_position_and_counts_its_lines(ledger: Ledger, tmp_path: Path) -> None:
    """Mutations caught: the default `after` of `export_lines` one past the log's start
    (the first event lost), `export_to` ignoring `after` or miscounting, `export_file`
    ignoring `after`, its path or the ledger's files."""
    assert import_lines(ledger, lines(GOOD)) == len(GOOD)
    whole = b"".join(export_lines(ledger))
    assert whole.splitlines() == [x.rstrip(b"\n") for x in export_lines(ledger, 0)]
    assert len(whole.splitlines()) == len(GOOD)
    buf = io.BytesIO()
    assert export_to(ledger, buf) == len(GOOD) and buf.getvalue() == whole
    tail = io.BytesIO()
    assert export_to(ledger, tail, 3) == len(GOOD) - 3
    assert tail.getvalue().splitlines() == whole.splitlines()[3:]
    out = tmp_path / "out.ndjson"
    assert export_file(ledger, str(out)) == len(GOOD) and out.read_bytes() == whole
    assert export_file(ledger, str(out), 5) == len(GOOD) - 5
    assert out.read_bytes().splitlines() == whole.splitlines()[5:]
    for own in [f for f in ledger.local_files() if Path(f).exists()]:  # SQLite's files; PostgreSQL has none
        before = Path(own).read_bytes()
        with pytest.raises(InvalidInput, match="refusing to overwrite"):
            export_file(ledger, own)
        assert Path(own).read_bytes() == before


def test_I1_the_import_refuses_each_bad_option_by_name_and_says_so(ledger: Ledger, tmp_path: Path) -> None:
    """Mutations caught: each usage refusal of `import_events` and `with_rejects` with
    its text missing or reworded, or naming another option."""
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"clock_steps": "sometimes"}, "--clock-steps", "expected 'refuse' or 'keep', got 'sometimes'"),
        ({"on_error": "ignore"}, "--on-error", "expected 'stop' or 'skip', got 'ignore'"),
        (
            {"rejects": str(tmp_path / "r.ndjson")},
            "--rejects",
            "a rejects file needs --on-error skip (a strict import rejects the whole file)",
        ),
        (
            {"on_error": "skip", "rejects": str(tmp_path)},
            "--rejects",
            "is a directory, not a file for the rejected lines (nothing was imported)",
        ),
    ]
    for options, where, message in cases:
        with pytest.raises(InvalidInput) as e:
            import_events(ledger, lines(GOOD[:1]), **options)
        assert (e.value.where, e.value.message) == (where, message)
    source = tmp_path / "in.ndjson"  # a file the caller protects (the CLI: the file it imports)
    source.write_bytes(b"".join(lines(GOOD[:1])))
    with pytest.raises(InvalidInput) as e:
        import_events(ledger, lines(GOOD[:1]), on_error="skip", rejects=str(source), protected=[str(source)])
    assert e.value.where == "--rejects" and "refusing to overwrite it" in e.value.message
    assert ledger._store.max_position() == 0


def test_I1_a_rejects_file_that_cannot_be_written_after_the_commit_says_both(
    ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The import committed; only the rejects file failed (its fsync): the refusal says
    what was committed and why the file was not written. Mutations caught: the text,
    the counts or the option missing from it."""

    def fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", fsync)
    rows = [*GOOD[:2], {"type": "run.nope", "at": "2026-09-09T14:00:03Z"}]
    rejects = tmp_path / "r.ndjson"
    with pytest.raises(InvalidInput) as e:
        import_events(ledger, lines(rows), on_error="skip", rejects=str(rejects))
    assert e.value.where == "--rejects"
    assert e.value.message == (
        "the import was committed (2 events appended, 1 lines rejected), but the rejects file could not be "
        f"written: {rejects}: cannot write: Input/output error"
    )
    assert ledger._store.max_position() == 2 and not rejects.exists()
