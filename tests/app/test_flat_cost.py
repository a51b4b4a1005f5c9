"""Flat write cost (rule W1): a write decides against the ledger's cached state of its
stream plus the events after the cached version, and a slot's fold is linear; the
optimistic check stays exact (rule L5).

Laws (hypothesis): deciding from a cached, possibly stale state equals deciding from a
full fold; the persistent slot state equals the tuple-rebuilding fold it replaced, for
random histories and random forks; a forged cache never lets a write through. Races of
two OS processes whose caches are warm, on both stores.

The 100,000-event run lives in the benchmark only (bench/growth.py: building and
folding it once takes seconds). The 20,000-epoch slot is built here by a bulk append
(about a second) and written through the ledger.
"""

from __future__ import annotations

import itertools
import random
import tempfile
from datetime import timedelta
from typing import Any, assert_never

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochledger import ConflictError, IllegalTransition, ManualClock, open_ledger
from epochledger.app import Ledger, _fold_stream
from epochledger.ledger import process as process_mod
from epochledger.ledger import run as run_mod
from epochledger.ledger.errors import StaleEpoch
from epochledger.ledger.events import (
    ProcessBooted,
    ProcessRetired,
    ProcessStopped,
    ProcessStopping,
    ProcessSweepFailed,
    ProcessSweepSkipped,
    RunCheckpointed,
    RunFinished,
    RunQueued,
    RunStarted,
    Status,
    process_stream,
    run_stream,
)
from epochledger.ledger.process import EpochState, ProcessState
from epochledger.ledger.store import Append
from tests.conftest import T0, race
from tests.helpers.engine_helpers import apply_op

replace = msgspec.structs.replace


# ------------------------------------------------------- the slot's fold (oracle)
def reference_evolve(state: Any, e: Any) -> Any:
    """The fold this issue replaced (ledger/process.py before W1): every boot rebuilds
    the tuple of epochs. The oracle the persistent state must equal."""
    if state is None:
        state = {"process": e.process, "epochs": (), "version": 0}
    epochs = state["epochs"]

    def with_epoch(**changes: object) -> tuple[EpochState, ...]:
        return tuple(replace(x, **changes) if x.epoch == e.epoch else x for x in epochs)

    match e:
        case ProcessBooted():
            epochs = tuple(
                replace(x, superseded_by=e.epoch, superseded_at=e.at) if x.superseded_by is None else x for x in epochs
            )
            epochs = (
                *epochs,
                EpochState(
                    process=e.process, epoch=e.epoch, booted_at=e.booted_at, recorded_at=e.at, host=e.host, pid=e.pid
                ),
            )
        case ProcessStopping():
            epochs = with_epoch(stopping_at=e.at)
        case ProcessStopped():
            epochs = with_epoch(stopped_at=e.at)
        case ProcessSweepSkipped():
            epochs = with_epoch(sweep_skipped=e.why)
        case ProcessSweepFailed():
            epochs = with_epoch(sweep_failed_at=e.at)
        case ProcessRetired():
            epochs = with_epoch(retired_at=e.at)
        case _:
            assert_never(e)
    return {"process": e.process, "epochs": epochs, "version": state["version"] + 1}


def _process_event(kind: int, epoch: int, i: int) -> Any:
    at = T0 + timedelta(seconds=i)
    name = f"e{epoch}"
    if kind == 0:
        return ProcessBooted(at=at, process="w", epoch=name, booted_at=at - timedelta(seconds=3), host="h", pid=i)
    if kind == 1:
        return ProcessStopping(at=at, process="w", epoch=name)
    if kind == 2:
        return ProcessStopped(at=at, process="w", epoch=name)
    if kind == 3:
        return ProcessSweepSkipped(at=at, process="w", epoch=name, why="clock stepped back")
    if kind == 5:
        return ProcessRetired(at=at, process="w", epoch=name)
    return ProcessSweepFailed(at=at, process="w", epoch=name, attempts=3, error="store down")


process_events = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 6)), max_size=40).map(
    lambda xs: [_process_event(k, e, i) for i, (k, e) in enumerate(xs)]
)


