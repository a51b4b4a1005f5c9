"""The Dagster importer (rule I3) on histories real Dagster runs produce here.

One module-scoped fixture builds a temporary DAGSTER_HOME and runs real jobs
(tests/helpers/dagster_jobs.py) through Dagster's own API: in this process (success, step
failure, an op retry, a failed run and its re-execution from failure), and in forked
run workers held inside their op (a cancel the way Dagster's launcher does it, a
SIGKILLed worker, a force-cancel racing the worker's own success, a SIGKILLed worker
whose run a new worker then picks up: RUN_WORKER_RESTART). Each test imports that
instance (or a copy of it) into a fresh ledger.

Gate: without Dagster (the extra `epochledger[dagster]`) these tests skip and say so;
with EPOCHLEDGER_TEST_DAGSTER=require (CI) a missing Dagster fails them.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from epochledger import open_ledger
from epochledger.app import Ledger
from epochledger.cli import main
from epochledger.ledger.errors import RunNotFound
from epochledger.ledger.events import ProcessBooted, ProcessExited, RunFenced, RunImported
from epochledger.ledger.host import SystemHost

pytestmark = pytest.mark.xdist_group("dagster")  # one worker builds the histories (pyproject: --dist loadgroup)
REQUIRE = os.environ.get("EPOCHLEDGER_TEST_DAGSTER") == "require"
QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
HOLD_SCENARIOS = ("cancel", "kill", "race", "restart", "timeout")
# Dagster's own tags on a run, beside the user's: run monitoring's max runtime (1 s).
HOLD_TAGS = {"timeout": {"dagster/max_runtime": "1"}}


def _need_dagster() -> Any:
    try:
        import dagster
    except ImportError as e:
        if REQUIRE:
            pytest.fail(
                f"EPOCHLEDGER_TEST_DAGSTER=require but Dagster is not installed ({e}): pip install -e '.[dagster]'"
            )
        pytest.skip(f"Dagster is not installed ({e}): pip install -e '.[dagster]' to run the importer's tests")
    return dagster


def _instance(home: Path) -> Any:
    from dagster import DagsterInstance
    from dagster._core.instance.ref import InstanceRef

    return DagsterInstance.from_ref(InstanceRef.from_dir(str(home)))


def _hold_worker(home: str, scenario: str) -> None:
    """A run worker in a process of its own (forked: no second import of Dagster)."""
    from dagster import execute_job, reconstructable

    from tests.helpers import dagster_jobs

    with _instance(Path(home)) as instance:
        execute_job(
            reconstructable(dagster_jobs.hold_job),
            instance=instance,
            raise_on_error=False,
            tags={"scenario": scenario, **HOLD_TAGS.get(scenario, {})},
            run_config=QUIET,
        )
    os._exit(0)


class Histories:
    def __init__(self, home: Path, runs: dict[str, str], statuses: dict[str, str], pids: dict[str, int]):
        self.home, self.runs, self.statuses, self.pids = home, runs, statuses, pids


@pytest.fixture(scope="module")
def histories(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Histories]:
    """Real Dagster histories, built once: in-process runs, then four forked workers."""
    _need_dagster()
    from dagster import ReexecutionOptions, RunsFilter, execute_job, reconstructable
    from dagster._core.execution.api import execute_run_iterator
    from dagster._daemon.monitoring.run_monitoring import check_run_timeout

    from tests.helpers import dagster_jobs as jobs

    started = time.monotonic()
    home = tmp_path_factory.mktemp("dagster_home")
    marks = home / "marks"
    marks.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with pytest.MonkeyPatch.context() as mp, _instance(home) as instance:
        mp.setenv("EPOCHLEDGER_DAGSTER_MARKS", str(marks))

        def run(job: Any, **kw: Any) -> str:
            return str(
                execute_job(
                    reconstructable(job), instance=instance, raise_on_error=False, run_config=QUIET, **kw
                ).run_id
            )

        runs = {"success": run(jobs.ok_job), "step failure": run(jobs.fail_job), "op retry": run(jobs.retry_job)}
        runs["failed, then fixed"] = run(jobs.fix_job)
        (marks / "fixed").touch()
        runs["re-execution"] = run(
            jobs.fix_job, reexecution_options=ReexecutionOptions.from_failure(runs["failed, then fixed"], instance)
        )

        ctx = multiprocessing.get_context("fork")
        workers = {k: ctx.Process(target=_hold_worker, args=(str(home), k)) for k in HOLD_SCENARIOS}
        for p in workers.values():
            p.start()
        deadline = time.monotonic() + 60
        for p in workers.values():
            while not (marks / f"holding.{p.pid}").exists():
                assert time.monotonic() < deadline and p.is_alive(), "a run worker never reached its op"
                time.sleep(0.01)

        def of(scenario: str) -> Any:
            [found] = instance.get_runs(filters=RunsFilter(tags={"scenario": scenario}))
            return found

        # A cancel as Dagster's run launcher does it: CANCELING, then interrupt the worker.
        instance.report_run_canceling(of("cancel"))
        os.kill(workers["cancel"].pid, signal.SIGTERM)  # type: ignore[arg-type]
        os.kill(workers["kill"].pid, signal.SIGKILL)  # type: ignore[arg-type]
        os.kill(workers["restart"].pid, signal.SIGKILL)  # type: ignore[arg-type]
        # A force-cancel from outside while the worker lives, then the worker finishes.
        instance.report_run_canceling(of("race"))
        instance.report_run_canceled(of("race"))
        # Dagster's run monitoring on a run past its dagster/max_runtime, its own code: a
        # cancel request, the launcher's terminate (no code server here to reach: the
        # worker lives on, as one that ignores the termination), then the failure,
        # written without waiting for the worker. The worker then ends on its own.
        record = instance.get_run_record_by_id(of("timeout").run_id)
        assert record is not None and record.start_time is not None
        time.sleep(max(0.0, record.start_time + 1.2 - time.time()))
        check_run_timeout(instance, record, logging.getLogger("run_monitoring"), 0)
        assert instance.get_run_by_id(of("timeout").run_id).status.value == "FAILURE"  # type: ignore[union-attr]
        for k in ("cancel", "kill", "restart"):
            workers[k].join(30)
        (marks / "release").touch()
        for k in ("race", "timeout"):
            workers[k].join(30)
        # A new run worker for the run whose worker was SIGKILLed (as a cluster restarts a pod).
        for _ in execute_run_iterator(reconstructable(jobs.hold_job), of("restart"), instance):
            pass
        pids = {k: int(workers[k].pid) for k in HOLD_SCENARIOS}  # type: ignore[arg-type]
        for k in HOLD_SCENARIOS:
            runs[k] = of(k).run_id
        statuses = {k: instance.get_run_by_id(r).status.value for k, r in runs.items()}
    print(f"Dagster histories built in {time.monotonic() - started:.1f} s")
    yield Histories(home, runs, statuses, pids)


class Imported:
    def __init__(self, url: str, report: Any):
        self.url, self.report = url, report


@pytest.fixture(scope="module")
def imported(histories: Histories, tmp_path_factory: pytest.TempPathFactory) -> Imported:
    """The histories imported once (--local-workers) into a ledger the read-only tests share."""
    url = f"sqlite:///{tmp_path_factory.mktemp('imported') / 'ledger.db'}"
    with open_ledger(url) as ledger:
        return Imported(url, _import(ledger, histories.home))


def _ledger(tmp_path: Path) -> Ledger:
    return open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")


def _import(ledger: Ledger, home: Path, local_workers: bool = True) -> Any:
    from epochledger.import_dagster import import_dagster

    return import_dagster(ledger, str(home), local_workers=local_workers)


# Run by run: Dagster's final status, then ours (status, code) after the import. Where
# they differ, the row says why (docs/import-dagster.md).
EXPECTED = [
    ("success", "SUCCESS", "finished", ""),
    ("step failure", "FAILURE", "failed", "ENGINE_ERROR"),
    ("op retry", "SUCCESS", "finished", ""),
    ("failed, then fixed", "FAILURE", "failed", "ENGINE_ERROR"),
    ("re-execution", "SUCCESS", "finished", ""),
    ("cancel", "CANCELED", "cancelled", "CANCELLED"),
    # Dagster never learns that a worker under `execute_job` / `dagster job execute` died:
    # STARTED forever. The import records a live worker; the probe then finds its pid
    # gone and the sweep recovers the run (test_I3_O8_the_probe_finds_the_sigkilled_worker).
    ("kill", "STARTED", "running", ""),
    # A force-cancel, then the worker's own SUCCESS: Dagster lets the late write win; the
    # ledger keeps the operator's cancel and the late success as evidence.
    ("race", "SUCCESS", "cancelled", "CANCELLED"),
    ("restart", "FAILURE", "failed", "PROCESS_EXITED"),
    # Run monitoring failed the run past its max runtime without the worker exiting; the
    # worker's own SUCCESS came after: Dagster lets it win, the ledger keeps the timeout
    # and the late success as evidence. No exit fact: nobody saw the worker exit.
    ("timeout", "SUCCESS", "failed", "TIMEOUT"),
]


def _table(ledger: Ledger, h: Histories, missing: tuple[str, ...] = ()) -> list[tuple[str, str, str, str]]:
    rows = []
    for scenario, run_id in h.runs.items():
        if scenario in missing:
            with pytest.raises(RunNotFound):
                ledger.get_run("dagster:" + run_id)
            rows.append((scenario, h.statuses[scenario], "(not imported)", ""))
            continue
        state = ledger.get_run("dagster:" + run_id)
        rows.append((scenario, h.statuses[scenario], str(state.status), state.code))
    return rows


def test_I3_dagster_final_status_against_ours_run_by_run(histories: Histories, imported: Imported) -> None:
    """The comparison table (docs/import-dagster.md): every real run, Dagster's final
    status beside the ledger's. Mutation caught: PIPELINE_CANCELED mapped to nothing
    (cancel stays running), a failure reason mapped to the wrong code."""
    report = imported.report
    with open_ledger(imported.url) as ledger:
        assert _table(ledger, histories) == EXPECTED
        assert report.runs == report.read == len(EXPECTED)


def test_I3_a_second_import_appends_nothing(histories: Histories, imported: Imported) -> None:
    """Idempotent: importing the same instance again appends nothing and reads no event
    of a finished run. Mutation caught: the cursor ignored (each import reads from the
    first event: the start of a finished run is refused and kept again)."""
    with open_ledger(imported.url) as ledger:
        head = ledger._store.max_position()
        second = _import(ledger, histories.home)
        assert (second.appended, second.refused, ledger._store.max_position()) == (0, [], head)
        assert imported.report.appended == head and second.runs == len(EXPECTED)
        assert second.read == 1 and second.events == 0  # only the STARTED run is read again: nothing new


def test_I3_incremental_reads_only_what_is_new_and_records_the_exit(histories: Histories, tmp_path: Path) -> None:
    """A run that moved in Dagster after an import: the next import reads only its new
    events (after the cursor) and maps them. Here Dagster's run monitoring gives up on
    the SIGKILLed worker: a failure from outside the worker becomes the worker's exit
    fact, then the run's failure (without --local-workers: this host's own word on the
    dead worker comes first otherwise). Mutation caught: the cursor not advanced."""
    home = tmp_path / "home"
    shutil.copytree(histories.home, home)
    killed = histories.runs["kill"]
    with _ledger(tmp_path) as ledger:
        _import(ledger, home, local_workers=False)
        with _instance(home) as instance:
            from dagster._core.events import JobFailureData, RunFailureReason

            instance.report_run_failed(
                instance.get_run_by_id(killed),
                job_failure_data=JobFailureData(error=None, failure_reason=RunFailureReason.UNEXPECTED_TERMINATION),
            )
        report = _import(ledger, home, local_workers=False)
        assert report.read == 1 and report.events == 1
        run = "dagster:" + killed
        state = ledger.get_run(run)
        assert (state.status, state.code) == ("failed", "PROCESS_EXITED")
        assert state.cause is not None and state.cause.code == "UNEXPECTED_TERMINATION"
        kinds = [type(r.event).__name__ for r in ledger.history(run)]
        assert kinds == ["RunQueued", "RunStarted", "RunImported", "RunFailed", "RunImported"]
        slot = ledger.process(run)
        assert slot is not None and slot.current is not None
        assert slot.current.exited_by == "dagster-import" and not slot.current.live


def test_I3_O7_a_code_servers_report_of_a_dead_worker_is_its_exit_with_the_signal(
    histories: Histories, tmp_path: Path
) -> None:
    """What Dagster's code server writes when the worker it launched is gone (its
    `_check_for_orphaned_runs`, replayed here with Dagster's own calls on the SIGKILLed
    worker's run): an engine event with Dagster's crash explanation, then a failure
    with no reason, both from outside the worker. Imported: the worker's exit, with the
    signal the explanation names, then the run's failure, PROCESS_EXITED. (A real code
    server and launcher cost ~30 s of start-up on this machine; the writes are the same.
    The code server writes them within a second of the death: before the first import.)"""
    from dagster._utils import get_run_crash_explanation

    home = tmp_path / "home"
    shutil.copytree(histories.home, home)
    killed = histories.runs["kill"]
    with _ledger(tmp_path) as ledger:
        with _instance(home) as instance:
            run = instance.get_run_by_id(killed)
            instance.report_engine_event(
                get_run_crash_explanation(prefix=f"Run execution process for {killed}", exit_code=-9), run
            )
            instance.report_run_failed(run)
        _import(ledger, home)
        state = ledger.get_run("dagster:" + killed)
        assert (state.status, state.code) == ("failed", "PROCESS_EXITED")
        assert state.error is not None and "terminated by signal 9" in state.error
        slot = ledger.process("dagster:" + killed)
        assert slot is not None and slot.current is not None
        worker = slot.current
        assert (worker.exited_by, worker.exit_signal, worker.exit_code) == ("dagster-import", 9, None)
        assert worker.exit_evidence is not None and "SIGKILL" in worker.exit_evidence


def test_I3_O7_a_max_runtime_kill_is_a_timeout_not_the_workers_exit(histories: Histories, imported: Imported) -> None:
    """Dagster's run monitoring failed the run past its dagster/max_runtime (its own
    check_run_timeout: a cancel request, then a failure from outside the worker, no
    reason) while the worker lived on and then wrote SUCCESS. Imported: failed, TIMEOUT;
    the worker's epoch gets no exit fact (nobody saw it exit) and stops cleanly after
    its own late success, which is kept as evidence. Mutation caught: the failure taken
    as the worker's exit (PROCESS_EXITED and a false process.exited: rule O7's exit facts come
    only from whoever saw the process die)."""
    run = "dagster:" + histories.runs["timeout"]
    with open_ledger(imported.url) as ledger:
        state = ledger.get_run(run)
        assert (state.status, state.code) == ("failed", "TIMEOUT")
        assert state.reason is not None and "exceeding maximum runtime of 1 seconds" in state.reason
        slot = ledger.process(run)
        assert slot is not None and [(e.exited_by, e.stopped_at is not None) for e in slot.epochs] == [(None, True)]
        [kept] = [r.event for r in ledger.history(run) if isinstance(r.event, RunFenced)]
        assert (kept.refused, kept.reported) == ("run.finished", "finished")
    assert [r.kind for r in imported.report.refused if r.run == run] == ["PIPELINE_SUCCESS"]


def test_I3_O7_a_max_runtime_cancel_read_by_an_earlier_import_still_makes_the_failure_a_timeout(
    histories: Histories, tmp_path: Path
) -> None:
    """Run monitoring's cancel request and its failure a second apart, an import round
    between them (Dagster's own calls, as check_run_timeout makes them, on the run whose
    worker is gone without a word): the failure, read alone, is still the timeout, and
    no exit fact is made up (without --local-workers: this host would say the worker is
    gone). Mutation caught: only the events read this round consulted."""
    home = tmp_path / "home"
    shutil.copytree(histories.home, home)
    killed = histories.runs["kill"]
    with _ledger(tmp_path) as ledger:
        _import(ledger, home, local_workers=False)
        with _instance(home) as instance:
            instance.report_run_canceling(
                instance.get_run_by_id(killed), message="Canceling due to exceeding maximum runtime of 1 seconds."
            )
        _import(ledger, home, local_workers=False)
        with _instance(home) as instance:
            instance.report_run_failed(instance.get_run_by_id(killed), "Exceeded maximum runtime of 1 seconds.")
        _import(ledger, home, local_workers=False)
        state = ledger.get_run("dagster:" + killed)
        assert (state.status, state.code) == ("failed", "TIMEOUT")
        slot = ledger.process("dagster:" + killed)
        assert slot is not None and slot.epochs[0].exited_by is None and slot.epochs[0].live


def test_I3_dagsters_starting_and_canceling_show_beside_the_ledgers_status(
    histories: Histories, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Dagster's STARTING (the launcher's event, before the worker starts: 20-28 s with
    a code server) and CANCELING (a cancel request the worker has not acted on) have no
    ledger status: the run stays `queued` / `running`, and its state, `show` and
    `show --json` say what Dagster calls it (source, source_status), as of the import.
    Here a run made and marked STARTING with Dagster's own calls (launch_run's first
    half), then run for real; and the worker-less run given a cancel request. Mutation
    caught: run.imported's source status not kept in the run's state."""
    from dagster import reconstructable
    from dagster._core.events import DagsterEvent
    from dagster._core.execution.api import execute_run

    from tests.helpers import dagster_jobs as jobs

    home = tmp_path / "home"
    shutil.copytree(histories.home, home)
    killed = "dagster:" + histories.runs["kill"]
    store = f"sqlite:///{tmp_path / 'ledger.db'}"
    with open_ledger(store, init=True) as ledger:
        with _instance(home) as instance:
            made = instance.create_run_for_job(job_def=jobs.ok_job, run_config=QUIET)
            instance.report_dagster_event(
                DagsterEvent(event_type_value="PIPELINE_STARTING", job_name=made.job_name), run_id=made.run_id
            )
            instance.report_run_canceling(instance.get_run_by_id(histories.runs["kill"]))
        _import(ledger, home)
        starting = ledger.get_run("dagster:" + made.run_id)
        assert (starting.status, starting.source, starting.source_status) == ("queued", "dagster", "STARTING")
        canceling = ledger.get_run(killed)
        assert (canceling.status, canceling.source_status) == ("running", "CANCELING")
    assert main(["--store", store, "show", "dagster:" + made.run_id]) == 0
    assert "source_status: STARTING" in capsys.readouterr().out
    assert main(["--store", store, "show", killed, "--json"]) == 0
    assert '"source_status":"CANCELING"' in capsys.readouterr().out.replace(" ", "")
    with _instance(home) as instance:
        execute_run(reconstructable(jobs.ok_job), instance.get_run_by_id(made.run_id), instance)  # type: ignore[arg-type]
    with open_ledger(store) as ledger:
        _import(ledger, home)
        done = ledger.get_run("dagster:" + made.run_id)
        assert (done.status, done.source_status) == ("finished", "SUCCESS")


