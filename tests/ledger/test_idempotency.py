"""The Idempotency-Key Decider (rule H3, ledger/idempotency.py): the first outcome under
a key lands, the same request again appends nothing, another request under a live key
is refused, and after the window the key is free."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from epochledger.ledger import idempotency
from epochledger.ledger.errors import InvalidInput
from epochledger.ledger.events import IdempotencyKept

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


def kept(fingerprint: str, at: datetime) -> IdempotencyKept:
    return IdempotencyKept(at=at, key="k1", fingerprint=fingerprint, status=200, body='{"recorded": true}')


def test_H3_a_key_names_one_request_within_its_window() -> None:
    first = idempotency.decide(kept("f1", T0), None)
    assert len(first) == 1
    state = idempotency.fold(first)
    assert state is not None and (state.fingerprint, state.version) == ("f1", 1)
    assert idempotency.decide(kept("f1", T0 + timedelta(hours=1)), state) == []  # a retry: nothing appended
    with pytest.raises(InvalidInput) as refused:
        idempotency.decide(kept("f2", T0 + timedelta(hours=1)), state)
    assert refused.value.where == "Idempotency-Key"
    late = T0 + idempotency.WINDOW + timedelta(seconds=1)
    assert idempotency.check(state, "f2", late) is None  # the window is over: the key is free
    again = idempotency.decide(kept("f2", late), state)
    folded = idempotency.fold(again, state)
    assert len(again) == 1 and folded is not None and folded.version == 2
    assert idempotency.check(state, "f1", T0 + idempotency.WINDOW) is state  # the window's last instant


def test_H3_the_fold_keeps_the_outcome_to_answer_with() -> None:
    """Mutation caught: the key, status or body dropped from the kept outcome."""
    state = idempotency.fold(idempotency.decide(kept("f1", T0), None))
    assert state == idempotency.KeptOutcome(
        key="k1", fingerprint="f1", status=200, body='{"recorded": true}', at=T0, version=1
    )


def test_H3_the_refusal_names_the_key_and_when_it_was_first_used() -> None:
    state = idempotency.fold([kept("f1", T0)])
    with pytest.raises(InvalidInput) as refused:
        idempotency.check(state, "f2", T0)
    assert f"Idempotency-Key 'k1' was first used at {T0.isoformat()} for another request" in str(refused.value)


def test_H3_decide_stamps_in_UTC_in_a_process_whose_zone_is_not_UTC() -> None:
    """Mutation caught: the time kept in its caller's zone or the machine's (`astimezone()`
    without UTC, which only a process in another zone tells apart)."""
    import os
    import time

    saved = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Kolkata"
    time.tzset()
    try:
        (event,) = idempotency.decide(kept("f1", T0.astimezone(timezone(timedelta(hours=2)))), None)
        assert event.at.utcoffset() == timedelta(0) and event.at == T0
    finally:
        if saved is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = saved
        time.tzset()


def test_H3_an_outcome_is_kept_for_the_24_hours_the_rule_promises() -> None:
    """The window's documented length (docs/rules.md, H3), not the constant read back:
    a window moved either way fails here."""
    state = idempotency.fold([kept("f1", T0)])
    assert idempotency.live(state, T0 + timedelta(hours=24)) is state
    assert idempotency.live(state, T0 + timedelta(hours=24, microseconds=1)) is None