def _same(state: ProcessState | None, ref: Any) -> None:
    if ref is None:
        assert state is None
        return
    assert state is not None
    assert (state.process, state.epochs, state.version) == (ref["process"], ref["epochs"], ref["version"])
    assert len(state) == len(ref["epochs"])
    assert state.current == (ref["epochs"][-1] if ref["epochs"] else None)
    for e in ref["epochs"]:
        first = next(x for x in ref["epochs"] if x.epoch == e.epoch)
        assert state.epoch(e.epoch) == first
    assert state.epoch("never-booted") is None
    ids = [e.epoch for e in ref["epochs"]]
    for a in ("e0", "e1", "e5", "ghost"):
        for b in ("e0", "e2", "ghost"):
            expect = None if a not in ids or b not in ids else ids.index(a) <= ids.index(b)
            assert state.booted_no_later(a, b) == expect


@settings(max_examples=150, deadline=None)
@given(process_events, st.data())
def test_W1_the_persistent_slot_state_equals_the_tuple_rebuilding_fold_under_random_forks(events, data) -> None:
    """Every state of a fold equals the old fold's state at that point, and stays equal
    after later evolves of it, of its ancestors, and of forks (an older state evolved
    again, as a rolled-back batch's cached state is). Mutation caught: evolve that skips
    the fork (appends to a core it is not the tip of): the older states change."""
    states: list[ProcessState | None] = [None]
    refs: list[Any] = [None]
    for e in events:
        base = data.draw(st.integers(0, len(states) - 1)) if data.draw(st.booleans()) else len(states) - 1
        states.append(process_mod.evolve(states[base], e))
        refs.append(reference_evolve(refs[base], e))
    for state, ref in zip(states, refs, strict=True):
        _same(state, ref)


@settings(max_examples=60, deadline=None)
@given(process_events, st.integers(0, 40))
def test_W1_R1_the_slot_fold_in_two_parts_equals_the_fold_at_once_and_its_bytes_are_the_old_ones(events, cut) -> None:
    """Fold laws on the new state, and its stored form: a ProcessRow with the old
    Struct's fields, so view rows and replay's state hash keep their bytes."""
    whole = process_mod.fold(events)
    assert process_mod.fold(events[cut:], process_mod.fold(events[:cut])) == whole
    ref = None
    for e in events:
        ref = reference_evolve(ref, e)
    if whole is None:
        return
    row = process_mod.ProcessRow(process=ref["process"], epochs=ref["epochs"], version=ref["version"])
    assert msgspec.json.encode(whole, enc_hook=process_mod.enc_hook) == msgspec.json.encode(row)
    decoded = msgspec.json.Decoder(ProcessState, dec_hook=process_mod.dec_hook).decode(msgspec.json.encode(row))
    assert decoded == whole


def test_W1_a_boot_at_the_tip_extends_the_slot_in_place_and_a_lookup_reads_no_other_epoch() -> None:
    """The per-write use is O(1): evolving the newest state shares its core (no copy of
    the epochs), and a lookup by id is a dict lookup. Mutation caught: the tuple
    rebuilt on each boot (a new core per evolve)."""
    state = process_mod.fold(_process_event(0, i, i) for i in range(50))
    assert state is not None
    after = process_mod.evolve(state, ProcessBooted(at=T0, process="w", epoch="new", booted_at=T0))
    assert after._core is state._core
    assert state.current is not None and state.current.epoch == "e49" and state.current.superseded_by is None
    assert after.epoch("e49").superseded_by == "new"  # type: ignore[union-attr]
    assert after._core.at["e3"] == [3]


def test_W1_O2_a_slot_with_20000_epochs_is_written_through_the_ledger(sqlite_url: str, clock: ManualClock) -> None:
    """A slot restarted 20,000 times (bulk-built), then booted, a run started on its
    new epoch, and a report from a superseded epoch fenced: the same answers as on a
    fresh slot (the slot is folded once, then cached)."""
    with open_ledger(sqlite_url, clock=clock) as lg:
        stream = process_stream("w")
        pending = []
        for i in range(20_000):
            at = T0 - timedelta(days=30) + timedelta(seconds=i)
            pending.append(Append(stream, i + 1, ProcessBooted(at=at, process="w", epoch=f"old{i}", booted_at=at)))
        lg._store.append(pending)
        live = lg.boot("w", epoch="live")
        lg.queue("r")
        assert lg.start("r", epoch=live).epoch == "live"
        with pytest.raises(StaleEpoch) as refused:
            lg.checkpoint("r", "n", "x", epoch="old19999")
        assert (refused.value.run, refused.value.attempted, refused.value.epoch) == (
            "r",
            "run.checkpointed",
            "old19999",
        )
        state = lg.process("w")
        assert state is not None and len(state) == 20_001 and state.epoch("old0").superseded_by == "old1"  # type: ignore[union-attr]
        assert lg.read_state(stream) == state


