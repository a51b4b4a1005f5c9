"""The spool (rule E1; epochledger/spool.py, docs/adapters.md "The spool"): a local
outbox replayed in order, exactly once, through the import's rule I1; a store taken
away during a burst (tests/helpers/pg_proxy.py), a SIGKILL during the replay, a dead owner's
spool reaped, a refused line held for another process's, and a Ledger across fork."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from epochledger import open_ledger
from epochledger import spool as spool_mod
from epochledger.app import Ledger
from epochledger.ledger.errors import InvalidInput
from epochledger.ledger.events import RunFinished, RunQueued, RunStarted
from epochledger.spool import Owner, Spool, reap
from tests.conftest import need_pg
from tests.helpers.pg_proxy import Proxy

ROOT = Path(__file__).resolve().parents[2]


def transitions(ledger: Ledger, runs: int, prefix: str = "r") -> list[object]:
    boot = ledger.boot_event("spool-writer")
    out: list[object] = [boot]
    for i in range(runs):
        now = ledger.clock.now
        out += [
            RunQueued(at=now(), run=f"{prefix}{i}", workflow="w"),
            RunStarted(at=now(), run=f"{prefix}{i}", epoch=boot.epoch),
            RunFinished(at=now(), run=f"{prefix}{i}", epoch=boot.epoch),
        ]
    return out


def each_once(ledger: Ledger, runs: int, prefix: str = "r") -> None:
    for i in range(runs):
        assert [r.event.__struct_config__.tag for r in ledger.history(f"{prefix}{i}")] == [  # type: ignore[union-attr]
            "run.queued",
            "run.started",
            "run.finished",
        ]


def test_E1_a_spool_lands_in_order_and_a_spool_sent_again_appends_nothing(store_url, tmp_path) -> None:
    ledger = open_ledger(store_url)
    spool = Spool(ledger, str(tmp_path / "spool"), "w").start()
    spool.append(*transitions(ledger, 40))  # type: ignore[arg-type]
    assert spool.flush(30)
    assert (spool.landed, spool.duplicates, spool.rejected) == (121, 0, 0)
    each_once(ledger, 40)
    head = ledger._store.max_position()
    os.unlink(spool.pos_path)  # the position lost: every line is sent again
    spool._pos = 0
    assert spool.flush(30)
    assert (spool.landed, spool.duplicates) == (121, 121)
    assert ledger._store.max_position() == head
    assert spool.close()
    assert os.listdir(tmp_path / "spool") == []  # drained: its files go


def test_E1_postgres_taken_away_during_a_burst_loses_nothing_doubles_nothing_and_never_blocks_a_task(
    pg_url, tmp_path
) -> None:
    need_pg()
    proxy = Proxy()
    url = proxy.url(pg_url) + "&connect_timeout=2"
    ledger = open_ledger(pg_url)
    spool = Spool(lambda: open_ledger(url), str(tmp_path), "burst", retry_max=0.2).start()
    lines = transitions(ledger, 150)
    slowest = 0.0

    def burst() -> None:
        nonlocal slowest
        for i in range(0, len(lines), 3):
            t = time.perf_counter()
            spool.append(*lines[i : i + 3])  # type: ignore[arg-type]
            slowest = max(slowest, time.perf_counter() - t)
            time.sleep(0.004)

    writer = threading.Thread(target=burst)
    writer.start()
    time.sleep(0.3)
    proxy.refuse()  # the port closes, live connections reset
    time.sleep(0.8)
    proxy.arm("after_commit")  # when it is back, the first commit's answer is lost (CommitUnknown)
    proxy.forward()
    writer.join()
    time.sleep(0.2)
    proxy.blackhole()  # a server that accepts and never answers
    time.sleep(0.5)
    proxy.forward()
    assert spool.flush(60), spool.last_error
    proxy.close()
    assert spool.failures > 0  # the outage was seen, and waited out
    each_once(ledger, 150)
    assert ledger._store.max_position() == len(lines)  # nothing doubled: one event per line
    assert spool.rejected == 0
    assert slowest < 0.05, f"an append waited {slowest * 1000:.1f} ms"
    spool.close()


def _dead_writer(store: str, directory: str, name: str, runs: int) -> None:
    """A process that appends `runs` runs' transitions to its spool and dies by SIGKILL
    before any of them reaches the store (it starts no writer)."""
    script = textwrap.dedent(
        f"""
        import os, signal
        from epochledger import open_ledger
        from epochledger.spool import Spool
        from tests.adapters.test_spool import transitions
        ledger = open_ledger({store!r})
        Spool(ledger, {directory!r}, {name!r}).append(*transitions(ledger, {runs}))
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=False, timeout=60)


