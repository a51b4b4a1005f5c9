"""`runs` lists each run from a lean read of the runs view (engine.read_runs `shape`):
the table decodes cli.reports.RunRow, --json decodes ListedRun (RunState but its last
event) and encodes the records in one call. Both must print exactly what the listing of
whole RunStates through `run_record` printed, for random histories and filters, live,
with --no-catch-up behind the log, and on a read-only copy that folds in memory (rule
W1's fleet listing, docs/benchmarks.md "Fleet size"; the outputs are pinned by
docs/cli.md)."""

from __future__ import annotations

import io
import random
import tempfile
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochledger import ManualClock, open_ledger, reports
from epochledger.app import Ledger
from epochledger.cli import common, main
from epochledger.ledger import lifecycle
from epochledger.ledger.codes import show_code
from epochledger.ledger.errors import StaleEpoch
from epochledger.ledger.events import Cause, RunTickFailed, Status
from epochledger.ledger.run import RunState
from epochledger.projections import engine
from tests.app.test_flat_cost import T0
from tests.conftest import read_only_backup
from tests.helpers.engine_helpers import CODES, random_history


def varied_history(lg: Ledger, seed: int) -> None:
    """random_history, plus what it never writes: labels and a parent, a nested cause,
    an open tick streak, a fenced end (rule F2), an error text with escapes."""
    random_history(lg, seed, runs=10, ops=90)
    rnd = random.Random(seed)
    for i in range(4):
        labels = {"team": rnd.choice(["data", "ml"]), **({"env": "prod"} if i % 2 else {})}
        lg.queue(f"lab-{i}", workflow=rnd.choice([None, "nightly"]), labels=labels, parent="run-000" if i else None)
        lg.clock.advance(1)  # type: ignore[attr-defined]
    lg.boot("lw", epoch="lw-a")  # a slot of its own: random_history's boots supersede its slots' epochs
    lg.start("lab-0", epoch="lw-a", process="lw")
    lg.fail(
        "lab-0",
        rnd.choice(CODES),
        resumable=bool(seed % 2),
        error='quote " and \\ and é',
        cause=Cause(code="ENGINE_ERROR", message="m", cause=Cause(code="OOM_KILLED")),
    )
    lg.start("lab-1", epoch="lw-a", process="lw")
    lg.submit(RunTickFailed(at=lg.clock.now(), run="lab-1", tick="t1", step="s", error_class="KeyError"))
    lg.start("lab-2", epoch="lw-a", process="lw")
    lg.boot("lw", epoch="lw-b")
    with pytest.raises(StaleEpoch):
        lg.finish("lab-2", epoch="lw-a")
    # The F2 case: a stale worker's finish kept as evidence, then a resumable failure:
    # its code alone would allow an automatic resume, its evidence does not (rule P4).
    lg.boot("fw", epoch="fw-a")
    lg.queue("lab-f", labels={"team": "data"})
    lg.start("lab-f", epoch="fw-a", process="fw")
    lg.boot("fw", epoch="fw-b")
    with pytest.raises(StaleEpoch):
        lg.finish("lab-f", epoch="fw-a")
    lg.fail("lab-f", rnd.choice(["", "TIMEOUT"]), resumable=True, epoch="fw-b")


FILTERS = st.fixed_dictionaries(
    {
        "status": st.lists(st.sampled_from([s.value for s in Status]), max_size=3, unique=True),
        "where": st.lists(st.sampled_from(list(lifecycle.PREDICATES)), max_size=2, unique=True),
        "code": st.lists(
            st.sampled_from(["UNKNOWN", "TIMEOUT", "NODE_NOT_FOUND", "PROCESS_ORPHANED"]), max_size=2, unique=True
        ),
        "label": st.lists(st.sampled_from(["team=data", "team=ml", "env=prod"]), max_size=2, unique=True),
    }
)


def argv(filters: dict[str, list[str]]) -> list[str]:
    return [x for flag, values in filters.items() for v in values for x in (f"--{flag}", v)]