# --------------------------------------------------------- the write path's cache
WRITES = ("queue", "start", "checkpoint", "pause", "resume", "fail", "cancel", "finish", "rewind", "delete", "boot")


def _candidates(run: str, n: int) -> list[Any]:
    """Commands to decide against a state, without appending them."""
    at = T0 + timedelta(days=1, seconds=n)
    return [
        RunQueued(at=at, run=run),
        RunStarted(at=at, run=run, process="w1"),
        RunCheckpointed(at=at, run=run, node="node", ref=f"ref-{n}"),
        RunFinished(at=at, run=run),
    ]


def _decision(cmd: Any, state: Any) -> Any:
    try:
        return run_mod.decide(cmd, state)
    except IllegalTransition as e:
        return (type(e), str(e))


@pytest.mark.parametrize("shared", [False, True], ids=["two_stores", "one_store"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(st.integers(0, 1), st.sampled_from(WRITES), st.integers(0, 4), st.booleans()), min_size=1, max_size=60
    )
)
def test_W1_deciding_from_a_cached_state_equals_deciding_from_a_full_fold(shared: bool, script) -> None:
    """Two ledgers write one file in turn (each one's cache goes stale whenever the
    other writes; a random step drops an entry or clears a cache), each with its own
    store (another connection) or both on one Store (one connection: SQLite's read
    skip must see the other's writes by its change count), then every run is decided
    from each ledger's cache and from a fold of its whole stream: the same state, the
    same events or the same refusal. Mutation caught: read_state deciding from the
    cached state without folding the events after its version (the law fails at the
    first stale entry); a log token blind to either kind of writer."""
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/l.db"
        clock = ManualClock(T0, uptime=5)
        with open_ledger(url, clock=clock) as a, open_ledger(url, clock=clock) as other:
            b = Ledger(a._store, clock) if shared else other
            writers = (a, b)
            for name in ("w0", "w1", "w2"):
                a.boot(name, epoch=f"e{name[1]}")
            for n, (who, op, run, forget) in enumerate(script):
                lg = writers[who]
                if forget:
                    (lg._cache.drop(run_stream(f"r{run}")) if n % 2 else writers[1 - who].cache.clear())
                try:
                    apply_op(lg, op if op != "queue" or n % 3 else "queue", f"r{run}", n)
                except StaleEpoch as e:  # a fenced report of this run (its evidence kept), never another's
                    assert e.run == f"r{run}", (op, run, e)
            for run in range(5):
                stream = run_stream(f"r{run}")
                full = _fold_stream(stream, a._store.read_stream(stream))
                for lg in writers:
                    cached = lg.read_state(stream)
                    assert cached == full
                    for cmd in _candidates(f"r{run}", run):
                        assert _decision(cmd, cached) == _decision(cmd, full)
            for name in ("w0", "w1", "w2"):
                stream = process_stream(name)
                assert (
                    a.read_state(stream) == b.read_state(stream) == _fold_stream(stream, a._store.read_stream(stream))
                )


def _count_reads(lg: Ledger, monkeypatch: Any) -> list[tuple[str, int]]:
    reads: list[tuple[str, int]] = []
    real_one, real_many = lg._store.read_stream, lg._store.read_streams
    monkeypatch.setattr(lg._store, "read_stream", lambda s, after=0: reads.append((s, after)) or real_one(s, after))
    monkeypatch.setattr(
        lg._store,
        "read_streams",
        lambda ss, after=None: reads.extend((s, (after or {}).get(s, 0)) for s in ss) or real_many(ss, after),
    )
    return reads


def test_W1_a_warm_write_reads_only_the_events_after_the_cached_version(store_url: str, monkeypatch) -> None:
    """The cache is used: a write on a run whose state is cached reads from its cached
    version on (one row, or the rows another writer added), never from version 1; on
    SQLite a run this ledger wrote last, with nothing appended since (the store's log
    token), is not read at all. Mutation caught: Batch.state reading the whole stream
    (after=0); the log token ignoring another connection's commits."""
    with open_ledger(store_url, clock=ManualClock(T0, uptime=5)) as lg:
        lg.queue("r")
        lg.start("r")
        for i in range(30):
            lg.checkpoint("r", "n", f"x{i}")
        reads = _count_reads(lg, monkeypatch)
        lg.checkpoint("r", "n", "y")
        skips = lg._store.log_token() is not None
        assert skips == (lg._store.kind == "sqlite")
        # the state is at 32: read from 32 on, to check it still holds (none on SQLite)
        assert reads == ([] if skips else [("run:r", 31)])
        with open_ledger(lg.url, clock=lg.clock) as other:
            other.checkpoint("r", "n", "z")  # the cache of `lg` is now one event behind
        reads.clear()
        assert lg.checkpoint("r", "n", "w").version == 35
        assert reads == [("run:r", 32)]
        reads.clear()
        with lg.batch() as b:  # the prefetch skips it as well
            b.prefetch([run_stream("r"), run_stream("new")])
            b.checkpoint("r", "n", "v")
        assert reads == ([("run:new", 0)] if skips else [("run:r", 34), ("run:new", 0)])