def test_I3_dagsters_own_tags_are_not_labels_unless_asked_for(
    histories: Histories, imported: Imported, tmp_path: Path
) -> None:
    """The user's tags are labels; Dagster's own (dagster/max_runtime here) are not, but
    are with dagster_tags=True (`--dagster-tags`). Mutation caught: every tag copied."""
    from epochledger.import_dagster import import_dagster

    run = "dagster:" + histories.runs["timeout"]
    with open_ledger(imported.url) as ledger:
        assert ledger.get_run(run).labels == {"scenario": "timeout"}
        assert not [
            k
            for s in histories.runs.values()
            for k in ledger.get_run("dagster:" + s).labels
            if k.startswith("dagster/")
        ]
    with _ledger(tmp_path) as ledger:
        import_dagster(ledger, str(histories.home), dagster_tags=True)
        assert ledger.get_run(run).labels == {"scenario": "timeout", "dagster/max_runtime": "1"}


def test_I3_tags_become_labels_and_the_reexecuted_run_the_parent(histories: Histories, imported: Imported) -> None:
    with open_ledger(imported.url) as ledger:
        ok = ledger.get_run("dagster:" + histories.runs["success"])
        assert ok.labels == {"team": "data", "owner": "ana"} and ok.workflow == "ok_job" and ok.parent is None
        child = ledger.get_run("dagster:" + histories.runs["re-execution"])
        parent = histories.runs["failed, then fixed"]
        assert child.parent == "dagster:" + parent
        failed = ledger.get_run("dagster:" + parent)
        assert "dagster/failure_reason" not in failed.labels  # a result, kept as the failure's cause
        assert failed.cause is not None and failed.cause.code == "STEP_FAILURE"
        assert failed.error is not None and "needs_fix" in failed.error


