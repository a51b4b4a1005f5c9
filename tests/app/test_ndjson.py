"""NDJSON import/export (rules L3, L4): any bad line rejects the whole file, naming the
line and the reason, and appends nothing; export -> import -> export is byte-identical."""

from __future__ import annotations

import io
import json

import pytest

from epochledger import ImportRejected, open_ledger
from epochledger.app import Ledger
from epochledger.ndjson import export_to, import_lines

GOOD = [
    {
        "type": "process.booted",
        "at": "2026-09-09T14:00:00Z",
        "process": "w-1",
        "epoch": "w-1.e1",
        "booted_at": "2026-09-09T13:59:58Z",
        "host": "h",
        "pid": 42,
    },
    {"type": "run.queued", "at": "2026-09-09T14:00:01Z", "run": "r1", "workflow": "nightly", "actor": "api"},
    {"type": "run.started", "at": "2026-09-09T16:00:02+02:00", "run": "r1", "epoch": "w-1.e1", "process": "w-1"},
    {"type": "run.checkpointed", "at": "2026-09-09T14:00:03Z", "run": "r1", "node": "extract", "ref": "s3://b/1"},
    {
        "type": "run.paused",
        "at": "2026-09-09T14:00:04Z",
        "run": "r1",
        "kind": "waiting_human",
        "interaction": "i1",
        "questions": ["ship?"],
    },
    {
        "type": "run.resumed",
        "at": "2026-09-09T14:00:05Z",
        "run": "r1",
        "by": "operator",
        "answers": {"ship?": "yes"},
        "actor": "alice",
        "reason": "approved",
    },
    {"type": "run.started", "at": "2026-09-09T14:00:06Z", "run": "r1", "epoch": "w-1.e1"},
    {
        "type": "run.failed",
        "at": "2026-09-09T14:00:07Z",
        "run": "r1",
        "code": "GPU_XID_79",
        "resumable": True,
        "error": "xid",
    },
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


def test_L3_import_then_export_then_import_is_byte_identical(ledger: Ledger, tmp_path) -> None:
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
    assert started.at.isoformat() == "2026-09-09T14:00:02+00:00"  # +02:00 normalised to UTC


BAD = [
    ({"type": "run.exploded", "at": "2026-09-09T14:00:05Z", "run": "r1"}, "unknown type 'run.exploded'"),
    ({"at": "2026-09-09T14:00:05Z", "run": "r1"}, "missing field 'type'"),
    (
        {"type": "run.failed", "at": "2026-09-09T14:00:05Z", "run": "r1", "code": "X"},
        "missing required field `resumable`",
    ),
    ({"type": "run.failed", "at": "2026-09-09T14:00:05Z", "run": "r1", "resumabel": True}, "unknown field 'resumabel'"),
    ({"type": "run.finished", "at": "2026-09-09 14:00", "run": "r1"}, "$.at"),
    ({"type": "run.finished", "at": "2026-09-09T14:00:05", "run": "r1"}, "timezone"),
    ({"type": "run.finished", "at": "2026-09-09T14:00:05Z", "run": "r1"}, "run 'r1' is queued: run.finished refused"),
    ({"type": "run.cancelled", "at": "2026-09-09T14:00:05Z", "run": "r1", "reason": "x" * 70000}, "$.reason"),
    (
        {"type": "run.started", "at": "2026-09-09T14:00:05Z", "run": "r1", "status": "finished"},
        "transition gives running",
    ),
]


@pytest.mark.parametrize(("bad", "reason"), BAD, ids=[r for _, r in BAD])
def test_I1_L4_one_bad_line_in_the_middle_rejects_the_file_and_appends_nothing(
    ledger: Ledger, bad: dict, reason: str
) -> None:
    rows = [*GOOD[:2], {"type": "run.queued", "at": "2026-09-09T14:00:02Z", "run": "r9"}, bad, *GOOD[2:]]
    rows[1] = {"type": "run.queued", "at": "2026-09-09T14:00:01Z", "run": "r1"}
    with pytest.raises(ImportRejected) as e:
        import_lines(ledger, lines(rows))
    assert e.value.line == 4
    assert "line 4" in str(e.value) and reason in str(e.value)
    assert ledger._store.max_position() == 0


def test_L4_not_json_names_the_line(ledger: Ledger) -> None:
    with pytest.raises(ImportRejected, match="line 2: not JSON"):
        import_lines(ledger, [lines(GOOD[:1])[0], b"{oops\n"])
    assert ledger._store.max_position() == 0


# ------------------------------------------------- issue 10: hostile lines (item 12)
DEEP = [
    (
        "reason nested 5000 deep",
        b'{"type":"run.queued","at":"2026-09-09T14:00:05Z","run":"r1","reason":' + b"[" * 5000 + b"]" * 5000 + b"}",
    ),
    (
        "unknown field nested 100000 deep",
        b'{"type":"run.queued","at":"2026-09-09T14:00:05Z","run":"r1","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    ),
    (
        "report nested 5000 deep",
        b'{"type":"run.fenced","at":"2026-09-09T14:00:05Z","run":"r1","epoch":"e","refused":"run.finished",'
        b'"why":"w","report":' + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"}",
    ),
]


@pytest.mark.parametrize(("name", "line"), DEEP, ids=[n for n, _ in DEEP])
def test_L4_a_line_nested_too_deeply_is_rejected_naming_the_line(ledger: Ledger, name: str, line: bytes) -> None:
    """Repro (before the fix): JSON nested deeper than about 500 levels raised
    RecursionError out of import (a traceback, not exit 3)."""
    with pytest.raises(ImportRejected) as e:
        import_lines(ledger, [lines(GOOD[1:2])[0], line + b"\n"])
    assert e.value.line == 2 and "nested too deeply" in str(e.value)
    assert ledger._store.max_position() == 0


@pytest.mark.parametrize("tag", ["{}", "[]", "5", "null", "true", '"RUN.QUEUED"'])
def test_L4_a_type_that_is_not_a_known_tag_is_rejected(ledger: Ledger, tag: str) -> None:
    """Repro (before the fix): `"type": {}` raised TypeError (unhashable) out of import."""
    line = b'{"type":%b,"at":"2026-09-09T14:00:05Z","run":"r1"}\n' % tag.encode()
    with pytest.raises(ImportRejected, match="line 1: unknown type|line 1: missing field 'type'"):
        import_lines(ledger, [line])
    assert ledger._store.max_position() == 0


class CountingReader(io.BufferedReader):
    def __init__(self, raw: io.RawIOBase):
        super().__init__(raw)
        self.consumed = 0

    def readline(self, size: int | None = -1) -> bytes:  # type: ignore[override]
        line = super().readline(size)
        self.consumed += len(line)
        return line


def test_L4_an_endless_line_is_refused_after_reading_at_most_the_limit() -> None:
    """Repro (before the fix): `epochledger import /dev/zero` read the whole "line"
    before checking its length and grew until MemoryError."""
    from epochledger.ndjson import MAX_LINE, read_lines

    with open("/dev/zero", "rb", buffering=0) as raw:
        f = CountingReader(raw)
        with pytest.raises(ImportRejected, match=f"line 1: line is longer than {MAX_LINE} bytes"):
            next(read_lines(f))
    assert f.consumed <= MAX_LINE + 2


def test_L4_import_of_dev_zero_exits_3_at_once(tmp_path) -> None:
    from epochledger.cli import main

    assert main(["--store", str(tmp_path / "l.db"), "init"]) == 0
    assert main(["--store", str(tmp_path / "l.db"), "import", "/dev/zero"]) == 3


def _padded(size: int) -> bytes:
    """A valid run.queued line whose content is exactly `size` bytes (JSON whitespace)."""
    line = b'{"type":"run.queued","at":"2026-09-09T14:00:05Z","run":"big"}'
    return line[:-1] + b" " * (size - len(line)) + b"}"


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b""], ids=["LF", "CRLF", "last line"])
def test_L4_a_line_of_exactly_the_limit_is_accepted_one_byte_more_is_not(ledger: Ledger, ending: bytes) -> None:
    """Repro (before the fix): a line of exactly 1 MiB was refused: its newline was
    counted against the limit."""
    from epochledger.ndjson import MAX_LINE, read_lines

    exact = _padded(MAX_LINE)
    assert len(exact) == MAX_LINE
    assert import_lines(ledger, read_lines(io.BytesIO(exact + ending))) == 1
    assert import_lines(ledger, [exact + ending]) == 0  # already recorded (I1); and not refused as too long
    for over in (read_lines(io.BytesIO(_padded(MAX_LINE + 1) + ending)), [_padded(MAX_LINE + 1) + ending]):
        with pytest.raises(ImportRejected, match="line 1: line is longer than"):
            import_lines(ledger, over)
    assert ledger._store.max_position() == 1


