"""NDJSON import and export: one event per line, `{"type": "<tag>", "at": ..., ...}`.

Import sends every line through the same `decide` as the API, stamped with the line's
own `at` (never the wall clock), inside one batch: any bad line rejects the whole file
with its line number and reason, and nothing is appended (rule L4). Export writes the
stored events in log order with the same encoder, so export -> import into an empty
ledger -> export is byte-identical.
"""

from __future__ import annotations

import base64
import bisect
import json
import os
import re
import types
import typing
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from functools import cache
from typing import IO, Annotated, Any, Literal, Protocol, TypeVar

import msgspec

from epochledger.app import (
    Ledger,
    _fold_stream,  # the one fold of a stream (rule T4: bad rows skipped)
    stream_of,
)
from epochledger.files import atomic_write
from epochledger.ledger import codec
from epochledger.ledger import run as run_mod
from epochledger.ledger.errors import IllegalTransition, ImportRejected, InvalidInput, LedgerError, StaleEpoch
from epochledger.ledger.events import (
    TAGS,
    Event,
    Recorded,
    RunCorrected,
    RunEventBase,
    RunFailed,
    RunFenced,
    RunStarted,
    StreamEvent,
    process_stream,
    run_stream,
    tag_of,
)
from epochledger.ledger.store import Poison

_encode = msgspec.json.Encoder().encode
PROCESS_STREAM = process_stream("")
MAX_LINE = 1 << 20  # bytes of a line's content; its line ending does not count


def _content(line: bytes) -> bytes:
    """A line without its line ending (\n or \r\n)."""
    if line.endswith(b"\n"):
        line = line[:-1]
        if line.endswith(b"\r"):
            line = line[:-1]
    return line


def read_lines(f: IO[bytes], limit: int = MAX_LINE) -> Iterator[bytes]:
    """The lines of a binary file, each read with a bound: a line whose content is
    longer than `limit` bytes is refused (ImportRejected) after reading at most
    limit + 2 bytes of it, so `epochledger import /dev/zero` stops at once instead of
    growing until memory runs out. A line of exactly `limit` bytes is accepted."""
    number = 0
    while True:
        line = f.readline(limit + 2)  # the content, and room for \r\n
        if not line:
            return
        number += 1
        if len(_content(line)) > limit:
            raise ImportRejected(number, f"line is longer than {limit} bytes")
        yield line


def parse_line(line: bytes | str, number: int) -> object:
    """One NDJSON line -> a typed event, or ImportRejected naming the line and reason.
    Unknown fields (at any depth: inside `cause` too) and duplicate keys are refused:
    the typed decode would drop the one and keep only the last of the other, silently
    (a typo such as "resumabel" must not vanish)."""
    return _parse_line(line, number)[1]


def _parse_line(line: bytes | str, number: int) -> tuple[dict[str, Any], Event]:
    """(the line as plain JSON, the typed event)."""
    if isinstance(line, str):
        try:
            line = line.encode()
        except UnicodeEncodeError as e:
            raise ImportRejected(number, f"not UTF-8: {e.reason} at character {e.start}") from None
    if len(_content(line)) > MAX_LINE:
        raise ImportRejected(number, f"line is longer than {MAX_LINE} bytes")
    try:
        return _parse(line, number)
    except RecursionError:
        # msgspec's and our own walks recurse; a line nested this deep is no event.
        raise ImportRejected(number, "JSON nested too deeply") from None


def _parse(line: bytes, number: int) -> tuple[dict[str, Any], Event]:
    try:
        raw = msgspec.json.decode(line)
    except msgspec.DecodeError as e:
        raise ImportRejected(number, f"not JSON: {e}") from None
    if not isinstance(raw, dict):
        raise ImportRejected(number, "expected a JSON object")
    tag = raw.get("type")
    if not isinstance(tag, str) or tag not in TAGS:
        raise ImportRejected(number, f"unknown type {tag!r}" if tag is not None else "missing field 'type'")
    unknown = _unknown_field(raw, TAGS[tag], "")
    if unknown is not None:
        raise ImportRejected(number, f"unknown field {unknown!r} for {tag}")
    duplicate = _duplicate_key(line, raw)
    if duplicate is not None:
        raise ImportRejected(number, f"duplicate key {duplicate!r} (JSON would keep only its last value)")
    try:
        event = codec.decode(line)
    except msgspec.ValidationError as e:
        raise ImportRejected(number, f"{tag}: {e}") from None
    finer = _finer_than_a_microsecond(raw, event)
    if finer is not None:
        raise ImportRejected(number, f"{tag}: {finer}")
    return raw, event


# A fraction of a second with a non-zero digit past the sixth: below a microsecond.
_SUB_MICROSECOND = re.compile(r":\d\d\.\d{6}\d*[1-9]")