def test_I3_O8_each_run_worker_is_an_epoch_of_its_own_slot(histories: Histories, imported: Imported) -> None:
    """One slot per run (rule O8): the forked workers ran at once and none superseded
    another. A worker that wrote its run's end stopped cleanly; the SIGKILLed worker
    that a new worker replaced exited, seen by Dagster; the killed one exited, seen by
    this host when the import read it (its pid not running). Each carries its pid,
    this host and its boot id (--local-workers)."""
    boot_id = SystemHost().boot_id()
    with open_ledger(imported.url) as ledger:
        slots = {k: ledger.process("dagster:" + r) for k, r in histories.runs.items()}
        for k in HOLD_SCENARIOS:
            slot = slots[k]
            assert slot is not None and slot.epochs[0].pid == histories.pids[k]
            assert slot.epochs[0].host_boot == boot_id and slot.epochs[0].host == SystemHost().name()
        assert [e.superseded_by for s in slots.values() if s for e in s.epochs] == [None] * len(slots)
        assert slots["cancel"].epochs[0].stopped_at is not None  # type: ignore[union-attr]
        killed = slots["kill"].epochs[0]  # type: ignore[union-attr]
        assert killed.exited_by == f"dagster-import@{SystemHost().name()}" and killed.stopped_at is None
        assert killed.exit_evidence is not None and f"pid {histories.pids['kill']} not running" in killed.exit_evidence
        restarted = slots["restart"].epochs[0]  # type: ignore[union-attr]
        assert restarted.exited_by == "dagster-import" and restarted.stopped_at is None
        assert restarted.exit_evidence is not None and "RUN_WORKER_RESTART" in restarted.exit_evidence
        inproc = slots["success"].epochs[0]  # type: ignore[union-attr]
        assert inproc.pid == os.getpid() and inproc.pid_start is not None  # alive, started before its events


