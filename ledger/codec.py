"""msgspec encoding of events: the bytes the store keeps and NDJSON carries.

One encoder for everything: struct fields in declaration order, dict keys sorted
("deterministic"), so the same event is always the same bytes (rules R1, S1).
"""

from __future__ import annotations

import re
import types
import typing
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any

import msgspec

from epochledger.ledger.errors import InvalidInput
from epochledger.ledger.events import (
    EVENT_TYPES,
    FORMAT_CHARS,
    MAX_CAUSE_DEPTH,
    MAX_NESTING,
    AnyEvent,
    Bounds,
    Event,
    Instant,
    Pattern,
)

_encoder = msgspec.json.Encoder(order="deterministic")
encode = _encoder.encode

if TYPE_CHECKING:

    def decode(buf: bytes | bytearray | memoryview | str, /) -> AnyEvent: ...


@cache
def _decoder() -> msgspec.json.Decoder[AnyEvent]:
    """The catalogue's decoder, built on first use: building it costs more than the rest
    of this module, and a start that decodes no event (`--help`, `show RUN` on a view
    that is caught up) does not pay it (rule W2)."""
    return msgspec.json.Decoder(AnyEvent)


def __getattr__(name: str) -> Any:
    if name == "decode":  # PEP 562: `codec.decode` is the decoder's own method, no wrapper
        globals()[name] = method = _decoder().decode
        return method
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def checked(event: Event, where: str | None = None) -> bytes:
    """Encode, and prove the bytes are the event, for the API and import alike (L4:
    one definition of "malformed" or "oversized"):

    - they encode at all (a lone surrogate, an object msgspec cannot encode, a
      structure nested past the recursion limit are refused, naming the field);
    - they nest at most MAX_NESTING levels and decode under the catalogue's constraints
      (lengths, types, aware times);
    - they decode back to an event equal to the one given: whatever the caller gave is
      what is stored. Without this, `reason=b"x"` was stored as the base64 text
      "eA==", an `at` given as a string was stored as that string, a dict where a
      Cause belongs was accepted; each is refused naming the field and what it would
      have become;
    - the write-time rules hold: `Pattern` (characters), `Bounds` (instants) and the
      cause chain's depth, checked on the decoded event.

    Costs a struct comparison on top of the encode and validating decode
    (docs/benchmarks.md, "The write-time round trip")."""
    try:
        data = _encoder.encode(event)
    except (TypeError, ValueError, OverflowError, RecursionError) as e:  # UnicodeEncodeError is a ValueError
        raise InvalidInput(_unencodable(event, e, "$"), where=where) from None
    # Only a free-form field (`Any`) can nest deeper than the catalogue's own shapes;
    # counting brackets is a cheap upper bound of the depth, measured only above it.
    if (
        type(event) in _free_form_types()
        and data.count(b"{") + data.count(b"[") > MAX_NESTING
        and _nesting(data) > MAX_NESTING
    ):
        raise InvalidInput(f"nested deeper than {MAX_NESTING} levels", where=where)
    try:
        decoded = _decoder().decode(data)
    except msgspec.ValidationError as e:
        raise InvalidInput(str(e), where=where) from None
    except RecursionError:
        raise InvalidInput("nested too deeply", where=where) from None
    if decoded != event:
        raise InvalidInput(
            _difference(event, decoded, "$") or "the event does not survive its own encoding", where=where
        )
    cause = getattr(decoded, "cause", None)
    if cause is not None and _cause_depth(cause) > MAX_CAUSE_DEPTH:
        raise InvalidInput(f"a cause chain is at most {MAX_CAUSE_DEPTH} causes deep - at `$.cause`", where=where)
    bad = _pattern_violation(decoded, type(decoded), "$")
    if bad is not None:
        raise InvalidInput(bad, where=where)
    return data


def check_value(value: Any, tp: Any, where: str) -> Any:
    """Validate one value against a catalogue field type (e.g. `Name`) by the rules of
    `checked`: it encodes, decodes under `tp` to an equal value, and keeps the
    write-time markers. Returns the value; raises InvalidInput naming `where`."""
    try:
        data = _encoder.encode(value)
    except (TypeError, ValueError, OverflowError, RecursionError) as e:
        raise InvalidInput(_unencodable(value, e, "$"), where=where) from None
    try:
        decoded = _value_decoder(tp).decode(data)
    except msgspec.ValidationError as e:
        raise InvalidInput(f"{_show(value)} is not valid ({e})", where=where) from None
    if decoded != value:
        raise InvalidInput(_difference(value, decoded, "$") or f"{_show(value)} is not valid", where=where)
    bad = _pattern_violation(decoded, tp, "$")
    if bad is not None:
        raise InvalidInput(f"{value!r} is not valid ({bad})", where=where)
    return decoded


@cache
def _value_decoder(tp: Any) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(tp)


