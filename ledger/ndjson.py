"""NDJSON import and export: one event per line, `{"type": "<tag>", "at": ..., ...}`.

Import sends every line through the same `decide` as the API, stamped with the line's
own `at` (never the wall clock), inside one batch: any bad line rejects the whole file
with its line number and reason, and nothing is appended (BRIEF L4). Export writes the
stored events in log order with the same encoder, so export -> import into an empty
ledger -> export is byte-identical.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import IO

import msgspec

from ledger import codec
from ledger.errors import IllegalTransition, ImportRejected, InvalidInput
from ledger.events import TAGS
from ledger.files import atomic_write
from ledger.service import Ledger

_FIELDS = {tag: set(cls.__struct_fields__) | {"type"} for tag, cls in TAGS.items()}
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
    Unknown fields are refused (a typo such as "resumabel" must not vanish silently)."""
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


def _parse(line: bytes, number: int) -> object:
    try:
        raw = msgspec.json.decode(line)
    except msgspec.DecodeError as e:
        raise ImportRejected(number, f"not JSON: {e}") from None
    if not isinstance(raw, dict):
        raise ImportRejected(number, "expected a JSON object")
    tag = raw.get("type")
    if not isinstance(tag, str) or tag not in TAGS:
        raise ImportRejected(number, f"unknown type {tag!r}" if tag is not None else "missing field 'type'")
    unknown = sorted(set(raw) - _FIELDS[tag])
    if unknown:
        raise ImportRejected(number, f"unknown field {unknown[0]!r} for {tag}")
    try:
        return codec.decode(line)
    except msgspec.ValidationError as e:
        raise ImportRejected(number, f"{tag}: {e}") from None


def import_lines(ledger: Ledger, lines: Iterable[bytes | str]) -> int:
    """Decide every line, then append them all in one transaction. Returns how many
    events were appended (lines whose effect already held append nothing)."""
    batch = ledger.batch()
    number = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        event = parse_line(line, number)
        try:
            batch.submit(event)  # type: ignore[arg-type]
        except (IllegalTransition, InvalidInput) as e:
            raise ImportRejected(number, str(e)) from None
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
    """Export to the file `path`, atomically (ledger/files.py): the file is replaced
    only by a complete export, and never when it is one of the ledger's own files."""
    with atomic_write(path, protected=ledger.store.local_files()) as out:
        return export_to(ledger, out, after)