def test_I3_O8_the_probe_finds_the_sigkilled_worker_and_the_sweep_recovers_its_run(
    histories: Histories, tmp_path: Path
) -> None:
    """Dagster never notices the SIGKILLed worker (STARTED forever). Imported while it
    still ran (this host's facts at the import say its pid runs, started before its
    first event: its start is recorded), the worker carries this host's boot id, pid
    and start, so `epochledger probe` on the real host finds the pid gone and the sweep
    recovers the run. Mutation caught: --local-workers not recording host_boot (the
    probe cannot judge the epoch, the run stays running)."""
    from epochledger.ledger.host import FakeHost

    run = "dagster:" + histories.runs["kill"]
    pid = histories.pids["kill"]
    real = SystemHost()  # the stand-in is this very machine (rule O10: the probe judges its own machine id only)
    alive = FakeHost(name=real.name(), boot_id=real.boot_id(), processes={pid: 1}, machine_id=real.machine_id())
    with _ledger(tmp_path) as ledger:
        from epochledger.import_dagster import import_dagster

        import_dagster(ledger, str(histories.home), local_workers=True, host=alive)
        assert ledger.get_run(run).status == "running"
        slot = ledger.process(run)
        assert slot is not None and (slot.epochs[0].pid_start, slot.epochs[0].live) == (1, True)
        ledger.probe()
        state = ledger.get_run(run)
        assert (state.status, state.code) == ("failed_resumable", "PROCESS_ORPHANED")
        slot = ledger.process(run)
        assert slot is not None and slot.epochs[0].exited_by is not None
        assert slot.epochs[0].exited_by.startswith("probe@")


