"""What-if (rule R4): another orphan policy over the recorded history, at every sweep the
record holds, listing every verdict that differs, with its evidence.

The golden histories (tests/golden/whatif_*.ndjson, recorded by tests/helpers/incident_histories.py)
are the incidents of docs/rules.md; each (history, policy) pair has its exact list of
differences below, as a literal table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import msgspec
import pytest

from epochledger import open_ledger
from epochledger.cli import main
from epochledger.ledger.errors import BadPolicy
from epochledger.ndjson import import_lines
from epochledger.replay.whatif import BUILTIN, EARLY, KILLED_LIVE, LATE, MISSED, Difference, whatif
from tests.helpers import incident_histories as incidents

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (history, policy) -> every difference, as (kind, run, sweeping epoch, the figure that matters):
# killed-live: the run's age at the sweep (s); missed / late: how much longer it stayed running (s).
EXPECTED: dict[tuple[str, str], list[tuple[str, str, str, float]]] = {
    # The 88-minute nightly: a flat threshold kills it, heartbeats do not, and both miss the young orphan.
    ("whatif_nightly_88", "flat-age:30m"): [
        (KILLED_LIVE, "nightly", "w2.e2", 5282.0),
        (MISSED, "young", "w2.e2", 600.0),
    ],
    ("whatif_nightly_88", "heartbeat:30m"): [(MISSED, "young", "w2.e2", 600.0)],
    ("whatif_nightly_88", "heartbeat:5m"): [
        (KILLED_LIVE, "nightly", "w2.e2", 5282.0),
        (MISSED, "young", "w2.e2", 600.0),
    ],
    ("whatif_nightly_88", "floor:30m"): [(MISSED, "young", "w2.e2", 600.0)],
    ("whatif_nightly_88", "clamp"): [],
    ("whatif_nightly_88", "epoch"): [],
    # 02:00 / 02:20: a floor misses both at the redeploy; api-1's 03:00 sweep takes the owned
    # one (O2 holds fleet-wide), nobody ever takes the unowned one (O3 is its own slot's).
    ("whatif_redeploy_0220", "floor:30m"): [
        (LATE, "owned-0200", "w1.e2", 2401.0),
        (MISSED, "unowned-0200", "w1.e2", 4201.0),
    ],
    ("whatif_redeploy_0220", "flat-age:30m"): [
        (LATE, "owned-0200", "w1.e2", 2401.0),
        (LATE, "unowned-0200", "w1.e2", 2401.0),
    ],
    ("whatif_redeploy_0220", "clamp"): [],
    ("whatif_redeploy_0220", "epoch"): [],
    # The clock stepped back: the clamp sweeps the live process's own run, 30 s old.
    ("whatif_clock_step", "clamp"): [(KILLED_LIVE, "after-step", "w1.e2", 30.0)],
    ("whatif_clock_step", "floor:30m"): [(MISSED, "owned", "w1.e2", 1800.0)],
    ("whatif_clock_step", "epoch"): [],
}


def _figure(d: Difference) -> float | None:
    return d.age_s if d.kind == KILLED_LIVE else d.running_for_s


@pytest.fixture(scope="module")
def goldens(tmp_path_factory) -> dict[str, str]:
    out = {}
    for name in incidents.INCIDENTS:
        url = f"sqlite:///{tmp_path_factory.mktemp(name) / 'l.db'}"
        with open_ledger(url) as lg, open(incidents.path(name), "rb") as f:
            import_lines(lg, f, clock_steps="keep")  # recorded through the API under a stepped clock
        out[name] = url
    return out


@pytest.mark.parametrize(("history", "policy"), sorted(EXPECTED))
def test_R4_golden_incidents_give_exactly_the_expected_differences(goldens, history, policy) -> None:
    """Each incident, under each alternative, lists exactly its differences. Mutations
    checked by hand: the alternative's world dropped (later sweeps see the record's
    recovered run, so `late` becomes `missed`: the redeploy rows fail); the recorded
    sweep left unjudged at its records (8 of the rows fail)."""
    with open_ledger(goldens[history], create=False) as lg:
        result = whatif(lg._store, policy)
    got = [(d.kind, d.run, d.sweep_epoch, _figure(d)) for d in result.differences]
    assert got == EXPECTED[history, policy]


GOLDEN = os.path.join(ROOT, "tests", "golden", "whatif")


def _golden_path(history: str, policy: str) -> str:
    return os.path.join(GOLDEN, f"{history}-{policy.replace(':', '_')}.json")


def _result_bytes(url: str, policy: str) -> bytes:
    with open_ledger(url, create=False) as lg:
        return msgspec.json.format(msgspec.json.encode(whatif(lg._store, policy)), indent=1) + b"\n"


@pytest.mark.parametrize(("history", "policy"), sorted(EXPECTED))
def test_R4_each_incidents_whatif_is_its_golden_result_every_field(goldens, history, policy) -> None:
    """The whole result, every field of every difference (the alternative's verdict, the
    owner and its liveness, the age, the checkpoint, what happened next, the message),
    byte for byte with tests/golden/whatif/. The table above says what each incident
    is about; this pins the evidence a user reads. An intended change is regenerated,
    and its diff reviewed, with `python -m tests.replay.test_whatif`."""
    with open(_golden_path(history, policy), "rb") as f:
        assert _result_bytes(goldens[history], policy) == f.read(), f"{history} {policy}: the result changed"


def test_R4_a_killed_live_run_carries_its_evidence(goldens) -> None:
    with open_ledger(goldens["whatif_nightly_88"], create=False) as lg:
        [killed, missed] = whatif(lg._store, "flat-age:30m").differences
    assert (killed.owner_process, killed.owner_epoch, killed.owner_live) == ("worker-1", "w1.e1", True)
    assert killed.last_checkpoint is not None and (killed.last_checkpoint.node, killed.last_checkpoint.ref) == (
        "publish",
        "ckpt/nightly/4",
    )
    assert killed.alternative is not None and killed.alternative.rule == "flat-age:30m"
    assert killed.then is not None and killed.then.startswith("finished at 2026-09-09T14:39")
    assert "while its owner w1.e1 of worker-1 was live" in killed.message and "1h28m02s old" in killed.message
    assert missed.recorded_rule == "O2-superseded" and missed.until_why == "the end of the replayed history"


def test_R4_at_cuts_the_history_like_replay(goldens) -> None:
    """--at stops before the first event stamped after the instant: before the 03:00
    sweep, the floor's miss of owned-0200 is not yet late, and counts to the instant."""
    from datetime import UTC, datetime

    with open_ledger(goldens["whatif_redeploy_0220"], create=False) as lg:
        result = whatif(lg._store, "floor:30m", at=datetime(2026, 9, 9, 2, 50, tzinfo=UTC))
    assert [(d.kind, d.run, d.running_for_s) for d in result.differences] == [
        (MISSED, "owned-0200", 1799.0),
        (MISSED, "unowned-0200", 1799.0),
    ]
    assert result.sweeps == 3