def test_L4_read_lines_numbers_lines_as_import_does(ledger: Ledger) -> None:
    from epochledger.ndjson import read_lines

    data = b"".join(lines(GOOD[:3])) + b"\n" + b'{"type":"run.finished","at":"2026-09-09T15:00:00Z","run":"zzz"}\n'
    with pytest.raises(ImportRejected) as e:
        import_lines(ledger, read_lines(io.BytesIO(data)))
    assert e.value.line == 5


# ------------------------------------- issue 10: imports that changed the input (item 13)
HEAD = [
    {"type": "run.queued", "at": "2026-09-09T14:00:01Z", "run": "r1"},
    {"type": "run.started", "at": "2026-09-09T14:00:02Z", "run": "r1"},
]
RECOVERED = {
    "type": "run.recovered",
    "at": "2026-09-09T14:00:05Z",
    "run": "r1",
    "rule": "O3-fallback",
    "swept_by": "w.e2",
    "swept_by_process": "w",
}
DEAD = {
    "type": "run.dead_lettered",
    "at": "2026-09-09T14:00:05Z",
    "run": "r1",
    "tick": "t1",
    "step": "advance",
    "error_class": "E",
    "failing_since": "2026-09-09T14:00:03Z",
    "failures": 3,
    "deadline_s": 300.0,
}
CHANGED = [
    (
        {"type": "run.cancelled", "at": "2026-09-09T14:00:05Z", "run": "r1", "code": ""},
        """field 'code': the line states "", but the ledger would record "CANCELLED\"""",
    ),
    (
        {**RECOVERED, "code": "TIMEOUT"},
        """field 'code': the line states "TIMEOUT", but the ledger would record "PROCESS_ORPHANED\"""",
    ),
    ({**RECOVERED, "code": ""}, "field 'code'"),
    ({**DEAD, "code": "FAIL_NODE"}, """the ledger would record "TICK_DEADLINE_EXCEEDED\""""),
]


