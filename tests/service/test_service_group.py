"""The server's group commit (`Service.write`, epochledger/service/app.py): the writes
waiting for the ledger are decided in arrival order in one batch and committed in one
transaction, each request with its own outcome or its own typed error (rules H2, H3,
H6): a refused write is dropped alone, a lost race is decided again alone, a commit whose
outcome is lost is unknown to each write in it, naming that write's streams only.

The group is made deterministic by holding the ledger's turn (`Service.lock`, as a long
read holds it) while the writes queue, on a real store; the last test sends concurrent
requests to a real `serve` process."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, cast

import httpx
from litestar import Response

from epochledger import open_ledger
from epochledger.app import Batch
from epochledger.ledger.errors import CommitUnknown, IllegalTransition, InvalidInput, LedgerError
from epochledger.ledger.events import tag_of
from epochledger.service.app import Service
from epochledger.service.config import ServiceConfig
from epochledger.service.idempotency import written
from epochledger.service.writes import RunWritten
from tests.helpers.server import served
from tests.service.test_service_faults import _proxied
from tests.service.test_service_live import metric

Apply = Callable[[Batch], Callable[[bool], RunWritten]]


def run_write(act: Callable[[Batch], Any]) -> Apply:
    """A run's write as the routes make it (writes.run_write): the state, recorded, already."""

    def apply(b: Batch) -> Callable[[bool], RunWritten]:
        state = act(b)
        return lambda appended: RunWritten(run=state, recorded=appended, already=not appended)

    return apply


def grouped(service: Service, writes: list[Apply]) -> list[Any]:
    """Each write through the route's path (idempotency.written, no key), queued while the
    ledger's turn is held, then let go at once: one group commit. Answers or errors."""
    sizes: list[int] = []
    service.on_group = sizes.append

    async def main() -> list[Any]:
        service.lock.acquire()
        try:
            tasks = [asyncio.create_task(written(service, cast(Any, None), None, cast(Any, None), w)) for w in writes]
            while len(service._queue) < len(writes):  # every write waits for the writer thread
                await asyncio.sleep(0.005)
        finally:
            service.lock.release()
        return await asyncio.gather(*tasks, return_exceptions=True)

    out = asyncio.run(main())
    assert sizes == [len(writes)], sizes  # one group commit, every write in it
    return out


def body(answer: Any) -> RunWritten:
    assert isinstance(answer, Response), answer
    assert isinstance(answer.content, RunWritten)
    return answer.content


def test_H2_H3_a_group_commit_gives_each_write_its_own_outcome(store_url: str) -> None:
    """Six writes in one group: the good ones land in one transaction, each refused one
    gets its own typed error and leaves nothing, and a write decided after another in
    the same group sees it (a second queue of r1 is `already`)."""
    open_ledger(store_url, init=True).close()
    with open_ledger(store_url, create=False) as ledger:
        head = ledger.head()
    service = Service(ServiceConfig(store=store_url))

    def half_then_bad(b: Batch) -> Any:
        b.queue("r3")  # submitted, then the write is refused: r3 must not land
        raise InvalidInput("refused after a submit", where="test")

    try:
        out = grouped(
            service,
            [
                run_write(lambda b: b.queue("r1", workflow="nightly")),
                run_write(lambda b: b.start("ghost")),  # never queued: 409 illegal-transition
                run_write(lambda b: b.queue("r2")),
                run_write(lambda b: b.queue("r1", workflow="nightly")),  # the same write again
                run_write(half_then_bad),
                run_write(lambda b: b.queue("r4", labels=cast(Any, {"k": 7}))),  # bad input, by the facade
            ],
        )
    finally:
        service.close()
    first, ghost, second, again, half, bad = out
    assert (body(first).recorded, body(first).already) == (True, False)
    assert isinstance(ghost, IllegalTransition) and ghost.run == "ghost"
    assert body(second).recorded and body(second).run.run == "r2"
    assert (body(again).recorded, body(again).already) == (False, True)
    assert isinstance(half, InvalidInput) and half.where == "test"
    assert isinstance(bad, InvalidInput)
    with open_ledger(store_url, create=False) as ledger:
        landed = list(ledger.events(after=head))
        assert [(r.stream, tag_of(r.event)) for r in landed] == [("run:r1", "run.queued"), ("run:r2", "run.queued")]
        assert landed[1].position == landed[0].position + 1  # one transaction: nothing between them
        assert {r.run for r in ledger.runs()} == {"r1", "r2"}