def test_I3_O7_a_worker_gone_before_the_first_import_is_its_exit_even_when_its_pid_runs_again(
    histories: Histories, tmp_path: Path
) -> None:
    """The SIGKILLed worker died before any import, and by the import its pid runs
    another process (started after the worker's first event: the pid reused). Its
    start can never be known (Dagster records none); what the import can know is that
    the worker is gone, so it records that exit then (evidence: the reuse), rather than
    leave a live epoch without a start that no later probe can tell from the new
    process. The probe's sweep then recovers the run. Mutation caught: no exit at the
    import (the probe says `unverified` and the run stays running forever)."""
    from epochledger.import_dagster import LocalHost, import_dagster
    from epochledger.ledger.host import FakeHost

    run = "dagster:" + histories.runs["kill"]
    pid = histories.pids["kill"]
    booted = LocalHost.host_booted()
    assert booted is not None
    now_ticks = int((time.time() - booted) * os.sysconf("SC_CLK_TCK"))
    reused = FakeHost(name=SystemHost().name(), boot_id=SystemHost().boot_id(), processes={pid: now_ticks})
    with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}", host=reused) as ledger:
        import_dagster(ledger, str(histories.home), local_workers=True)
        slot = ledger.process(run)
        assert slot is not None and slot.epochs[0].exited_by == f"dagster-import@{SystemHost().name()}"
        assert slot.epochs[0].exit_evidence is not None and "the pid was reused" in slot.epochs[0].exit_evidence
        assert ledger.get_run(run).status == "running"  # an orphan now (O2-exited), until a sweep
        ledger.probe()
        state = ledger.get_run(run)
        assert (state.status, state.code) == ("failed_resumable", "PROCESS_ORPHANED")


