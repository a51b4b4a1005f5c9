"""Rule O5's bounds, by their documented values: 3 attempts, gaps of 1 s and 4 s, and 8
re-reads after lost races within an attempt. The other O5 tests pass their own
`attempts=`/`gaps=` or compare with the module's constants, so a changed setting passed
every one of them; these read the defaults through both public entries (the sweep
module and `Ledger.sweep`) and compare with the numbers docs/rules.md states."""

from __future__ import annotations

import pytest

from epochledger import sweep as sweep_mod
from epochledger.app import Batch
from epochledger.ledger.errors import ConflictError, SweepFailed
from epochledger.ledger.events import RunRecovered
from tests.app.test_sweep import Flaky, _previous_day
from tests.conftest import losing_batch

DOCUMENTED_ATTEMPTS, DOCUMENTED_GAPS, DOCUMENTED_ROUNDS = 3, [1.0, 4.0], 8


@pytest.mark.parametrize("entry", ["Ledger.sweep", "epochledger.sweep.sweep"])
def test_O5_the_default_retry_is_three_attempts_with_gaps_of_one_and_four_seconds(ledger, clock, monkeypatch, entry):
    """The store is down for every attempt: the sweep tries 3 times, waits 1 s and
    then 4 s between them, and gives up naming 3 attempts. Mutations caught: ATTEMPTS
    or either gap changed in epochledger/sweep.py (before, Ledger.sweep kept its own copy
    of both, so a change there was never seen through the ledger)."""
    _previous_day(ledger, clock)
    epoch = ledger.boot("worker-1", epoch="w2")
    flaky = Flaky(ledger, 99)
    monkeypatch.setattr(ledger, "orphan_view", flaky)
    gaps: list[float] = []
    with pytest.raises(SweepFailed) as err:
        if entry == "Ledger.sweep":
            ledger.sweep(epoch, sleep=gaps.append)
        else:
            sweep_mod.sweep(ledger, epoch, sleep=gaps.append)
    assert (flaky.calls, gaps) == (DOCUMENTED_ATTEMPTS, DOCUMENTED_GAPS)
    assert (err.value.process, err.value.epoch, err.value.attempts, err.value.alert_recorded) == (
        "worker-1",
        "w2",
        DOCUMENTED_ATTEMPTS,
        True,
    )
    assert "connection refused" in err.value.error


def test_O5_a_sweep_that_loses_every_race_re_reads_eight_times_then_names_the_streams(ledger, clock, monkeypatch):
    """Every round's batch loses its race on `owned`'s stream: the sweep reads and
    decides 8 times within its one attempt, then raises ConflictError naming the stream
    and the count, and nothing is recovered. Mutation caught: CONFLICT_ROUNDS moved
    (the existing test compares with the constant itself, so it moves with it)."""
    _previous_day(ledger, clock)
    epoch = ledger.boot("worker-1", epoch="w2")
    rounds: list[int] = []
    losing = losing_batch("run-owned")

    def batch() -> Batch:
        rounds.append(1)
        return losing(ledger)

    monkeypatch.setattr(ledger, "batch", batch)
    with pytest.raises(ConflictError) as err:
        ledger.sweep(epoch)
    assert (len(rounds), err.value.streams) == (DOCUMENTED_ROUNDS, ["run-owned"])
    assert f"kept losing races after {DOCUMENTED_ROUNDS} re-reads" in str(err.value)
    assert not any(isinstance(r.event, RunRecovered) for r in ledger._store.read_all())
