"""Rule H4 in the library: the token Decider (ledger/tokens.py), the one role table
(ledger/access.py) and the facade's token verbs (epochledger/app.py): tokens replay
from the log, are stored only as digests, and are checked in constant time."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta, timezone

import pytest

from epochledger.app import open_ledger
from epochledger.ledger import access
from epochledger.ledger import tokens as t
from epochledger.ledger.errors import InvalidInput, TokenNotFound
from epochledger.ledger.events import TokenIssued, TokenRevoked, token_stream

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
DIGEST = hashlib.sha256(b"elt.a1.s3cret").hexdigest()


def issued(token: str = "a1", role: str = "writer", digest: str = DIGEST, **kw: object) -> TokenIssued:
    return TokenIssued(at=T0, token=token, role=role, digest=digest, **kw)  # type: ignore[arg-type]


def given(*events: TokenIssued | TokenRevoked) -> t.TokenRegistry | None:
    return t.fold(events)


# ------------------------------------------------------------------ the Decider
def test_H4_issue_then_revoke_folds_to_a_refused_token_that_stays_listed() -> None:
    state = given(issued(name="tick", slots=["tick-*"]), TokenRevoked(at=T0 + timedelta(hours=1), token="a1"))
    assert state is not None and state.version == 2
    token = state.tokens["a1"]
    assert (token.role, token.name, token.slots, token.revoked) == ("writer", "tick", ["tick-*"], True)
    assert t.matches(state, "elt.a1.s3cret") is None


def test_H4_decide_table() -> None:
    """Command x state -> events or refusal, including the retried deliveries."""
    live = given(issued())
    revoked = given(issued(), TokenRevoked(at=T0, token="a1"))
    assert t.decide(issued(), None) == [issued()]
    assert t.decide(issued(), live) == []  # the same issue again: a retry
    with pytest.raises(InvalidInput, match="taken"):
        t.decide(issued(digest="0" * 64), live)
    with pytest.raises(InvalidInput, match="not a role") as bad:
        t.decide(issued(role="root"), None)
    assert bad.value.where == "role"
    with pytest.raises(InvalidInput, match="only a writer") as bad:
        t.decide(issued(role="reader", slots=["a"]), None)
    assert bad.value.where == "slots"
    assert t.decide(TokenRevoked(at=T0, token="a1"), live) == [TokenRevoked(at=T0, token="a1")]
    assert t.decide(TokenRevoked(at=T0, token="a1"), revoked) == []
    with pytest.raises(TokenNotFound) as gone:
        t.decide(TokenRevoked(at=T0, token="zz"), live)
    assert gone.value.token == "zz"


def test_H4_a_token_event_is_stamped_in_UTC() -> None:
    cet = timezone(timedelta(hours=1))
    (event,) = t.decide(TokenIssued(at=T0.astimezone(cet), token="a1", role="admin", digest=DIGEST), None)
    assert event.at.utcoffset() == timedelta(0) and event.at == T0


def test_H4_matches_needs_the_exact_token_of_a_live_id() -> None:
    state = given(issued())
    assert t.matches(state, "elt.a1.s3cret") is not None
    for wrong in ("elt.a1.s3creT", "elt.a1.s3cret.", "elt.a2.s3cret", "a1.s3cret", "", "elt..", "elt.a1."):
        assert t.matches(state, wrong) is None, wrong
    assert t.matches(None, "elt.a1.s3cret") is None


def test_H4_the_fold_keeps_who_issued_and_who_revoked() -> None:
    """Mutation caught: the issuer or the revoker dropped from the listing."""
    state = given(issued(actor="alice"), TokenRevoked(at=T0 + timedelta(hours=1), token="a1", actor="bob"))
    assert state is not None and state.digests == {"a1": DIGEST}
    token = state.tokens["a1"]
    assert (token.issued_at, token.issued_by) == (T0, "alice")
    assert (token.revoked_at, token.revoked_by) == (T0 + timedelta(hours=1), "bob")


def test_H4_decide_stamps_in_UTC_in_a_process_whose_zone_is_not_UTC() -> None:
    """Mutation caught: `astimezone()` without UTC (the machine's zone), which a process
    running in UTC cannot tell apart: this test runs in another zone."""
    import os
    import time

    saved = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Kolkata"
    time.tzset()
    try:
        cet = timezone(timedelta(hours=1))
        (event,) = t.decide(TokenIssued(at=T0.astimezone(cet), token="a1", role="admin", digest=DIGEST), None)
        assert event.at.utcoffset() == timedelta(0) and event.at == T0
    finally:
        if saved is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = saved
        time.tzset()


def test_H4_refusals_name_the_field_and_the_roles() -> None:
    """Mutation caught: a taken id refused without `where`, the roles' list garbled."""
    with pytest.raises(InvalidInput) as taken:
        t.decide(issued(digest="0" * 64), given(issued()))
    assert taken.value.where == "token"
    with pytest.raises(InvalidInput) as bad:
        t.decide(issued(role="root"), None)
    assert "one of reader, writer, operator, auditor, admin" in str(bad.value)


def test_H4_token_id_reads_only_the_three_part_shape() -> None:
    """Mutation caught: any one of the shape's four conditions lost."""
    assert t.token_id("elt.a1.s3cret") == "a1"
    for wrong in ("elt..s3cret", "elt.a1.", "xyz.a1.s3cret", "elt.a1.s3cret.x", "elt.a1", "a1"):
        assert t.token_id(wrong) is None, wrong


def test_H4_the_digest_is_sha256_of_the_text_even_of_a_lone_surrogate() -> None:
    """A token's text is a str: one with a lone surrogate (which no HTTP header holds, but
    a library caller may pass) is digested, never an encoding error, and never matches."""
    assert t.digest("elt.a1.s3cret") == DIGEST
    assert t.digest("elt.a1.\udcff") == hashlib.sha256(b"elt.a1.\xed\xb3\xbf").hexdigest()
    assert t.matches(given(issued()), "elt.a1.\udcff") is None


def test_H4_the_registry_finds_a_live_token_by_its_text() -> None:
    state = given(issued())
    assert state is not None
    found = state.find("elt.a1.s3cret")
    assert found is not None and found.id == "a1"
    assert state.find("elt.a1.wrong") is None


# ------------------------------------------------------------------ the role table
def test_H4_the_role_table_its_operator_acts_and_deny_by_default() -> None:
    assert list(access.ROLES) == ["reader", "writer", "operator", "auditor", "admin"]
    for role in access.ROLES:
        assert access.READS <= access.ROLES[role]
    assert not access.allows("writer", "correct") and access.allows("operator", "correct")
    assert not access.allows("writer", "resume.operator") and access.allows("writer", "resume")
    assert not access.allows("operator", "audit_query") and access.allows("auditor", "audit_query")
    assert access.needed("audit_query") == ["auditor", "admin"]
    assert access.needed("token_create") == ["admin"]
    assert not any(access.allows(r, "queue") for r in ("reader", "operator", "auditor"))
    assert not any(access.allows(r, "no_such_op") for r in access.ROLES)
    assert not access.allows("root", "queue") and access.allows("root", "healthz")  # an unknown role: public only
    assert access.needed("no_such_op") == []
    assert all(access.allows(r, "healthz") for r in access.ROLES)
    # every act `act` names is in the table; anything else is the op itself
    assert access.act("resume", by="operator") == "resume.operator"
    assert access.act("resume", by="auto") == "resume"
    assert access.act("cancel", actor="operator") == access.act("cancel", actor="operator:alice") == "cancel.operator"
    assert access.act("cancel", actor="operators") == access.act("cancel") == "cancel"
    assert {"resume.operator", "cancel.operator"} <= access.OPERATIONS
    assert access.SLOT_BOUND <= access.ROLES["writer"]


def test_H4_slot_bindings_are_names_or_fnmatch_patterns() -> None:
    assert access.slot_allowed([], "anything")
    assert access.slot_allowed(["api-1"], "api-1") and not access.slot_allowed(["api-1"], "api-10")
    assert access.slot_allowed(["api-*"], "api-10") and not access.slot_allowed(["api-*"], "API-1")
    assert access.slot_allowed(["w?", "x"], "w1") and not access.slot_allowed(["w?", "x"], "y")


# ------------------------------------------------------------------ the facade
def test_H4_a_token_is_random_stored_as_its_digest_only_and_replays(store_url: str) -> None:
    with open_ledger(store_url, create=True) as lg:
        a = lg.issue_token("writer", name="tick", slots=["tick-*"], actor="alice", reason="the Rust loop")
        b = lg.issue_token("reader")
        assert a.secret != b.secret and a.token.id != b.token.id
        # 256 random bits: 43 url-safe characters after the id
        assert len(a.secret.split(".")[2]) == 43
        raw = b"".join(batch.data for batch in lg._store.read_lines())
        assert a.secret.encode() not in raw and a.secret.split(".")[2].encode() not in raw
        assert hashlib.sha256(a.secret.encode()).hexdigest().encode() in raw
        assert lg.authenticate(a.secret) == a.token
        lg.revoke_token(b.token.id, actor="alice")
    with open_ledger(store_url) as fresh:  # another process: the tokens are the log's
        assert fresh.authenticate(a.secret) == a.token
        assert fresh.authenticate(b.secret) is None
        assert [(x.id, x.revoked, x.revoked_by) for x in fresh.tokens()] == [
            (a.token.id, False, None),
            (b.token.id, True, "alice"),
        ]
        assert len(fresh._store.read_stream(token_stream())) == 3


def test_H4_a_revocation_by_another_ledger_is_seen_at_the_next_check(sqlite_url: str) -> None:
    """The registry is cached between checks, never trusted past a change of the log:
    a revocation written by another process is refused at the very next check."""
    with open_ledger(sqlite_url, create=True) as one, open_ledger(sqlite_url) as two:
        token = one.issue_token("admin")
        assert two.authenticate(token.secret) is not None  # cached now
        assert two.authenticate(token.secret) is not None
        one.revoke_token(token.token.id)
        assert two.authenticate(token.secret) is None


def test_H4_bad_token_input_is_refused_by_name_and_appends_nothing(sqlite_url: str) -> None:
    with open_ledger(sqlite_url, create=True) as lg:
        for kwargs, where in (
            ({"role": "root"}, "role"),
            ({"role": "writer", "slots": "api-1"}, "slots"),
            ({"role": "writer", "slots": ["a b"]}, "slots"),
            ({"role": "writer", "name": "has space"}, "name"),
            ({"role": "writer", "slots": ["s"] * 65}, "slots"),
        ):
            with pytest.raises(InvalidInput) as bad:
                lg.issue_token(**kwargs)  # type: ignore[arg-type]
            assert where in str(bad.value), (kwargs, bad.value)
        with pytest.raises(TokenNotFound):
            lg.revoke_token("nope")
        assert lg.tokens() == [] and lg._store.read_stream(token_stream()) == []


def test_H4_the_service_page_shows_the_role_table_as_the_code_has_it() -> None:
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "service.md").read_text()
    assert access.render() in page, "docs/service.md 'Roles' differs from ledger/access.py: paste access.render()"