def test_I3_O7_a_live_worker_from_before_the_hosts_boot_is_gone(
    histories: Histories, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--local-workers on a host that rebooted since the workers ran: no worker gets the
    current boot id, and the one still live (the SIGKILLed worker) gets an exit fact at
    the host's boot instant, after all it wrote; every other outcome is as before.
    Mutation caught: the exit written at the worker's boot (its own start and finish
    would then be fenced, and the table would change)."""
    from epochledger.import_dagster import LocalHost

    rebooted = time.time()  # as if this host booted after every run of the instance
    monkeypatch.setattr(LocalHost, "host_booted", staticmethod(lambda: rebooted))
    with _ledger(tmp_path) as ledger:
        _import(ledger, histories.home)
        assert _table(ledger, histories) == EXPECTED
        exits = [r.event for r in ledger.events() if isinstance(r.event, ProcessExited)]
        by_reboot = [e for e in exits if e.observed_by.startswith("dagster-import@")]
        assert [e.process for e in by_reboot] == ["dagster:" + histories.runs["kill"]]
        assert by_reboot[0].evidence is not None and "booted at" in by_reboot[0].evidence
        boots = [r.event for r in ledger.events() if isinstance(r.event, ProcessBooted)]
        assert {b.host_boot for b in boots} == {None}
        ledger.probe()  # nothing of this boot to probe; the sweep recovers the run of the dead worker
        state = ledger.get_run("dagster:" + histories.runs["kill"])
        assert (state.status, state.code) == ("failed_resumable", "PROCESS_ORPHANED")


def test_I3_a_late_success_after_a_force_cancel_is_kept_not_lost(histories: Histories, imported: Imported) -> None:
    """The force-cancel race: Dagster's final word is the worker's late SUCCESS; the
    ledger refuses finished-after-cancelled and keeps the refused report as evidence
    (rule I1), listed in the import's report."""
    run = "dagster:" + histories.runs["race"]
    report = imported.report
    [refused] = [r for r in report.refused if r.run == run]
    assert (refused.run, refused.kind, refused.kept_as) == (run, "PIPELINE_SUCCESS", "run.fenced")
    with open_ledger(imported.url) as ledger:
        [kept] = [r.event for r in ledger.history(run) if isinstance(r.event, RunFenced)]
        assert (kept.refused, kept.reported, kept.report["epoch"]) == ("run.finished", "finished", kept.epoch)
        assert ledger.get_run(run).fenced_end is not None  # a worker said the work ended: an operator decides (F2)


def test_I3_cursor_is_kept_in_the_ledger(histories: Histories, imported: Imported) -> None:
    """Each imported run's stream ends with run.imported: Dagster's status and the last
    storage id read."""
    with open_ledger(imported.url) as ledger:
        for scenario, run_id in histories.runs.items():
            last = ledger.history("dagster:" + run_id)[-1].event
            assert isinstance(last, RunImported) and last.source == "dagster"
            assert last.source_status == histories.statuses[scenario] and last.cursor > 0


def test_I3_the_cli_imports_and_says_what_it_did(
    histories: Histories, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path / 'cli.db'}"
    assert main(["--store", store, "init"]) == 0
    assert main(["--store", store, "import-dagster", "--instance", str(histories.home), "--local-workers"]) == 0
    said = capsys.readouterr().out
    assert f"read {len(EXPECTED)} of {len(EXPECTED)} Dagster runs" in said and "PIPELINE_SUCCESS" in said
    assert main(["--store", store, "import-dagster", "--instance", str(histories.home), "--json"]) == 0
    assert '"appended": 0' in capsys.readouterr().out


def test_I3_L4_not_a_dagster_instance_is_refused_and_appends_nothing(tmp_path: Path) -> None:
    _need_dagster()
    from epochledger.import_dagster import import_dagster
    from epochledger.ledger.errors import InvalidInput

    (tmp_path / "empty").mkdir()
    with _ledger(tmp_path) as ledger:
        for where in (tmp_path / "empty", tmp_path / "missing"):
            with pytest.raises(InvalidInput, match="DAGSTER_HOME|not a Dagster instance"):
                import_dagster(ledger, str(where))
        assert ledger._store.max_position() == 0
        assert not (tmp_path / "empty" / "history").exists()  # nothing created where nothing was