def _finer_than_a_microsecond(raw: dict[str, Any], event: Event) -> str | None:
    """An instant the line states below a microsecond, which the decode rounded (rule
    L4's "would be stored as something else"): a ledger instant is a Python datetime,
    microseconds at the finest. Refused, naming the field and what it would have become;
    trailing zeros past the sixth digit are the same instant and pass."""
    for key, value in raw.items():
        if type(value) is str and len(value) > 27 and _SUB_MICROSECOND.search(value):
            stored = getattr(event, key, None)
            if isinstance(stored, datetime):
                return (
                    f"not stored as given: {value!r} is finer than a microsecond; it would be stored as "
                    f"{stored.isoformat()} - at `$.{key}`"
                )
    return None


@cache
def _fields(tp: type[msgspec.Struct]) -> dict[str, Any]:
    """A struct's fields and their types (the tag field too, as a plain string)."""
    hints = typing.get_type_hints(tp)
    fields = {f: hints[f] for f in tp.__struct_fields__}
    tag_field = tp.__struct_config__.tag_field
    if tag_field is not None:
        fields[tag_field] = str
    return fields


Walk = typing.Callable[[Any, str], "str | None"]


def _unknown_field(raw: Any, tp: Any, path: str) -> str | None:
    """The first key of `raw` that no field of the type `tp` takes, at any depth (as
    `cause.zzz`), walking the type the typed decode will apply. Other mismatches
    (a string for a number, ...) are left to that decode, which names them."""
    walk = _walker(tp)
    return walk(raw, path) if walk is not None else None


@cache
def _walker(tp: Any) -> Walk | None:
    """The walk of `_unknown_field` for `tp`, built once per type; None where no struct
    can occur below (a scalar, `dict[str, Any]`), so a flat event costs one set check."""
    while typing.get_origin(tp) is Annotated:
        tp = typing.get_args(tp)[0]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        options = [w for w in (_walker(a) for a in args) if w is not None]
        if not options:
            return None
        return lambda raw, path: next(filter(None, (w(raw, path) for w in options)), None)
    if origin is list:
        item = _walker(args[0])
        if item is None:
            return None
        return lambda raw, path: (
            next(filter(None, (item(v, f"{path}{i}.") for i, v in enumerate(raw))), None)
            if isinstance(raw, list)
            else None
        )
    if origin is dict:
        value = _walker(args[1])
        if value is None:
            return None
        return lambda raw, path: (
            next(filter(None, (value(v, f"{path}{k}.") for k, v in raw.items())), None)
            if isinstance(raw, dict)
            else None
        )
    if not (isinstance(tp, type) and issubclass(tp, msgspec.Struct)):
        return None
    fields = _fields(tp)
    nested: list[tuple[str, Walk]] = []
    ready = [False]

    def struct(raw: Any, path: str) -> str | None:
        if not isinstance(raw, dict):
            return None
        if not ready[0]:  # on first use: a struct may contain itself (Cause)
            ready[0] = True
            nested.extend((f, w) for f, t in fields.items() if (w := _walker(t)) is not None)
        if not raw.keys() <= fields.keys():
            return path + str(next(k for k in raw if k not in fields))
        for f, w in nested:
            if f in raw:
                bad = w(raw[f], f"{path}{f}.")
                if bad is not None:
                    return bad
        return None

    return struct


def _duplicate_key(line: bytes, raw: dict[str, Any]) -> str | None:
    """The first key that occurs twice in one JSON object of `line`, if any: msgspec
    keeps the last value silently.

    Fast path (docs/benchmarks.md, "NDJSON import"): re-encode the decoded line and
    count colons. Outside strings a colon ends a key; inside strings colons survive
    the re-encoding, which only drops duplicate keys (and their values) and may turn
    an escaped colon (\\u003a) into a plain one. So without that escape in the line,
    equal counts prove there is no duplicate; otherwise Python's json module, which
    shows every pair, names it (the slow path, for those lines alone)."""
    if b"\\u003" not in line and line.count(b":") == _encode(raw).count(b":"):
        return None
    found: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> None:
        seen: set[str] = set()
        for key, _ in items:
            if key in seen and not found:
                found.append(key)
            seen.add(key)
        return None  # the values are not needed: msgspec decodes the line

    json.loads(line, object_pairs_hook=pairs)
    return found[0] if found else None