def _show(value: Any) -> str:
    if value is None:
        return "null"
    shown = value.isoformat() if isinstance(value, datetime) else repr(value)
    return f"{type(value).__name__} {shown[:80]}"


def _difference(given: Any, stored: Any, path: str) -> str | None:
    """The first place where `given` and the decode of its encoding differ."""
    if isinstance(given, msgspec.Struct) and type(given) is type(stored):
        for f in given.__struct_fields__:
            bad = _difference(getattr(given, f), getattr(stored, f), f"{path}.{f}")
            if bad:
                return bad
        return None
    if type(given) is dict and type(stored) is dict and given.keys() == stored.keys():
        return next(filter(None, (_difference(v, stored[k], f"{path}[{k!r}]") for k, v in given.items())), None)
    if type(given) is list and type(stored) is list and len(given) == len(stored):
        return next(
            filter(
                None, (_difference(v, w, f"{path}[{i}]") for i, (v, w) in enumerate(zip(given, stored, strict=True)))
            ),
            None,
        )
    if given == stored:
        return None
    return f"not stored as given: {_show(given)} would be stored as {_show(stored)} - at `{path}`"


def _unencodable(value: Any, error: BaseException, path: str) -> str:
    """Name the innermost field that cannot be encoded (the slow path of a refusal)."""
    if isinstance(error, RecursionError):
        return f"nested too deeply - at `{path}`"
    if isinstance(value, msgspec.Struct):
        parts: list[tuple[str, Any]] = [(f"{path}.{f}", getattr(value, f)) for f in value.__struct_fields__]
    elif isinstance(value, dict):
        parts = [(f"{path}.key", k) for k in value] + [(f"{path}[{k!r}]", v) for k, v in value.items()]
    elif isinstance(value, list | tuple):
        parts = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
    else:
        parts = []
    for where, part in parts:
        try:
            _encoder.encode(part)
        except (TypeError, ValueError, OverflowError, RecursionError) as e:
            return _unencodable(part, e, where)
    return f"cannot be stored: {_show(value)} ({error}) - at `{path}`"


def _free_form(tp: type[Event]) -> bool:
    """Does `tp` have a field typed `Any` (or a container of it)?"""
    return any(h is Any or Any in typing.get_args(h) for h in typing.get_type_hints(tp).values())


@cache
def _free_form_types() -> frozenset[type[Event]]:
    """The event types with a free-form field, found on first use (reading every type's
    hints is a start's cost otherwise; rule W2)."""
    return frozenset(t for t in EVENT_TYPES if _free_form(t))


def _cause_depth(cause: Any) -> int:
    depth = 0
    while cause is not None and depth <= MAX_CAUSE_DEPTH:
        depth += 1
        cause = cause.cause
    return depth


def _nesting(data: bytes) -> int:
    """How deep JSON objects and arrays nest in `data` (brackets inside strings aside)."""
    depth = deepest = 0
    for b in _BRACKETS.findall(_STRINGS.sub(b"", data)):
        if b in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(rb"[\[\]{}]")


Check = typing.Callable[[Any, str], "str | None"]

# A cheap test that a string holds a catalogue's character rule, tried before its
# regex: `str.isprintable()` (one C loop, cheaper than a `fullmatch` call:
# docs/benchmarks.md, "The hot path, second round") is False for every control
# character (category Cc: \x00-\x1f, \x7f-\x9f) and every whitespace character but
# the ASCII space (\s matches what str.isspace() says: Cc, Zs, Zl, Zp). So a printable
# string holds "no control characters", and a non-empty printable string without " "
# holds "no whitespace or control characters". Only ever a sufficient test: anything
# it does not accept goes to the regex, which decides (and names the value). Keyed by
# the exact regex of ledger/events.py: a rule changed there loses its fast test, never
# its check (tests/ledger/test_hostile_input.py).
# printable also rules out every format character (category Cf, which ids and label
# values refuse): str.isprintable() is False for Cf too.
NO_SPACE, SPACE_OK = 2, 1
_FAST = {
    r"[^\s\x00-\x1f\x7f" + FORMAT_CHARS + "]+": NO_SPACE,
    r"[^\x00-\x1f\x7f]*": SPACE_OK,
    r"[^\x00-\x1f\x7f" + FORMAT_CHARS + "]*": SPACE_OK,
}


def _fast_holds(kind: int, value: str) -> bool:
    """The fast test of a rule of kind `kind` (_FAST; 0: none, always False)."""
    return (
        kind == SPACE_OK
        and value.isprintable()
        or kind == NO_SPACE
        and value != ""
        and value.isprintable()
        and " " not in value
    )