def test_R4_golden_files_are_what_the_incidents_record() -> None:
    for name in incidents.INCIDENTS:
        with open(incidents.path(name), "rb") as f:
            assert f.read() == incidents.record(name), f"{name}: run `python -m tests.helpers.incident_histories`"


def test_R4_the_recorded_rule_as_a_policy_differs_nowhere(tmp_path) -> None:
    """`--policy epoch` over the demo (and the goldens above) lists nothing: the harness
    judges each sweep where the sweep judged it."""
    from epochledger.demo import run_demo

    path = str(tmp_path / "demo.db")
    run_demo(path, out=lambda _: None)
    with open_ledger(path, create=False) as lg:
        result = whatif(lg._store, "epoch")
    assert result.sweeps >= 4 and result.differences == []


@pytest.mark.parametrize(
    "spec",
    [
        "nope",
        "flat-age",
        "flat-age:",
        "flat-age:-5m",
        "flat-age:30x",
        "floor:0",
        "clamp:5",
        "heartbeat:2000d",
        "epoch:x",
    ],
)
def test_R4_a_bad_policy_is_refused_naming_it(capsys, goldens, spec) -> None:
    code = main(["--store", goldens["whatif_clock_step"], "whatif", "--policy", spec])
    err = capsys.readouterr().err
    assert code == 3 and "BadPolicy: --policy:" in err and "Traceback" not in err
    if spec in ("clamp:5", "epoch:x"):  # a policy without an argument names itself
        name, arg = spec.split(":")
        assert f"policy {name!r}: {name} takes no argument, got {arg!r}" in err


@pytest.mark.parametrize("at", ["yesterday", "2026-09-09T10:00:00", "2026-13-01T00:00:00Z"])
def test_R4_a_bad_at_is_refused_naming_it(capsys, goldens, at) -> None:
    code = main(["--store", goldens["whatif_clock_step"], "whatif", "--policy", "clamp", "--at", at])
    assert code == 3 and "--at:" in capsys.readouterr().err


