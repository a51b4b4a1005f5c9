"""The host probe (rules O7, O8) against real OS processes started and killed by the
test: the kernel's word about a pid (gone, a zombie, or reused: another start time)
becomes `process.exited` by `probe@<host>` with the evidence, and the sweep that
follows recovers the dead worker's runs and nothing else."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from epochledger import ManualClock, StaleEpoch, open_ledger
from epochledger.app import Ledger
from epochledger.cli import main
from epochledger.ledger.events import ProcessExited
from epochledger.ledger.host import FakeHost, SystemHost, read_stat
from tests.conftest import T0

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the probe reads Linux's /proc")


@pytest.fixture
def workers(children: list[subprocess.Popen[bytes]]) -> list[subprocess.Popen[bytes]]:
    """The worker processes a test starts: killed if still running and reaped at teardown (conftest `children`)."""
    return children


def spawn(workers: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    workers.append(p)
    return p


def exits(lg: Ledger) -> list[ProcessExited]:
    return [r.event for r in lg.events() if isinstance(r.event, ProcessExited)]


@pytest.fixture
def real(store_url: str) -> Iterator[tuple[Ledger, ManualClock]]:
    clock = ManualClock(T0, uptime=60.0)
    with open_ledger(store_url, clock=clock) as lg:  # the real host port: /proc
        yield lg, clock


def test_O7_O8_probe_records_the_exit_of_a_sigkilled_worker_and_the_sweep_recovers_only_its_run(
    real: tuple[Ledger, ManualClock], workers: list[subprocess.Popen[bytes]]
) -> None:
    """Two real workers, one slot each; the first is SIGKILLed and reaped. The probe
    records its exit ("pid N not running", observed_by probe@<host>), boots its own
    slot to sweep, recovers that worker's run with O2-exited and leaves the other
    worker's run running; the dead worker's late report is fenced. On SQLite and the
    real PostgreSQL. Mutations caught: judge() taking a missing pid for alive (no exit
    recorded, the run stays running: the worker-per-run incident), the probe skipping
    the sweep, the fence ignoring exits."""
    lg, clock = real
    a, b = spawn(workers), spawn(workers)
    wa, wb = lg.boot("worker-a", pid=a.pid), lg.boot("worker-b", pid=b.pid)
    assert wa.host == SystemHost().name() and wa.host_boot == SystemHost().boot_id()
    assert wa.pid_start == SystemHost().process(a.pid).start  # type: ignore[union-attr]
    for run, w in (("ra", wa), ("rb", wb)):
        lg.queue(run)
        lg.start(run, epoch=w)
    clock.advance(5)

    head = lg._store.max_position()
    first = lg.probe()
    assert {(f.process, f.verdict) for f in first.findings if f.process.startswith("worker-")} == {
        ("worker-a", "alive"),
        ("worker-b", "alive"),
    }
    assert (
        first.exited == 0 and first.sweep is None and lg._store.max_position() == head
    )  # nothing to do: nothing appended

    a.send_signal(signal.SIGKILL)
    a.wait()
    report = lg.probe()
    assert report.exited == 1
    [seen] = exits(lg)
    assert (seen.process, seen.epoch, seen.observed_by) == ("worker-a", wa.epoch, f"probe@{wa.host}")
    assert seen.evidence == f"pid {a.pid} not running"
    assert report.sweep is not None and report.sweep.process == f"probe@{wa.host}"
    assert [(v.run, v.rule, v.observed_by) for v in report.sweep.recovered] == [("ra", "O2-exited", f"probe@{wa.host}")]
    assert lg.get_run("ra").status == "failed_resumable" and lg.get_run("rb").status == "running"
    with pytest.raises(StaleEpoch) as refused:
        lg.finish("ra", epoch=wa)
    assert refused.value.evidence is not None and refused.value.evidence.rule == "O2-exited"
    probe_epoch = lg.epoch(report.swept_by)  # type: ignore[arg-type]
    assert probe_epoch.stopped_at is not None  # the probe's own epoch stopped after its sweep
    assert [e.process for e, ended in lg.liveness() if ended is None] == ["worker-b"]


def test_O7_probe_tells_a_reused_pid_by_its_start_time(
    real: tuple[Ledger, ManualClock], workers: list[subprocess.Popen[bytes]]
) -> None:
    """A pid that runs, but with another start time than the boot recorded, is another
    process: the worker is gone and its pid was given to a newcomer. Faked by recording
    a start time one tick off the real one. Mutation caught: judge() comparing only that
    the pid runs (the start time ignored): the dead worker stays live."""
    lg, _clock = real
    p = spawn(workers)
    real_start = SystemHost().process(p.pid).start  # type: ignore[union-attr]
    w = lg.boot("worker", pid=p.pid, pid_start=real_start - 1)
    lg.queue("r")
    lg.start("r", epoch=w)
    report = lg.probe()
    [seen] = exits(lg)
    assert seen.evidence == f"pid {p.pid} start {real_start} != recorded {real_start - 1} (the pid was reused)"
    assert report.sweep is not None and [v.run for v in report.sweep.recovered] == ["r"]
    assert p.poll() is None  # the newcomer itself is not touched: the probe only records


def test_O7_probe_takes_a_zombie_for_dead(sqlite_url: str, workers: list[subprocess.Popen[bytes]]) -> None:
    """SIGKILLed but not reaped yet: /proc still lists the pid, as a zombie, with its
    start time. It has exited. Mutation caught: the zombie check dropped (its start time
    matches, so it passes for alive)."""
    with open_ledger(sqlite_url, clock=ManualClock(T0, uptime=60.0)) as lg:
        p = spawn(workers)
        w = lg.boot("worker", pid=p.pid)
        p.send_signal(signal.SIGKILL)
        for _ in range(200):  # the kernel marks it a zombie asynchronously
            facts = SystemHost().process(p.pid)
            if facts is not None and facts.zombie:
                break
            subprocess.run(["sleep", "0.01"], check=True)
        report = lg.probe(sweep=False)
        assert [(f.epoch, f.verdict) for f in report.findings if f.process == "worker"] == [(w.epoch, "exited")]
        assert "zombie" in (exits(lg)[0].evidence or "")


def test_O7_probe_after_a_host_reboot_ends_the_old_boots_epochs_by_its_own_boot(sqlite_url: str) -> None:
    """After a reboot nobody can report the old processes' exits, and their pids mean
    nothing now. The probe records no exit for them: its own boot, under the new host
    boot id, is the fact that ends them (O2-host-rebooted), and its sweep recovers their
    runs. Epochs of another host are not judged at all. Mutation caught: evolve_host
    keeping the first id for good (nothing ended, the runs stay running)."""
    host = FakeHost(name="node-1", boot_id="boot-A", pid=10, processes={10: 1, 11: 50, 12: 60})
    with open_ledger(sqlite_url, clock=ManualClock(T0, uptime=60.0), host=host) as lg:
        w1, w2 = lg.boot("w1", pid=11), lg.boot("w2", pid=12)
        other = lg.boot("w3", host="node-2", pid=11)  # same pid, another host: not ours to judge
        for run, w in (("r1", w1), ("r2", w2), ("r3", other)):
            lg.queue(run)
            lg.start(run, epoch=w)
        host.reboot("boot-B")
        report = lg.probe()
        assert sorted((f.process, f.verdict) for f in report.findings) == [
            ("w1", "host-rebooted"),
            ("w2", "host-rebooted"),
        ]
        assert report.exited == 0 and exits(lg) == []
        assert report.sweep is not None
        assert sorted((v.run, v.rule, v.rebooted_to) for v in report.sweep.recovered) == [
            ("r1", "O2-host-rebooted", "boot-B"),
            ("r2", "O2-host-rebooted", "boot-B"),
        ]
        assert lg.get_run("r3").status == "running"


def test_O7_probe_leaves_a_pid_without_a_recorded_start_time_alone_and_says_so(sqlite_url: str) -> None:
    """No start time recorded (an older boot, a pid the port could not read): a running
    pid may be a reused one, so the probe cannot call it dead, nor alive: `unverified`,
    nothing recorded. A pid that is gone is gone either way."""
    host = FakeHost(name="node-1", boot_id="boot-A", pid=10, processes={10: 1})
    with open_ledger(sqlite_url, clock=ManualClock(T0, uptime=60.0), host=host) as lg:
        legacy = lg.boot("legacy", pid=11)  # the port does not know pid 11 yet: no start time
        assert legacy.pid_start is None
        host.spawn(11, 50)
        head = lg._store.max_position()
        report = lg.probe(sweep=False)
        assert [(f.epoch, f.verdict) for f in report.findings] == [(legacy.epoch, "unverified")]
        assert lg._store.max_position() == head
        host.kill(11)
        report = lg.probe(sweep=False)
        assert [(f.epoch, f.verdict, f.evidence) for f in report.findings] == [
            (legacy.epoch, "exited", "pid 11 not running")
        ]


def test_O7_probe_with_the_callers_epoch_sweeps_with_it(sqlite_url: str) -> None:
    """A scheduler probes from its timer: its own epoch sweeps, no probe slot is booted."""
    host = FakeHost(name="node-1", boot_id="boot-A", pid=10, processes={10: 1, 11: 50})
    clock = ManualClock(T0, uptime=60.0)
    with open_ledger(sqlite_url, clock=clock, host=host) as lg:
        sched = lg.boot("scheduler")
        w = lg.boot("worker-1", pid=11)
        lg.queue("r")
        lg.start("r", epoch=w)
        host.kill(11)
        clock.advance(1)
        report = lg.probe(epoch=sched)
        assert report.swept_by == sched.epoch and report.sweep is not None
        assert [v.rule for v in report.sweep.recovered] == ["O2-exited"]
        assert lg.process("probe@node-1") is None


def test_O7_the_probe_refuses_a_host_without_a_boot_id(sqlite_url: str) -> None:
    from epochledger.ledger.errors import InvalidInput

    with open_ledger(sqlite_url, clock=ManualClock(T0), host=FakeHost(boot_id=None)) as lg:
        lg.boot("w")
        head = lg._store.max_position()
        with pytest.raises(InvalidInput, match="boot id"):
            lg.probe()
        assert lg._store.max_position() == head


def test_O7_stat_parsing_counts_fields_after_the_last_parenthesis() -> None:
    """A command name may hold spaces and parentheses: `(a) b (c)`."""
    fields = ["S"] + [str(i) for i in range(4, 60)]
    fields[19] = "987654"
    facts = read_stat("42 (a) b (c) " + " ".join(fields))
    assert (facts.start, facts.zombie) == (987654, False)
    assert read_stat("42 (x) Z " + " ".join(fields[1:])).zombie


def test_O7_O8_cli_probe_and_epochs(tmp_path, capsys, workers: list[subprocess.Popen[bytes]]) -> None:
    """`epochledger probe` says what it found and did (and --json); `epochs --live`
    stops listing a worker that exited or stopped, and once the probe's sweep retired
    their slots `epochs` lists them only with --retired (rule O8)."""
    store = f"sqlite:///{tmp_path / 'l.db'}"
    assert main(["--store", store, "init"]) == 0
    p, q = spawn(workers), spawn(workers)
    with open_ledger(store, clock=ManualClock(T0, uptime=60.0)) as lg:
        w = lg.boot("worker-1", pid=p.pid)
        lg.queue("r1")
        lg.start("r1", epoch=w)
        done = lg.boot("worker-2", pid=q.pid)
        lg.stop(done)  # ended normally
    p.send_signal(signal.SIGKILL)
    p.wait()
    capsys.readouterr()
    assert main(["--store", store, "probe"]) == 0
    out = capsys.readouterr().out
    assert "1 live epoch(s) checked: 1 exited" in out and f"pid {p.pid} not running" in out
    assert "recorded 1 exit(s)" in out and "recovered 1 orphan(s)" in out and "r1: O2-exited" in out
    assert main(["--store", store, "probe", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["exited"] == 0 and again["findings"] == [] and again["sweep"] is None
    assert main(["--store", store, "epochs", "--live", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["--store", store, "epochs", "--json"]) == 0
    # both retired after the probe's sweep (rule O8); the probe's own slot, stopped after it, retires next time
    assert [r["process"] for r in json.loads(capsys.readouterr().out)] == [f"probe@{SystemHost().name()}"]
    assert main(["--store", store, "epochs", "--retired", "--json"]) == 0
    rows = {r["process"]: r for r in json.loads(capsys.readouterr().out)}
    assert (rows["worker-1"]["live"], rows["worker-1"]["ended"]) == (False, "O2-exited")
    assert (rows["worker-2"]["live"], rows["worker-2"]["ended"]) == (False, "O2-stopped")


def test_L4_probe_with_an_unknown_epoch_is_refused_before_any_exit_is_recorded(sqlite_url: str) -> None:
    """A dead worker's exit is there to record, but the caller's epoch names no boot:
    the argument is refused first (UnknownEpoch naming it) and nothing is appended.
    Mutation caught: the epoch checked only by the sweep, after the exits were
    appended."""
    from epochledger.ledger.errors import UnknownEpoch

    host = FakeHost(name="h1", boot_id="b1", pid=10)
    with open_ledger(sqlite_url, clock=ManualClock(T0, uptime=100), host=host) as lg:
        host.spawn(101, 5)
        lg.boot("w1", pid=101, pid_start=5)
        host.kill(101)
        head = lg._store.max_position()
        with pytest.raises(UnknownEpoch) as refused:
            lg.probe(epoch="no-such-epoch")
        assert refused.value.epoch == "no-such-epoch" and refused.value.where == "epoch"
        assert lg._store.max_position() == head and exits(lg) == []


def test_O10_the_probe_refuses_a_host_without_a_machine_id(sqlite_url: str) -> None:
    """Without a machine id the probe cannot tell this machine's epochs from those of
    another machine with the same name (rule O10): refused, nothing appended, not a
    false exit recorded for a twin's pid. Mutation caught: the machine id check
    dropped (the probe judges the epochs by name and records their pids as gone)."""
    from epochledger.ledger.errors import InvalidInput

    clock = ManualClock(T0)
    with (
        open_ledger(sqlite_url, clock=clock, host=FakeHost(name="n", machine_id="twin-a", pid=7)) as twin,
        open_ledger(sqlite_url, clock=clock, host=FakeHost(name="n", machine_id=None, pid=8)) as lg,
    ):
        twin.boot("w")  # pid 7, running on the twin; not a pid of this machine
        head = lg._store.max_position()
        with pytest.raises(InvalidInput, match="machine id") as refused:
            lg.probe()
        assert refused.value.where == "probe" and lg._store.max_position() == head


def test_O5_O7_O8_startup_alone_recovers_the_runs_of_a_sigkilled_workers_pool_children(
    real: tuple[Ledger, ManualClock], workers: list[subprocess.Popen[bytes]]
) -> None:
    """A prefork worker as its adapter maps it: the main process is slot `pool:main`,
    each pool child its own slot (rule O8), each booted with its real pid. The whole
    worker (main and both children) is SIGKILLed; another worker on the host lives on.
    The restarted main's `startup()`, with no `probe()` after it, records the
    children's exits (probe@<host>, "pid N not running") and its sweep recovers their
    runs with O2-exited; the healthy worker's run stays running. On SQLite and the real
    PostgreSQL. Mutation caught: startup() without the probe's exits (boot then sweep:
    the children's runs stay running until someone probes, the incident)."""
    lg, clock = real
    main_proc, c1, c2, other = spawn(workers), spawn(workers), spawn(workers), spawn(workers)
    main_epoch, _ = lg.startup("pool:main", pid=main_proc.pid)
    children = [lg.boot(f"pool:child:{c.pid}", pid=c.pid) for c in (c1, c2)]
    healthy = lg.boot("other-worker", pid=other.pid)
    for run, w in (("job-1", children[0]), ("job-2", children[1]), ("job-3", healthy)):
        lg.queue(run)
        lg.start(run, epoch=w)
    clock.advance(30)
    for p in (main_proc, c1, c2):
        p.send_signal(signal.SIGKILL)
        p.wait()

    restarted = spawn(workers)
    again, report = lg.startup("pool:main", pid=restarted.pid)
    assert again.machine is not None and again.machine == SystemHost().machine_id()  # /etc/machine-id (rule O10)
    assert lg.epoch(main_epoch).superseded_by == again.epoch
    assert sorted((v.run, v.rule) for v in report.recovered) == [("job-1", "O2-exited"), ("job-2", "O2-exited")]
    assert sorted((x.process, x.observed_by, x.evidence) for x in exits(lg)) == sorted(
        (f"pool:child:{c.pid}", f"probe@{SystemHost().name()}", f"pid {c.pid} not running") for c in (c1, c2)
    )
    assert lg.get_run("job-3").status == "running"
    assert [ended for e, ended in lg.liveness() if e.epoch == healthy.epoch] == [None]


