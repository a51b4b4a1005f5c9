"""Hostile input through the Python API (issue 10 items 12, 13, 15): every bad value is
refused with InvalidInput naming the field, and appends nothing (L4). What the
ledger stores is exactly what the caller gave, or nothing."""

from __future__ import annotations

import json
import math
import unicodedata
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from epochledger.app import Ledger
from epochledger.ledger.errors import ImportRejected, InvalidInput, StaleEpoch
from epochledger.ledger.events import MAX_CAUSE_DEPTH, MAX_NESTING, Cause, Code, LabelValue, Name, Pattern, RunFenced
from epochledger.ndjson import import_lines
from epochledger.sweep import preview


def chain(depth: int) -> Cause:
    cause = None
    for i in range(depth):
        cause = Cause(code=f"C{i}", message="m", cause=cause)
    assert cause is not None
    return cause


def _queued(lg: Ledger) -> None:
    lg.queue("r", workflow="nightly")


NOT_AS_GIVEN: list[tuple[str, Any, str]] = [
    ("bytes reason", lambda lg: lg.queue("q", reason=b"x"), "bytes b'x' would be stored as str 'eA==' - at `$.reason`"),
    ("bytes run id", lambda lg: lg.queue(b"q"), "bytes b'q' would be stored as str 'cQ==' - at `$.run`"),
    (
        "at as a string",
        lambda lg: lg.queue("q", at="2026-09-09T14:00:00Z"),
        "str '2026-09-09T14:00:00Z' would be stored as datetime 2026-09-09T14:00:00+00:00 - at `$.at`",
    ),
    ("a dict for a cause", lambda lg: lg.fail("r", "X", resumable=True, cause={"code": "OOM"}), "at `$.cause`"),
    (
        "bytes inside a cause",
        lambda lg: lg.fail("r", "X", resumable=True, cause=Cause(code="OOM", message=b"m")),
        "at `$.cause.message`",
    ),
    (
        "a tuple of questions",
        lambda lg: lg.pause("r", "waiting_human", questions=("ship?",)),
        "tuple ('ship?',) would be stored as list ['ship?'] - at `$.questions`",
    ),
    (
        "NaN pid",
        lambda lg: lg.boot("w", epoch="w.e9", pid=float("nan")),
        "float nan would be stored as null - at `$.pid`",
    ),
    ("bytes answer", lambda lg: lg.resume("r", "operator", answers={"q": b"yes"}), "at `$.answers['q']`"),
]


@pytest.mark.parametrize(("name", "call", "message"), NOT_AS_GIVEN, ids=[n for n, _, _ in NOT_AS_GIVEN])
def test_L4_a_value_that_would_not_be_stored_as_given_is_refused(
    ledger: Ledger, name: str, call: Any, message: str
) -> None:
    """Repro (before the fix): `ledger.queue("r", reason=b"x")` stored the reason as the
    base64 text "eA=="; `at` given as a string was accepted by the check and crashed
    in decide (AttributeError); a dict was stored where a Cause belongs. Mutation
    caught: dropping the round-trip comparison in codec.checked."""
    _queued(ledger)
    ledger.start("r")
    before = ledger._store.max_position()
    with pytest.raises(InvalidInput) as e:
        call(ledger)
    assert message in str(e.value)
    assert ledger._store.max_position() == before


UNENCODABLE: list[tuple[str, Any, str]] = [
    ("surrogate in a run id", lambda lg: lg.queue("h\udc80"), "at `$.run`"),
    ("surrogate in a reason", lambda lg: lg.queue("h", reason="ok \udc80"), "at `$.reason`"),
    (
        "surrogate in an answer key",
        lambda lg: lg.resume("r", "operator", answers={"\ud800": "y"}),
        "at `$.answers.key`",
    ),
    ("an object for a workflow", lambda lg: lg.queue("h", workflow=object()), "at `$.workflow`"),
]


@pytest.mark.parametrize(("name", "call", "where"), UNENCODABLE, ids=[n for n, _, _ in UNENCODABLE])
def test_L4_a_value_that_cannot_be_encoded_is_refused_naming_the_field(
    ledger: Ledger, name: str, call: Any, where: str
) -> None:
    """Repro (before the fix): a lone surrogate raised UnicodeEncodeError out of the API."""
    _queued(ledger)
    ledger.start("r")
    ledger.pause("r", "operator")
    before = ledger._store.max_position()
    with pytest.raises(InvalidInput, match="cannot be stored") as e:
        call(ledger)
    assert where in str(e.value)
    assert ledger._store.max_position() == before