def _append_elsewhere(url: str, run: str) -> None:
    """Another OS process checkpoints `run` (its own connection, its own cache)."""
    import subprocess
    import sys

    code = (
        "import sys; from epochledger import open_ledger\n"
        "with open_ledger(sys.argv[1]) as lg: lg.checkpoint(sys.argv[2], 'n', 'elsewhere')"
    )
    subprocess.run([sys.executable, "-c", code, url, run], check=True, timeout=60)


@pytest.mark.parametrize("writer", ["process", "connection", "same_store", "store_append"])
def test_W1_L5_an_append_since_the_last_write_is_read_before_the_next_one(
    sqlite_url: str, writer: str, monkeypatch
) -> None:
    """SQLite's read skip (Store.log_token): whoever appends between two writes of a
    ledger with a warm cache (another OS process, another connection of this process,
    another Ledger sharing this very Store and connection, the store's own append
    called directly), the next write reads the stream after its cached version, decides
    against the event it missed, and lands; no ConflictError. Mutation caught: a token
    without data_version (the process and connection cases write a version already
    taken: ConflictError), a token without total_changes (the same-store cases)."""
    with open_ledger(sqlite_url, clock=ManualClock(T0, uptime=5)) as lg:
        lg.queue("r")
        lg.start("r")
        lg.checkpoint("r", "n", "x")
        reads = _count_reads(lg, monkeypatch)
        lg.checkpoint("r", "n", "y")
        assert reads == []  # warm and fresh: not read
        if writer == "process":
            _append_elsewhere(sqlite_url, "r")
        elif writer == "connection":
            with open_ledger(sqlite_url) as other:
                other.checkpoint("r", "n", "elsewhere")
        elif writer == "same_store":
            Ledger(lg._store, lg.clock).checkpoint("r", "n", "elsewhere")
        else:
            e = RunCheckpointed(at=T0, run="r", node="n", ref="elsewhere", status=Status.RUNNING)
            lg._store.append([Append(run_stream("r"), 5, e)])
        reads.clear()  # (the same-store Ledger read through it)
        state = lg.checkpoint("r", "n", "z")
        assert reads == [("run:r", 3)]  # from the cached version 4 on: it holds, then 5 is folded
        assert state.version == 6 and [r.version for r in lg.history("r")] == [1, 2, 3, 4, 5, 6]
        assert state == run_mod.fold([r.event for r in lg.history("r")])  # type: ignore[misc]
        assert lg.history("r")[4].event.ref == "elsewhere"  # type: ignore[union-attr]


def test_W1_L5_a_write_inside_a_batchs_window_unmarks_what_the_batch_read(sqlite_url: str, monkeypatch) -> None:
    """Another Ledger on the same Store (this very connection) writes run s after this
    batch read s and t and before it commits t: the commit must not carry the marks
    made at the batch's read (Store.token_after_append), so the next write of s reads
    it and lands. Mutation caught: token_after_append not checking that nothing was
    written through the connection since the token (s's stale mark: ConflictError)."""
    with open_ledger(sqlite_url, clock=ManualClock(T0, uptime=5)) as lg:
        for run in ("s", "t"):
            lg.queue(run)
            lg.start(run)
        other = Ledger(lg._store, lg.clock)
        with lg.batch() as b:
            b.prefetch([run_stream("s"), run_stream("t")])
            other.checkpoint("s", "n", "between")
            b.checkpoint("t", "n", "x")
        reads = _count_reads(lg, monkeypatch)
        assert lg.checkpoint("s", "n", "after").version == 4
        assert reads == [("run:s", 1)]
        assert [r.event.ref for r in lg.history("s")[2:]] == ["between", "after"]  # type: ignore[union-attr]