def _not_as_stated(raw: dict[str, Any], stated: Event, recorded: Event) -> str | None:
    """The first field the line states that the ledger would record otherwise: decide
    stamps status and code, and a stated value must be the stamped one (a run.cancelled
    stating "code": "" would be recorded with CANCELLED)."""
    for key in raw:
        if key == "type":
            continue
        mine, theirs = getattr(stated, key), getattr(recorded, key)
        if mine != theirs:
            shown = msgspec.json.encode(msgspec.to_builtins(theirs)).decode()
            return (
                f"field {key!r}: the line states {msgspec.json.encode(raw[key]).decode()}, but the ledger would "
                f"record {shown}; state that, or leave the field out"
            )
    return None


# ------------------------------------------------------------------ import
OnError = Literal["stop", "skip"]
ClockSteps = Literal["refuse", "keep"]
CHUNK = 2000  # lines parsed, and their streams read in bulk, at a time


class Rejected(msgspec.Struct, frozen=True, kw_only=True):
    """One line the tolerant import refused: its number, why, and its exact content."""

    line: int
    reason: str
    content: bytes  # the line without its line ending
    kept: str | None = None  # "run.fenced" if the refused report was kept as evidence
    position: int | None = None  # the evidence's log position, once committed


class ImportResult(msgspec.Struct, kw_only=True):
    """What an import did, line by line counted: every non-blank line is exactly one of
    landed, duplicate, held or rejected (rule I1)."""

    lines: int = 0  # non-blank lines read
    landed: int = 0  # lines appended as the event they state
    duplicates: int = 0  # lines already recorded (same stream, type, time and fields): nothing appended
    held: int = 0  # lines whose effect already held (decide returned nothing): nothing appended
    rejected: list[Rejected] = []  # on_error="skip" only (strict raises at the first)
    evidence: int = 0  # of the rejected, refused reports kept as run.fenced evidence
    appended: int = 0  # events appended: landed + evidence


def import_lines(ledger: Ledger, lines: Iterable[bytes | str], *, clock_steps: ClockSteps = "refuse") -> int:
    """Strict import: decide every line, then append them all in one transaction.
    Returns how many events were appended (duplicates and lines whose effect already
    held append nothing). Any refused line raises ImportRejected and appends nothing."""
    return import_events(ledger, lines, clock_steps=clock_steps).appended


def import_events(
    ledger: Ledger,
    lines: Iterable[bytes | str],
    *,
    on_error: OnError = "stop",
    rejects: str | None = None,
    protected: Iterable[str] = (),
    clock_steps: ClockSteps = "refuse",
) -> ImportResult:
    """Import NDJSON lines through the one write path, in one transaction (rule I1).

    - A line already recorded (same stream, type, time and the fields it states,
      anywhere in the stream or earlier in the file) is a duplicate: counted, not
      appended. A report already kept as `run.fenced` evidence appends nothing either,
      and is listed as rejected again (kept, at the evidence's position).
    - A line is judged at its place in the file (`_Import`): one not recorded that
      comes before a recorded line of its run (or of the slot whose epoch it names) is
      judged just before that line's event, never appended. So importing the same
      file twice appends nothing the second time and rejects the same lines.
    - A run event whose `at` is earlier than the previous event of its run (not
      counting evidence) is refused: it would give the run a negative duration. clock_steps="keep" accepts it as
      recorded: for an export of a ledger whose writers' clocks stepped back or
      disagreed (the ledger records what each writer's clock read, rule O3), which must
      come back exactly as written.
    - on_error="stop" (strict, the default): the first refused line raises
      ImportRejected (its number and reason) and nothing is appended.
    - on_error="skip" (tolerant): every acceptable line lands; each refused line is in
      `rejected` (and, given `rejects`, written there as NDJSON, atomically, after the
      commit: epochledger/files.py). A refused report that is a real observation (a
      late success after a cancel, a stale epoch's report) is kept as `run.fenced`
      evidence (ledger/run.py `refused_report`, `fence`), and still counted rejected.

    A line longer than MAX_LINE stops the import in either mode, appending nothing (the
    reader cannot skip it in bounded memory and time: `/dev/zero` has no line end)."""
    if clock_steps not in ("refuse", "keep"):
        raise InvalidInput(f"expected 'refuse' or 'keep', got {clock_steps!r}", where="--clock-steps")
    keep = clock_steps == "keep"
    return with_rejects(
        ledger,
        on_error,
        rejects,
        protected,
        lambda: _Import(ledger, tolerant=on_error == "skip", keep_clock_steps=keep).run(lines),
    )


class Rejecting(Protocol):
    """What an import that rejects reports: what it appended, and what it rejected."""

    appended: int
    rejected: list[Rejected]


R = TypeVar("R", bound=Rejecting)