@pytest.mark.parametrize(("row", "reason"), CHANGED, ids=[r["type"] + " " + r["code"] for r, _ in CHANGED])
def test_I1_L4_a_stated_field_that_decide_would_change_is_rejected(ledger: Ledger, row: dict, reason: str) -> None:
    """Repro (before the fix): a run.cancelled line stating "code": "" was imported with
    code CANCELLED, a run.recovered stating TIMEOUT was recorded as PROCESS_ORPHANED:
    the ledger silently recorded something other than the line. Mutation caught:
    dropping the stated-versus-recorded comparison in import_lines."""
    with pytest.raises(ImportRejected) as e:
        import_lines(ledger, lines([*HEAD, row]))
    assert e.value.line == 3 and reason in str(e.value)
    assert ledger._store.max_position() == 0


def test_L3_stating_exactly_what_decide_records_is_accepted(ledger: Ledger) -> None:
    rows = [
        *HEAD,
        {**RECOVERED, "code": "PROCESS_ORPHANED", "status": "failed_resumable"},
        {"type": "run.queued", "at": "2026-09-09T14:00:06+02:00", "run": "r2"},
        {
            "type": "run.cancelled",
            "at": "2026-09-09T14:00:07Z",
            "run": "r2",
            "code": "CANCELLED",
            "status": "cancelled",
        },
    ]
    assert import_lines(ledger, lines(rows)) == 5


