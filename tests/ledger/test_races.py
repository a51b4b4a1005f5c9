"""Racing writers in separate processes, on each store (rule L5): exactly one of two
racing transitions lands, the other gets a typed conflict; nothing lost, nothing
doubled; every run's history stays a legal sequence."""

from __future__ import annotations

import random

from epochledger import ConflictError, open_ledger
from epochledger.ledger.events import RunCheckpointed, RunFinished, RunStarted
from epochledger.ledger.run import decide, evolve
from tests.conftest import race

RUNS = [f"r{i:02d}" for i in range(12)]


def hammer(url: str, worker: int, go, results) -> None:
    rnd = random.Random(worker)
    landed_ckpt = conflicts = landed_finish = 0
    with open_ledger(url) as ledger:
        go.wait()
        for i in range(80):
            run = rnd.choice(RUNS)
            try:
                with ledger.batch() as b:
                    b.checkpoint(run, f"w{worker}", f"{worker}-{i}")
                landed_ckpt += len(b.recorded)
            except ConflictError:
                conflicts += 1
        go.wait()  # both writers finish their checkpoints before anyone finishes a run
        order = RUNS[:]
        rnd.shuffle(order)
        for run in order:
            try:
                with ledger.batch() as b:
                    b.finish(run)
                landed_finish += len(b.recorded)
            except ConflictError:
                conflicts += 1
    results.put((worker, landed_ckpt, landed_finish, conflicts))


def test_L5_two_processes_racing_on_the_same_runs(store_url: str) -> None:
    with open_ledger(store_url) as ledger:
        with ledger.batch() as b:
            for run in RUNS:
                b.queue(run)
                b.start(run)
    outcomes = race(hammer, store_url)
    print("race outcomes (worker, checkpoints, finishes, conflicts):", outcomes)
    ckpts = sum(o[1] for o in outcomes)
    finishes = sum(o[2] for o in outcomes)
    assert finishes == len(RUNS)  # each finish landed exactly once across both writers

    with open_ledger(store_url) as ledger:
        events = list(ledger.events())
        assert sum(isinstance(r.event, RunCheckpointed) for r in events) == ckpts
        assert sum(isinstance(r.event, RunFinished) for r in events) == len(RUNS)
        assert sum(isinstance(r.event, RunStarted) for r in events) == len(RUNS)
        for run in RUNS:
            state = None
            history = ledger.history(run)
            assert [r.version for r in history] == list(range(1, len(history) + 1))
            for rec in history:  # replaying each event through decide accepts it as is
                assert decide(rec.event, state) == [rec.event]
                state = evolve(state, rec.event)
            assert state is not None and state.status == "finished"
