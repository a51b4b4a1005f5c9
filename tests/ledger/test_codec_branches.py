"""The write-time checks of ledger/codec.py (rule L4) on the paths the plain-field tests
of tests/ledger/test_hostile_input.py do not take: a character rule inside an optional
structured field, nesting made of lists, and the exclusive upper bound of an instant
checked by `check_value` (every CLI instant flag). Each refusal is an InvalidInput
naming where, and nothing is appended."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from epochledger.app import Ledger
from epochledger.cli.common import instant
from epochledger.ledger.codec import check_value
from epochledger.ledger.errors import InvalidInput
from epochledger.ledger.events import LATEST, MAX_CAUSE_DEPTH, MAX_NESTING, Cause, Instant, RunFailed, RunFenced


def test_L4_a_control_character_inside_an_optional_cause_is_refused_naming_the_field(ledger: Ledger) -> None:
    """`cause` is optional and structured, so its Pattern check goes through the union
    walk, not the plain-field fast path. Mutation caught: the union walk returning None
    for every value (no character rule checked under an optional field)."""
    ledger.queue("r", workflow="wf")
    ledger.start("r")
    before = ledger._store.max_position()
    with pytest.raises(InvalidInput) as refused:
        ledger.fail("r", "X", resumable=True, cause=Cause(code="bad\x00code"))
    assert "no control characters" in str(refused.value) and "at `$.cause.code`" in str(refused.value)
    assert ledger._store.max_position() == before
    ledger.fail("r", "X", resumable=True, cause=Cause(code="good code"))
    assert ledger.get_run("r").cause == Cause(code="good code")


def test_L4_a_free_form_field_nested_in_lists_is_bounded_like_one_nested_in_objects(ledger: Ledger) -> None:
    """MAX_NESTING counts JSON arrays as well as objects. Mutation caught: the cheap
    bracket count reading only `{`, which lets a report of lists nested 80 deep through."""
    ledger.queue("r", workflow="wf")
    before = ledger._store.max_position()
    deep: Any = 1
    for _ in range(MAX_NESTING + 16):
        deep = [deep]
    fenced = RunFenced(at=ledger.clock.now(), run="r", epoch="e", refused="run.finished", why="w", report={"a": deep})
    with pytest.raises(InvalidInput) as refused:
        ledger.submit(fenced)
    assert str(refused.value).startswith(f"nested deeper than {MAX_NESTING} levels")
    assert ledger._store.max_position() == before


@pytest.mark.parametrize("flag", ["--as-of", "--since"])
def test_L4_an_instant_flag_at_the_upper_bound_is_refused_the_bound_is_exclusive(flag: str) -> None:
    """Instants are written from 1970 up to, not including, 9000 UTC: the CLI's instant
    check (`check_value` under `Instant`) refuses 9000-01-01 itself and names the flag.
    Mutation caught: `<=` for `<` at the high bound of the annotated walk."""
    with pytest.raises(InvalidInput) as refused:
        instant("9000-01-01T00:00:00Z", flag)
    assert refused.value.where == flag and "out of range: '9000-01-01T00:00:00Z'" in str(refused.value)
    with pytest.raises(InvalidInput) as direct:
        check_value(LATEST, Instant, flag)
    assert direct.value.where == flag and "from 1970 to before 9000 UTC" in str(direct.value)
    last = LATEST - timedelta(microseconds=1)
    assert instant(last.isoformat(), flag) == last
    assert check_value(datetime(1970, 1, 1, tzinfo=UTC), Instant, flag) == datetime(1970, 1, 1, tzinfo=UTC)


def test_L4_a_value_that_cannot_be_encoded_is_refused_naming_where_the_field_and_why() -> None:
    """The slow path of an unencodable value (a lone surrogate): the refusal names the
    caller's place (`where`: an import's line), the innermost field and the encoder's
    reason. Mutations caught: `where` dropped from that refusal, the encoder's error
    not passed on (the message then cannot say why)."""
    from epochledger.ledger import codec
    from epochledger.ledger.events import RunQueued
    from tests.conftest import T0

    with pytest.raises(InvalidInput) as refused:
        codec.checked(RunQueued(at=T0, run="q", reason="\udcff"), where="line 7")
    assert refused.value.where == "line 7"
    assert str(refused.value) == (
        "line 7: cannot be stored: str '\\udcff' ('utf-8' codec can't encode character "
        "'\\udcff' in position 0: surrogates not allowed) - at `$.reason`"
    )


@pytest.mark.parametrize(
    ("name", "event"),
    [
        ("nested", "nested"),
        ("invalid", "invalid"),
        ("not as given", "not as given"),
        ("cause", "cause"),
        ("characters", "characters"),
    ],
)
def test_L4_every_refusal_of_checked_names_the_callers_where(name: str, event: str) -> None:
    """`checked(event, where=...)` puts the caller's place on every refusal it makes, not
    only on the unencodable one: a structure nested too deep, a value the catalogue's
    constraints refuse, a value that would not be stored as given. Mutations caught:
    `where` dropped from any of those refusals."""
    from epochledger.ledger import codec
    from epochledger.ledger.events import RunQueued
    from tests.conftest import T0

    deep: Any = 1
    for _ in range(MAX_NESTING + 1):
        deep = {"a": deep}
    made = {
        "nested": RunFenced(at=T0, run="r", epoch="e", refused="run.finished", why="w", report=deep),
        "invalid": RunQueued(at=T0, run="q" * 201),  # a Name is at most 200 characters
        "not as given": RunQueued(at=T0, run="q", reason=b"x"),  # type: ignore[arg-type]  # the refusal under test
        "cause": RunFailed(at=T0, run="r", code="X", resumable=True, cause=_chain(MAX_CAUSE_DEPTH + 1)),
        "characters": RunQueued(at=T0, run="q", workflow="a b"),
    }[event]
    with pytest.raises(InvalidInput) as refused:
        codec.checked(made, where="line 7")
    assert refused.value.where == "line 7", name
    assert str(refused.value).startswith("line 7: "), name


def _chain(depth: int) -> Cause:
    cause = None
    for i in range(depth):
        cause = Cause(code=f"C{i}", message="m", cause=cause)
    assert cause is not None
    return cause


def test_L4_a_free_form_field_exactly_at_the_nesting_bound_is_accepted(ledger: Ledger) -> None:
    """MAX_NESTING levels are allowed, one more is not, also when the report holds more
    brackets than levels (the cheap count is past the bound, the measured depth is at
    it). Mutation caught: `>=` for `>` in the measured depth's test."""
    ledger.queue("r", workflow="wf")
    deep: Any = 1
    for _ in range(MAX_NESTING - 1):  # with the event's own object: MAX_NESTING levels
        deep = {"a": deep}
    at_bound = RunFenced(
        at=ledger.clock.now(),
        run="r",
        epoch="e",
        refused="run.finished",
        why="w",
        report={"a": deep["a"], "b": {}, "c": [[]]},
    )
    ledger.submit(at_bound)
    assert ledger.history("r")[-1].event.report == at_bound.report  # type: ignore[union-attr]  # a RunFenced
    with pytest.raises(InvalidInput) as refused:
        ledger.submit(
            RunFenced(
                at=ledger.clock.now(), run="r", epoch="e", refused="run.finished", why="w", report={"a": deep, "b": {}}
            )
        )
    assert str(refused.value).startswith(f"nested deeper than {MAX_NESTING} levels")