UNKNOWN_NESTED = [
    ({"code": "OOM", "zzz": 1}, "unknown field 'cause.zzz' for run.failed"),
    ({"code": "OOM", "cause": {"code": "K", "mesage": "typo"}}, "unknown field 'cause.cause.mesage' for run.failed"),
]


@pytest.mark.parametrize(("cause", "reason"), UNKNOWN_NESTED, ids=[r for _, r in UNKNOWN_NESTED])
def test_L4_an_unknown_field_inside_a_cause_is_rejected(ledger: Ledger, cause: dict, reason: str) -> None:
    """Repro (before the fix): unknown fields inside `cause` were dropped silently
    (only top-level fields were checked)."""
    row = {
        "type": "run.failed",
        "at": "2026-09-09T14:00:05Z",
        "run": "r1",
        "code": "X",
        "resumable": True,
        "cause": cause,
    }
    with pytest.raises(ImportRejected) as e:
        import_lines(ledger, lines([*HEAD, row]))
    assert e.value.line == 3 and reason in str(e.value)
    assert ledger._store.max_position() == 0


DUPLICATES = [
    b'{"type":"run.queued","at":"2026-09-09T14:00:05Z","run":"a","run":"b"}',
    b'{"type":"run.queued","at":"2026-09-09T14:00:05Z","run" : "a", "actor":"x:y","run":"b"}',
    b'{"type":"run.queued","type":"run.queued","at":"2026-09-09T14:00:05Z","run":"a"}',
    # the surviving value's escaped colon would hide the dropped key from a colon count
    b'{"type":"run.queued","at":"2026-09-09T14:00:05Z","run":"a","run":"\\u003a"}',
]


@pytest.mark.parametrize("line", DUPLICATES, ids=range(len(DUPLICATES)))
def test_L4_a_duplicate_json_key_is_rejected(ledger: Ledger, line: bytes) -> None:
    """Repro (before the fix): `"run":"a","run":"b"` imported run b (JSON's last value
    wins), silently dropping what the line said first."""
    with pytest.raises(ImportRejected, match=r"line 2: duplicate key '(run|type)'"):
        import_lines(ledger, [lines(GOOD[1:2])[0], line + b"\n"])
    assert ledger._store.max_position() == 0


def test_L4_a_duplicate_key_inside_a_cause_or_answers_is_rejected(ledger: Ledger) -> None:
    failed = (
        b'{"type":"run.failed","at":"2026-09-09T14:00:05Z","run":"r1","resumable":true,'
        b'"cause":{"code":"A","message":"m: 1","code":"B"}}\n'
    )
    with pytest.raises(ImportRejected, match="line 3: duplicate key 'code'"):
        import_lines(ledger, [*lines(HEAD), failed])
    paused = b'{"type":"run.paused","at":"2026-09-09T14:00:05Z","run":"r1","kind":"waiting_human","questions":["q"]}\n'
    resumed = b'{"type":"run.resumed","at":"2026-09-09T14:00:06Z","run":"r1","by":"operator","answers":{"q":"no","q":"yes"}}\n'
    with pytest.raises(ImportRejected, match="line 4: duplicate key 'q'"):
        import_lines(ledger, [*lines(HEAD), paused, resumed])
    assert ledger._store.max_position() == 0


# ------------------------------------------------------------ issue 10: import fuzz
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from epochledger.ledger.events import TAGS  # noqa: E402

