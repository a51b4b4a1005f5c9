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


def test_W2_codec_decode_is_built_on_first_use_and_no_other_name_is_made_up() -> None:
    """`codec.decode` is the catalogue decoder's own method, built when first asked for
    (rule W2); any other missing name is refused as a module refuses it, naming the
    module and the name. Mutation caught: the AttributeError raised without its text."""
    from epochledger.ledger import codec
    from epochledger.ledger.events import RunQueued
    from tests.conftest import T0

    event = RunQueued(at=T0, run="q")
    assert codec.decode(codec.checked(event)) == event
    with pytest.raises(AttributeError) as missing:
        codec.nothing_here  # noqa: B018  # the lookup is the test
    assert str(missing.value) == "module 'epochledger.ledger.codec' has no attribute 'nothing_here'"


def test_L4_check_value_refuses_each_way_naming_where_and_the_value() -> None:
    """`check_value` (every id a caller names outside an event: a CLI flag, an
    Idempotency-Key, a pass's item) refuses in the words of `checked`, with the value and
    the caller's `where`, and returns the value it proved. Mutations caught: the reason,
    the value or `where` dropped from any of its four refusals, the encoder's error not
    passed on, the value shown cut at 81 characters, not 80."""
    from epochledger.ledger.events import Name, Text

    refusals = {
        "\udcff": (
            "cannot be stored: str '\\udcff' ('utf-8' codec can't encode character '\\udcff' in position 0: "
            "surrogates not allowed) - at `$`"
        ),
        "a" * 201: f"str '{'a' * 79} is not valid (Expected `str` of length <= 200)",
        None: "null is not valid (Expected `str`, got `null`)",
        b"x": "not stored as given: bytes b'x' would be stored as str 'eA==' - at `$`",
        "a b": "'a b' is not valid (Expected `str` with no whitespace, control or format characters, got 'a b' - at `$`)",
    }
    for value, message in refusals.items():
        with pytest.raises(InvalidInput) as refused:
            check_value(value, Name, "--run")
        assert (refused.value.where, refused.value.message) == ("--run", message), value
    assert check_value("nightly-1", Name, "--run") == "nightly-1"
    assert check_value("any text at all", Text, "--reason") == "any text at all"  # a type without markers


def test_L4_an_instant_typed_by_a_person_is_refused_saying_what_is_wrong_with_it() -> None:
    """`instant` (every instant flag and query parameter): not an instant, no time zone,
    out of range, each refused naming the flag and saying which; no text is no instant.
    Mutations caught: the reason or `where` dropped from the first two refusals."""
    from epochledger.ledger import codec

    cases = {
        "yesterday": "not an RFC 3339 instant: 'yesterday' (e.g. 2026-09-09T14:29:19Z)",
        "2026-09-09T14:00:00": "the instant needs a time zone: '2026-09-09T14:00:00' (e.g. 2026-09-09T14:29:19Z)",
        "1969-12-31T23:59:59Z": "out of range: '1969-12-31T23:59:59Z' (the ledger's instants are from 1970 to before 9000 UTC)",
    }
    for text, message in cases.items():
        with pytest.raises(InvalidInput) as refused:
            codec.instant(text, "--since")
        assert (refused.value.where, refused.value.message) == ("--since", message), text
    assert codec.instant(None, "--since") is None


def test_L4_a_value_not_stored_as_given_inside_lists_and_objects_is_named_by_its_place() -> None:
    """The refusal of a value that would not be stored as given, or cannot be encoded,
    names its place inside lists and objects, past the parts that are stored as given
    (an equal object and an equal list before it). Mutations caught: the list walk
    skipped, or crashing (StopIteration) on a part with no difference; the object walk
    crashing the same way; the unencodable walk not entering a list."""
    from epochledger.ledger import codec
    from epochledger.ledger.events import RunPaused
    from tests.conftest import T0

    fenced = RunFenced(
        at=T0,
        run="r",
        epoch="e",
        refused="run.finished",
        why="w",
        report={"same": {"x": [1]}, "list": [1, [2]], "bad": b"x"},
    )
    asked = RunPaused(at=T0, run="r", kind="waiting_human", questions=["ship?", b"x"])  # type: ignore[list-item]  # the refusal under test
    unencodable = RunPaused(at=T0, run="r", kind="waiting_human", questions=["ship?", "\udc80"])
    expected = [
        (fenced, "not stored as given: bytes b'x' would be stored as str 'eA==' - at `$.report['bad']`"),
        (asked, "not stored as given: bytes b'x' would be stored as str 'eA==' - at `$.questions[1]`"),
        (
            unencodable,
            "cannot be stored: str '\\udc80' ('utf-8' codec can't encode character '\\udc80' in position 0: "
            "surrogates not allowed) - at `$.questions[1]`",
        ),
    ]
    for event, message in expected:
        with pytest.raises(InvalidInput) as refused:
            codec.checked(event, where="line 3")
        assert refused.value.message == message