def test_R4_cli_text_and_json(capsys, goldens) -> None:
    assert main(["--store", goldens["whatif_clock_step"], "whatif", "--policy", "clamp"]) == 0
    text = capsys.readouterr().out
    assert "1 verdicts differ" in text and "killed-live after-step" in text
    assert main(["--store", goldens["whatif_clock_step"], "whatif", "--policy", "clamp", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["policy"] == "clamp" and [d["kind"] for d in doc["differences"]] == [KILLED_LIVE]


def test_R4_builtin_policies_are_the_documented_ones() -> None:
    assert sorted(BUILTIN) == ["clamp", "epoch", "flat-age", "floor", "heartbeat"]
    with pytest.raises(BadPolicy) as refused:
        from epochledger.replay.whatif import resolve

        resolve("flat-age:0s")
    assert refused.value.policy == "flat-age:0s" and "more than 0" in str(refused.value)


def test_R4_a_third_party_policy_plugs_in_through_an_installed_entry_point(tmp_path, goldens) -> None:
    """A real distribution on sys.path (a dist-info with entry_points.txt), found by
    importlib.metadata in a fresh interpreter: its policy recovers every running run."""
    (tmp_path / "grim_policy.py").write_text(
        textwrap.dedent("""
        from epochledger.projections.orphans import Verdict

        def make(arg):
            if arg not in (None, "all"):
                raise ValueError(f"takes 'all' or nothing, got {arg!r}")
            def reaper(sweep, run, relative_to):
                if run.status == "running":
                    return Verdict(run=run.run, rule="grim", started_at=run.started_at)
                return None
            return reaper
    """)
    )
    info = tmp_path / "grim_policy-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: grim-policy\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[epochledger.policies]\ngrim = grim_policy:make\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), ROOT])}
    cmd = [sys.executable, "-m", "epochledger", "--store", goldens["whatif_clock_step"], "whatif", "--json", "--policy"]
    done = subprocess.run([*cmd, "grim:all"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    diffs = json.loads(done.stdout)["differences"]
    assert [(d["kind"], d["run"], d["alternative"]["rule"]) for d in diffs] == [(KILLED_LIVE, "after-step", "grim")]
    bad = subprocess.run([*cmd, "grim:some"], env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 3 and "takes 'all' or nothing" in bad.stderr
    gone = subprocess.run(
        [*cmd, "grim"], env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True, timeout=60
    )
    assert gone.returncode == 3 and "no policy named 'grim'" in gone.stderr


def test_R4_whatif_reads_postgresql_too(pg_url) -> None:
    with open_ledger(pg_url) as lg, open(incidents.path("whatif_nightly_88"), "rb") as f:
        import_lines(lg, f, clock_steps="keep")  # recorded through the API under a stepped clock
        result = whatif(lg._store, "flat-age:30m")
    assert [(d.kind, d.run) for d in result.differences] == [(KILLED_LIVE, "nightly"), (MISSED, "young")]


def test_R4_an_orphan_found_before_any_recorded_sweep_is_early(sqlite_ledger, clock) -> None:
    """worker-1 is redeployed with boot() alone (no sweep) while an unowned run of its old
    epoch runs; worker-2's startup sweep an hour later cannot take it (O3 is worker-1's to
    judge). A boot with no sweep records nothing, so what-if judges it as a sweep that found
    nothing: the recorded rule itself finds the run there, first; a flat age finds it at
    worker-2's sweep. Both `early`, and the record never recovers it. A sweep that gave up
    (process.sweep_failed) judged nothing and is no decision point."""
    from epochledger.ledger.events import ProcessSweepFailed

    lg = sqlite_ledger
    lg.boot("worker-1", epoch="w1.e1")
    lg.boot("worker-2", epoch="w2.e1")
    clock.advance(300)
    lg.queue("u", process="worker-1")
    lg.start("u", process="worker-1")
    clock.advance(15 * 60)
    clock.restart(1)
    lg.boot("worker-1", epoch="w1.e2")
    clock.advance(40 * 60)
    lg.startup("worker-2", epoch="w2.e2")
    clock.advance(60)
    lg.boot("worker-3", epoch="w3.e1")
    lg.submit(ProcessSweepFailed(at=clock.now(), process="worker-3", epoch="w3.e1", attempts=3, error="store down"))
    clock.advance(60)
    got = {
        p: [(d.kind, d.run, d.sweep_epoch, d.then) for d in whatif(lg._store, p).differences]
        for p in ("epoch", "flat-age:30m")
    }
    assert got == {"epoch": [(EARLY, "u", "w1.e2", None)], "flat-age:30m": [(EARLY, "u", "w2.e2", None)]}
    assert whatif(lg._store, "epoch").sweeps == 4  # four boots; the one whose sweep gave up is not judged
    [early] = whatif(lg._store, "epoch").differences
    assert early.message == (
        f"u: the alternative recovers this orphan at the sweep of w1.e2 ({early.at.isoformat()}), "
        "before any recorded sweep did"
    )


if __name__ == "__main__":  # regenerate tests/golden/whatif/ from the incidents (module docstring)
    import tempfile

    os.makedirs(GOLDEN, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        urls = {}
        for name in incidents.INCIDENTS:
            urls[name] = f"sqlite:///{os.path.join(tmp, name + '.db')}"
            with open_ledger(urls[name]) as lg, open(incidents.path(name), "rb") as f:
                import_lines(lg, f, clock_steps="keep")
        for history, policy in sorted(EXPECTED):
            with open(_golden_path(history, policy), "wb") as f:
                f.write(_result_bytes(urls[history], policy))
