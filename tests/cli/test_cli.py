"""The command line: each command calls the library and prints; errors map to the
documented exit codes (README.md)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from epochledger.cli import main
from tests.app.test_ndjson import GOOD, lines


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def history_file(tmp_path):
    path = tmp_path / "history.ndjson"
    path.write_bytes(b"".join(lines(GOOD)))
    return path


def test_L3_import_show_runs_history_export(capsys, tmp_path, history_file) -> None:
    store = f"sqlite:///{tmp_path / 'l.db'}"
    assert cli(capsys, "--store", store, "init")[0] == 0
    code, out, _ = cli(capsys, "--store", store, "import", str(history_file))
    assert code == 0 and f"imported {len(GOOD)} events" in out

    code, out, _ = cli(capsys, "show", "r1", "--json", "--store", store)  # --store after the command works too
    shown = json.loads(out)
    assert shown["status"] == "failed_resumable" and shown["code"] == "GPU_XID_79"
    assert shown["predicates"]["can_auto_resume"] is True and shown["predicates"]["is_terminal"] is True

    code, out, _ = cli(capsys, "--store", store, "runs", "--json")
    assert [r["run"] for r in json.loads(out)] == ["r1", "r3"]  # r2 was deleted
    code, out, _ = cli(capsys, "--store", store, "runs", "--code", "UNKNOWN", "--json")
    assert [r["run"] for r in json.loads(out)] == ["r3"]
    code, out, _ = cli(capsys, "--store", store, "runs", "--where", "can_auto_resume", "--json")
    assert [r["run"] for r in json.loads(out)] == ["r1"]
    code, out, _ = cli(capsys, "--store", store, "runs", "--status", "failed")
    assert "r3" in out and "UNKNOWN" in out and "r1" not in out

    code, out, _ = cli(capsys, "--store", store, "history", "r1")
    assert "alice" in out and "approved" in out and "GPU_XID_79" in out
    code, out, _ = cli(capsys, "--store", store, "history", "r1", "--json")
    assert [e["type"] for e in json.loads(out)][:2] == ["run.queued", "run.started"]

    code, out, _ = cli(capsys, "--store", store, "export")
    assert out.encode() == b"".join(
        subprocess.run(
            [sys.executable, "-m", "epochledger", "--store", store, "export"], capture_output=True, check=True
        ).stdout.splitlines(keepends=True)
    )
    assert out.count("\n") == len(GOOD)


@pytest.mark.parametrize(
    ("args", "exit_code", "message"),
    [
        (["show", "nope"], 4, "run 'nope' not found"),
        (["show", "r2"], 4, "run 'r2' was deleted"),
        (["import", "/nonexistent.ndjson"], 3, "/nonexistent.ndjson: cannot read"),
        (["--store", "mysql://x", "runs"], 3, "unsupported store URL scheme"),
    ],
)
def test_L4_errors_map_to_documented_exit_codes(capsys, tmp_path, history_file, args, exit_code, message) -> None:
    store = f"sqlite:///{tmp_path / 'l.db'}"
    cli(capsys, "--store", store, "init")
    cli(capsys, "--store", store, "import", str(history_file))
    if "--store" not in args:
        args = ["--store", store, *args]
    code, _, err = cli(capsys, *args)
    assert code == exit_code and message in err


def test_L4_import_with_a_bad_line_exits_3_naming_the_line(capsys, tmp_path) -> None:
    store = f"sqlite:///{tmp_path / 'l.db'}"
    bad = tmp_path / "bad.ndjson"
    bad.write_bytes(b"".join(lines(GOOD[:3])) + b'{"type":"run.finished","at":"2026-09-09T15:00:00Z","run":"zzz"}\n')
    cli(capsys, "--store", store, "init")
    code, _, err = cli(capsys, "--store", store, "import", str(bad))
    assert code == 3 and "line 4" in err and "nothing was imported" in err
    code, out, _ = cli(capsys, "--store", store, "export")
    assert out == ""


def test_demo_records_a_day_and_prints_it(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli(capsys, "demo")
    assert code == 0 and "recorded" in out and "runs by status" in out
    code, out, _ = cli(capsys, "--store", "epochledger-demo.db", "runs", "--json")
    runs = json.loads(out)
    assert len(runs) > 30
    assert {r["status"] for r in runs} >= {"finished", "failed_resumable", "cancelled"}
    assert cli(capsys, "demo")[0] == 0  # the default demo file is replaced, the same day again
    code, out2, _ = cli(capsys, "--store", "epochledger-demo.db", "runs", "--json")
    assert json.loads(out2) == runs


def test_L2_L7_show_keeps_the_cause_a_cancel_overrode_and_drops_a_cancelled_question(ledger, store_url, capsys) -> None:
    """`show` and `show --json` of a cancelled failure name what it was (code, error,
    cause); of a cancelled human wait, no pending question is left in the state."""
    from epochledger.ledger.events import Cause

    ledger.queue("f")
    ledger.start("f")
    ledger.fail(
        "f", "TIMEOUT", resumable=True, error="step s1 took 3h", cause=Cause(code="OOM_KILLED", message="cgroup")
    )
    ledger.cancel("f", actor="alice", reason="not needed any more")
    ledger.queue("h")
    ledger.start("h")
    ledger.pause("h", "waiting_human", interaction="i-7", questions=["ship it?"], reason="needs sign-off")
    ledger.cancel("h")
    code, out, _ = cli(capsys, "--store", store_url, "show", "f")
    assert code == 0 and "CANCELLED" in out
    assert "cancelled: from failed_resumable TIMEOUT: step s1 took 3h; caused by OOM_KILLED: cgroup" in out
    code, out, _ = cli(capsys, "--store", store_url, "show", "f", "--json")
    shown = json.loads(out)
    assert shown["code_shown"] == "CANCELLED" and shown["error"] is None
    assert shown["cancelled_from"] == {
        "status": "failed_resumable",
        "code": "TIMEOUT",
        "error": "step s1 took 3h",
        "cause": {"code": "OOM_KILLED", "message": "cgroup"},
        "reason": None,
    }
    code, out, _ = cli(capsys, "--store", store_url, "show", "h", "--json")
    shown = json.loads(out)
    assert (shown["interaction"], shown["questions"], shown["answers"]) == (None, None, None)
    assert (
        shown["cancelled_from"]["status"] == "paused_waiting_human"
        and shown["cancelled_from"]["reason"] == "needs sign-off"
    )
    code, out, _ = cli(capsys, "--store", store_url, "show", "h")
    assert "ship it?" not in out and "i-7" not in out and "cancelled: from paused_waiting_human: needs sign-off" in out


def test_L1_a_retried_queue_of_a_queued_run_appends_nothing(ledger) -> None:
    """The adapter's retry lane: fail, auto resume, re-publish (queue, same fields), on
    each store: the queue returns the run as it is and appends nothing; other fields
    are refused and append nothing either."""
    from epochledger.ledger.errors import IllegalTransition

    ledger.queue("t-1", workflow="add", labels={"queue": "celery"})
    ledger.start("t-1")
    ledger.fail("t-1", "TIMEOUT", resumable=True)
    ledger.resume("t-1", "auto")
    before = ledger._store.max_position()
    state = ledger.queue("t-1", workflow="add", labels={"queue": "celery"}, actor="celery", reason="retry 1")
    assert state.status == "queued" and ledger._store.max_position() == before
    with pytest.raises(IllegalTransition, match="workflow 'add', not 'mul'"):
        ledger.queue("t-1", workflow="mul", labels={"queue": "celery"})
    assert ledger._store.max_position() == before


def test_L1_A1_a_runs_attempt_counts_its_starts_in_show_runs_json_and_the_audit(
    ledger, store_url, capsys, tmp_path
) -> None:
    """Each start after a resume or retry is the run's next attempt: 0 while never
    started, 1 from the first start. `show`, `runs --json` and the audit's runs view say
    the same; the audit's new column comes after its others."""
    from epochledger.projections import audit

    ledger.queue("t-1")
    ledger.queue("t-0")
    assert ledger.get_run("t-1").attempt == 0
    ledger.start("t-1")
    assert ledger.get_run("t-1").attempt == 1
    ledger.fail("t-1", "TIMEOUT", resumable=True)
    ledger.resume("t-1", "auto")
    assert ledger.get_run("t-1").attempt == 1  # a resume is not a start
    ledger.start("t-1")
    code, out, _ = cli(capsys, "--store", store_url, "show", "t-1", "--json")
    shown = json.loads(out)
    assert code == 0 and shown["attempt"] == 2
    assert list(shown) == sorted(shown)  # the JSON's keys are sorted: a new field takes its place, others stay
    code, out, _ = cli(capsys, "--store", store_url, "show", "t-1")
    assert "     attempt: 2" in out
    assert "attempt" not in cli(capsys, "--store", store_url, "show", "t-0")[1]  # never started
    code, out, _ = cli(capsys, "--store", store_url, "runs", "--json")
    assert {r["run"]: r["attempt"] for r in json.loads(out)} == {"t-0": 0, "t-1": 2}
    path = str(tmp_path / "audit.duckdb")
    audit.sync(ledger._store, path)
    assert audit.query(path, "SELECT run, attempt FROM runs ORDER BY run").rows == [("t-0", 0), ("t-1", 2)]
    columns = [c for (c,) in audit.query(path, "SELECT column_name FROM (DESCRIBE runs)").rows]
    assert columns[columns.index("labels") + 1] == "attempt"