PLUS14 = timezone(timedelta(hours=14))
MINUS14 = timezone(timedelta(hours=-14))


@pytest.mark.parametrize(
    "at",
    [
        datetime(1, 1, 1, tzinfo=PLUS14),
        datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 0, tzinfo=MINUS14),
        datetime(9000, 1, 1, tzinfo=UTC),
    ],
    ids=str,
)
def test_L4_an_instant_outside_the_written_range_is_refused(ledger: Ledger, at: datetime) -> None:
    """Repro (before the fix): at=0001-01-01T00:00:00+14:00 raised OverflowError in
    decide's conversion to UTC."""
    with pytest.raises(InvalidInput, match=r"Expected `datetime` from 1970 to before 9000 UTC, got .* - at `\$.at`"):
        ledger.queue("q", at=at)
    assert ledger._store.max_position() == 0
    ledger.queue("q", at=datetime(1970, 1, 1, tzinfo=UTC))
    ledger.queue("q2", at=datetime(8999, 12, 31, 23, 59, 59, tzinfo=UTC))


@pytest.mark.parametrize("at", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "1969-01-01T00:00:00Z"])
def test_L4_an_import_line_with_an_instant_outside_the_range_is_rejected(ledger: Ledger, at: str) -> None:
    """Repro (before the fix): this line raised OverflowError out of import (traceback)."""
    good = b'{"type":"run.queued","at":"2026-09-09T14:00:00Z","run":"a"}\n'
    with pytest.raises(ImportRejected, match="line 2: .*from 1970 to before 9000 UTC"):
        import_lines(ledger, [good, b'{"type":"run.queued","at":"%b","run":"b"}\n' % at.encode()])
    assert ledger._store.max_position() == 0


def test_L4_a_cause_chain_is_bounded(ledger: Ledger) -> None:
    """Repro (before the fix): a cause chain 600 deep raised RecursionError out of the
    character check (and an import line with it, out of import)."""
    _queued(ledger)
    ledger.start("r")
    before = ledger._store.max_position()
    for depth in (MAX_CAUSE_DEPTH + 1, 600, 5000):
        with pytest.raises(InvalidInput, match="cause chain is at most|nested too deeply"):
            ledger.fail("r", "X", resumable=True, cause=chain(depth))
    assert ledger._store.max_position() == before
    ledger.fail("r", "X", resumable=True, cause=chain(MAX_CAUSE_DEPTH))
    assert ledger.get_run("r").cause == chain(MAX_CAUSE_DEPTH)


def test_L4_an_import_line_with_a_deep_cause_chain_is_rejected(ledger: Ledger) -> None:
    head = [
        b'{"type":"run.queued","at":"2026-09-09T14:00:00Z","run":"a"}\n',
        b'{"type":"run.started","at":"2026-09-09T14:00:01Z","run":"a"}\n',
    ]
    for depth in (MAX_CAUSE_DEPTH + 1, 600):
        cause = b'{"code":"X"' + b',"cause":{"code":"X"' * (depth - 1) + b"}" * depth
        line = b'{"type":"run.failed","at":"2026-09-09T14:00:02Z","run":"a","resumable":true,"cause":%b}\n' % cause
        with pytest.raises(ImportRejected, match="line 3: .*(cause chain is at most|nested too deeply)"):
            import_lines(ledger, [*head, line])
    assert ledger._store.max_position() == 0


def test_L4_a_free_form_field_is_bounded_in_depth(ledger: Ledger) -> None:
    _queued(ledger)
    deep: Any = 1
    for _ in range(MAX_NESTING):
        deep = {"a": deep}
    fenced = RunFenced(at=ledger.clock.now(), run="r", epoch="e", refused="run.finished", why="w", report=deep)
    with pytest.raises(InvalidInput, match=f"nested deeper than {MAX_NESTING} levels"):
        ledger.submit(fenced)
    ledger.submit(
        RunFenced(at=ledger.clock.now(), run="r", epoch="e", refused="run.finished", why="w", report=deep["a"])
    )