@cache
def _checker(tp: Any) -> Check | None:
    """A function that returns the first value under `tp` breaking a `Pattern` marker
    (in msgspec's own wording) or None; None when `tp` holds no marker at all. Built
    once per type, so a write pays only for the regexes it runs."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Annotated:
        inner = _checker(args[0])
        rules = [(re.compile(m.regex), m.meaning, _FAST.get(m.regex, 0)) for m in args[1:] if isinstance(m, Pattern)]
        bounds = [m for m in args[1:] if isinstance(m, Bounds)]
        if not rules and not bounds:
            return inner

        def annotated(value: Any, path: str) -> str | None:
            if isinstance(value, str):
                for rx, meaning, kind in rules:
                    if not _fast_holds(kind, value) and not rx.fullmatch(value):
                        return f"Expected `str` with {meaning}, got {value[:80]!r} - at `{path}`"
            elif isinstance(value, datetime | int):
                for b in bounds:
                    if not b.low <= value < b.high:
                        return f"{_out_of_bounds(b, value)} - at `{path}`"
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
        return lambda value, path: (
            next(filter(None, (item(v, f"{path}[{i}]") for i, v in enumerate(value))), None)
            if isinstance(value, list)
            else None
        )
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
        # Plain fields with one marker (`Name`, `Name | None`, `Code`; `Instant`,
        # `Instant | None`) are checked inline, the rest through their own checkers:
        # the common case stays cheap. So an event that breaks several rules is refused
        # naming the first plain field's character rule, then an instant's bound, then a
        # structured field (tests/ledger/test_codec_branches.py pins that order).
        plain: list[tuple[str, re.Pattern[str], str, int]] = []
        instants: list[tuple[str, Bounds]] = []
        nested: list[tuple[str, Check]] = []
        ready = [False]

        def prepare() -> None:  # on first use: a struct may contain itself (Cause)
            ready[0] = True
            for f in tp.__struct_fields__:
                rule = _plain_rule(hints[f])
                if isinstance(rule, Bounds):
                    instants.append((f, rule))
                elif rule is not None:
                    plain.append((f, *rule))
                elif (c := _checker(hints[f])) is not None:
                    nested.append((f, c))

        def struct(value: Any, path: str) -> str | None:
            if not isinstance(value, tp):
                return None
            if not ready[0]:
                prepare()
            for f, rx, meaning, kind in plain:
                v = getattr(value, f)
                if v is None:
                    continue
                # _fast_holds, inlined (the hot loop of every write): the regex decides the rest
                if kind == NO_SPACE and v and v.isprintable() and " " not in v or kind == SPACE_OK and v.isprintable():
                    continue
                if not rx.fullmatch(v):
                    return f"Expected `str` with {meaning}, got {v[:80]!r} - at `{path}.{f}`"
            for f, b in instants:
                v = getattr(value, f)
                if v is not None and not b.low <= v < b.high:
                    return f"{_out_of_bounds(b, v)} - at `{path}.{f}`"
            for f, c in nested:
                bad = c(getattr(value, f), f"{path}.{f}")
                if bad:
                    return bad
            return None

        return struct
    return None


def _out_of_bounds(b: Bounds, value: datetime | int) -> str:
    if isinstance(value, datetime):
        return f"Expected `datetime` {b.meaning}, got {value.isoformat()}"
    return f"Expected `int` {b.meaning}, got {value}"


def _plain_rule(tp: Any) -> tuple[re.Pattern[str], str, int] | Bounds | None:
    """(regex, meaning) if `tp` is `Annotated[str, ..., Pattern]`, the Bounds if it is
    `Annotated[datetime, ..., Bounds]` or `Annotated[int, ..., Bounds]`; either
    optionally `| None`."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(rest) != 1:
            return None
        tp = rest[0]
    if typing.get_origin(tp) is not Annotated:
        return None
    base, *meta = typing.get_args(tp)
    rules = [m for m in meta if isinstance(m, Pattern)]
    bounds = [m for m in meta if isinstance(m, Bounds)]
    if base in (datetime, int) and len(bounds) == 1 and not rules:
        return bounds[0]
    if base is not str or len(rules) != 1 or bounds:
        return None
    return re.compile(rules[0].regex), rules[0].meaning, _FAST.get(rules[0].regex, 0)


def _pattern_violation(value: Any, tp: Any, path: str) -> str | None:
    check = _checker(tp)
    return check(value, path) if check is not None else None


def instant(text: str | None, where: str) -> datetime | None:
    """An RFC 3339 instant with a time zone, within the catalogue's instants (rule L4: from
    1970 to before 9000 UTC), or None; InvalidInput naming `where` (a flag, a query
    parameter) otherwise. The one check of an instant a person types, for both skins."""

    if text is None:
        return None
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(f"not an RFC 3339 instant: {text!r} (e.g. 2026-09-09T14:29:19Z)", where=where) from None
    if t.tzinfo is None:
        raise InvalidInput(f"the instant needs a time zone: {text!r} (e.g. 2026-09-09T14:29:19Z)", where=where)
    try:
        check_value(t, Instant, where)  # the catalogue's bounds, one definition
    except InvalidInput:
        raise InvalidInput(
            f"out of range: {text!r} (the ledger's instants are from 1970 to before 9000 UTC)", where=where
        ) from None
    return t