@pytest.mark.parametrize("policy", ["flat-age:30s", "floor:1h"])
def test_R4_V1_timeline_with_a_policy_draws_the_consoles_what_if_picture(capsys, tmp_path, policy: str) -> None:
    """`timeline -o --policy` writes the page the console's incident page draws with
    `policy=` (and `upto=` as `--upto`): each verdict the what-if gives differently
    flagged on its run, the same bytes as the facade's page given `Reports.whatif`'s
    result, windowed or whole; without --policy the page is the one it was."""
    from datetime import UTC, datetime

    from epochledger import open_ledger
    from epochledger.demo import run_demo

    db = str(tmp_path / "demo.db")
    run_demo(db, out=lambda _: None)
    cursor, upto = datetime(2026, 9, 9, 14, 20, tzinfo=UTC), datetime(2026, 9, 9, 15, 0, tzinfo=UTC)
    window = {"start": datetime(2026, 9, 9, 14, 0, tzinfo=UTC), "end": datetime(2026, 9, 9, 16, 0, tzinfo=UTC)}
    flags = ["--at", "2026-09-09T14:20:00Z"]
    out = str(tmp_path / "t.html")
    with open_ledger(db, create=False) as lg:
        for extra, kwargs, cut in (
            ([], {}, None),
            (["--from", "2026-09-09T14:00:00Z", "--to", "2026-09-09T16:00:00Z"], window, None),
            (["--upto", "2026-09-09T15:00:00Z"], {}, upto),
        ):
            code, said, err = cli(capsys, "--store", db, "timeline", "-o", out, "--policy", policy, *flags, *extra)
            assert code == 0, err
            found = lg.whatif(policy, at=cut, name=policy)
            assert found.differences or cut is not None
            page = lg.timeline_page(cursor=cursor, whatif=found, **kwargs)
            assert open(out).read() == page and f"wrote {out}" in said
            for d in found.differences if not extra else ():  # the whole history: every flag is drawn
                bar = page[page.index(f'<g class="run" data-run="{d.run}"') :]
                label = bar[: bar.index("</g>")].rsplit(" (what-if: ", 1)[1]  # the verdicts named beside the run
                assert f'data-kind="whatif-{d.kind}"' in bar and d.kind in label.split(")</text>")[0]
        assert cli(capsys, "--store", db, "timeline", "-o", out, *flags)[0] == 0
        assert open(out).read() == lg.timeline_page(cursor=cursor) and "what-if" not in open(out).read()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "nope"], "BadPolicy: --policy: no policy named 'nope'"),
        (["--policy", "flat-age:soon"], "BadPolicy: --policy: policy 'flat-age': not a duration: 'soon'"),
        (["--policy", "clamp", "--upto", "yesterday"], "--upto: not an RFC 3339 instant"),
        (["--upto", "2026-09-09T15:00:00Z"], "--upto: cuts the what-if's replay: it needs --policy"),
    ],
)
def test_R4_L4_timeline_refuses_a_bad_policy_before_the_log_is_read(capsys, tmp_path, args, message) -> None:
    """A bad policy, its bad argument or a bad --upto is refused by its flag's name with
    exit 3 (as `whatif --policy` is, and as the console's incident page names `policy`
    and `upto`), before the store is opened: a store that does not exist is not what
    is named, and nothing is written."""
    missing, out = str(tmp_path / "missing.db"), str(tmp_path / "t.html")
    code, _, err = cli(capsys, "--store", missing, "timeline", "-o", out, *args)
    assert code == 3 and message in err and "Traceback" not in err, err
    assert not (tmp_path / "missing.db").exists() and not (tmp_path / "t.html").exists()