def test_E1_a_sigkill_during_the_replay_then_a_replay_again_records_each_transition_once(tmp_path) -> None:
    store = f"sqlite:///{tmp_path / 'ledger.db'}"
    directory = str(tmp_path / "spool")
    _dead_writer(store, directory, "victim", 400)
    size = os.path.getsize(os.path.join(directory, "victim.spool"))
    script = textwrap.dedent(
        f"""
        from epochledger import open_ledger, spool as spool_mod
        spool_mod.CHUNK_BYTES = 4096  # many transactions, so the kill lands between or inside them
        s = spool_mod.Spool(open_ledger({store!r}), {directory!r}, "victim")
        print("replaying", flush=True)
        s.replay()
        print("done", flush=True)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"replaying"
    pos_path = Path(directory) / "victim.pos"
    deadline = time.monotonic() + 20
    while not (pos_path.exists() and 0 < int(pos_path.read_bytes() or b"0") < size // 2):
        assert time.monotonic() < deadline and proc.poll() is None, "the replay ended before it could be killed"
        time.sleep(0.001)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    ledger = open_ledger(store)
    landed = ledger._store.max_position()
    assert 0 < landed < 1201  # killed part-way
    again = Spool(ledger, directory, "victim")
    assert again.replay()
    assert again.landed == 1201 - landed  # what had landed is a duplicate, or behind the position
    each_once(ledger, 400)
    assert ledger._store.max_position() == 1201


def test_E1_a_dead_owners_spool_is_reaped_with_its_owner_and_reaped_once(tmp_path) -> None:
    store = f"sqlite:///{tmp_path / 'ledger.db'}"
    directory = str(tmp_path / "spool")
    script = textwrap.dedent(
        f"""
        import os, signal
        from epochledger import open_ledger
        from epochledger.spool import Owner, Spool
        from epochledger.ledger.events import RunQueued, RunStarted
        ledger = open_ledger({store!r})
        boot = ledger.boot_event("child:1")
        s = Spool(ledger, {directory!r}, "child.1", owner=Owner(process="child:1", epoch=boot.epoch, pid=os.getpid()))
        now = ledger.clock.now
        s.append(boot, RunQueued(at=now(), run="job"), RunStarted(at=now(), run="job", epoch=boot.epoch))
        os.kill(os.getpid(), signal.SIGKILL)  # no writer ever ran: every line is still in the file
        """
    )
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=False, timeout=30)
    ledger = open_ledger(store)
    seen: list[list[spool_mod.Dead]] = []
    dead = reap(ledger, directory, then=seen.append)
    assert [(d.name, d.owner.process, d.lines, d.rejected) for d in dead] == [("child.1", "child:1", 3, 0)]
    assert seen == [dead]
    run = ledger.get_run("job")
    assert (run.status.value, run.process, run.epoch) == ("running", "child:1", dead[0].owner.epoch)
    assert os.listdir(directory) == []
    assert reap(ledger, directory) == []  # nothing left, nothing read


def test_E1_a_live_owners_spool_is_never_reaped(tmp_path) -> None:
    ledger = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    spool = Spool(ledger, str(tmp_path), "alive")
    spool.append(*transitions(ledger, 1))  # type: ignore[arg-type]
    script = textwrap.dedent(
        f"""
        from epochledger import open_ledger
        from epochledger.spool import reap
        print(len(reap(open_ledger({ledger.url!r}), {str(tmp_path)!r})))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, check=True, timeout=30)
    assert out.stdout.strip() == b"0"
    assert spool.pending() > 0
    with pytest.raises(InvalidInput, match="in use by another live process"):
        Spool(ledger, str(tmp_path), "alive")