def test_H6_a_race_lost_by_a_group_is_decided_again_write_by_write(store_url: str) -> None:
    """Another writer appends to r1 between the group's decision and its commit: the
    commit conflicts, and each write is made again alone, so the neighbours land and
    only r1's write is answered by what r1 now is."""
    open_ledger(store_url, init=True).close()
    service = Service(ServiceConfig(store=store_url))
    raced: list[bool] = []

    def racing(b: Batch) -> Any:
        state = b.queue("r1", workflow="ours")
        if not raced:  # once: the write made alone again meets the other writer's event
            raced.append(True)
            with open_ledger(store_url, create=False) as other:
                other.queue("r1", workflow="theirs")
        return state

    try:
        out = grouped(
            service, [run_write(racing), run_write(lambda b: b.queue("r5")), run_write(lambda b: b.queue("r6"))]
        )
    finally:
        service.close()
    mine, r5, r6 = out
    assert body(r5).recorded and body(r6).recorded
    assert isinstance(mine, LedgerError) or not body(mine).recorded, mine  # r1 was theirs first
    with open_ledger(store_url, create=False) as ledger:
        assert [tag_of(r.event) for r in ledger.history("r1")] == ["run.queued"]
        assert ledger.get_run("r1").workflow == "theirs"
        assert {r.run for r in ledger.runs()} == {"r1", "r5", "r6"}


def test_H3_a_lost_commit_of_a_group_is_unknown_to_each_write_naming_its_own_streams() -> None:
    """The connection is cut after PostgreSQL committed the group and the check cannot
    reach it: every write in it is 503 commit-unknown, each naming its own run's stream
    and versions only (never another request's), and all had landed."""
    proxy, url = _proxied()
    try:
        service = Service(ServiceConfig(store=url))
        try:

            def queue(run: str) -> Apply:
                return run_write(lambda b: b.queue(run))

            proxy.arm("after_commit", then_refuse=True)
            out = grouped(service, [queue("r1"), queue("r2"), queue("r3")])
        finally:
            proxy.forward()
            service.close()
        for i, lost in enumerate(out, start=1):
            assert isinstance(lost, CommitUnknown), lost
            assert lost.versions == {f"run:r{i}": (1, 1)}
            assert [a.stream for a in cast(Any, lost.appends)] == [f"run:r{i}"]
        with open_ledger(url, create=False) as ledger:
            assert {r.run for r in ledger.runs()} == {"r1", "r2", "r3"}  # they had landed
    finally:
        proxy.close()
        proxy.drop()  # type: ignore[attr-defined]


def test_H2_concurrent_requests_to_a_server_each_get_their_own_answer(sqlite_url: str) -> None:
    """Eight clients at once on a real server, each mixing writes that land, a retried
    write, and writes that are refused: every answer is the request's own, the log holds
    each landed write once and nothing of a refused one, and the server joined writes
    in its group commits (the metric of their sizes)."""
    open_ledger(sqlite_url, init=True).close()
    clients, each = 8, 15
    answers: dict[tuple[int, int], list[tuple[int, str]]] = {}

    def client(c: int, base: str) -> None:
        with httpx.Client(base_url=base, timeout=60) as http:
            for i in range(each):
                run = f"c{c}-{i}"
                got = [
                    http.post(f"/v1/runs/{run}/queue", json={"workflow": "nightly"}),
                    http.post(f"/v1/runs/{run}/queue", json={"workflow": "nightly"}),  # a retry
                    http.post(f"/v1/runs/ghost-{run}/finish", json={}),  # never queued
                    http.post(f"/v1/runs/{run}/queue", json={"labels": {"k": 7}}),  # bad input
                ]
                answers[c, i] = [
                    (r.status_code, "recorded" if r.json().get("recorded") else str(r.json().get("type", "already")))
                    for r in got
                ]

    with served(sqlite_url) as base:
        threads = [threading.Thread(target=client, args=(c, base)) for c in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        scrape = httpx.get(f"{base}/metrics", timeout=10).text
    assert len(answers) == clients * each
    for got in answers.values():
        assert got == [
            (200, "recorded"),
            (200, "already"),
            (409, "urn:epochledger:problem:illegal-transition"),
            (422, "urn:epochledger:problem:invalid-input"),
        ], got
    groups = metric("", "epochledger_write_group_size_count", "", scrape)
    alone = metric("", "epochledger_write_group_size_bucket", 'le="1.0"', scrape)
    assert groups is not None and alone is not None and alone < groups  # some commit joined several writes
    with open_ledger(sqlite_url, create=False) as ledger:
        runs = {r.run for r in ledger.runs()}
        assert runs == {f"c{c}-{i}" for c in range(clients) for i in range(each)}
        assert [tag_of(r.event) for r in ledger.events()].count("run.queued") == clients * each