def test_W1_L5_an_assumed_stream_written_by_a_batch_is_read_before_the_next_write(store_url: str, monkeypatch) -> None:
    """A batch that `assume`s a run's state (a view's fold) and writes it moves the
    stream without caching its state: the ledger's cached state of that run, fresh
    before, is read again by the next write, which lands. Mutation caught: the commit
    carrying the assumed stream's fresh mark (the next write decides against the
    version before the batch: ConflictError)."""
    with open_ledger(store_url, clock=ManualClock(T0, uptime=5)) as lg:
        lg.queue("r")
        lg.start("r")
        lg.checkpoint("r", "n", "x")
        with lg.batch() as b:
            b.assume(lg.get_run("r"))
            b.checkpoint("r", "n", "assumed")
        reads = _count_reads(lg, monkeypatch)
        assert lg.checkpoint("r", "n", "after").version == 5
        assert reads == [("run:r", 2)]
        assert [r.event.ref for r in lg.history("r")[2:]] == ["x", "assumed", "after"]  # type: ignore[union-attr]


def test_W1_L5_an_append_racing_a_skipped_read_is_one_typed_conflict_then_a_reread(sqlite_url: str) -> None:
    """Another writer commits after the log token was taken and before this write's
    transaction (the window no token can close): the unique (stream, version) key
    refuses this write with a ConflictError naming the run, nothing of it is appended,
    and the next write reads what it missed and lands (rule L5: one winner, one typed
    conflict)."""
    with open_ledger(sqlite_url, clock=ManualClock(T0, uptime=5)) as lg, open_ledger(sqlite_url) as other:
        lg.queue("r")
        lg.start("r")
        lg.checkpoint("r", "n", "x")
        real = lg._store.log_token

        def token_then_race() -> Any:
            token = real()
            other.checkpoint("r", "n", "won")  # lands between the token and the append
            return token

        lg._store.log_token = token_then_race  # type: ignore[method-assign]
        with pytest.raises(ConflictError) as e:
            lg.checkpoint("r", "n", "lost")
        assert e.value.streams == [run_stream("r")]
        lg._store.log_token = real  # type: ignore[method-assign]
        assert [r.event.ref for r in lg.history("r")[2:]] == ["x", "won"]  # type: ignore[union-attr]
        assert lg.checkpoint("r", "n", "again").version == 5
        assert [r.event.ref for r in lg.history("r")[2:]] == ["x", "won", "again"]  # type: ignore[union-attr]


def test_W1_a_rolled_back_batch_leaves_the_cache_as_the_log_is(sqlite_ledger: Ledger) -> None:
    """The batch's own state is the source within the batch; it reaches the cache only
    when its commit lands. Mutation caught: caching a state at submit time (the next
    write decides against a start that never landed)."""
    lg = sqlite_ledger
    lg.queue("r")
    lg.boot("w", epoch="e1")
    with pytest.raises(RuntimeError), lg.batch() as b:
        b.start("r", process="w")
        b.submit(ProcessBooted(at=T0, process="w", epoch="e2", booted_at=T0))
        raise RuntimeError("the caller's block fails: nothing is appended")
    assert lg._cache.get(run_stream("r")).status == Status.QUEUED
    slot = lg._cache.get(process_stream("w"))
    assert slot.current.epoch == "e1" and slot.epoch("e2") is None
    assert lg.start("r", process="w").slot_epoch == "e1"
    assert lg.boot("w", epoch="e2").epoch == "e2"
    assert [e.epoch for e in lg.process("w").epochs] == ["e1", "e2"]  # type: ignore[union-attr]


