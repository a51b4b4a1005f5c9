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


Check = typing.Callable[[Any, str], "str | None"]


@cache
def _checker(tp: Any) -> Check | None:
    """A function that returns the first value under `tp` breaking a `Pattern` marker
    (in msgspec's own wording) or None; None when `tp` holds no marker at all. Built
    once per type, so a write pays only for the regexes it runs."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Annotated:
        inner = _checker(args[0])
        rules = [(re.compile(m.regex), m.meaning) for m in args[1:] if isinstance(m, Pattern)]
        if not rules:
            return inner

        def annotated(value: Any, path: str) -> str | None:
            if isinstance(value, str):
                for rx, meaning in rules:
                    if not rx.fullmatch(value):
                        return f"Expected `str` with {meaning}, got {value[:80]!r} - at `{path}`"
            return inner(value, path) if inner is not None else None

        return annotated
    if origin in (typing.Union, types.UnionType):
        options = [c for c in map(_checker, args) if c is not None]
        if not options:
            return None

        def union(value: Any, path: str) -> str | None:
            if value is None:
                return None
            for c in options:
                bad = c(value, path)
                if bad:
                    return bad
            return None

        return union
    if origin is list:
        item = _checker(args[0])
        if item is None:
            return None
        return lambda value, path: next(filter(None, (item(v, f"{path}[{i}]") for i, v in enumerate(value))), None) if isinstance(value, list) else None
    if origin is dict:
        key, val = _checker(args[0]), _checker(args[1])
        if key is None and val is None:
            return None

        def mapping(value: Any, path: str) -> str | None:
            if not isinstance(value, dict):
                return None
            for k, v in value.items():
                bad = (key and key(k, f"{path}.key")) or (val and val(v, f"{path}[{k!r}]"))
                if bad:
                    return bad
            return None

        return mapping
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        hints = typing.get_type_hints(tp, include_extras=True)
        # Plain string fields with a marker (`Name`, `Name | None`, `Code`) are checked
        # inline, the rest through their own checkers: the common case stays cheap.
        plain: list[tuple[str, re.Pattern[str], str]] = []
        nested: list[tuple[str, Check]] = []
        ready = [False]

        def prepare() -> None:  # on first use: a struct may contain itself (Cause)
            ready[0] = True
            for f in tp.__struct_fields__:
                rule = _plain_rule(hints[f])
                if rule is not None:
                    plain.append((f, *rule))
                elif (c := _checker(hints[f])) is not None:
                    nested.append((f, c))

        def struct(value: Any, path: str) -> str | None:
            if not isinstance(value, tp):
                return None
            if not ready[0]:
                prepare()
            for f, rx, meaning in plain:
                v = getattr(value, f)
                if v is not None and not rx.fullmatch(v):
                    return f"Expected `str` with {meaning}, got {v[:80]!r} - at `{path}.{f}`"
            for f, c in nested:
                bad = c(getattr(value, f), f"{path}.{f}")
                if bad:
                    return bad
            return None

        return struct
    return None


def _plain_rule(tp: Any) -> tuple[re.Pattern[str], str] | None:
    """(regex, meaning) if `tp` is `Annotated[str, ..., Pattern]`, optionally `| None`."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(rest) != 1:
            return None
        tp = rest[0]
    if typing.get_origin(tp) is not Annotated:
        return None
    base, *meta = typing.get_args(tp)
    rules = [m for m in meta if isinstance(m, Pattern)]
    if base is not str or len(rules) != 1:
        return None
    return re.compile(rules[0].regex), rules[0].meaning


def _pattern_violation(value: Any, tp: Any, path: str) -> str | None:
    check = _checker(tp)
    return check(value, path) if check is not None else None