def reference(store: Any, filters: dict[str, list[str]], *, catch_up_first: bool = True) -> tuple[bytes, str]:
    """What `runs` printed before the lean read: every live RunState, filtered, through
    run_record, `out_json` of the dicts and `table` of them (the labels column joined)."""
    labels = [tuple(x.split("=", 1)) for x in filters["label"]]

    def keep(s: RunState) -> bool:
        return (
            (not filters["status"] or s.status in filters["status"])
            and all(common.run_record(s)["predicates"][p] for p in filters["where"])
            and (not filters["code"] or (lifecycle.is_failure(s.status) and show_code(s.code) in filters["code"]))
            and all(s.labels.get(k) == v for k, v in labels)
        )

    every, _ = engine.read_runs(store, catch_up_first=catch_up_first)
    rows = [common.run_record(s) for s in every if keep(s)]
    as_json = msgspec.json.format(msgspec.json.encode(rows, order="deterministic"), indent=2) + b"\n"
    columns = ["run", "status", "code_shown", "workflow", "process", "updated_at", "actor"]
    if any(r["labels"] for r in rows):
        for r in rows:
            r["labels"] = ",".join(f"{k}={v}" for k, v in sorted(r["labels"].items()))
        columns.append("labels")
    text = io.StringIO()
    with redirect_stdout(text):
        common.table(rows, columns)
    return as_json, text.getvalue()


def listing(capfdbinary: pytest.CaptureFixture[bytes], url: str, *args: str) -> tuple[bytes, str]:
    """`runs ARGS --json` and `runs ARGS` as printed (bytes, text)."""
    assert main(["--store", url, "runs", *args, "--json"]) == 0
    as_json = capfdbinary.readouterr().out
    assert main(["--store", url, "runs", *args]) == 0
    return as_json, capfdbinary.readouterr().out.decode()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), filters=FILTERS)
def test_W1_the_lean_listing_prints_what_the_listing_of_whole_states_printed(
    seed: int, filters: dict[str, list[str]], capfdbinary: pytest.CaptureFixture[bytes]
) -> None:
    """For random histories and filters, `runs` (table and --json) prints byte for byte
    what the listing of whole RunStates printed, live and with --no-catch-up behind the
    log. Mutations caught: a RunState field left out of ListedRun; RunRow.updated_at as
    a datetime (str() is not the stored text); the shown code from the code alone
    (a non-failure's code shows as '')."""
    with tempfile.TemporaryDirectory() as tmp:
        with open_ledger(f"sqlite:///{tmp}/l.db", clock=ManualClock(T0, uptime=5)) as lg:
            varied_history(lg, seed)
            assert listing(capfdbinary, lg.url, *argv(filters)) == reference(lg._store, filters)
            lg.queue(f"late-{seed}", labels={"team": "data"})  # the view is now behind the log
            lg.delete("lab-3")
            got = listing(capfdbinary, lg.url, *argv(filters), "--no-catch-up")
            assert got == reference(lg._store, filters, catch_up_first=False)


def test_P4_every_predicate_filter_agrees_with_the_predicate_shown(
    tmp_path: Path, capfdbinary: pytest.CaptureFixture[bytes]
) -> None:
    """`runs --where P` lists exactly the runs whose JSON row (and `show`) says P holds,
    for every predicate, over generated histories with fenced evidence of an end (rule
    F2), live and on a read-only copy that folds in memory. Repro (before the fix): the
    filter re-derived the predicate from status and code, so `--where can_auto_resume`
    listed lab-f, which `show`, its JSON row and the API said may not be auto-resumed."""
    import json

    for seed in (1, 2, 5):
        live = tmp_path / f"live-{seed}"
        live.mkdir()
        with open_ledger(f"sqlite:///{live}/l.db", clock=ManualClock(T0, uptime=5)) as lg:
            varied_history(lg, seed)
            engine.read_runs(lg._store)
            lg.fail("lab-2", "TIMEOUT", resumable=True, epoch="lw-b")  # fenced end, and after the view
            f = lg.get_run("lab-f")
            assert lifecycle.can_auto_resume(f.status, f.code) and f.fenced_end is not None  # the code alone allows it
            url = lg.url
        with read_only_backup(live / "l.db", tmp_path / f"backup-{seed}") as backup:
            for store in (url, f"sqlite:///{backup}"):
                assert main(["--store", store, "runs", "--json"]) == 0
                rows = json.loads(capfdbinary.readouterr().out)
                for p in lifecycle.PREDICATES:
                    assert main(["--store", store, "runs", "--where", p, "--json"]) == 0
                    got = [r["run"] for r in json.loads(capfdbinary.readouterr().out)]
                    assert got == [r["run"] for r in rows if r["predicates"][p]], (seed, store, p)
                for run in ("lab-f", "lab-2"):
                    assert main(["--store", store, "show", run, "--json"]) == 0
                    shown = json.loads(capfdbinary.readouterr().out)
                    assert shown["predicates"] == next(r for r in rows if r["run"] == run)["predicates"]
                    assert shown["predicates"]["can_auto_resume"] is False and shown["status"] == "failed_resumable"


