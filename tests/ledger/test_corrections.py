"""Terminal is absorbing; an audited correction is the only way out (rules L2, L3, on
both stores). Attribution: every transition records who made it and why."""

from __future__ import annotations

import json

import pytest

from epochledger import IllegalTransition, Status
from epochledger.app import Ledger
from epochledger.cli import main
from epochledger.ledger.events import Cause, RunCorrected


def finished(ledger: Ledger, run: str = "r1") -> None:
    ledger.queue(run, actor="api")
    ledger.start(run, actor="w-1.e1")
    ledger.finish(run, actor="w-1.e1")


def test_P1_final_run_refuses_everything_but_delete_and_correction(ledger: Ledger) -> None:
    finished(ledger)
    for tag, attempt in (
        ("run.failed", lambda: ledger.fail("r1", "X", resumable=True)),
        ("run.rewound", lambda: ledger.rewind("r1")),
        ("run.resumed", lambda: ledger.resume("r1", "operator")),
        ("run.cancelled", lambda: ledger.cancel("r1")),
    ):
        with pytest.raises(IllegalTransition) as refused:
            attempt()
        # refused by the transition table (final absorbs), not by another check
        assert (refused.value.run, refused.value.status, refused.value.attempted, refused.value.why) == (
            "r1",
            Status.FINISHED,
            tag,
            "",
        )
    with pytest.raises(IllegalTransition, match="needs an actor and a reason"):
        ledger.submit(RunCorrected(at=ledger.clock.now(), run="r1", to=Status.FAILED, actor="alice"))
    with pytest.raises(IllegalTransition, match="may not set running"):
        ledger.correct("r1", Status.RUNNING, actor="alice", reason="no")
    assert len(ledger.history("r1")) == 3


def test_P1_correction_moves_a_final_run_with_actor_reason_and_code(ledger: Ledger) -> None:
    finished(ledger)
    state = ledger.correct("r1", Status.FAILED, code="BAD_OUTPUT", actor="alice", reason="export was empty")
    assert (state.status, state.code, state.corrections, state.actor) == (Status.FAILED, "BAD_OUTPUT", 1, "alice")
    last = ledger.history("r1")[-1].event
    assert isinstance(last, RunCorrected) and last.reason == "export was empty"
    # correcting a code on the same status is a correction too; the identical one is a no-op
    state = ledger.correct("r1", Status.FAILED, code="BAD_INPUT", actor="alice", reason="root cause was input")
    assert state.code == "BAD_INPUT" and state.corrections == 2
    ledger.correct("r1", Status.FAILED, code="BAD_INPUT", actor="alice", reason="root cause was input")
    assert len(ledger.history("r1")) == 5
    state = ledger.correct("r1", Status.FAILED_RESUMABLE, code="BAD_INPUT", actor="alice", reason="input fixed")
    assert ledger.resume("r1", "operator", actor="alice").status == Status.QUEUED


def test_history_shows_corrections_distinctly_with_actor_and_reason(sqlite_ledger: Ledger, capsys) -> None:
    finished(sqlite_ledger)
    sqlite_ledger.correct("r1", Status.FAILED, code="", actor="alice", reason="output was empty")
    assert main(["--store", sqlite_ledger.url, "history", "r1"]) == 0
    out = capsys.readouterr().out
    line = [ln for ln in out.splitlines() if "CORRECTION" in ln][0]
    assert (
        "CORRECTION finished -> failed" in line and "alice" in line and "output was empty" in line and "UNKNOWN" in line
    )
    assert main(["--store", sqlite_ledger.url, "history", "r1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["actor"] for r in rows] == ["api", "w-1.e1", "w-1.e1", "alice"]
    assert rows[-1]["from_status"] == "finished" and rows[-1]["type"] == "run.corrected"


def test_cli_correct_needs_actor_and_reason(sqlite_ledger: Ledger, capsys) -> None:
    finished(sqlite_ledger)
    with pytest.raises(SystemExit) as refused:
        main(["--store", sqlite_ledger.url, "correct", "r1", "--to", "failed", "--actor", "alice"])
    assert refused.value.code == 2  # argparse: a usage error (docs/cli.md)
    code = main(
        [
            "--store",
            sqlite_ledger.url,
            "correct",
            "r1",
            "--to",
            "failed",
            "--code",
            "BAD",
            "--actor",
            "alice",
            "--reason",
            "r",
            "--json",
        ]
    )
    assert code == 0 and json.loads(capsys.readouterr().out)["corrections"] == 1
    code = main(
        [
            "--store",
            sqlite_ledger.url,
            "correct",
            "r1",
            "--to",
            "failed",
            "--code",
            "BAD",
            "--actor",
            "bob",
            "--reason",
            "again",
            "--json",
        ]
    )
    assert code == 0 and json.loads(capsys.readouterr().out)["corrections"] == 1  # the same correction again: no-op
    code = main(
        [
            "--store",
            sqlite_ledger.url,
            "correct",
            "r1",
            "--to",
            "finished",
            "--code",
            "BAD",
            "--actor",
            "bob",
            "--reason",
            "x",
        ]
    )
    assert code == 5  # a code belongs only on a failure status


def test_L3_cause_chain_round_trips_and_prints(sqlite_ledger: Ledger, capsys) -> None:
    sqlite_ledger.queue("r1")
    sqlite_ledger.start("r1")
    chain = Cause(code="OOM_KILLED", message="cgroup limit", cause=Cause(code="", message="leak in parser"))
    state = sqlite_ledger.fail("r1", "ENGINE_ERROR", resumable=True, error="worker died", cause=chain)
    assert state.cause == chain and sqlite_ledger.get_run("r1").cause == chain
    main(["--store", sqlite_ledger.url, "history", "r1"])
    assert "caused by OOM_KILLED: cgroup limit caused by UNKNOWN: leak in parser" in capsys.readouterr().out
    sqlite_ledger.resume("r1", "auto")
    assert sqlite_ledger.get_run("r1").cause is None