def test_I3_the_core_works_without_the_extra(tmp_path: Path) -> None:
    """Without Dagster the ledger imports and works; import-dagster says which extra to
    install (exit 3, no traceback). Dagster is hidden from a fresh interpreter."""
    code = (
        "import sys; sys.modules['dagster'] = None\n"
        "import epochledger, epochledger.cli, epochledger.import_dagster\n"
        "from epochledger.cli import main\n"
        f"store = 'sqlite:///{tmp_path / 'l.db'}'\n"
        "assert main(['--store', store, 'init']) == 0\n"
        f"sys.exit(main(['--store', store, 'import-dagster', '--instance', '{tmp_path}']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert "epochledger[dagster]" in done.stderr and "Traceback" not in done.stderr


def test_I3_booted_workers_carry_dagsters_pid(histories: Histories, imported: Imported) -> None:
    """Every boot the import wrote names a pid Dagster recorded, at the time of the
    worker's first run-level event."""
    with open_ledger(imported.url) as ledger:
        boots = [r.event for r in ledger.events() if isinstance(r.event, ProcessBooted)]
        exits = [r.event for r in ledger.events() if isinstance(r.event, ProcessExited)]
        assert len(boots) == len(EXPECTED) and all(b.pid is not None for b in boots)
        # Dagster's reports: only the restarted run's old worker; this host's: the killed one.
        assert [e.process for e in exits if e.observed_by == "dagster-import"] == [
            "dagster:" + histories.runs["restart"]
        ]
        assert [e.process for e in exits if e.observed_by != "dagster-import"] == ["dagster:" + histories.runs["kill"]]


def test_I3_L5_the_same_import_on_postgresql(histories: Histories, pg_url: str) -> None:
    """The importer only speaks the write path: on PostgreSQL the same table, and a
    second import appends nothing."""
    with open_ledger(pg_url, init=True) as ledger:
        _import(ledger, histories.home)
        assert _table(ledger, histories) == EXPECTED
        head = ledger._store.max_position()
        assert _import(ledger, histories.home).appended == 0 and ledger._store.max_position() == head


def test_I3_O7_a_worker_that_ends_its_run_as_it_is_read_is_not_taken_for_dead(
    histories: Histories, tmp_path: Path
) -> None:
    """The race the host check must not lose: the worker writes its run's end and exits
    just after the import read its events, before the import asks the host about its
    pid (here the host's answer writes, with Dagster's own call, the worker's
    PIPELINE_SUCCESS with its pid, then says the pid is gone). The import reads Dagster
    again after asking, finds the end, and records the run finished and the worker
    stopped: no exit fact. Mutation caught: the host asked without reading Dagster
    again (a false exit, the success fenced at the next import)."""
    from dagster._core.events import DagsterEvent

    from epochledger.import_dagster import import_dagster
    from epochledger.ledger.host import FakeHost, PidFacts

    home = tmp_path / "home"
    shutil.copytree(histories.home, home)
    killed, pid = histories.runs["kill"], histories.pids["kill"]

    class EndsAsAsked(FakeHost):
        def process(self, asked: int) -> PidFacts | None:
            if asked == pid and pid in self.processes:
                with _instance(home) as instance:
                    instance.report_dagster_event(
                        DagsterEvent(event_type_value="PIPELINE_SUCCESS", job_name="hold_job", pid=pid), run_id=killed
                    )
                self.kill(pid)
            return super().process(asked)

    host = EndsAsAsked(name=SystemHost().name(), boot_id=SystemHost().boot_id(), processes={pid: 1})
    with _ledger(tmp_path) as ledger:
        import_dagster(ledger, str(home), local_workers=True, host=host)
        state = ledger.get_run("dagster:" + killed)
        assert state.status == "finished"
        slot = ledger.process("dagster:" + killed)
        assert slot is not None and [(e.exited_by, e.stopped_at is not None) for e in slot.epochs] == [(None, True)]


def test_I3_dagster_times_that_step_back_are_recorded_without_a_negative_duration(tmp_path: Path) -> None:
    """Dagster stamps events with the writer's clock (a code server and a worker may
    disagree): an event earlier than the run's previous one is recorded at that
    previous time, Dagster's own time kept in the reason, so no run shows a negative
    duration (as the NDJSON import refuses one). The mapping alone, on made-up events:
    no Dagster needed. Mutation caught: the clamp removed."""
    from datetime import UTC, datetime, timedelta

    from epochledger.import_dagster import ImportReport, SourceEvent, SourceRun, _RunImport

    t0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    src = SourceRun(run_id="r1", job="j", status="SUCCESS", tags={}, parent=None, created=t0, updated=t0)
    events = [
        SourceEvent(storage_id=1, at=t0 + timedelta(seconds=2), kind="PIPELINE_START", pid=7),
        SourceEvent(storage_id=2, at=t0 + timedelta(seconds=1), kind="PIPELINE_SUCCESS", pid=7),
    ]
    with _ledger(tmp_path) as ledger:
        batch = ledger.batch()
        job = _RunImport(batch, ImportReport(instance="x"), src, None)
        job.queue()
        for ev in events:
            job.apply(ev)
        batch.commit()
        run_events = [r.event for r in ledger.history("dagster:r1")]
        assert [type(e).__name__ for e in run_events] == ["RunQueued", "RunStarted", "RunFinished"]
        assert [e.at for e in run_events] == [t0, t0 + timedelta(seconds=2), t0 + timedelta(seconds=2)]
        assert "Dagster's time 2026-12-01T12:00:01+00:00 is earlier" in (run_events[-1].reason or "")
        assert ledger.get_run("dagster:r1").status == "finished"


# ------------------------------------------------ malformed instance data (rule I1's strict / tolerant)
def _damage_event(home: Path, run_id: str, kind: str, timestamp: str) -> None:
    """Hand-edit one stored event of a run (its own event-log database): its timestamp
    becomes `timestamp` (JSON text Dagster's reader takes: NaN, Infinity)."""
    import re
    import sqlite3

    with sqlite3.connect(home / "history" / "runs" / f"{run_id}.db") as db:
        [(row_id, text)] = db.execute("select id, event from event_logs where dagster_event_type = ?", (kind,))
        db.execute(
            "update event_logs set event = ? where id = ?",
            (re.sub(r'"timestamp": [0-9.e+]+', f'"timestamp": {timestamp}', text), row_id),
        )


def _damage_run(home: Path, run_id: str, fields: dict[str, Any]) -> None:
    """Hand-edit a run's record in runs.db (its serialized body)."""
    import json
    import sqlite3

    with sqlite3.connect(home / "history" / "runs.db") as db:
        [(body,)] = db.execute("select run_body from runs where run_id = ?", (run_id,))
        db.execute(
            "update runs set run_body = ? where run_id = ?", (json.dumps({**json.loads(body), **fields}), run_id)
        )


DAMAGED = ("step failure", "op retry", "failed, then fixed", "cancel")


def _damaged_home(h: Histories, tmp_path: Path) -> Path:
    """A copy of the instance with four runs Dagster's storage holds but the ledger
    cannot record: a NaN event time, an infinite one, a tag value that is not a string
    (Dagster's own listing of runs then fails), a run id with a lone surrogate."""
    home = tmp_path / "home"
    shutil.copytree(h.home, home)
    _damage_event(home, h.runs["step failure"], "PIPELINE_START", "NaN")
    _damage_event(home, h.runs["op retry"], "PIPELINE_SUCCESS", "Infinity")
    _damage_run(home, h.runs["failed, then fixed"], {"tags": {"owner": 5}})
    _damage_run(home, h.runs["cancel"], {"run_id": "\ud800" + h.runs["cancel"]})
    return home


def test_I3_I1_a_malformed_dagster_run_rejects_a_strict_import_naming_it_and_appends_nothing(
    histories: Histories, tmp_path: Path
) -> None:
    """Strict (the default), as NDJSON's import: a run whose stored event has a NaN time
    refuses the whole import with a typed error naming the run and the field; nothing
    is appended. Mutation caught: the time read without its check (a raw ValueError)."""
    from epochledger.import_dagster import import_dagster
    from epochledger.ledger.errors import ForeignRunRejected

    home = tmp_path / "home"
    shutil.copytree(histories.home, home)
    _damage_event(home, histories.runs["step failure"], "PIPELINE_START", "NaN")
    with _ledger(tmp_path) as ledger:
        with pytest.raises(ForeignRunRejected) as e:
            import_dagster(ledger, str(home), local_workers=True)
        assert (e.value.source, e.value.run) == ("dagster", histories.runs["step failure"])
        assert e.value.field.endswith("(PIPELINE_START) timestamp") and "nan" in e.value.reason.lower()
        assert ledger._store.max_position() == 0


def test_I3_I1_tolerant_import_rejects_each_malformed_run_and_imports_every_other(
    histories: Histories, tmp_path: Path
) -> None:
    """--on-error skip: each malformed run is rejected whole, listed with NDJSON's
    Rejected (line: its storage id in Dagster's run storage) and written to the rejects
    file; every other run is imported as from a clean instance. A second import appends
    nothing and rejects the same runs. Mutation caught: one bad run aborting the whole
    import (a NaN or infinite time, a non-string tag, a lone-surrogate id: rules I3, L4)."""
    import json

    from epochledger.import_dagster import import_dagster

    home = _damaged_home(histories, tmp_path)
    rejects = tmp_path / "rejected.ndjson"
    with _ledger(tmp_path) as ledger:
        report = import_dagster(ledger, str(home), local_workers=True, on_error="skip", rejects=str(rejects))
        said = [r.reason for r in report.rejected]
        assert len(said) == len(DAMAGED) and report.runs == len(EXPECTED), said
        for scenario, field in zip(
            DAMAGED, ("PIPELINE_START) timestamp", "PIPELINE_SUCCESS) timestamp", "record", "run_id"), strict=True
        ):
            assert any(histories.runs[scenario] in r and field in r for r in said), (scenario, said)
        lines = [json.loads(line) for line in rejects.read_text().splitlines()]
        assert [line["reason"] for line in lines] == said and all("raw" in line for line in lines)
        rows = [row for row in _table(ledger, histories, missing=DAMAGED)]
        assert rows == [row if row[0] not in DAMAGED else (row[0], row[1], "(not imported)", "") for row in EXPECTED]
        head = ledger._store.max_position()
        again = import_dagster(ledger, str(home), local_workers=True, on_error="skip", rejects=str(rejects))
        assert (again.appended, ledger._store.max_position(), [r.reason for r in again.rejected]) == (0, head, said)


def test_I3_I1_the_cli_exits_3_strict_and_11_tolerant_on_malformed_runs(
    histories: Histories, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = _damaged_home(histories, tmp_path)
    store = f"sqlite:///{tmp_path / 'cli.db'}"
    assert main(["--store", store, "init"]) == 0
    assert main(["--store", store, "import-dagster", "--instance", str(home)]) == 3
    assert "nothing was imported" in capsys.readouterr().err
    rejects = str(tmp_path / "rejected.ndjson")
    assert main(["--store", store, "import-dagster", "--instance", str(home), "--rejects", rejects]) == 2
    assert (
        main(["--store", store, "import-dagster", "--instance", str(home), "--on-error", "skip", "--rejects", rejects])
        == 11
    )
    said = capsys.readouterr().out
    assert f"{len(DAMAGED)} runs rejected, written to {rejects}" in said and "Traceback" not in said
