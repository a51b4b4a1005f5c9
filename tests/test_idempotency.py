"""The Idempotency-Key Decider (rule H3, ledger/idempotency.py): the first outcome under
a key lands, the same request again appends nothing, another request under a live key
is refused, and after the window the key is free."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ledger import idempotency
from ledger.errors import InvalidInput
from ledger.events import IdempotencyKept

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