def test_F1_the_evidence_of_a_stale_report_with_the_deepest_cause_is_kept(ledger: Ledger) -> None:
    """The run.fenced evidence holds the refused report one level deeper: the bounds
    must leave room for it, or a late report would be lost (F1)."""
    ledger.boot("w", epoch="w.e1")
    ledger.queue("r", process="w")
    ledger.start("r", epoch="w.e1", process="w")
    ledger.boot("w", epoch="w.e2")
    with pytest.raises(StaleEpoch) as e:
        ledger.fail("r", "X", resumable=True, epoch="w.e1", cause=chain(MAX_CAUSE_DEPTH), error="x" * 60_000)
    assert e.value.kept_at is not None
    kept = ledger.history("r")[-1].event
    assert isinstance(kept, RunFenced) and kept.report["code"] == "X"


# ------------------------------------------- issue 10 item 15: typed errors, named
def _booted(lg: Ledger) -> Any:
    booted = lg.boot("w", epoch="w.e1")
    lg.queue("r", process="w")
    lg.start("r", epoch="w.e1", process="w")
    return booted


TYPED: list[tuple[str, Any, str]] = [
    (
        "correct to a bogus status",
        lambda lg, b: lg.correct("r", to="bogus", actor="a", reason="x"),
        "to: 'bogus' is not a status",
    ),
    ("get_run(None)", lambda lg, b: lg.get_run(None), "run: "),
    ("history(None)", lambda lg, b: lg.history(None), "run: "),
    ("process(b'w')", lambda lg, b: lg.process(b"w"), "process: "),
    ("get_run with a surrogate", lambda lg, b: lg.get_run("r\udc80"), "run: cannot be stored"),
    (
        "orphans margin NaN",
        lambda lg, b: lg.orphans(margin=math.nan),
        "margin: margin must be from 0 to 31536000 seconds",
    ),
    ("orphans margin 1e15", lambda lg, b: lg.orphans(margin=1e15), "margin: margin must be from 0"),
    ("orphans margin as text", lambda lg, b: lg.orphans(margin="1"), "margin: margin must be a number of seconds"),
    ("sweep margin inf", lambda lg, b: lg.sweep(b, margin=math.inf), "margin: "),
    ("sweep margin 2**2000", lambda lg, b: lg.sweep(b, margin=2**2000), "margin: "),
    ("sweep a hostile epoch", lambda lg, b: lg.sweep(object()), "epoch.process: "),
    ("sweep attempts as text", lambda lg, b: lg.sweep(b, attempts="3"), "attempts: "),
    ("sweep gaps NaN", lambda lg, b: lg.sweep(b, attempts=2, gaps=[math.nan]), "gaps: "),
    ("preview margin 1e15", lambda lg, b: preview(lg, "w", margin=1e15), "margin: "),
    ("preview process None", lambda lg, b: preview(lg, None), "process: "),
    ("startup margin NaN", lambda lg, b: lg.startup("w", margin=math.nan), "margin: "),
    ("stop a dict epoch", lambda lg, b: lg.stop({"e": 1}), "epoch: "),
    (
        "events after 2**63",
        lambda lg, b: list(lg.events(2**63)),
        "after: a position is an integer from 0 to 9223372036854775807",
    ),
    ("events upto -1", lambda lg, b: list(lg.events(0, -1)), "upto: "),
]


@pytest.mark.parametrize(("name", "call", "message"), TYPED, ids=[n for n, _, _ in TYPED])
def test_L4_bad_arguments_are_invalid_input_naming_the_argument(
    ledger: Ledger, name: str, call: Any, message: str
) -> None:
    """Repro (before the fix), each of these raised a raw Python error: ValueError
    ('bogus' is not a valid Status; cannot convert float NaN to integer), TypeError
    (can only concatenate str, not NoneType), OverflowError (1e15 margins, positions
    past 2**63-1 reaching the driver), AttributeError (an epoch without .process).
    `startup` with a bad margin used to boot first and refuse after: nothing may be
    appended."""
    booted = _booted(ledger)
    before = ledger._store.max_position()
    with pytest.raises(InvalidInput) as e:
        call(ledger, booted)
    assert message in str(e.value)
    assert ledger._store.max_position() == before


def test_R1_replay_refuses_a_position_past_the_databases_range(ledger: Ledger) -> None:
    from epochledger.replay import state_at

    _booted(ledger)
    with pytest.raises(InvalidInput, match="--position: a position is an integer from 0 to"):
        state_at(ledger._store, position=99999999999999999999)
    assert state_at(ledger._store, position=2**63 - 1).events == 3


