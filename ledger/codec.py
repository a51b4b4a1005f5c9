"""msgspec encoding of events: the bytes the store keeps and NDJSON carries.

One encoder for everything: struct fields in declaration order, dict keys sorted
("deterministic"), so the same event is always the same bytes (BRIEF R1, S1).
"""

from __future__ import annotations

import re
import types
import typing
from functools import cache
from typing import Annotated, Any

import msgspec

from ledger.errors import InvalidInput
from ledger.events import AnyEvent, Event, Pattern

_encoder = msgspec.json.Encoder(order="deterministic")
_decoder = msgspec.json.Decoder(AnyEvent)

encode = _encoder.encode
decode = _decoder.decode


def checked(event: Event, where: str | None = None) -> bytes:
    """Encode, and prove the bytes decode under the catalogue's constraints (lengths,
    aware times) and satisfy its character rules (`Pattern` markers). One definition of
    "oversized" or "malformed" for the API and for import alike (BRIEF L4)."""
    data = _encoder.encode(event)
    try:
        _decoder.decode(data)
    except msgspec.ValidationError as e:
        raise InvalidInput(str(e), where=where) from None
    bad = _pattern_violation(event, type(event), "$")
    if bad is not None:
        raise InvalidInput(bad, where=where)
    return data


def check_value(value: Any, tp: Any, where: str) -> Any:
    """Validate one value against a catalogue field type (e.g. `Name`): its msgspec
    constraints and its character rules. Returns the value; raises InvalidInput."""
    try:
        value = msgspec.convert(value, tp)
    except msgspec.ValidationError as e:
        raise InvalidInput(f"{value!r} is not valid ({e})", where=where) from None
    bad = _pattern_violation(value, tp, "$")
    if bad is not None:
        raise InvalidInput(f"{value!r} is not valid ({bad})", where=where)
    return value


@cache
def _hints(cls: type) -> tuple[tuple[str, Any], ...]:
    hints = typing.get_type_hints(cls, include_extras=True)
    return tuple((f, hints[f]) for f in cls.__struct_fields__)


@cache
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _pattern_violation(value: Any, tp: Any, path: str) -> str | None:
    """The first value that breaks a `Pattern` marker of its declared type, in msgspec's
    own wording, or None."""
    if value is None:
        return None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Annotated:
        for meta in args[1:]:
            if isinstance(meta, Pattern) and isinstance(value, str) and not _regex(meta.regex).fullmatch(value):
                return f"Expected `str` with {meta.meaning}, got {value[:80]!r} - at `{path}`"
        return _pattern_violation(value, args[0], path)
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            if arg is not type(None) and (bad := _pattern_violation(value, arg, path)):
                return bad
        return None
    if origin is list and isinstance(value, list):
        return next(filter(None, (_pattern_violation(v, args[0], f"{path}[{i}]") for i, v in enumerate(value))), None)
    if origin is dict and isinstance(value, dict):
        return next(filter(None, (_pattern_violation(k, args[0], f"{path}.key") or _pattern_violation(v, args[1], f"{path}[{k!r}]")
                                  for k, v in value.items())), None)  # fmt: skip
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct) and isinstance(value, tp):
        return next(filter(None, (_pattern_violation(getattr(value, f), ftp, f"{path}.{f}") for f, ftp in _hints(type(value)))), None)
    return None