def test_W1_every_field_of_a_run_but_its_last_event_is_listed() -> None:
    """ListedRun is RunState's fields but `last`, in RunState's types and defaults, and
    run_record's two derived fields: a field added to RunState is listed as it was."""
    fields = {f.name: f for f in msgspec.structs.fields(reports.ListedRun)}
    state = {f.name: f for f in msgspec.structs.fields(RunState)}
    assert set(fields) == set(state) - {"last"} | {"code_shown", "predicates"}
    for name, f in state.items():
        if name != "last":
            assert (fields[name].type, fields[name].required) == (f.type, f.required), name
    assert {f.name for f in msgspec.structs.fields(reports.RunRow)} <= set(state)  # decodable from the stored state


def test_W1_a_lean_read_equals_the_whole_read_given_its_shape(ledger: Ledger) -> None:
    """engine.read_runs(shape=S) is read_runs() with each RunState given shape S through
    its stored encoding, on both stores, with and without statuses pushed to SQL."""
    varied_history(ledger, 7)
    store = ledger._store
    every, _ = engine.read_runs(store)
    for shape in (reports.ListedRun, reports.RunRow):
        for statuses in ([], ["running"], ["queued", "failed_resumable", "paused_waiting_human"]):
            lean, lag = engine.read_runs(store, statuses=statuses, shape=shape)
            assert lag == 0
            want = [
                msgspec.json.decode(msgspec.json.encode(s), type=shape)
                for s in every
                if not statuses or s.status in statuses
            ]
            assert lean == want and len(lean) > 0


def test_W1_the_listing_is_the_same_on_both_stores(ledger: Ledger, capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    """One history, every output, on SQLite and PostgreSQL: what the whole-state
    listing printed (PostgreSQL's ORDER BY follows its collation: read_runs sorts)."""
    varied_history(ledger, 11)
    for filters in (
        {"status": [], "where": [], "code": [], "label": []},
        {"status": ["failed_resumable", "failed", "running"], "where": [], "code": [], "label": []},
        {"status": [], "where": ["is_terminal"], "code": ["UNKNOWN"], "label": []},
        {"status": [], "where": [], "code": [], "label": ["team=data"]},
    ):
        assert listing(capfdbinary, ledger.url, *argv(filters)) == reference(ledger._store, filters)


def test_W1_a_read_only_copy_lists_what_the_live_ledger_lists(
    tmp_path: Path, capfdbinary: pytest.CaptureFixture[bytes]
) -> None:
    """A backup copy (0444 file, 0555 directory) whose runs view is behind its log: the
    lean listing folds the events after it in memory, as the whole-state one did, and
    prints what the live ledger prints once caught up."""
    live = tmp_path / "live"
    live.mkdir()
    with open_ledger(f"sqlite:///{live}/l.db", clock=ManualClock(T0, uptime=5)) as lg:
        varied_history(lg, 3)
        engine.read_runs(lg._store)  # the view built, then more events after it
        lg.queue("after-the-view", labels={"team": "ml"})
        lg.cancel("lab-3")
        lg.delete("lab-1")
    with read_only_backup(live / "l.db", tmp_path / "backup") as backup:
        for filters in (
            {"status": [], "where": [], "code": [], "label": []},
            {"status": ["queued", "cancelled"], "where": [], "code": [], "label": ["team=ml"]},
        ):
            copy = listing(capfdbinary, f"sqlite:///{backup}", *argv(filters))
            assert copy == listing(capfdbinary, f"sqlite:///{live}/l.db", *argv(filters))
            with open_ledger(f"sqlite:///{backup}") as ro:
                assert ro._store.read_only and copy == reference(ro._store, filters)
