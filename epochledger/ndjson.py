"""NDJSON import and export: one event per line, `{"type": "<tag>", "at": ..., ...}`.

Import sends every line through the same `decide` as the API, stamped with the line's
own `at` (never the wall clock), inside one batch: any bad line rejects the whole file
with its line number and reason, and nothing is appended (rule L4). Export writes the
stored events in log order with the same encoder, so export -> import into an empty
ledger -> export is byte-identical.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Iterable, Iterator
from functools import cache
from typing import IO, Annotated, Any

import msgspec

from epochledger.app import Ledger
from epochledger.files import atomic_write
from ledger import codec
from ledger.errors import IllegalTransition, ImportRejected, InvalidInput
from ledger.events import TAGS, Event, ProcessEventBase, RunEventBase

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
        return raw, codec.decode(line)
    except msgspec.ValidationError as e:
        raise ImportRejected(number, f"{tag}: {e}") from None


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


def import_lines(ledger: Ledger, lines: Iterable[bytes | str]) -> int:
    """Decide every line, then append them all in one transaction. Returns how many
    events were appended (lines whose effect already held append nothing). Every field
    a line states must come out of decide unchanged (ImportRejected otherwise)."""
    batch = ledger.batch()
    number = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        raw, event = _parse_line(line, number)
        before = batch.pending
        try:
            assert isinstance(event, RunEventBase | ProcessEventBase)  # every tag of the catalogue is one
            state = batch.submit(event)
        except (IllegalTransition, InvalidInput) as e:
            raise ImportRejected(number, str(e)) from None
        # A run's state keeps the event just appended (`last`); process events are
        # appended as given (ledger/process.py stamps nothing).
        recorded = getattr(state, "last", None)
        if batch.pending > before and type(recorded) is type(event):
            bad = _not_as_stated(raw, event, recorded)
            if bad is not None:
                raise ImportRejected(number, bad)
    appended = batch.pending
    batch.commit()
    return appended


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