_FORGED = itertools.count()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(offset=st.integers(-4, 6).filter(lambda x: x != 0), tamper_last=st.booleans())
def test_W1_L5_a_forged_cache_never_lets_a_wrong_write_through(store_url: str, offset: int, tamper_last: bool) -> None:
    """A cached state whose version is off (either way) or whose last event is not the
    stream's: the write path sees it at its read and folds again from zero, and a
    state handed straight to a batch (`assume`, which skips the read) is refused by
    the store's version check (taken, or beyond the stream's end) with a typed
    ConflictError, nothing appended. On both stores. Mutation caught: the store's
    predecessor check removed (a forged higher version appends and leaves a gap)."""
    clock = ManualClock(T0, uptime=5)
    with open_ledger(store_url, clock=clock) as lg:
        run = f"f{next(_FORGED)}"  # the store is shared by the examples
        lg.queue(run)
        lg.start(run)
        for i in range(4):
            lg.checkpoint(run, "n", f"x{i}")
        true = lg.get_run(run)
        forged = replace(true, version=max(1, true.version + offset))
        if tamper_last:
            forged = replace(forged, last=RunFinished(at=T0, run=run, status=Status.FINISHED), status=Status.FINISHED)
        before = lg._store.max_position()
        b = lg.batch()
        b.assume(forged)
        try:
            b.checkpoint(run, "n", "assumed")
        except IllegalTransition as e:  # the forged state refuses the command itself: nothing to commit
            assert tamper_last and (e.run, e.status, e.attempted) == (run, Status.FINISHED, "run.checkpointed"), e
        else:
            with pytest.raises(ConflictError) as e:
                b.commit()
            assert e.value.streams == [run_stream(run)]
        assert lg._store.max_position() == before
        lg._cache._states[run_stream(run)] = forged  # a wrong entry, as a bug or a foreign store would leave
        state = lg.checkpoint(run, "n", "after")
        assert state == run_mod.fold([r.event for r in lg.history(run)])  # type: ignore[misc]
        assert state.version == true.version + 1 and state.status == Status.RUNNING
        assert [r.version for r in lg.history(run)] == list(range(1, true.version + 2))


def test_W1_L5_the_store_refuses_a_version_beyond_the_stream_end(store_url: str) -> None:
    """Store.append: a version already taken is a conflict (the unique key), and so is
    one past the stream's end (the predecessor check), on both stores."""
    with open_ledger(store_url) as lg:
        lg.queue("r")
        e = RunStarted(at=T0, run="r", status=Status.RUNNING)
        with pytest.raises(ConflictError) as err:
            lg._store.append(
                [
                    Append(run_stream("r"), 3, e),
                    Append(run_stream("new"), 1, RunQueued(at=T0, run="new", status=Status.QUEUED)),
                ]
            )
        assert err.value.streams == [run_stream("r")]
        assert lg._store.max_position() == 1
        assert lg._store.append([Append(run_stream("r"), 2, e)]) == [2]


# ------------------------------------------------------------ races, caches warm
RUNS = [f"r{i:02d}" for i in range(8)]


def _hammer(url: str, worker: int, go: Any, results: Any) -> None:
    rnd = random.Random(worker)
    landed = finishes = conflicts = boots = 0
    with open_ledger(url) as lg:
        for run in RUNS:  # warm: every run and the slot are cached before the race
            lg.read_state(run_stream(run))
        lg.read_state(process_stream("shared"))
        assert len(lg._cache) == len(RUNS) + 1
        go.wait()
        for i in range(40):
            run = rnd.choice(RUNS)
            try:
                lg.checkpoint(run, f"w{worker}", f"{worker}-{i}")
                landed += 1
            except ConflictError:
                conflicts += 1
            if i % 10 == 0:
                lg.boot("shared", epoch=f"w{worker}-{i}")  # a lost race re-reads and retries (boot())
                boots += 1
        go.wait()
        order = RUNS[:]
        rnd.shuffle(order)
        for run in order:
            try:
                with lg.batch() as b:
                    b.finish(run)
                finishes += len(b.recorded)  # 0: the other's finish had landed, the same event (L1)
            except ConflictError:
                conflicts += 1
            except IllegalTransition as e:  # the other writer finished it first, and this cache has caught up
                if (e.run, e.status, e.attempted) != (run, Status.FINISHED, "run.finished"):
                    raise
    results.put((worker, landed, finishes, conflicts, boots))


def test_W1_L5_two_processes_with_warm_caches_racing_get_one_winner_each_time(store_url: str) -> None:
    """Two OS processes, caches warm on every run and on the slot both boot: every
    checkpoint that returned landed once, each run finished exactly once, each lost
    race a typed ConflictError, every boot recorded once; histories stay legal."""
    with open_ledger(store_url) as lg:
        lg.boot("shared", epoch="first")
        with lg.batch() as b:
            for run in RUNS:
                b.queue(run)
                b.start(run)
    outcomes = race(_hammer, store_url, timeout=90)
    with open_ledger(store_url) as lg:
        events = list(lg.events())
        assert sum(isinstance(r.event, RunCheckpointed) for r in events) == sum(o[1] for o in outcomes)
        assert sum(isinstance(r.event, RunFinished) for r in events) == len(RUNS) == sum(o[2] for o in outcomes)
        slot = lg.process("shared")
        assert slot is not None and len(slot) == 1 + sum(o[4] for o in outcomes)
        assert sorted(e.epoch for e in slot.epochs[1:]) == sorted(f"w{w}-{i}" for w in (1, 2) for i in range(0, 40, 10))
        for run in RUNS:
            state = None
            for rec in lg.history(run):
                assert run_mod.decide(rec.event, state) == [rec.event]
                state = run_mod.evolve(state, rec.event)
            assert state is not None and state.status == Status.FINISHED