# ---------------------------------------------- issue 10 item 16: follow's poll
@pytest.mark.parametrize("poll", [0, 0.0, -1, math.nan, math.inf, "0.2", None, True, 1e-9, 0.0099, 1e300, 3600.5])
def test_R3_follow_refuses_a_poll_that_would_spin(sqlite_ledger: Ledger, poll: Any) -> None:
    """Repro (before the fix): `follow --poll 0` (or negative) looped on stop.wait(0)
    at 100% CPU. The stop timer ends the loop if the refusal is missing, so the test
    fails instead of hanging."""
    import threading

    from epochledger.projections import engine

    stop = threading.Event()
    timer = threading.Timer(0.5, stop.set)
    timer.start()
    try:
        with pytest.raises(InvalidInput, match="--poll: poll must be from 0.01 to 3600 seconds"):
            engine.follow(sqlite_ledger._store, stop=stop, poll=poll)
    finally:
        timer.cancel()


def _every_character() -> list[str]:
    return [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]  # lone surrogates never encode


def test_L4_the_fast_character_test_accepts_only_what_the_rule_accepts() -> None:
    """codec._FAST: the isprintable() test tried before a Pattern's regex is only ever
    sufficient. Both rules are a character class repeated, so checking every code
    point alone proves it for every string (and the empty one for `+`). Mutation
    caught: the fast test without `" " not in value` (accepts 'a b' as a Name)."""
    import re

    from epochledger.ledger import codec

    assert set(codec._FAST) == {
        m.regex for tp in (Name, Code, LabelValue) for m in tp.__metadata__ if isinstance(m, Pattern)
    }
    for regex, kind in codec._FAST.items():
        rx = re.compile(regex)
        assert not codec._fast_holds(kind, "") or rx.fullmatch("")
        wrong = [c for c in _every_character() if codec._fast_holds(kind, c) and not rx.fullmatch(c)]
        assert wrong == []
        assert codec._fast_holds(kind, "plain-ascii_1.2")  # and it does take the common case


def test_L4_format_characters_are_refused_in_ids_and_label_keys_and_values(sqlite_ledger) -> None:
    """Unicode format characters (category Cf: U+202E RIGHT-TO-LEFT OVERRIDE, zero-width
    spaces, the BOM) would let one run id display as another (`nightly-\u202e2400` reads
    as nightly-0042). Every Cf character of this Python's unicodedata is refused in an
    id, a label key and a label value, by the API and the import alike, naming the
    field, and nothing is appended; the class holds nothing else that is assigned.
    Repro (before the fix): all three were accepted and printed raw."""
    import re

    from epochledger.ledger.errors import InvalidInput
    from epochledger.ledger.events import FORMAT_CHARS

    cf = [c for c in _every_character() if unicodedata.category(c) == "Cf"]
    in_class = re.compile(f"[{FORMAT_CHARS}]")
    assert [c for c in cf if not in_class.fullmatch(c)] == []
    assert [
        c for c in _every_character() if in_class.fullmatch(c) and unicodedata.category(c) not in ("Cf", "Cn")
    ] == []
    name = re.compile(next(m.regex for m in Name.__metadata__ if isinstance(m, Pattern)))
    value = re.compile(next(m.regex for m in LabelValue.__metadata__ if isinstance(m, Pattern)))
    assert [c for c in cf if name.fullmatch(f"a{c}b") or value.fullmatch(f"a{c}b")] == []
    before = sqlite_ledger._store.max_position()
    for kwargs, where in (
        (dict(run="nightly-\u202e2400"), "$.run"),
        (dict(run="r", labels={"k\u200b": "v"}), "$.labels.key"),
        (dict(run="r", labels={"k": "\u202egnp.exe"}), "$.labels['k']"),
        (dict(run="r", workflow="\ufeffwf"), "$.workflow"),
    ):
        with pytest.raises(InvalidInput, match=f"format characters.*- at `{re.escape(where)}`"):
            sqlite_ledger.queue(**kwargs)
    line = json.dumps({"type": "run.queued", "at": "2026-09-09T14:00:00Z", "run": "nightly-\u202e2400"}).encode()
    with pytest.raises(ImportRejected, match="line 1: .*format characters.* - at `\\$.run`"):
        import_lines(sqlite_ledger, [line])
    assert sqlite_ledger._store.max_position() == before
    sqlite_ledger.queue("caf\u00e9-\u4e2d", labels={"team": "d\u00e4ta ok"})  # other non-ASCII letters stay valid