def with_rejects(
    ledger: Ledger, on_error: OnError, rejects: str | None, protected: Iterable[str], run: Callable[[], R]
) -> R:
    """Run an import in mode `on_error` (rule I1: "stop" strict, "skip" tolerant) and,
    given `rejects`, write what it rejected there, one `reject_record` a line: the one
    rejects file of every import (NDJSON's lines, an importer's foreign runs). The file
    is opened (and so refused: a directory, the ledger's own file, one of `protected`)
    before the import runs, and replaced whole after it committed."""
    if on_error not in ("stop", "skip"):
        raise InvalidInput(f"expected 'stop' or 'skip', got {on_error!r}", where="--on-error")
    if rejects is None:
        return run()
    if on_error != "skip":
        raise InvalidInput(
            "a rejects file needs --on-error skip (a strict import rejects the whole file)", where="--rejects"
        )
    if os.path.isdir(rejects):
        raise InvalidInput(
            "is a directory, not a file for the rejected lines (nothing was imported)", where="--rejects"
        )
    result: R | None = None
    try:
        with atomic_write(rejects, protected=[*ledger.local_files(), *protected], where="--rejects") as out:
            result = run()
            for r in result.rejected:
                out.write(reject_record(r) + b"\n")
    except InvalidInput as e:
        if result is None:  # refused before the import ran, or the import itself refused
            raise
        # The commit landed; only the rejects file could not be written: say both.
        raise InvalidInput(
            f"the import was committed ({result.appended} events appended, {len(result.rejected)} lines "
            f"rejected), but the rejects file could not be written: {e}",
            where="--rejects",
        ) from None
    return result


def reject_record(r: Rejected) -> bytes:
    """One line of a rejects file: `line`, `reason`, the original `event` (the line's
    JSON, when it is JSON), and `raw`: the line's exact text (`raw_base64` when it is not
    UTF-8), so nothing of the input is lost; `kept`/`position` for kept evidence."""
    record: dict[str, Any] = {"line": r.line, "reason": r.reason}
    try:
        record["raw"] = r.content.decode("utf-8")
    except UnicodeDecodeError:
        record["raw_base64"] = base64.b64encode(r.content).decode()
    if r.kept is not None:
        record["kept"] = r.kept
        record["position"] = r.position
    try:
        return _encode({**record, "event": msgspec.json.decode(r.content)})
    except (msgspec.DecodeError, RecursionError):  # not JSON, or nested too deeply to echo: `raw` has it
        return _encode(record)


# What the ledger fills in when a line leaves it out (decide stamps status, and the code
# of every event but a failure's or a correction's; a start's slot and slot epoch): a
# line that omits them is still the event recorded with them.
_STAMPED_RUN = frozenset({"status", "code"})
_STAMPED: dict[type[Event], frozenset[str]] = {
    RunFailed: frozenset({"status"}),
    RunCorrected: frozenset({"status"}),
    RunStarted: _STAMPED_RUN | {"process", "slot_epoch"},
}


def _stamped(event: Event) -> frozenset[str]:
    found = _STAMPED.get(type(event))
    if found is not None:
        return found
    return _STAMPED_RUN if isinstance(event, RunEventBase) else frozenset()


def _same(raw: dict[str, Any], stated: Event, recorded: Event) -> bool:
    """Is `recorded` the event `stated` (the line, as `raw` states it)? Same type, and
    every field equal (instants as instants, whatever their offset), except what the
    ledger stamps where the line leaves it out."""
    if type(stated) is not type(recorded):
        return False
    wild = _stamped(stated)
    return all(
        getattr(stated, f) == getattr(recorded, f) for f in stated.__struct_fields__ if f in raw or f not in wild
    )


def _kept(raw: dict[str, Any], stated: Event, fenced: RunFenced) -> bool:
    """Is `fenced` the evidence kept for the report `stated` (by the fence, or by an
    earlier tolerant import)? Its `report` is the report as submitted."""
    if fenced.refused != tag_of(stated):
        return False
    mine: dict[str, Any] = msgspec.to_builtins(stated)
    wild = _stamped(stated)
    report = fenced.report
    return all(report.get(k) == v for k, v in mine.items() if k in raw or k not in wild) and all(
        k in mine or k in wild for k in report
    )


