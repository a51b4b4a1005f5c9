"""Point-in-time replay: the fleet as of a log position or an instant (rule R1).

The state is every registered view folded over a prefix of the log with the views' own
evolve (the code path of the live views and of verify), plus the positions of events
that could not be applied (parked, under the engine's rules). Its canonical encoding
is msgspec JSON with every struct field and dict key sorted; the state hash is the
SHA-256 of those bytes. Nothing here reads the clock: the same prefix always gives
the same bytes and the same hash.

`at`: the prefix ends before the first event stamped after the instant. The log's
order is the truth, so a clock that stepped back cannot reorder history: an event
stamped earlier but recorded after a later-stamped one is not in the prefix.

`by="event-time"` (with `at`), for histories imported late (a run recorded today with
yesterday's times, after events stamped this morning): every stream's events up to,
not including, its own first event stamped after the instant, whenever they were
recorded, folded in log order. Each stream is still a prefix of itself (a stream is
never folded past an event it skipped, so a run's state is always one it was in), but
across streams event time decides. Deterministic too: the same log gives the same
bytes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import msgspec

from epochledger.ledger import process as process_mod
from epochledger.ledger.errors import InvalidInput
from epochledger.ledger.events import Recorded
from epochledger.ledger.store import Poison, Store, check_position
from epochledger.projections.engine import MAX_ATTEMPTS
from epochledger.projections.registry import VIEWS
from epochledger.projections.view import View, ViewSpec, spec


class FleetState(msgspec.Struct, frozen=True, kw_only=True):
    position: int  # last position in the prefix (0: empty prefix)
    at: datetime | None  # ledger time of the last event in the prefix
    events: int  # events in the prefix, parked included
    views: dict[str, Any]  # each view as its module folds it
    parked: dict[str, list[int]]


_canonical = msgspec.json.Encoder(order="sorted", enc_hook=process_mod.enc_hook)


def canonical_bytes(state: FleetState) -> bytes:
    return _canonical.encode(state)


def state_hash(state: FleetState) -> str:
    import hashlib  # on first use: a start that hashes no state does not load OpenSSL (rule W2)

    return hashlib.sha256(canonical_bytes(state)).hexdigest()


By = Literal["log", "event-time"]


def state_at(
    store: Store,
    *,
    position: int | None = None,
    at: datetime | None = None,
    views: tuple[View, ...] = VIEWS,
    by: By = "log",
) -> FleetState:
    """The fleet as of `position` (events at or before it) or `at` (see the module doc);
    both: whichever prefix is shorter; neither: the whole log. `by`: how `at` cuts the
    log, "log" (a prefix of the log) or "event-time" (a prefix of every stream)."""
    if at is not None and at.tzinfo is None:
        raise InvalidInput("the instant needs a time zone (e.g. 2026-09-09T14:29:19Z)", where="--at")
    if by not in ("log", "event-time"):
        raise InvalidInput(f"expected 'log' or 'event-time', got {by!r}", where="--by")
    if by == "event-time" and at is None:
        raise InvalidInput("event-time needs an instant (--at)", where="--by")
    if position is not None:
        check_position(position, "--position")
    specs = [spec(v) for v in views]
    folded = {v.NAME: v.initial() for v in specs}
    parked: dict[str, list[int]] = {v.NAME: [] for v in specs}
    last_position, last_at, events = 0, None, 0
    ended: set[str] = set()  # by event time: streams that reached an event stamped after `at`
    for chunk in store.read_batches(0, position):
        for rec in chunk:
            if by == "event-time" and rec.stream in ended:
                continue
            if type(rec) is Recorded:
                if at is not None and rec.event.at > at:
                    if by == "event-time":
                        ended.add(rec.stream)
                        continue
                    return _done(last_position, last_at, events, folded, parked)
                last_at = rec.event.at
                for v in specs:
                    folded[v.NAME], ok = _apply(v, folded[v.NAME], rec)
                    if not ok:
                        parked[v.NAME].append(rec.position)
            else:
                assert isinstance(rec, Poison)
                for v in specs:
                    parked[v.NAME].append(rec.position)
            last_position = rec.position
            events += 1
    return _done(last_position, last_at, events, folded, parked)


def _apply(view_module: ViewSpec[Any], view: Any, rec: Recorded) -> tuple[Any, bool]:
    for _ in range(MAX_ATTEMPTS):
        try:
            return view_module.evolve(view, rec), True
        except Exception:  # noqa: BLE001 - the engine's poison rule (rule T4)
            continue
    return view, False


def _done(
    position: int, at: datetime | None, events: int, folded: dict[str, Any], parked: dict[str, list[int]]
) -> FleetState:
    return FleetState(position=position, at=at, events=events, views=folded, parked=parked)
