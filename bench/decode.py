"""Where the read path's time goes: typed decode of the same payloads with the
catalogue's types as they are, without their `pattern` constraints, and without any
constraint, against the raw fetch. Evidence for docs/benchmarks.md, not a goal.

    python -m bench.decode [--runs 40000] [--repeat 3]

The stripped decoders build look-alike struct types (same tags, fields, defaults) only
to measure; nothing else uses them.
"""

from __future__ import annotations

import argparse
import statistics
import time
import types
import typing

import msgspec

from bench.common import emit, sqlite_file
from epochledger.ledger import codec, events
from epochledger.ledger.store import open_store


def _strip(tp: typing.Any, keep: typing.Callable[[str], bool]) -> typing.Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return typing.Union[tuple(_strip(a, keep) for a in typing.get_args(tp))]  # noqa: UP007
    if typing.get_origin(tp) is typing.Annotated:
        base, *metas = typing.get_args(tp)
        kept = []
        for m in metas:
            kw = {
                a: getattr(m, a)
                for a in ("pattern", "min_length", "max_length", "tz", "ge", "le")
                if getattr(m, a, None) is not None and keep(a)
            }
            if kw:
                kept.append(msgspec.Meta(**kw))
        return typing.Annotated[(base, *kept)] if kept else base
    return tp


def _decoder(keep: typing.Callable[[str], bool]) -> msgspec.json.Decoder:
    classes = []
    for cls in events.EVENT_TYPES:
        hints = typing.get_type_hints(cls, include_extras=True)
        fields: list[typing.Any] = []
        for f in msgspec.structs.fields(cls):
            t = _strip(hints[f.name], keep)
            fields.append((f.name, t, f.default) if f.default is not msgspec.NODEFAULT else (f.name, t))
        classes.append(
            msgspec.defstruct(
                cls.__name__,
                fields,
                tag_field="type",
                tag=cls.__struct_config__.tag,
                frozen=True,
                kw_only=True,
                omit_defaults=True,
            )
        )
    return msgspec.json.Decoder(typing.Union[tuple(classes)])  # noqa: UP007


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m bench.decode")
    p.add_argument("--runs", type=int, default=40_000)
    p.add_argument("--repeat", type=int, default=3)
    ns = p.parse_args(argv)
    store = open_store(sqlite_file(f"/tmp/epochledger-bench_{ns.runs}x5.db", ns.runs, 5))
    payloads = [row[3] for chunk in store.read_raw() for row in chunk]
    decoders = {
        "catalogue": codec._decoder(),
        "no_patterns": _decoder(lambda a: a != "pattern"),
        "no_constraints": _decoder(lambda a: False),
    }
    times: dict[str, list[float]] = {"raw_fetch": [], **{k: [] for k in decoders}}
    for _ in range(ns.repeat):
        t0 = time.perf_counter()
        sum(len(c) for c in store.read_raw())
        times["raw_fetch"].append(time.perf_counter() - t0)
        for name, d in decoders.items():
            decode = d.decode
            t0 = time.perf_counter()
            for data in payloads:
                decode(data)
            times[name].append(time.perf_counter() - t0)
    n = len(payloads)
    result = {
        "bench": "decode",
        "events": n,
        "repeat": ns.repeat,
        "events_per_second": {k: round(n / statistics.median(v)) for k, v in times.items()},
    }
    store.close()
    emit(result)
    return result


if __name__ == "__main__":
    main()