class _Known:
    """One stream as the import knows it: its events by (tag, instant), and its latest.
    The first `stored` events are the stream as the store held it when the import
    read it (`rows`: each one's index in that history, `positions`: its log position);
    the rest are this import's own appends."""

    __slots__ = ("by_key", "claimed", "events", "history", "last_at", "last_where", "positions", "rows", "stored")

    def __init__(self, history: list[Recorded | Poison] | None = None) -> None:
        self.by_key: dict[tuple[str, datetime], list[int]] = {}
        self.events: list[Event] = []  # in stream order
        self.positions: list[int | None] = []
        self.rows: list[int] = []
        self.history = history or []
        self.claimed: set[int] = set()  # kept evidence a line of this import was found to be
        self.last_at: datetime | None = None
        self.last_where = ""
        for row, rec in enumerate(self.history):
            if type(rec) is Recorded:
                self.rows.append(row)
                self.add(rec.event, f"position {rec.position}", rec.position)
        self.stored = len(self.events)

    def add(self, event: Event, where: str, position: int | None = None) -> None:
        self.by_key.setdefault((tag_of(event), event.at), []).append(len(self.events))
        self.events.append(event)
        self.positions.append(position)
        if not isinstance(event, RunFenced):  # evidence is no transition: it never moves the run's clock (rule I1)
            self.last_at, self.last_where = event.at, where

    def resent(self, raw: dict[str, Any], event: RunEventBase, state: Any, upto: int | None = None) -> bool:
        """Is `event` a re-send of a recorded event of its run that `decide` would call
        the same event again (another time, actor or reason: rule L1), as if it came
        right after it: nothing recorded after the original is earlier than the
        re-send (or as early and a change of status)? Such a line appended nothing when
        it was first imported (its effect held), so importing its file again must not
        refuse it now that the run has moved on. `upto`: as if the stream ended before
        its event `upto` (the line's place), with `state` its state there."""
        events = self.events
        for i in range((len(events) if upto is None else upto) - 1, -1, -1):
            e = events[i]
            if not isinstance(e, RunEventBase):
                continue
            if type(e) is type(event) and e.at <= event.at and _holds_again(raw, event, e, state):
                return True
            if e.at < event.at:
                return False
            if e.at == event.at and i > 0 and e.status != getattr(events[i - 1], "status", None):
                return False
        return False

    def match(self, raw: dict[str, Any], event: Event) -> int | None:
        """The index of the recorded event the line states (or of the run.fenced
        evidence kept for it), if any: the line is already recorded."""
        for i in self.by_key.get((tag_of(event), event.at), ()):
            if _same(raw, event, self.events[i]):
                return i
        if isinstance(event, RunEventBase):
            for i in self.by_key.get(("run.fenced", event.at), ()):
                fenced = self.events[i]
                if isinstance(fenced, RunFenced) and _kept(raw, event, fenced):
                    return i
        return None

    def before(self, index: int) -> tuple[Any, datetime | None, str]:
        """The stream's state just before its stored event `index`, and the time and
        position of its last event but evidence there: the place of a line that comes
        before it."""
        last = next((k for k in range(index - 1, -1, -1) if not isinstance(self.events[k], RunFenced)), None)
        event = self.events[index]
        assert isinstance(event, StreamEvent)  # every tag of the catalogue is one
        state = _fold_stream(stream_of(event), self.history[: self.rows[index]])
        return (state, None, "") if last is None else (state, self.events[last].at, f"position {self.positions[last]}")


def _holds_again(raw: dict[str, Any], event: RunEventBase, original: RunEventBase, state: Any) -> bool:
    """Would `decide` find `event` to be `original` again, had `original` been the run's
    last event? (With the slot a start's epoch gave `original`, where the line names none.)"""
    if state is None:
        return False
    if isinstance(event, RunStarted) and "process" not in raw:
        event = msgspec.structs.replace(event, process=getattr(original, "process", None))
    try:
        return run_mod.decide(event, msgspec.structs.replace(state, last=original)) == []  # type: ignore[arg-type]
    except LedgerError:
        return False


class _Refused(Exception):
    def __init__(self, reason: str, evidence: RunFenced | None = None, kept_at: int | None = None):
        self.reason = reason
        self.evidence = evidence
        self.kept_at = kept_at  # the evidence for this line is kept already, at this log position


Parsed = tuple[int, bytes, "tuple[dict[str, Any], Event] | ImportRejected"]
Read = tuple[int, bytes, "tuple[dict[str, Any], Event] | ImportRejected | None"]  # None: parsed again when decided


