"""NDJSON import and export: one event per line, `{"type": "<tag>", "at": ..., ...}`.

Import sends every line through the same `decide` as the API, stamped with the line's
own `at` (never the wall clock), inside one batch: any bad line rejects the whole file
with its line number and reason, and nothing is appended (rule L4). Export writes the
stored events in log order with the same encoder, so export -> import into an empty
ledger -> export is byte-identical.
"""

from __future__ import annotations

import base64
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

from epochledger.app import Ledger, stream_of
from epochledger.files import atomic_write
from ledger import codec
from ledger import run as run_mod
from ledger.errors import IllegalTransition, ImportRejected, InvalidInput, LedgerError, StaleEpoch
from ledger.events import (
    TAGS,
    Event,
    LedgerEventBase,
    PassEventBase,
    ProcessEventBase,
    Recorded,
    RoleEventBase,
    RunCorrected,
    RunEventBase,
    RunFailed,
    RunFenced,
    RunStarted,
    run_stream,
    tag_of,
)

_encode = msgspec.json.Encoder().encode
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
                return (f"not stored as given: {value!r} is finer than a microsecond; it would be stored as "
                        f"{stored.isoformat()} - at `$.{key}`")  # fmt: skip
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
        return lambda raw, path: next(filter(None, (item(v, f"{path}{i}.") for i, v in enumerate(raw))), None) \
            if isinstance(raw, list) else None  # fmt: skip
    if origin is dict:
        value = _walker(args[1])
        if value is None:
            return None
        return lambda raw, path: next(filter(None, (value(v, f"{path}{k}.") for k, v in raw.items())), None) \
            if isinstance(raw, dict) else None  # fmt: skip
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

    Fast path (~0.5 us): re-encode the decoded line and count colons. Outside strings
    a colon ends a key; inside strings colons survive the re-encoding, which only
    drops duplicate keys (and their values) and may turn an escaped colon (\\u003a)
    into a plain one. So without that escape in the line, equal counts prove there is
    no duplicate; otherwise Python's json module, which shows every pair, names it
    (~4 us)."""
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
            return (f"field {key!r}: the line states {msgspec.json.encode(raw[key]).decode()}, but the ledger would "
                    f"record {shown}; state that, or leave the field out")  # fmt: skip
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


def import_events(ledger: Ledger, lines: Iterable[bytes | str], *, on_error: OnError = "stop",
                  rejects: str | None = None, protected: Iterable[str] = (),
                  clock_steps: ClockSteps = "refuse") -> ImportResult:  # fmt: skip
    """Import NDJSON lines through the one write path, in one transaction (rule I1).

    - A line already recorded (same stream, type, time and the fields it states,
      anywhere in the stream or earlier in the file; a report already kept as
      `run.fenced` evidence counts too) is a duplicate: counted, not appended. So
      importing the same file twice appends nothing the second time.
    - A run event whose `at` is earlier than the previous event of its run is refused:
      it would give the run a negative duration. clock_steps="keep" accepts it as
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
    return with_rejects(ledger, on_error, rejects, protected,
                        lambda: _Import(ledger, tolerant=on_error == "skip", keep_clock_steps=keep).run(lines))  # fmt: skip


class Rejecting(Protocol):
    """What an import that rejects reports: what it appended, and what it rejected."""

    appended: int
    rejected: list[Rejected]


R = TypeVar("R", bound=Rejecting)


def with_rejects(ledger: Ledger, on_error: OnError, rejects: str | None, protected: Iterable[str],
                 run: Callable[[], R]) -> R:  # fmt: skip
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
        raise InvalidInput("a rejects file needs --on-error skip (a strict import rejects the whole file)", where="--rejects")
    if os.path.isdir(rejects):
        raise InvalidInput("is a directory, not a file for the rejected lines (nothing was imported)", where="--rejects")
    result: R | None = None
    try:
        with atomic_write(rejects, protected=[*ledger.store.local_files(), *protected], where="--rejects") as out:
            result = run()
            for r in result.rejected:
                out.write(reject_record(r) + b"\n")
    except InvalidInput as e:
        if result is None:  # refused before the import ran, or the import itself refused
            raise
        # The commit landed; only the rejects file could not be written: say both.
        raise InvalidInput(f"the import was committed ({result.appended} events appended, {len(result.rejected)} lines "
                           f"rejected), but the rejects file could not be written: {e}", where="--rejects") from None  # fmt: skip
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
    return all(getattr(stated, f) == getattr(recorded, f) for f in stated.__struct_fields__
               if f in raw or f not in wild)  # fmt: skip


def _kept(raw: dict[str, Any], stated: Event, fenced: RunFenced) -> bool:
    """Is `fenced` the evidence kept for the report `stated` (by the fence, or by an
    earlier tolerant import)? Its `report` is the report as submitted."""
    if fenced.refused != tag_of(stated):
        return False
    mine: dict[str, Any] = msgspec.to_builtins(stated)
    wild = _stamped(stated)
    report = fenced.report
    return all(report.get(k) == v for k, v in mine.items() if k in raw or k not in wild) and \
        all(k in mine or k in wild for k in report)  # fmt: skip