def test_L4_the_write_walk_with_its_fast_test_refuses_exactly_what_the_regexes_refuse() -> None:
    """The struct walk inlines the fast test (codec._checker): for every character of
    the Basic Multilingual Plane in a Name field and in a Code field, it refuses
    exactly when the rule's regex does, with the message naming the field."""
    import re

    from epochledger.ledger import codec
    from epochledger.ledger.events import RunQueued

    at = datetime(2026, 9, 9, tzinfo=UTC)
    check = codec._checker(RunQueued)
    assert check is not None
    name, code = re.compile(r"[^\s\x00-\x1f\x7f]+"), re.compile(r"[^\x00-\x1f\x7f]*")
    for c in _every_character()[:0xF800]:  # U+0000 .. U+FFFF
        value = f"a{c}b"
        bad = check(RunQueued(at=at, run="r", workflow=value), "$")
        assert (bad is None) == (bool(name.fullmatch(value)) and unicodedata.category(c) != "Cf"), repr(c)
        if bad is not None:
            assert bad.endswith("- at `$.workflow`")
        assert (check(RunQueued(at=at, run="r", code=value), "$") is None) == bool(code.fullmatch(value)), repr(c)


def test_L4_out_of_bound_pids_and_signals_are_refused_naming_the_field(sqlite_ledger) -> None:
    """A pid is 1..2^31-1 (pid_t; 0 and negatives name process groups), a signal 1..127,
    by the API and the import alike, naming the field, nothing appended. Repro (before
    the fix): a pid of 2^70 was stored (the audit then held NULL), a pid of -1 left the
    probe unable to judge the epoch forever, and a signal of 2^80 was kept."""
    lg = sqlite_ledger
    before = lg._store.max_position()
    for pid in (2**70, -5, -1, 0, 2**31):
        with pytest.raises(InvalidInput, match=r"Expected `int` from 1 to 2147483647, got -?\d+ - at `\$.pid`"):
            lg.boot("p", epoch="e0", pid=pid)
    booted = [
        b'{"type":"process.booted","at":"2026-09-09T14:00:00Z","process":"p","epoch":"e","booted_at":'
        b'"2026-09-09T13:00:00Z","pid":%d}' % pid
        for pid in (2**70, -5)
    ]
    for line in booted:
        with pytest.raises(ImportRejected, match=r"line 1: .*from 1 to 2147483647.* - at `\$.pid`"):
            import_lines(lg, [line])
    assert lg._store.max_position() == before
    lg.boot("p", epoch="e1", pid=2**31 - 1)
    lg.boot("q", epoch="q1", pid=1)
    before = lg._store.max_position()
    for signal in (2**80, 0, -9, 128):
        with pytest.raises(InvalidInput, match=r"from 1 to 127, got -?\d+ - at `\$.signal`"):
            lg.exited("p", "e1", observed_by="supervisor:test", signal=signal)
    assert lg._store.max_position() == before
    lg.exited("p", "e1", observed_by="supervisor:test", signal=9)


def test_L4_an_instant_finer_than_a_microsecond_is_refused_not_rounded(sqlite_ledger) -> None:
    """A ledger instant is microseconds at the finest: an imported instant with a
    non-zero digit below a microsecond would be stored rounded, so it is refused naming
    the field and what it would have become; trailing zeros are the same instant.
    Repro (before the fix): 14:00:00.1234567Z was imported as 14:00:00.123457Z."""
    lg = sqlite_ledger
    for at, field in (
        (b'"at":"2026-09-09T14:00:00.1234567Z"', "at"),
        (b'"at":"2026-09-09T14:00:00.000000001+02:00"', "at"),
    ):
        line = b'{"type":"run.queued",%b,"run":"a"}' % at
        with pytest.raises(
            ImportRejected,
            match=f"line 1: run.queued: not stored as given: .* finer than a microsecond; "
            f"it would be stored as .* - at `\\$.{field}`",
        ):
            import_lines(lg, [line])
    boot = (
        b'{"type":"process.booted","at":"2026-09-09T14:00:00Z","process":"p","epoch":"e",'
        b'"booted_at":"2026-09-09T13:00:00.99999999Z"}'
    )
    with pytest.raises(ImportRejected, match=r"would be stored as 2026-09-09T13:00:01\+00:00 - at `\$.booted_at`"):
        import_lines(lg, [boot])
    assert lg._store.max_position() == 0
    import_lines(lg, [b'{"type":"run.queued","at":"2026-09-09T14:00:00.1234560000Z","run":"a"}'])
    assert lg.get_run("a").queued_at.microsecond == 123456