def test_E1_a_refused_line_waits_for_another_processes_line_then_lands_in_order(tmp_path) -> None:
    ledger = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    boot = ledger.boot(f"worker:{os.getpid()}")
    queued = RunQueued(at=ledger.clock.now(), run="job", workflow="w")  # the publisher's line, late
    started = RunStarted(at=ledger.clock.now(), run="job", epoch=boot.epoch)
    worker = Spool(ledger, str(tmp_path), "worker", hold=5.0).start()
    worker.append(started)
    time.sleep(0.3)
    assert worker.pending() > 0 and (worker.last_error or "").startswith("held:")
    publisher = Spool(ledger, str(tmp_path), "publisher").start()
    publisher.append(queued)
    assert publisher.flush(10) and worker.flush(10)
    assert [r.event.__struct_config__.tag for r in ledger.history("job")] == ["run.queued", "run.started"]  # type: ignore[union-attr]
    assert worker.rejected == 0
    # A line that no other line will ever make legal is refused for good after `hold`,
    # written down with its reason, and the spool goes on.
    worker.hold = 0.2
    worker.append(
        RunStarted(at=ledger.clock.now(), run="ghost", epoch=boot.epoch),
        RunFinished(at=ledger.clock.now(), run="job", epoch=boot.epoch),
    )
    assert worker.flush(10)
    assert worker.rejected == 1
    assert "a run begins with run.queued" in Path(worker.rejected_path).read_text()
    assert ledger.get_run("job").status.value == "finished"


def test_E1_a_ledger_used_across_fork_reopens_in_the_child_and_the_parent_keeps_its_connection(
    store_url, tmp_path
) -> None:
    ledger = open_ledger(store_url)
    ledger.queue("before")
    spool = Spool(ledger, str(tmp_path), "parent", owner=Owner(pid=os.getpid()))
    pid = os.fork()
    if pid == 0:  # the child: the same objects, its own connections
        code = 1
        try:
            for i in range(30):  # while the parent writes too, on what would be one socket or file handle
                ledger.queue(f"child-{i}")
            ledger.queue("in-child")
            ledger.start("in-child")
            try:
                spool.append(RunQueued(at=ledger.clock.now(), run="never"))
            except InvalidInput:
                code = 0  # the parent's spool is not the child's
        finally:
            os._exit(code)
    for i in range(30):
        ledger.queue(f"parent-{i}")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # The child closed nothing of the parent's: its connection still writes.
    ledger.queue("after")
    assert ledger.get_run("in-child").status.value == "running"
    expected = {"before", "in-child", "after"} | {f"{w}-{i}" for w in ("child", "parent") for i in range(30)}
    assert {r.run for r in ledger.runs()} == expected
    with pytest.raises(InvalidInput):
        Spool(ledger, str(tmp_path), "parent")  # the parent still holds its spool's lock
    spool.close()