class _Known:
    """One stream as the import knows it: its events by (tag, instant), and its latest."""

    __slots__ = ("by_key", "events", "last_at", "last_where")

    def __init__(self) -> None:
        self.by_key: dict[tuple[str, datetime], list[Event]] = {}
        self.events: list[Event] = []  # in stream order
        self.last_at: datetime | None = None
        self.last_where = ""

    def add(self, event: Event, where: str) -> None:
        self.by_key.setdefault((tag_of(event), event.at), []).append(event)
        self.events.append(event)
        self.last_at, self.last_where = event.at, where

    def resent(self, raw: dict[str, Any], event: RunEventBase, state: Any) -> bool:
        """Is `event` a re-send of a recorded event of its run that `decide` would call
        the same event again (another time, actor or reason: rule L1), as if it came
        right after it: nothing recorded after the original is earlier than the
        re-send (or as early and a change of status)? Such a line appended nothing when
        it was first imported (its effect held), so importing its file again must not
        refuse it now that the run has moved on."""
        events = self.events
        for i in range(len(events) - 1, -1, -1):
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

    def holds(self, raw: dict[str, Any], event: Event) -> bool:
        if any(_same(raw, event, e) for e in self.by_key.get((tag_of(event), event.at), ())):
            return True
        if isinstance(event, RunEventBase):
            return any(_kept(raw, event, e) for e in self.by_key.get(("run.fenced", event.at), ()) if isinstance(e, RunFenced))
        return False


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
    def __init__(self, reason: str, evidence: RunFenced | None = None):
        self.reason = reason
        self.evidence = evidence


Parsed = tuple[int, bytes, "tuple[dict[str, Any], Event] | ImportRejected"]


class _Import:
    def __init__(self, ledger: Ledger, *, tolerant: bool, keep_clock_steps: bool = False):
        self.store = ledger.store
        self.batch = ledger.batch()
        self.tolerant = tolerant
        self.keep_clock_steps = keep_clock_steps
        self.known: dict[str, _Known] = {}
        self.result = ImportResult()
        self.kept: list[tuple[int, int]] = []  # (index in rejected, index in the batch's appends)

    def run(self, lines: Iterable[bytes | str]) -> ImportResult:
        chunk: list[Parsed] = []
        try:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                chunk.append(self._parse(line, number))
                if len(chunk) >= CHUNK:
                    self._chunk(chunk)
                    chunk = []
        except ImportRejected:  # the reader gave up (a line over MAX_LINE): nothing lands,
            self._chunk(chunk)  # but a strict import names the first bad line, as it reads
            raise
        if chunk:
            self._chunk(chunk)
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

    def _chunk(self, chunk: list[Parsed]) -> None:
        """Read the streams this chunk names that the import has not seen, in bulk."""
        streams = [stream_of(p[2][1]) for p in chunk if not isinstance(p[2], ImportRejected)]  # type: ignore[arg-type]
        new = [s for s in dict.fromkeys(streams) if s not in self.known]
        if new:
            histories = self.store.read_streams(new)
            self.batch.preload(histories)
            for stream, history in histories.items():
                known = self.known[stream] = _Known()
                for rec in history:
                    if type(rec) is Recorded:
                        known.add(rec.event, f"position {rec.position}")
        for number, content, parsed in chunk:
            self.result.lines += 1
            try:
                if isinstance(parsed, ImportRejected):
                    raise _Refused(parsed.reason)
                self._line(number, *parsed)
            except _Refused as r:
                if not self.tolerant:
                    raise ImportRejected(number, r.reason) from None
                self._reject(number, content, r)

    def _line(self, number: int, raw: dict[str, Any], event: Event) -> None:
        assert isinstance(event, RunEventBase | ProcessEventBase | LedgerEventBase | RoleEventBase | PassEventBase)  # all tags
        try:  # first: an instant out of bounds must not reach the index (hashing it overflows) or decide
            codec.checked(event)
        except InvalidInput as e:
            raise _Refused(str(e)) from None
        stream = stream_of(event)
        known = self.known[stream]
        if known.holds(raw, event):
            self.result.duplicates += 1
            return
        if isinstance(event, RunEventBase) and known.resent(raw, event, self.batch.state(stream)):
            self.result.held += 1
            return
        if (isinstance(event, RunEventBase) and known.last_at is not None and event.at < known.last_at
                and not self.keep_clock_steps):  # fmt: skip
            raise _Refused(f"time goes backwards in run {event.run!r}: at {event.at.isoformat()} is earlier than "
                           f"{known.last_at.isoformat()}, the time of its previous event ({known.last_where}); "
                           "the run would show a negative duration (an export of a ledger whose clock stepped "
                           "back imports with --clock-steps keep)")  # fmt: skip
        point = self.batch.savepoint(stream)
        try:
            state = self.batch.submit(event)
        except StaleEpoch as e:  # a stale epoch's report: the fence's own evidence (rule F1)
            raise _Refused(str(e), e.evidence if isinstance(e.evidence, RunFenced) else None) from None
        except IllegalTransition as e:
            evidence = None
            if isinstance(event, RunEventBase):
                evidence = run_mod.refused_report(event, self.batch.state(stream), str(e))
            raise _Refused(str(e), evidence) from None
        except InvalidInput as e:
            raise _Refused(str(e)) from None
        appended = self.batch.appended_since(point[0])
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

    def _reject(self, number: int, content: bytes, refused: _Refused) -> None:
        result = self.result
        kept = None
        evidence = refused.evidence
        if evidence is not None:
            stream = run_stream(evidence.run)
            point = self.batch.savepoint(stream)
            try:
                self.batch.submit(evidence)
            except LedgerError:  # evidence that cannot be kept: the line is still in the rejects
                self.batch.rollback(point)
            else:
                appended = self.batch.appended_since(point[0])
                for a in appended:
                    self.known[stream].add(a.event, f"line {number}")
                if appended:
                    kept = "run.fenced"
                    result.evidence += 1
                    self.kept.append((len(result.rejected), self.batch.pending - 1))
        result.rejected.append(Rejected(line=number, reason=refused.reason, content=content, kept=kept))


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
    with atomic_write(path, protected=ledger.store.local_files()) as out:
        return export_to(ledger, out, after)