def test_L4_a_structure_nested_past_the_encoders_limit_is_refused_at_its_top() -> None:
    """A cause chain too deep for the encoder to walk is refused as nested too deeply, at
    `$`: the slow path that names an unencodable field does not look inside a structure
    the encoder could not walk. Mutation caught: the encoder's RecursionError not passed
    to that path (it then re-encodes the parts and names `$.cause`)."""
    from epochledger.ledger import codec

    with pytest.raises(InvalidInput) as refused:
        codec.checked(RunFailed(at=LATEST - timedelta(days=1), run="r", code="X", resumable=True, cause=_chain(5000)))
    assert refused.value.message == "nested too deeply - at `$`"


def test_L4_a_free_form_field_is_measured_from_where_each_bracket_closes() -> None:
    """The measured depth goes back up by one level at each closing bracket: a report
    whose first member is a small object and whose second nests to one level past the
    bound is refused. Mutations caught: a closing bracket resetting the depth to 1, or
    taking two levels off."""
    from epochledger.ledger import codec
    from tests.conftest import T0

    deep: Any = 1
    for _ in range(MAX_NESTING - 1):  # the event and the report add two levels: one past the bound
        deep = {"a": deep}
    with pytest.raises(InvalidInput) as refused:
        codec.checked(
            RunFenced(at=T0, run="r", epoch="e", refused="run.finished", why="w", report={"x": {}, "y": deep})
        )
    assert refused.value.message == f"nested deeper than {MAX_NESTING} levels"
    codec.checked(
        RunFenced(at=T0, run="r", epoch="e", refused="run.finished", why="w", report={"x": {}, "y": deep["a"]})
    )


def test_L4_an_event_breaking_several_rules_names_its_character_rules_first() -> None:
    """Which field a refusal names when several break the write-time rules is fixed: the
    character rules of the plain fields (one marker, optional or not, in field order),
    then the instants' bounds, then the structured fields (codec._checker's order). So
    a run queued before 1970 with a bad id or workflow is refused naming the id or the
    workflow, every time. Mutations caught: `_plain_rule` sending the plain string
    fields, the optional ones, or every field through the structured walk."""
    from epochledger.ledger import codec
    from epochledger.ledger.events import RunQueued

    early = datetime(1969, 12, 31, tzinfo=UTC)
    for event, place in (
        (RunQueued(at=early, run="a b", workflow="c d"), "$.run"),
        (RunQueued(at=early, run="r", workflow="c d"), "$.workflow"),
    ):
        with pytest.raises(InvalidInput) as refused:
            codec.checked(event)
        assert refused.value.message.endswith(
            f"got 'a b' - at `{place}`".replace("'a b'", repr(getattr(event, place[2:])))
        )
    with pytest.raises(InvalidInput) as refused:
        codec.checked(RunQueued(at=early, run="r"))
    assert (
        refused.value.message
        == "Expected `datetime` from 1970 to before 9000 UTC, got 1969-12-31T00:00:00+00:00 - at `$.at`"
    )


def test_H4_L4_a_token_digest_is_64_hex_digits_not_any_printable_text() -> None:
    """A token's digest has a character rule of its own (64 hex digits) with no fast
    test: 64 printable characters that are not hex are refused. Mutation caught: a rule
    without a fast test given the no-control-characters one."""
    from epochledger.ledger import codec
    from epochledger.ledger.events import TokenIssued
    from tests.conftest import T0

    with pytest.raises(InvalidInput) as refused:
        codec.checked(TokenIssued(at=T0, token="t1", role="admin", digest="g" * 64))
    assert refused.value.message == f"Expected `str` with 64 hex digits, got {'g' * 64!r} - at `$.digest`"
    codec.checked(TokenIssued(at=T0, token="t1", role="admin", digest="0" * 64))


def test_L4_a_value_whose_equality_contradicts_itself_is_refused_in_plain_words() -> None:
    """A hostile value can be unequal to its own decoding while no part of it differs (its
    `!=` and `==` both say True): `checked` and `check_value` refuse it all the same, in
    plain words (there is no field to name). Mutations caught: those texts changed, the
    value left out of check_value's."""
    from epochledger.ledger import codec
    from epochledger.ledger.events import RunQueued
    from tests.conftest import T0

    class LyingEvent(RunQueued, frozen=True, kw_only=True):
        def __eq__(self, other: object) -> bool:
            return True

        def __ne__(self, other: object) -> bool:
            return True

    class LyingCause(Cause, frozen=True, kw_only=True):
        def __eq__(self, other: object) -> bool:
            return True

        def __ne__(self, other: object) -> bool:
            return True

    with pytest.raises(InvalidInput) as refused:
        codec.checked(LyingEvent(at=T0, run="q"), where="line 2")
    assert (refused.value.where, refused.value.message) == ("line 2", "the event does not survive its own encoding")
    with pytest.raises(InvalidInput) as refused:
        check_value(LyingCause(code="X"), Cause, "--cause")
    assert (refused.value.where, refused.value.message) == (
        "--cause",
        "LyingCause LyingCause(code='X', message=None, cause=None) is not valid",
    )