def test_W1_the_cache_is_bounded() -> None:
    from epochledger.app import StateCache

    cache = StateCache(limit=3)
    states = [
        run_mod.RunState(run=f"r{i}", status=Status.QUEUED, queued_at=T0, updated_at=T0, version=1) for i in range(5)
    ]
    for s in states:
        cache.put(run_stream(s.run), s)
    assert len(cache) == 3 and cache.get(run_stream("r0")) is None and cache.get(run_stream("r4")) == states[4]
    cache.put(run_stream("r4"), replace(states[4], version=0))  # an older true state never replaces a newer
    assert cache.get(run_stream("r4")).version == 1


# ------------------------------------------------------------------- fleet size
def test_runs_by_status_selects_in_sql_exactly_what_the_filter_would_keep(sqlite_ledger: Ledger, capsys) -> None:
    """`runs --status S` reads only the view's rows in S (its status column), and lists
    the same runs as filtering every run; on a read-only copy it filters in memory."""
    from epochledger.cli import main
    from epochledger.projections import engine
    from tests.helpers.engine_helpers import random_history

    random_history(sqlite_ledger, 5, runs=15, ops=200)
    store = sqlite_ledger._store
    every, _ = engine.read_runs(store)
    for statuses in (["running"], ["queued", "failed_resumable"], ["finished"], []):
        picked, lag = engine.read_runs(store, statuses=statuses)
        assert lag == 0
        assert picked == [s for s in every if not statuses or s.status in statuses]
    assert main(["--store", sqlite_ledger.url, "runs", "--status", "running", "--json"]) == 0
    shown = msgspec.json.decode(capsys.readouterr().out)
    assert [r["run"] for r in shown] == [s.run for s in every if s.status == "running"]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 10_000))
def test_O2_O3_O5_the_sweeps_candidate_read_gives_the_verdicts_of_the_whole_fleet(seed: int) -> None:
    """The sweep reads only the runs not owned by their slot's live current epoch
    (Ledger.orphan_view(candidates_only=True)); over random histories (boots that
    supersede, stops, starts with and without epochs) every slot's sweep and the
    fleet-wide read find exactly the verdicts of the whole runs view. Mutation caught:
    the candidate query without `p.live = 0` (a cleanly stopped current epoch's runs
    are missed)."""
    from epochledger.projections import orphans
    from tests.helpers.engine_helpers import random_history

    with tempfile.TemporaryDirectory() as tmp:
        clock = ManualClock(T0, uptime=5)
        with open_ledger(f"sqlite:///{tmp}/l.db", clock=clock) as lg:
            random_history(lg, seed, runs=14, ops=160)
            rnd = random.Random(seed)
            for slot in ("w0", "w1", "w2", "w3"):
                current = lg.process(slot).current if lg.process(slot) is not None else lg.boot(slot)  # type: ignore[union-attr]
                for k in range(3):  # owned by the slot's current epoch
                    lg.queue(f"x-{slot}-{k}", process=slot)
                    lg.start(f"x-{slot}-{k}", epoch=current)
                lg.queue(f"o-{slot}", process=slot)
                lg.start(f"o-{slot}", process=slot)  # no owner epoch: the O3 fallback
                clock.advance(30)
                # w0 always reboots, so every history has an orphan to find (a seed whose
                # four draws were all "none" had none: the count below was 0)
                action = "reboot" if slot == "w0" else rnd.choice(["reboot", "stop", "both", "none"])
                if action in ("stop", "both"):
                    lg.stop(current)  # type: ignore[arg-type]
                if action in ("reboot", "both"):
                    clock.restart(5)
                    lg.boot(slot, epoch=f"{slot}.again")
            whole = lg.orphan_view()
            few = lg.orphan_view(candidates_only=True)
            assert set(few.runs) <= set(whole.runs)
            found = 0
            for slot in ("w0", "w1", "w2", "w3", None):
                me = whole.current(slot) if slot is not None else None
                assert orphans.verdicts(few, me) == orphans.verdicts(whole, me)
                found += len(orphans.verdicts(whole, me))
            assert found > 0  # the rule has orphans to find in every history


