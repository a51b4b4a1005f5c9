"""The service's writes against a real `epochledger serve` process (rules H2, H3, H6, H8):
every write of the Python API over HTTP with the same rules and typed errors, safe
retries, two servers on one store racing, and the bounds."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

from epochledger import open_ledger
from epochledger.ledger.events import tag_of
from epochledger.tick import StepDeadlineExceeded
from tests.helpers.server import served

BOOTED = "2026-12-01T10:00:00Z"


@pytest.fixture
def base(store_url: str) -> Iterator[str]:
    open_ledger(store_url, init=True).close()
    with served(store_url) as url:
        yield url


def post(base: str, path: str, body: dict[str, Any] | None = None, **kw: Any) -> httpx.Response:
    return httpx.post(f"{base}{path}", json=body if body is not None else {}, timeout=30, **kw)


def ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def problem(response: httpx.Response, status: int, slug: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["type"] == f"urn:epochledger:problem:{slug}", body
    assert body["status"] == status
    return body


def boot(base: str, process: str, epoch: str, **facts: Any) -> dict[str, Any]:
    return ok(
        post(
            base,
            f"/v1/processes/{process}/boot",
            {"booted_at": BOOTED, "host": "h1", "pid": 7, "epoch": epoch, **facts},
        )
    )


def test_H2_every_write_of_the_python_api_over_http_with_the_same_rules(base: str, store_url: str) -> None:
    epoch = boot(base, "w1", "e1")["epoch"]
    assert (epoch["process"], epoch["epoch"], epoch["booted_at"]) == ("w1", "e1", BOOTED)
    steps: list[tuple[str, str, dict[str, Any], str]] = [
        ("r1", "queue", {"workflow": "nightly", "labels": {"team": "data"}}, "queued"),
        ("r1", "start", {"epoch": "e1"}, "running"),
        ("r1", "checkpoint", {"node": "n1", "ref": "s3://x", "epoch": "e1"}, "running"),
        (
            "r1",
            "pause",
            {"kind": "waiting_human", "interaction": "i1", "questions": ["ok?"], "epoch": "e1"},
            "paused_waiting_human",
        ),
        ("r1", "resume", {"by": "operator", "answers": {"ok?": "yes"}}, "queued"),
        ("r1", "start", {"epoch": "e1"}, "running"),
        ("r1", "fail", {"code": "OOM_KILLED", "resumable": True, "error": "killed", "epoch": "e1"}, "failed_resumable"),
        ("r1", "resume", {"by": "operator"}, "queued"),
        ("r1", "start", {"epoch": "e1"}, "running"),
        ("r1", "finish", {"epoch": "e1"}, "finished"),
        ("r1", "correct", {"to": "failed", "code": "BAD_OUTPUT", "actor": "ops", "reason": "wrong rows"}, "failed"),
        ("r2", "queue", {}, "queued"),
        ("r2", "cancel", {"actor": "ops"}, "cancelled"),
        ("r3", "queue", {}, "queued"),
        ("r3", "delete", {"actor": "ops"}, "queued"),
    ]
    for run, op, body, status in steps:
        got = ok(post(base, f"/v1/runs/{run}/{op}", body))
        assert got["recorded"] is True and got["already"] is False, (op, got)
        assert got["run"]["status"] == status or op == "delete", (op, got["run"])
    # The same rules: an illegal transition names run, status and transition (409).
    refused = problem(post(base, "/v1/runs/r2/start", {"epoch": "e1"}), 409, "illegal-transition")
    assert refused["fields"] == {"run": "r2", "status": "cancelled", "attempted": "run.started", "why": ""}
    # A write to a run never queued is refused by the same decider (no such run: status null).
    assert problem(post(base, "/v1/runs/nope/start", {}), 409, "illegal-transition")["fields"]["status"] is None
    # Bad input: 422 naming the field, whether msgspec's decoding or the ledger's checks refuse it.
    unknown = problem(post(base, "/v1/runs/r9/queue", {"bogus": 1}), 422, "invalid-input")
    assert "bogus" in unknown["fields"]["errors"][0]["message"]
    malformed = httpx.post(
        f"{base}/v1/runs/r9/queue", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert "malformed" in problem(malformed, 400, "bad-request")["detail"]
    bad_id = problem(post(base, "/v1/runs/r%20x/queue", {}), 422, "invalid-input")
    assert "`$.run`" in bad_id["detail"]
    bad_status = problem(
        post(base, "/v1/runs/r1/correct", {"to": "nope", "actor": "a", "reason": "b"}), 422, "invalid-input"
    )
    assert bad_status["fields"]["errors"][0]["key"] == "to"
    # Slots: begin-stop, stop, exited, sweep with its own epoch, startup.
    boot(base, "w2", "e2")
    ok(post(base, "/v1/runs/r4/queue", {}))
    ok(post(base, "/v1/runs/r4/start", {"epoch": "e2"}))
    assert ok(post(base, "/v1/epochs/e2/begin-stop", {"reason": "deploy"}))["epoch"]["stopping_at"] is not None
    exited = ok(post(base, "/v1/processes/w2/epochs/e2/exited", {"observed_by": "supervisor", "exit_code": 137}))
    assert exited["epoch"]["exited_by"] == "supervisor" and exited["epoch"]["exit_code"] == 137
    # A late report of the exited epoch is fenced and kept as evidence (rule F1).
    fenced = problem(post(base, "/v1/runs/r4/finish", {"epoch": "e2"}), 409, "stale-epoch")
    assert fenced["fields"]["run"] == "r4"
    boot(base, "w3", "e3")
    report = ok(post(base, "/v1/epochs/e3/sweep", {}))
    assert (report["process"], report["epoch"], report["outcome"]) == ("w3", "e3", "swept")
    assert [v["run"] for v in report["recovered"]] == ["r4"]
    assert problem(post(base, "/v1/epochs/nobody/sweep", {}), 422, "unknown-epoch")
    stopped = ok(post(base, "/v1/epochs/e3/stop", {}))
    assert stopped["epoch"]["stopped_at"] is not None
    started = ok(
        post(base, "/v1/processes/w3/startup", {"booted_at": BOOTED, "host": "elsewhere", "pid": 9, "epoch": "e4"})
    )
    assert started["epoch"]["epoch"] == "e4" and started["report"]["outcome"] == "swept"
    boot(base, "w5", "e5")
    boot(base, "w5", "e6")
    assert problem(post(base, "/v1/epochs/e5/sweep", {}), 422, "epoch-not-live")["fields"]["epoch"] == "e5"
    # What the server wrote is what the facade reads.
    with open_ledger(store_url, create=False) as ledger:
        assert ledger.get_run("r1").status == "failed" and ledger.get_run("r1").code == "BAD_OUTPUT"
        assert ledger.get_run("r4").status == "failed_resumable"
        assert [tag_of(r.event) for r in ledger.history("r4")][-2:] == ["run.fenced", "run.recovered"]
        assert ledger.epoch("e2").exited_by == "supervisor"


def count(store_url: str) -> int:
    with open_ledger(store_url, create=False) as ledger:
        return ledger._store.max_position()


def test_H3_a_repeated_write_returns_the_original_outcome_and_says_it_was_already_recorded(
    base: str, store_url: str
) -> None:
    boot(base, "w1", "e1")
    first = ok(post(base, "/v1/runs/r1/queue", {"workflow": "nightly"}))
    assert (first["recorded"], first["already"]) == (True, False)
    head = count(store_url)
    again = ok(post(base, "/v1/runs/r1/queue", {"workflow": "nightly"}))
    assert (again["recorded"], again["already"]) == (False, True)
    assert again["run"] == first["run"]
    assert count(store_url) == head  # nothing appended
    # An Idempotency-Key: the first outcome is kept (status and body) and answered again.
    key = {"Idempotency-Key": "boot-w9-1"}
    body = {"booted_at": BOOTED, "host": "h1", "pid": 8}
    made = post(base, "/v1/processes/w9/boot", body, headers=key)
    epoch = ok(made)["epoch"]["epoch"]
    head = count(store_url)
    retried = post(base, "/v1/processes/w9/boot", body, headers=key)
    assert retried.headers["idempotency-replayed"] == "true"
    assert ok(retried)["epoch"] == ok(made)["epoch"] and ok(retried)["already"] is True
    assert count(store_url) == head  # a boot without an epoch id was not made twice
    with open_ledger(store_url, create=False) as ledger:
        assert [e.epoch for e in ledger.epochs() if e.process == "w9"] == [epoch]
    # The same key with another request: 422, nothing appended.
    reused = problem(post(base, "/v1/processes/w9/boot", {**body, "pid": 9}, headers=key), 422, "invalid-input")
    assert reused["fields"]["where"] == "Idempotency-Key"
    assert count(store_url) == head
    # A key on a group-commit write: kept in the write's own transaction.
    k2 = {"Idempotency-Key": "start-r1"}
    one = ok(post(base, "/v1/runs/r1/start", {"epoch": "e1"}, headers=k2))
    two = post(base, "/v1/runs/r1/start", {"epoch": "e1"}, headers=k2)
    assert two.headers["idempotency-replayed"] == "true" and ok(two)["run"] == one["run"]
    # A refused request keeps nothing: its retry is decided again.
    k3 = {"Idempotency-Key": "start-r2"}
    head = count(store_url)
    problem(post(base, "/v1/runs/r2/start", {"epoch": "e1"}, headers=k3), 409, "illegal-transition")
    assert count(store_url) == head
    ok(post(base, "/v1/runs/r2/queue", {}))
    assert ok(post(base, "/v1/runs/r2/start", {"epoch": "e1"}, headers=k3))["recorded"] is True


def test_T1_T2_T3_H2_a_tick_outcome_report_is_judged_by_the_tick_drivers_rules(base: str, store_url: str) -> None:
    boot(base, "loop", "e1")
    for run in ("a", "b", "c"):
        ok(post(base, f"/v1/runs/{run}/queue", {}))
        ok(post(base, f"/v1/runs/{run}/start", {"epoch": "e1"}))

    def tick(name: str, outcomes: list[dict[str, Any]], deadline: float = 3600) -> dict[str, Any]:
        body = {"tick": name, "outcomes": outcomes, "tick_failure_deadline_s": deadline}
        return ok(post(base, "/v1/epochs/e1/tick", body))

    failed = {"step": "admit", "error_class": "io::Error", "error": "disk gone"}
    first = tick("t1", [{"run": "a", **failed}, {"run": "b"}, {"run": "c"}])
    assert first["advanced"] == ["b", "c"] and first["recovered"] == [] and first["appended"] == 1
    assert [(f["run"], f["error_class"], f["failures"]) for f in first["failures"]] == [("a", "io::Error", 1)]
    head = count(store_url)
    assert tick("t1", [{"run": "a", **failed}, {"run": "b"}, {"run": "c"}])["appended"] == 0  # a retried report
    assert count(store_url) == head
    # T3: a recovery only where a streak is open; a healthy run appends nothing.
    second = tick("t2", [{"run": "a"}, {"run": "b"}])
    assert second["recovered"] == ["a"] and second["appended"] == 1
    # T2: the streak outlives the deadline: dead-lettered, and the answer names it.
    tick("t3", [{"run": "c", **failed}], deadline=0.001)
    dead = tick("t4", [{"run": "c", **failed}], deadline=0.001)
    assert [d["run"] for d in dead["dead_letters"]] == ["c"] and dead["failures"][0]["dead_lettered"] is True
    with open_ledger(store_url, create=False) as ledger:
        c = ledger.get_run("c")
        assert (c.status, c.code) == ("failed", "TICK_DEADLINE_EXCEEDED")
        assert ledger.get_run("a").tick_streak is None
    # Refused whole, nothing appended: an unknown run (404), a half-stated failure (422).
    head = count(store_url)
    assert problem(
        post(base, "/v1/epochs/e1/tick", {"outcomes": [{"run": "b"}, {"run": "nope"}]}), 404, "run-not-found"
    )
    half = post(base, "/v1/epochs/e1/tick", {"outcomes": [{"run": "b", "step": "admit"}]})
    assert problem(half, 422, "invalid-input")["fields"]["where"] == "outcomes[0]"
    assert count(store_url) == head
    # F1: a report for an epoch that is no longer live is fenced (409).
    boot(base, "loop", "e2")
    problem(post(base, "/v1/epochs/e1/tick", {"outcomes": [{"run": "b", **failed}]}), 409, "stale-epoch")


def test_T5_T2_H2_a_foreign_tick_names_its_abandoned_steps_recorded_as_the_drivers_own(
    base: str, store_url: str
) -> None:
    """A scheduler in another language abandons a step past its own deadline and says
    so (`abandoned_after_s`): the ledger records it as the tick driver records its own
    abandoned steps (StepDeadlineExceeded, T5's words), so the T2 bound dead-letters a
    run whose step always hangs. A half-stated abandonment is refused whole (422, where)."""
    boot(base, "loop", "e1")
    for run in ("h", "ok"):
        ok(post(base, f"/v1/runs/{run}/queue", {}))
        ok(post(base, f"/v1/runs/{run}/start", {"epoch": "e1"}))
    hung = {"run": "h", "step": "reconcile", "abandoned_after_s": 30}
    first = ok(post(base, "/v1/epochs/e1/tick", {"tick": "t1", "outcomes": [hung, {"run": "ok"}]}))
    assert first["advanced"] == ["ok"]
    [failed] = first["failures"]
    expected = str(StepDeadlineExceeded("h", "reconcile", timedelta(seconds=30)))
    assert (failed["run"], failed["step"], failed["error_class"]) == (
        "h",
        "reconcile",
        "epochledger.tick.StepDeadlineExceeded",
    )
    assert failed["error"] == expected and "abandoned for this tick (rule T5)" in expected
    with open_ledger(store_url, create=False) as ledger:
        [event] = [r.event for r in ledger.history("h") if tag_of(r.event) == "run.tick_failed"]
        assert (event.error_class, event.error) == ("epochledger.tick.StepDeadlineExceeded", expected)
    # T2: the step hangs on every tick; its streak outlives the deadline: dead-lettered.
    body = {"tick": "t2", "outcomes": [hung], "tick_failure_deadline_s": 0.001}
    dead = ok(post(base, "/v1/epochs/e1/tick", body))
    assert [d["run"] for d in dead["dead_letters"]] == ["h"]
    head = count(store_url)
    for outcome, where in (
        ({"run": "ok", "abandoned_after_s": 30}, "outcomes[0]"),  # no step
        (
            {"run": "ok", "step": "s", "error_class": "E", "abandoned_after_s": 30},
            "outcomes[0]",
        ),  # T5's class, not reported
        ({"run": "ok", "step": "s", "error": "why", "abandoned_after_s": 30}, "outcomes[0]"),
        ({"run": "ok", "step": "s", "abandoned_after_s": 0}, "outcomes[0].abandoned_after_s"),
        ({"run": "ok", "step": "s", "abandoned_after_s": -1.5}, "outcomes[0].abandoned_after_s"),
    ):
        refused = post(base, "/v1/epochs/e1/tick", {"outcomes": [outcome]})
        assert problem(refused, 422, "invalid-input")["fields"]["where"] == where, outcome
    assert count(store_url) == head


def test_L5_H2_a_batch_is_one_transaction_all_or_nothing_and_bounded(base: str, store_url: str) -> None:
    boot(base, "w1", "e1")
    commands = [{"op": "queue", "run": "a"}, {"op": "start", "run": "a", "epoch": "e1"}, {"op": "queue", "run": "b"}]
    got = ok(post(base, "/v1/batch", {"commands": commands}))
    assert [(r["op"], r["run"]["status"], r["recorded"]) for r in got["results"]] == [
        ("queue", "queued", True),
        ("start", "running", True),
        ("queue", "queued", True),
    ]
    assert got["appended"] == 3
    again = ok(post(base, "/v1/batch", {"commands": commands[1:]}))
    assert (again["appended"], again["already"]) == (0, True)
    head = count(store_url)
    refused = post(base, "/v1/batch", {"commands": [{"op": "queue", "run": "c"}, {"op": "finish", "run": "zz"}]})
    assert problem(refused, 409, "illegal-transition")["fields"]["command"] == 1
    assert count(store_url) == head  # c was not queued either
    unknown_op = post(base, "/v1/batch", {"commands": [{"op": "explode", "run": "c"}]})
    problem(unknown_op, 422, "invalid-input")
    slots = [
        {"op": "begin_stop", "epoch": "e1"},
        {"op": "exited", "process": "w1", "epoch": "e1", "observed_by": "k8s"},
    ]
    done = ok(post(base, "/v1/batch", {"commands": slots}))
    assert done["results"][1]["epoch"]["exited_by"] == "k8s"
    # H8: more than max_batch commands is refused before any is decided.
    many = {"commands": [{"op": "queue", "run": f"m{i}"} for i in range(10_001)]}
    assert problem(post(base, "/v1/batch", many), 422, "invalid-input")["fields"]["where"] == "commands"
    assert count(store_url) == head + 2


def test_H4_the_write_routes_make_the_guards_checks(sqlite_url: str) -> None:
    """An operator's act, a slot another token's, a command of a batch: each write route
    asks the guard (epochledger/service/auth.py) before it writes anything."""
    with open_ledger(sqlite_url, init=True) as ledger:
        writer = ledger.issue_token("writer", name="tick", slots=["a-*"]).secret
        operator = ledger.issue_token("operator", name="ops").secret
        admin = ledger.issue_token("admin", name="root").secret

    def as_(token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    with served(sqlite_url) as base:
        ok(
            post(
                base,
                "/v1/processes/a-1/boot",
                {"booted_at": BOOTED, "host": "h", "pid": 1, "epoch": "ea"},
                headers=as_(writer),
            )
        )
        refused = post(
            base,
            "/v1/processes/b-1/boot",
            {"booted_at": BOOTED, "host": "h", "pid": 1, "epoch": "eb"},
            headers=as_(writer),
        )
        assert problem(refused, 403, "forbidden")["fields"]["slot"] == "b-1"
        ok(
            post(
                base,
                "/v1/processes/b-1/boot",
                {"booted_at": BOOTED, "host": "h", "pid": 1, "epoch": "eb"},
                headers=as_(admin),
            )
        )
        ok(post(base, "/v1/runs/r1/queue", {}, headers=as_(writer)))
        problem(post(base, "/v1/runs/r1/start", {"epoch": "eb"}, headers=as_(writer)), 403, "forbidden")
        ok(post(base, "/v1/runs/r1/start", {"epoch": "ea"}, headers=as_(writer)))
        ok(post(base, "/v1/runs/r1/pause", {"kind": "operator"}, headers=as_(writer)))
        act = post(base, "/v1/runs/r1/resume", {"by": "operator"}, headers=as_(writer))
        assert problem(act, 403, "forbidden")["fields"]["op"] == "resume.operator"
        in_batch = post(
            base, "/v1/batch", {"commands": [{"op": "resume", "run": "r1", "by": "operator"}]}, headers=as_(writer)
        )
        assert problem(in_batch, 403, "forbidden")["fields"]["op"] == "resume.operator"
        assert (
            ok(post(base, "/v1/runs/r1/resume", {"by": "operator"}, headers=as_(operator)))["run"]["status"] == "queued"
        )
        problem(post(base, "/v1/runs/r1/queue", {}), 401, "unauthorized")
    with open_ledger(sqlite_url, create=False) as ledger:
        assert [e.process for e in ledger.epochs()] == ["a-1", "b-1"]