def test_O8_a_probe_on_a_timer_retires_the_slots_it_leaves_with_nothing_live(sqlite_url: str) -> None:
    """A scheduler's timer probes with its own epoch: the dead worker's exit is
    recorded, its run recovered, and its slot retires (listed in the report, gone from
    `epochs`); the live worker's slot stays. Mutation caught: no retirement after the
    probe's sweep (a pool that never restarts keeps every child's slot in the live
    reads)."""
    host = FakeHost(name="node-1", boot_id="boot-A", pid=10, processes={10: 1, 11: 50, 12: 60})
    with open_ledger(sqlite_url, clock=ManualClock(T0, uptime=60.0), host=host) as lg:
        sched = lg.boot("scheduler")
        dead, alive = lg.boot("worker-1", pid=11), lg.boot("worker-2", pid=12)
        for run, w in (("r1", dead), ("r2", alive)):
            lg.queue(run)
            lg.start(run, epoch=w)
        host.kill(11)
        report = lg.probe(epoch=sched)
        assert report.sweep is not None and [v.run for v in report.sweep.recovered] == ["r1"]
        assert report.retired == ["worker-1"]
        assert {e.process for e in lg.epochs()} == {"scheduler", "worker-2"}


def test_O10_the_machine_id_recorded_is_a_keyed_hash_never_the_id_itself() -> None:
    """systemd asks that /etc/machine-id stay confidential: what a boot records is an
    app-specific keyed hash of it, stable across reads. Mutation caught: the raw id
    returned (it would land in every boot, export and audit copy)."""
    from pathlib import Path

    raw = next(
        (
            t
            for p in ("/etc/machine-id", "/var/lib/dbus/machine-id")
            if Path(p).exists() and (t := Path(p).read_text().strip())
        ),
        None,
    )
    if raw is None:
        pytest.skip("this machine has no machine id")
    found = SystemHost().machine_id()
    assert found is not None and len(found) == 32 and found != raw and raw not in found
    assert found == SystemHost().machine_id()


def test_O7_a_system_host_reads_its_ids_once_and_keeps_them(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The boot id and the machine id are read once per SystemHost and kept (no process
    outlives its kernel's boot; a forked child runs on its parent's host): an Airflow task
    runner, forked per try from the process that made its Recorder, boots without reading
    them again. Ids read after the files are gone are the kept ones; a new SystemHost reads
    the files (here: none)."""
    from epochledger.ledger import host as host_mod

    here = SystemHost()
    boot, machine = here.boot_id(), here.machine_id()
    if boot is None:
        pytest.skip("this machine has no boot id")
    monkeypatch.setattr(host_mod, "BOOT_ID", str(tmp_path / "no-boot-id"))
    monkeypatch.setattr(host_mod, "MACHINE_ID", (str(tmp_path / "no-machine-id"),))
    assert (here.boot_id(), here.machine_id()) == (boot, machine)
    assert (SystemHost().boot_id(), SystemHost().machine_id()) == (None, None)