class _Import:
    """Two passes over the file (rule I1, "a line is judged at its place"). The first
    parses every line, reads the streams they name in bulk, and notes, stream by
    stream, which lines are recorded there already (`anchors`). The second decides
    every line in file order; a line not recorded whose stream has a recorded line
    after it in the file is judged at its place, just before that line's event,
    never at the end of the run's history: appending it there would put it after
    events the file says came later (a resume before its pause), and the outcome of
    a file would depend on how many times it was imported."""

    def __init__(self, ledger: Ledger, *, tolerant: bool, keep_clock_steps: bool = False):
        self.store = ledger._store  # the import reads histories in bulk: behind the facade
        self.batch = ledger.batch()
        self.tolerant = tolerant
        self.keep_clock_steps = keep_clock_steps
        self.known: dict[str, _Known] = {}
        self.anchors: dict[
            str, list[tuple[int, int]]
        ] = {}  # stream -> (line, index of its stored event), in file order
        self.taken: set[int] = set()  # lines whose recorded event is a later line's (`_settle`)
        self.slots_anchored = False  # some line is recorded in a process slot's stream already
        self.result = ImportResult()
        self.kept: list[tuple[int, int]] = []  # (index in rejected, index in the batch's appends)

    def run(self, lines: Iterable[bytes | str]) -> ImportResult:
        # Only a line's bytes are kept between the passes, not its parse (about three
        # times its size): parsing it again costs less than holding every parse at once.
        read: list[Read] = []
        chunk: list[Parsed] = []
        try:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                chunk.append(self._parse(line, number))
                if len(chunk) >= CHUNK:
                    self._read(chunk)
                    read += [(n, c, p if isinstance(p, ImportRejected) else None) for n, c, p in chunk]
                    chunk = []
        except ImportRejected:  # the reader gave up (a line over MAX_LINE): nothing lands,
            self._read(chunk)  # but a strict import names the first bad line, as it reads
            self._settle()
            self._decide([*read, *chunk])
            raise
        self._read(chunk)
        read += chunk
        del chunk
        self._settle()
        self._decide(read)
        result = self.result
        result.appended = self.batch.pending
        recorded = self.batch.commit()
        for i, j in self.kept:
            result.rejected[i] = msgspec.structs.replace(result.rejected[i], position=recorded[j].position)
        return result

    @staticmethod
    def _parse(line: bytes | str, number: int) -> Parsed:
        content = _content(line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line)
        try:
            return number, content, _parse_line(line, number)
        except ImportRejected as e:
            return number, content, e

    def _read(self, chunk: list[Parsed]) -> None:
        """Read the streams this chunk names that the import has not seen, in bulk, and
        note the chunk's lines already recorded in them (before anything is decided)."""
        streams = [stream_of(p[2][1]) for p in chunk if not isinstance(p[2], ImportRejected)]  # type: ignore[arg-type]
        new = [s for s in dict.fromkeys(streams) if s not in self.known]
        if new:
            histories = self.store.read_streams(new)
            self.batch.preload(histories)
            for stream, history in histories.items():
                self.known[stream] = _Known(history)
        for number, _, parsed in chunk:
            if isinstance(parsed, ImportRejected):
                continue
            raw, event = parsed
            assert isinstance(event, StreamEvent)  # every tag of the catalogue is one
            stream = stream_of(event)
            known = self.known[stream]
            if not known.stored:
                continue
            try:
                i = known.match(raw, event)
            except OverflowError:  # an instant out of bounds: `checked` refuses it when decided
                continue
            if i is not None:
                self.anchors.setdefault(stream, []).append((number, i))

    def _settle(self) -> None:
        """Which recorded event is whose. A line that states an event recorded at
        position P is its duplicate, unless a later line states the same event and a
        line between them is the first to state an event recorded before P, in the
        line's own stream or in the slot whose epoch it names, and after every event
        the lines before it state: then the file's order puts that event before P, so
        P is the later line's (it landed where an earlier import rejected this line,
        e.g. a start before its epoch's boot) and this line is judged at its place
        like any line not recorded. Events recorded before the file's own (the
        frontier) prove nothing about its order, so they do not count."""
        flat = sorted(
            (line, self.known[stream].positions[i] or 0, stream, i)
            for stream, anchors in self.anchors.items()
            for line, i in anchors
        )
        fresh: dict[str, list[tuple[int, int]]] = {}  # stream -> (line, position) of each first statement
        seen: set[tuple[str, int]] = set()
        for line, position, stream, i in flat:
            if (stream, i) not in seen:
                seen.add((stream, i))
                fresh.setdefault(stream, []).append((line, position))
        while True:  # a line found taken no longer states its position: until nothing changes
            taken = len(self.taken)
            self._take(flat, fresh)
            if len(self.taken) == taken:
                break
        for stream, anchors in self.anchors.items():  # a place is before the first line that states an event
            firsts: dict[int, tuple[int, int]] = {}
            for line, i in anchors:
                if line not in self.taken:
                    firsts.setdefault(i, (line, i))
            self.anchors[stream] = sorted(firsts.values())
        self.slots_anchored = any(stream.startswith(PROCESS_STREAM) for stream in self.anchors)

    def _take(self, flat: list[tuple[int, int, str, int]], fresh: dict[str, list[tuple[int, int]]]) -> None:
        frontier: dict[int, int] = {}  # line -> the latest position the lines before it state
        latest = 0
        for line, position, _, _ in flat:
            frontier.setdefault(line, latest)
            if line not in self.taken:
                latest = max(latest, position)
        for stream, anchors in self.anchors.items():
            known = self.known[stream]
            last = {i: line for line, i in anchors}  # stored index -> the last line that states it
            for line, i in anchors:
                end = last[i]
                if end == line or line in self.taken:
                    continue
                position, floor = known.positions[i] or 0, frontier[line]
                slot = self._stated_slot(known.events[i]) if stream.startswith(run_stream("")) else None
                for other in (stream, slot):
                    firsts = fresh.get(other, []) if other is not None else []
                    start = bisect.bisect_right(firsts, (line, position))
                    if any(floor < p < position for n, p in firsts[start:] if n < end):
                        self.taken.add(line)
                        break

    def _decide(self, lines: list[Read]) -> None:
        for number, content, parsed in lines:
            self.result.lines += 1
            try:
                if isinstance(parsed, ImportRejected):
                    raise _Refused(parsed.reason)
                self._line(number, *(parsed or _parse_line(content, number)))
            except _Refused as r:
                if not self.tolerant:
                    raise ImportRejected(number, r.reason) from None
                self._reject(number, content, r)

    def _line(self, number: int, raw: dict[str, Any], event: Event) -> None:
        assert isinstance(event, StreamEvent)  # all tags
        try:  # first: an instant out of bounds must not reach the index (hashing it overflows) or decide
            codec.checked(event)
        except InvalidInput as e:
            raise _Refused(str(e)) from None
        stream = stream_of(event)
        known = self.known[stream]
        found = known.match(raw, event) if number not in self.taken else None
        if found is not None:
            kept = known.events[found]
            if isinstance(kept, RunFenced) and tag_of(event) != "run.fenced" and found not in known.claimed:
                # The refused report kept as evidence (by an earlier import of this
                # file, or by the fence): rejected again, as it was, appending nothing.
                known.claimed.add(found)
                raise _Refused(_refusal_of(kept), kept_at=known.positions[found])
            self.result.duplicates += 1
            return
        place = self._place(stream, number)
        if place is not None:
            state, last_at, where = known.before(place[1])
            if isinstance(event, RunEventBase) and known.resent(raw, event, state, upto=place[1]):
                self.result.held += 1
                return
            self._behind(event, state, (last_at, where), place[0], known.positions[place[1]])
            return
        if isinstance(event, RunEventBase) and known.resent(raw, event, self.batch.state(stream)):
            self.result.held += 1
            return
        slot = self._slot(event) if self.slots_anchored else None
        place = self._place(slot, number) if slot is not None else None
        if place is not None and slot is not None:  # the slot whose epoch the line names moved past its place
            self._behind(  # ... so it is judged there too
                event,
                self.batch.state(stream),
                (known.last_at, known.last_where),
                place[0],
                self.known[slot].positions[place[1]],
            )
            return
        if (
            isinstance(event, RunEventBase)
            and known.last_at is not None
            and event.at < known.last_at
            and not self.keep_clock_steps
        ):
            raise _Refused(_backwards(event, known.last_at, known.last_where))
        point = self.batch.savepoint(stream)
        try:
            state = self.batch.submit(event)
        except StaleEpoch as e:  # a stale epoch's report: the fence's own evidence (rule F1)
            raise _Refused(str(e), e.evidence if isinstance(e.evidence, RunFenced) else None) from None
        except IllegalTransition as e:
            evidence = None
            if isinstance(event, RunEventBase):
                evidence = run_mod.refused_report(event, self.batch.state(run_stream(event.run)), str(e))
            raise _Refused(str(e), evidence) from None
        except InvalidInput as e:
            raise _Refused(str(e)) from None
        appended = self.batch.appended_since(point.pending)
        if not appended:
            self.result.held += 1
            return
        # A run's state keeps the event just appended (`last`); process events are
        # appended as given (ledger/process.py stamps nothing).
        recorded = getattr(state, "last", None)
        if type(recorded) is type(event):
            bad = _not_as_stated(raw, event, recorded)
            if bad is not None:
                self.batch.rollback(point)
                raise _Refused(bad)
        for a in appended:
            known.add(a.event, f"line {number}")
        self.result.landed += 1

    def _place(self, stream: str, number: int) -> tuple[int, int] | None:
        """(line, index of its stored event) of the first line after `number` in the
        file that is recorded in `stream` already, if any: the line's place is before it."""
        anchors = self.anchors.get(stream)
        if not anchors:
            return None
        at = bisect.bisect_right(anchors, (number, len(self.known[stream].events)))
        return anchors[at] if at < len(anchors) else None

    def _slot(self, event: Event) -> str | None:
        """The process stream a run line's verdict reads besides its run's: the slot
        of the epoch it names (the fence), or a start's slot (its `slot_epoch`)."""
        if not isinstance(event, RunEventBase):
            return None
        epoch = run_mod.writer_epoch(event)
        if epoch is not None:
            try:
                return process_stream(
                    self.batch.find_epoch(
                        epoch, run_mod.slot_hint(event, self.batch.state(run_stream(event.run)))
                    ).process
                )
            except LedgerError:
                return None
        if isinstance(event, RunStarted):
            state = self.batch.state(run_stream(event.run))
            slot = event.process or (state.process if state is not None else None)
            return process_stream(slot) if slot is not None else None
        return None

    def _stated_slot(self, stored: Event) -> str | None:
        """The slot whose epoch a recorded line's verdict read: the stored event's own
        (`_slot`), or, for a refused report kept as evidence, the slot of the epoch that
        report named (the evidence itself names no writer). Without it a report refused
        for an epoch not yet booted, then kept when a later copy of it came after the
        boot, would claim that copy's evidence on the next import."""
        if isinstance(stored, RunFenced):
            if stored.epoch == run_mod.UNATTRIBUTED:
                return None
            try:
                return process_stream(self.batch.find_epoch(stored.epoch, None).process)
            except LedgerError:
                return None
        return self._slot(stored)

    def _behind(
        self, event: StreamEvent, state: Any, last: tuple[datetime | None, str], later: int, position: int | None
    ) -> None:
        """Judge a line at its place: against its stream's history (`state`, whose last
        event but evidence is `last`: its time and where) just before the event of the recorded line
        `later` that follows it in the file. Nothing is appended: the history has moved
        past that place. A line whose effect held there holds; any other is rejected,
        with decide's refusal or the time check where the place gives one (the reason
        an earlier import of the file gave, mostly)."""
        try:
            events = self.batch.decide_at(event, state)
        except LedgerError as e:  # StaleEpoch too: its evidence is not kept, nothing is appended at a past place
            raise _Refused(str(e)) from None
        if not events:
            self.result.held += 1
            return
        last_at, where = last
        if isinstance(event, RunEventBase) and last_at is not None and event.at < last_at and not self.keep_clock_steps:
            raise _Refused(_backwards(event, last_at, where))
        raise _Refused(
            f"out of place: line {later}, after it in the file, is already recorded (position {position}), "
            "so this line's place in the history is taken; "
            "nothing is appended before recorded events (rule I1: a line is judged at its place)"
        )

    def _reject(self, number: int, content: bytes, refused: _Refused) -> None:
        result = self.result
        kept = "run.fenced" if refused.kept_at is not None else None
        evidence = refused.evidence
        if evidence is not None:
            stream = run_stream(evidence.run)
            point = self.batch.savepoint(stream)
            try:
                self.batch.submit(evidence)
            except LedgerError:  # evidence that cannot be kept: the line is still in the rejects
                self.batch.rollback(point)
            else:
                appended = self.batch.appended_since(point.pending)
                known = self.known[stream]
                for a in appended:
                    known.claimed.add(len(known.events))  # this line's own evidence
                    known.add(a.event, f"line {number}")
                if appended:
                    kept = "run.fenced"
                    result.evidence += 1
                    self.kept.append((len(result.rejected), self.batch.pending - 1))
        result.rejected.append(
            Rejected(line=number, reason=refused.reason, content=content, kept=kept, position=refused.kept_at)
        )