_KEYS = sorted({f for cls in TAGS.values() for f in cls.__struct_fields__} | {"type", "zzz"})
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=30)
    | st.sampled_from(
        [
            "2026-09-09T14:00:00Z",
            "0001-01-01T00:00:00+14:00",
            "9999-12-31T23:59:59-14:00",
            "",
            "r1",
            "w-1.e1",
            "w-1",
            "operator",
            "waiting_human",
            "failed",
            "\ud800",
        ]
    ),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(_KEYS) | st.text(max_size=5), inner, max_size=5)
    ),
    max_leaves=12,
)
_instant = st.sampled_from(
    [
        "2026-09-09T14:00:00Z",
        "0001-01-01T00:00:00+14:00",
        "9999-12-31T23:59:59-14:00",
        "1969-12-31T23:59:59Z",
        "2026-09-09T14:00:00",
    ]
)
_event_like = st.fixed_dictionaries(
    {"type": st.sampled_from(sorted(TAGS)) | _json, "at": _instant},
    optional={k: _json for k in _KEYS if k not in ("type", "at")},
)


def _encode_json(value: object) -> bytes:
    try:
        return json.dumps(value).encode()
    except (ValueError, UnicodeEncodeError):
        return b"{}"


@st.composite
def _mutated(draw: st.DrawFn) -> bytes:
    row = dict(draw(st.sampled_from(GOOD)))
    how = draw(st.sampled_from(["set", "instant", "drop", "bytes", "duplicate", "nest", "truncate"]))
    if how == "instant":
        row[draw(st.sampled_from(["at", *(k for k in row if k.endswith("_at"))]))] = draw(_instant)
    elif how == "set":
        key = draw(st.sampled_from(_KEYS))
        row[key] = draw(_instant if key.endswith(("at", "_since")) else _json)
    elif how == "drop" and len(row) > 1:
        row.pop(draw(st.sampled_from(sorted(row))))
    line = _encode_json(row)
    if how == "bytes":
        i = draw(st.integers(0, len(line)))
        line = line[:i] + draw(st.binary(max_size=4)) + line[i + draw(st.integers(0, 3)) :]
    elif how == "duplicate":
        key = draw(st.sampled_from(sorted(row)))
        line = line[:-1] + b", " + json.dumps(key).encode() + b": " + _encode_json(draw(_json)) + b"}"
    elif how == "nest":
        depth = draw(st.sampled_from([40, 70, 600, 3000]))
        line = line[:-1] + b', "cause": ' + b'{"code": "X", "cause": ' * depth + b"null" + b"}" * depth + b"}"
    elif how == "truncate":
        line = line[: draw(st.integers(0, len(line)))]
    return line


_line = st.one_of(
    _mutated(), _mutated(), _mutated(), _event_like.map(_encode_json), _json.map(_encode_json), st.binary(max_size=60)
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    prefix=st.integers(0, len(GOOD)),
    extra=st.lists(_line, min_size=1, max_size=4),
    endings=st.sampled_from([b"\n", b"\r\n"]),
)
def test_I1_L4_fuzzed_import_lines_import_or_are_rejected_with_their_line(
    tmp_path_factory, prefix: int, extra: list[bytes], endings: bytes
) -> None:
    """Law (issue 10 item 12, where 49 of 5,500 fuzz cases escaped as RecursionError,
    OverflowError, TypeError): whatever the lines (random JSON, random bytes, mutated
    valid lines, after a valid prefix of a history), import either succeeds or raises
    ImportRejected naming a line of the file, and a rejected file appends nothing.
    Each example gets a fresh ledger, so its lines are decided against GOOD's prefix.
    Mutations caught: `tag not in TAGS` without the str check (TypeError), dropping the
    instant bounds (OverflowError), the RecursionError guard of parse_line."""
    from epochledger.ndjson import read_lines

    content = b"".join(x.replace(b"\n", b" ") + endings for x in [*(_encode_json(r) for r in GOOD[:prefix]), *extra])
    with open_ledger(str(tmp_path_factory.mktemp("fuzz") / "l.db")) as lg:
        try:
            import_lines(lg, read_lines(io.BytesIO(content)))
        except ImportRejected as e:
            assert 1 <= e.line <= prefix + len(extra)
            assert f"line {e.line}: " in str(e)
            assert lg._store.max_position() == 0