def test_W1_the_slot_state_hooks_refuse_any_other_type_by_name() -> None:
    """msgspec passes a hook's NotImplementedError on as it is, so its text is what a
    reader of a broken view sees. Mutations caught (make mutation): the messages dropped
    or naming the wrong type."""
    from epochledger.ledger import process

    with pytest.raises(NotImplementedError, match=r"^cannot encode object$"):
        msgspec.json.encode(object(), enc_hook=process.enc_hook)
    with pytest.raises(NotImplementedError, match=r"^cannot decode <class 'complex'>$"):
        msgspec.json.decode(b"1", type=complex, dec_hook=process.dec_hook)


def test_W1_a_forked_slot_state_forks_once_then_extends_in_place_and_keeps_its_slot() -> None:
    """Evolving an older state (a rolled-back batch, a second fold from one state) copies
    what it sees once; its own successors then extend that copy in place, and the
    original is untouched. A state moved to another version keeps its slot. Mutation
    caught (make mutation): with_version losing the slot's name."""
    state = process_mod.fold(_process_event(0, i, i) for i in range(20))
    assert state is not None
    process_mod.evolve(state, ProcessBooted(at=T0, process="w", epoch="a", booted_at=T0))  # the tip moves on
    forked = process_mod.evolve(state, ProcessBooted(at=T0, process="w", epoch="b", booted_at=T0))
    assert forked._core is not state._core
    after = process_mod.evolve(forked, ProcessBooted(at=T0, process="w", epoch="c", booted_at=T0))
    assert after._core is forked._core and [e.epoch for e in after.epochs][-3:] == ["e19", "b", "c"]
    assert [e.epoch for e in state.epochs][-1] == "e19" and state.current.superseded_by is None  # type: ignore[union-attr]
    moved = after.with_version(99)
    assert (moved.process, moved.version, moved.epochs) == (after.process, 99, after.epochs)


def test_W1_a_slot_state_built_from_its_stored_row_extends_in_place_and_forks_like_a_folded_one() -> None:
    """The epochs view and the ledger's cache hand out states built from a ProcessRow
    (`ProcessState(process=, epochs=, version=)`), not folded: the next write must
    extend that state in place (no copy of 20,000 epochs on a warm write), and evolving
    it a second time (a rolled-back batch) must fork exactly what it holds. Mutations
    caught (make mutation): a new core whose tip is not the row-built state's step (a
    copy of every epoch on the first write); the row's epochs recorded in the core
    without their ids or at a later step than the state's (a fork that loses them)."""
    events = [_process_event(0, i, i) for i in range(6)] + [_process_event(2, 2, 7)]
    folded = process_mod.fold(events)
    assert folded is not None
    for built, held in (
        (ProcessState(process="w", epochs=folded.epochs, version=folded.version), folded.epochs),
        (ProcessState(process="w"), ()),
        (process_mod._from_row(folded.row()), folded.epochs),
    ):
        boot = ProcessBooted(at=T0, process="w", epoch="x", booted_at=T0)
        first = process_mod.evolve(built, boot)
        assert first._core is built._core
        assert built.epochs == held and len(built) == len(held)  # the state handed out does not change
        stop = ProcessStopping(at=T0, process="w", epoch="e5") if held else boot
        second = process_mod.evolve(built, stop)  # a second evolve of the same state: a fork
        assert second._core is not built._core
        reference = process_mod.evolve(ProcessState(process="w", epochs=held, version=built.version), stop)
        assert second == reference and second.epochs == reference.epochs and len(second) == len(reference)
        for e in held:
            assert second.epoch(e.epoch) == reference.epoch(e.epoch) and first.epoch(e.epoch) is not None
        assert built.epochs == held  # neither evolve changed it


def test_L4_a_slot_refuses_an_event_that_is_not_a_process_event_by_name() -> None:
    """A run event handed to the slot's decide or fold (a hand-edited log, a wrong
    stream) is refused loudly and names what it got, never appended or folded as a
    no-op. Mutations caught (make mutation): the `case _: assert_never` arms of
    `process.decide` and `process.evolve` removed (decide returns None, evolve bumps
    the version and keeps nothing), or asserting on None instead of the event."""
    stray = RunQueued(at=T0, run="r1")
    with pytest.raises(AssertionError, match="RunQueued"):
        process_mod.decide(stray, None)  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match="RunQueued"):
        process_mod.evolve(ProcessState(process="w"), stray)  # type: ignore[arg-type]