def _refusal_of(kept: RunFenced) -> str:
    """The refusal a kept report was rejected with, from its evidence: the fence's
    (which names the rule that ended the epoch) as StaleEpoch words it; the tolerant
    import's own (`refused_report`) keeps it whole in `why`."""
    if kept.rule is None:
        return kept.why
    return str(StaleEpoch(kept.run, kept.status, kept.refused, kept.epoch, kept.why))


def _backwards(event: RunEventBase, last_at: datetime, where: str) -> str:
    return (
        f"time goes backwards in run {event.run!r}: at {event.at.isoformat()} is earlier than "
        f"{last_at.isoformat()}, the time of its previous event ({where}); the run would show a negative "
        "duration (an export of a ledger whose clock stepped back imports with --clock-steps keep)"
    )


def export_lines(ledger: Ledger, after: int = 0) -> Iterable[bytes]:
    for rec in ledger.events(after):
        yield codec.encode(rec.event) + b"\n"


def export_to(ledger: Ledger, out: IO[bytes], after: int = 0) -> int:
    n = 0
    for line in export_lines(ledger, after):
        out.write(line)
        n += 1
    return n


def export_file(ledger: Ledger, path: str, after: int = 0) -> int:
    """Export to the file `path`, atomically (epochledger/files.py): the file is replaced
    only by a complete export, and never when it is one of the ledger's own files."""
    with atomic_write(path, protected=ledger.local_files()) as out:
        return export_to(ledger, out, after)
