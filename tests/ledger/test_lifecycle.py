"""The lifecycle contract (rules P1, P2): every predicate over every status as a literal
truth table, the code-dependent cells, the relation invariants, and the rendered table
in docs/lifecycle.md checked against the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from epochledger.ledger import lifecycle
from epochledger.ledger.codes import KNOWN_CODES, NO_AUTO_RESUME
from epochledger.ledger.events import Status

Y, N = True, False
PREDS = [
    "is_terminal",
    "is_paused",
    "is_final_success",
    "is_final_failure",
    "is_terminal_resumable",
    "is_queued",
    "is_active",
    "can_operator_resume",
    "requires_resume_answers",
    "can_auto_resume",
    "counts_against_launch_limit",
]
# fmt: off
TRUTH = {
    #                        term paus fsuc ffai tres queu actv opre answ auto lim
    "queued":               (N,   N,   N,   N,   N,   Y,   Y,   N,   N,   N,   N),
    "running":              (N,   N,   N,   N,   N,   N,   Y,   N,   N,   N,   Y),
    "paused_operator":      (Y,   Y,   N,   N,   Y,   N,   N,   Y,   N,   N,   N),
    "paused_waiting_human": (Y,   Y,   N,   N,   Y,   N,   N,   Y,   Y,   N,   N),
    "paused_orchestrator":  (Y,   Y,   N,   N,   Y,   N,   N,   Y,   N,   N,   N),
    "failed_resumable":     (Y,   N,   N,   N,   Y,   N,   N,   Y,   N,   Y,   N),
    "failed":               (Y,   N,   N,   Y,   N,   N,   N,   N,   N,   N,   N),
    "cancelled":            (Y,   N,   N,   N,   Y,   N,   N,   Y,   N,   N,   N),
    "finished":             (Y,   N,   Y,   N,   N,   N,   N,   N,   N,   N,   N),
}
# fmt: on
CODES = [
    "",
    "TIMEOUT",
    "NODE_NOT_FOUND",
    "RESUME_INVALID",
    "FAIL_NODE",
    "PROCESS_ORPHANED",
    "SOMETHING_NEW",
    "LOOP_EXHAUSTED",
    "JOIN_FAILED",
    "QUEUE_SCHEMA_MISMATCH",
]
# The codes whose resume would fail the same way, is invalid, or contradicts a deliberate
# fail: the only code-dependent cells of the truth table.
NO_AUTO = ("NODE_NOT_FOUND", "RESUME_INVALID", "FAIL_NODE", "LOOP_EXHAUSTED", "JOIN_FAILED")


def test_P2_tables_cover_every_status_and_every_predicate() -> None:
    assert set(TRUTH) == {s.value for s in Status}
    assert PREDS == list(lifecycle.PREDICATES)


@pytest.mark.parametrize("status", list(TRUTH))
@pytest.mark.parametrize("code", CODES)
def test_P1_P2_truth_table(status: str, code: str) -> None:
    expected = dict(zip(PREDS, TRUTH[status], strict=True))
    if code in NO_AUTO:
        expected["can_auto_resume"] = False  # the only code-dependent cells
    assert lifecycle.predicates(Status(status), code) == expected


def test_P1_auto_resume_refusal_list_is_at_least_the_pointless_codes() -> None:
    assert set(NO_AUTO) <= NO_AUTO_RESUME
    assert NO_AUTO_RESUME <= set(KNOWN_CODES)


def test_P1_L3_every_known_code_is_in_the_documented_code_list() -> None:
    """The reserved codes (LOOP_EXHAUSTED, JOIN_FAILED, QUEUE_SCHEMA_MISMATCH among them)
    are in ledger/codes.py and in the code table of docs/lifecycle.md, each once."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "lifecycle.md").read_text()
    table = doc.split("## Failure codes", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `([A-Z_]+)` \|", table, re.M)
    assert sorted(documented) == sorted(KNOWN_CODES)
    assert {"LOOP_EXHAUSTED", "JOIN_FAILED", "QUEUE_SCHEMA_MISMATCH"} <= set(KNOWN_CODES)


@pytest.mark.parametrize("status", list(Status))
@pytest.mark.parametrize("code", CODES)
def test_P2_relation_invariants(status: Status, code: str) -> None:
    p = lifecycle.predicates(status, code)

    def implies(a: str, b: str) -> None:
        assert not p[a] or p[b], f"{status}/{code!r}: {a} without {b}"

    implies("is_final_success", "is_terminal")
    implies("is_final_failure", "is_terminal")
    implies("is_terminal_resumable", "is_terminal")
    implies("is_paused", "is_terminal_resumable")
    implies("can_auto_resume", "can_operator_resume")
    implies("can_operator_resume", "is_terminal_resumable")
    implies("requires_resume_answers", "is_paused")
    assert p["is_active"] != p["is_terminal"]  # a run is driven by the tick or waits on someone
    assert not (p["is_final_success"] and p["is_final_failure"])
    assert not (p["counts_against_launch_limit"] and p["is_terminal"])
    assert not (p["is_final_success"] or p["is_final_failure"]) or not p["can_operator_resume"]
    if status is Status.CANCELLED:
        assert not p["can_auto_resume"]  # automation never overrides an operator's stop


def test_P1_E1_only_the_orchestrators_own_wait_is_the_orchestrators_to_resume() -> None:
    """Mutation caught: the orchestrator's resume widened to another status, or its
    wait handed to automation (a retry lane selecting can_auto_resume would resume it)."""
    for s in Status:
        assert lifecycle.can_orchestrator_resume(s) is (s == Status.PAUSED_ORCHESTRATOR), s
        assert not (lifecycle.can_orchestrator_resume(s) and lifecycle.can_auto_resume(s)), s
        assert not lifecycle.can_orchestrator_resume(s) or lifecycle.allowed_from("run.resumed", s), s


def test_P1_transitions_are_decided_by_the_same_predicates() -> None:
    for s in Status:
        assert lifecycle.allowed_from("run.resumed", s) == lifecycle.can_operator_resume(s)
        assert lifecycle.allowed_from("run.corrected", s) == (
            lifecycle.is_final_success(s) or lifecycle.is_final_failure(s)
        )
        # A failure or a finish ends active work, or the orchestrator's own wait (rule E1):
        # no other pause, and nothing terminal.
        assert lifecycle.allowed_from("run.failed", s) == (
            lifecycle.is_active(s) or lifecycle.can_orchestrator_resume(s)
        )
        assert lifecycle.allowed_from("run.finished", s) == (
            lifecycle.counts_against_launch_limit(s) or lifecycle.can_orchestrator_resume(s)
        )


def test_P2_docs_lifecycle_table_is_generated_from_the_code() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "lifecycle.md").read_text()
    m = re.search(r"<!-- BEGIN GENERATED .*? -->\n(.*?)<!-- END GENERATED -->", doc, re.S)
    assert m, "docs/lifecycle.md lost its generated block"
    assert m.group(1) == lifecycle.render_markdown(), (
        "docs/lifecycle.md is out of date: regenerate with `python -m epochledger.ledger.lifecycle --write`"
    )


