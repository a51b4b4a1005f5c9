"""The Deciders of the tick's cross-run rules, pure (no store): the role's (rule T7,
ledger/role.py) and the pass's (rule T6, ledger/passes.py). Each test pins what a
mutant of `make mutation` changed and the driver tests could not see (docs/mutation.md):
the folded state's fields, the UTC stamp, the refusal's structured fields, the counts
read for an item the state does not hold."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from epochledger.ledger import passes, role
from epochledger.ledger.errors import StaleEpoch
from epochledger.ledger.events import PassItemFailed, PassItemRecovered, PassItemRetired, RoleGranted

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
PLUS2 = timezone(timedelta(hours=2))


def grant(epoch: str, process: str = "p1", at: datetime = T0, **fields: object) -> RoleGranted:
    return RoleGranted(at=at, role="admission", epoch=epoch, process=process, **fields)  # type: ignore[arg-type]


def test_T7_the_folded_role_names_its_role_instant_and_one_version_per_grant() -> None:
    state = role.fold([grant("e1", token=1), grant("e2", at=T0 + timedelta(seconds=5), token=2)])
    assert state == role.RoleState(
        role="admission", epoch="e2", process="p1", token=2, granted_at=T0 + timedelta(seconds=5), version=2
    )
    later = role.fold([grant("e3", token=3)], state)
    assert later is not None and later.version == 3


def test_T7_a_grant_is_stamped_in_UTC_whatever_the_callers_offset() -> None:
    (first,) = role.decide(grant("e1", at=T0.astimezone(PLUS2)), None, asker_end=None, holder_end=None)
    assert first.at == T0 and first.at.tzinfo is UTC


def test_T7_the_first_grant_clears_any_previous_holder_the_command_carried() -> None:
    cmd = grant(
        "e1",
        previous_epoch="e0",
        previous_process="p0",
        previous_token=7,
        previous_rule="O2-stopped",
        previous_evidence="made up",
    )
    (first,) = role.decide(cmd, None, asker_end=None, holder_end=None)
    assert first.token == 1
    assert (
        first.previous_epoch,
        first.previous_process,
        first.previous_token,
        first.previous_rule,
        first.previous_evidence,
    ) == (None, None, None, None, None)


def test_T7_a_dead_asker_is_refused_with_the_fact_and_the_rule_that_ended_it() -> None:
    with pytest.raises(StaleEpoch) as refused:
        role.decide(grant("e1"), None, asker_end=("O2-stopped", "epoch e1 stopped"), holder_end=None)
    err = refused.value
    assert (err.run, err.status, err.attempted, err.epoch) == ("", None, "role.granted", "e1")
    assert err.why == "stale epoch 'e1': epoch e1 stopped (O2-stopped): it cannot take role 'admission' (rule T7)"


def failed(item: str, at: datetime = T0, deliveries: int = 1) -> PassItemFailed:
    return PassItemFailed(at=at, name="outbox", item=item, tick="t1", error_class="E", deliveries=deliveries)


def test_T6_the_folded_pass_keeps_its_name_and_a_recovery_closes_only_its_item() -> None:
    state = passes.fold([failed("a"), failed("b")])
    assert state is not None and state.name == "outbox" and state.failing == {"a": 1, "b": 1}
    state = passes.evolve(state, PassItemRecovered(at=T0, name="outbox", item="a", tick="t2"))
    assert state.name == "outbox" and state.failing == {"b": 1} and state.version == 3


def test_T6_an_item_the_state_does_not_hold_starts_from_no_failure() -> None:
    other = passes.fold([failed("a")])
    assert passes.outcome(other, "b", True, 3) == "failed"
    assert passes.outcome(other, "b", False, 3) == "healthy"
    assert passes.outcome(None, "b", False, 3) == "healthy"
    (first,) = passes.decide(failed("b", deliveries=0), other)
    assert isinstance(first, PassItemFailed) and first.deliveries == 1
    retire = PassItemRetired(at=T0, name="outbox", item="b", tick="t1", error_class="E", deliveries=0, ceiling=1)
    (last,) = passes.decide(retire, other)
    assert isinstance(last, PassItemRetired) and last.deliveries == 1


def test_T6_a_recovery_of_an_item_with_no_open_failure_appends_nothing() -> None:
    recovered = PassItemRecovered(at=T0, name="outbox", item="b", tick="t2")
    assert passes.decide(recovered, passes.fold([failed("a")])) == []
    assert passes.decide(recovered, None) == []


def test_T6_a_pass_event_is_stamped_in_UTC_whatever_the_callers_offset() -> None:
    (first,) = passes.decide(failed("a", at=T0.astimezone(PLUS2)), None)
    assert first.at == T0 and first.at.tzinfo is UTC