def test_E1_a_fork_waits_for_the_spool_writer_to_leave_the_store_and_no_longer_than_its_bound(
    tmp_path, monkeypatch
) -> None:
    """A child forked while a writer thread is inside SQLite inherits SQLite's locks as
    that thread held them and hangs at its own first open (Airflow's scheduler forks
    while its spool writes). So fork() waits while the writer is in the store (here:
    held there, opening the ledger), and forks anyway past FORK_WAIT_S."""
    store = f"sqlite:///{tmp_path / 'ledger.db'}"
    inside, leave = threading.Event(), threading.Event()

    def opener() -> Ledger:
        inside.set()
        leave.wait(30)
        return open_ledger(store)

    def fork_took() -> float:
        began = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        took = time.monotonic() - began
        os.waitpid(pid, 0)
        return took

    spool = Spool(opener, str(tmp_path / "spool"), "guarded").start()
    try:
        spool.append(RunQueued(at=open_ledger(store).clock.now(), run="r", workflow="w"))
        assert inside.wait(10)
        threading.Timer(0.4, leave.set).start()
        assert fork_took() >= 0.3  # it waited for the writer to leave the store
        assert spool.flush(30)
        assert fork_took() < 0.3  # an idle writer holds nothing up
        inside.clear()
        leave.clear()
        monkeypatch.setattr(spool_mod, "FORK_WAIT_S", 0.2)
        spool._ledger = None  # the next replay opens the store again, and is held there
        spool._open = opener
        spool.append(RunStarted(at=open_ledger(store).clock.now(), run="r"))
        assert inside.wait(10)
        took = fork_took()
        assert 0.15 <= took < 2.0, took  # a store that does not answer holds a fork up to the bound, no longer
    finally:
        leave.set()
        spool.close(10)


def test_E1_the_writers_first_round_waits_its_linger_off_the_hooks_path_and_a_flush_cuts_it_short(tmp_path) -> None:
    """A spool opens on a hook's path, and its writer's first round waits the spool's
    linger before it reads anything: the new thread holds the interpreter only to fall
    asleep, not to open the store while the hook runs (an Airflow task runner's boot,
    docs/benchmarks.md). Whoever waits for the store (a flush, a close: a task runner's
    drained exit) ends that wait at once: with a linger of 3 s, the lines still wait
    after 0.3 s, and a flush lands them in well under the linger."""
    ledger = open_ledger(f"sqlite:///{tmp_path}/ledger.db")
    spool = Spool(ledger, str(tmp_path / "spool"), "late", linger=3.0).start()
    spool.append(*transitions(ledger, 2))  # type: ignore[arg-type]
    time.sleep(0.3)
    assert spool.pending() > 0 and spool.landed == 0  # the writer is still asleep
    t0 = time.monotonic()
    assert spool.flush(10)
    assert time.monotonic() - t0 < 1.5  # not the linger's 3 s
    each_once(ledger, 2)
    assert spool.close()


def test_E1_a_writer_reads_another_spool_again_only_once_its_file_moved(tmp_path, monkeypatch) -> None:
    """The order across processes asks each round for the oldest line pending in the
    directory's other spools. One found drained is not read again while its file is
    unchanged (one stat: inode, size, modification time), and is read again as soon as a
    line is appended to it: its new line, unlanded, holds this spool's later lines back.
    Without the stat, a cache would hide that line; without the cache, every round reads
    every spool's position and head (docs/benchmarks.md)."""
    ledger = open_ledger(f"sqlite:///{tmp_path}/ledger.db")
    directory = str(tmp_path / "spool")
    ours, other = Spool(ledger, directory, "a"), Spool(ledger, directory, "b")
    other.append(*transitions(ledger, 1, prefix="b"))  # type: ignore[arg-type]
    assert other.flush(10)  # no writer thread: replayed here, drained
    reads: list[str] = []
    head_of = spool_mod._head_of
    monkeypatch.setattr(spool_mod, "_head_of", lambda d, n: reads.append(n) or head_of(d, n))
    assert ours._oldest_elsewhere() is None and reads == ["b"]
    assert ours._oldest_elsewhere() is None and reads == ["b"]  # unchanged: not read again
    late = RunQueued(at=ledger.clock.now(), run="b-late", workflow="w")
    other.append(late)
    assert ours._oldest_elsewhere() == late.at and reads == ["b", "b"]
    assert other.flush(10)
    assert ours._oldest_elsewhere() is None and reads == ["b", "b", "b"]
    assert other.close() and ours.close()