@pytest.mark.parametrize("status", list(Status))
def test_P2_F2_fenced_evidence_of_an_end_refuses_auto_resume_for_every_status_and_code(status: Status) -> None:
    from epochledger.ledger.codes import KNOWN_CODES

    for code in ["", "A_CODE_NOBODY_KNOWS", *KNOWN_CODES]:
        assert lifecycle.can_auto_resume(status, code, fenced_end=True) is False
        assert lifecycle.predicates(status, code, fenced_end=True)["can_auto_resume"] is False
        assert lifecycle.predicates(status, code)["can_auto_resume"] is lifecycle.can_auto_resume(status, code)


def test_P2_write_doc_replaces_only_the_generated_block(tmp_path: Path) -> None:
    """`python -m epochledger.ledger.lifecycle --write` keeps the prose and rewrites the block;
    a doc without exactly one block is refused."""
    doc = tmp_path / "lifecycle.md"
    doc.write_text(
        "intro\n<!-- BEGIN GENERATED by `python -m epochledger.ledger.lifecycle --write` -->\nstale\n"
        "<!-- END GENERATED -->\noutro\n"
    )
    lifecycle.write_doc(str(doc))
    text = doc.read_text()
    assert text.startswith("intro\n<!-- BEGIN GENERATED by `python -m epochledger.ledger.lifecycle --write` -->\n")
    assert (
        lifecycle.render_markdown() in text and "stale" not in text and text.endswith("<!-- END GENERATED -->\noutro\n")
    )
    doc.write_text("no block here\n")
    with pytest.raises(SystemExit, match="expected one generated block, found 0"):
        lifecycle.write_doc(str(doc))


@pytest.mark.parametrize("name", list(lifecycle.PREDICATES))
def test_P1_predicates_take_a_status_by_value_and_refuse_an_unknown_one(name: str) -> None:
    """Repro (before the fix): `is_final_success("finished")` answered False while
    `is_terminal("finished")` answered True: predicates compared with `is`, so a status
    read from JSON or DuckDB got a silently wrong answer. Mutation caught: `is` back in
    any predicate."""
    from epochledger.ledger.errors import InvalidInput

    f = lifecycle.PREDICATES[name]
    for s in Status:
        for code in ("", "NODE_NOT_FOUND", "TIMEOUT"):
            assert f(s.value, code) is f(s, code), (name, s, code)
            assert f(str(s.value), code) is f(s, code)  # a plain str, not the enum's own value object
    with pytest.raises(InvalidInput, match="unknown status 'finised'"):
        f("finised", "")
    with pytest.raises(InvalidInput) as refused:
        f(None, "")  # type: ignore[arg-type]
    assert "status" in str(refused.value) and "None" in str(refused.value)


def test_P1_the_exported_predicates_answer_by_value() -> None:
    import epochledger

    assert epochledger.is_final_success("finished") and epochledger.is_terminal("finished")
    assert lifecycle.allowed_from("run.finished", "running") and not lifecycle.allowed_from("run.finished", "queued")


def test_P1_an_unknown_status_is_refused_with_every_known_status_and_where() -> None:
    from epochledger.ledger.errors import InvalidInput

    """Mutations caught (make mutation): the refusal's `where` or its list of known
    statuses changed."""
    with pytest.raises(InvalidInput) as err:
        lifecycle.is_terminal("finised")
    known = (
        "queued, running, paused_operator, paused_waiting_human, paused_orchestrator, failed_resumable, failed, "
        "cancelled, finished"
    )
    assert (str(err.value), err.value.where) == (f"status: unknown status 'finised' (known: {known})", "status")
