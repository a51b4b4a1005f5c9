"""An exclusive role over HTTP (rule T7, docs/service.md "Exclusive roles"): a foreign
scheduler's epoch takes or keeps a role such as "admission" with `POST
/v1/roles/{role}/acquire` and reads who holds it with `GET /v1/roles/{role}`, against
real `epochledger serve` processes (tests/helpers/server.py).

The incident T7 answers: two live replicas both admitted the same runs. Here the
replicas are foreign drivers, two OS processes that speak only HTTP (no epochledger
import), each through a server of its own on one store (SQLite's file; PostgreSQL,
as the H6 tests do), each with a writer token bound to its own slot.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from epochledger import open_ledger
from epochledger.ledger.events import RoleGranted
from tests.helpers.server import served
from tests.helpers.tick_helpers import lines, wait_for
from tests.service.test_service_writes import ok, problem

ROLE = "admission"
BOOTED = "2026-12-02T09:00:00Z"


def post(base: str, path: str, body: dict[str, Any] | None = None, **kw: Any) -> httpx.Response:
    return httpx.post(f"{base}{path}", json=body if body is not None else {}, timeout=60, **kw)


def boot(base: str, process: str, epoch: str, **kw: Any) -> None:
    ok(post(base, f"/v1/processes/{process}/boot", {"booted_at": BOOTED, "host": "h1", "pid": 7, "epoch": epoch}, **kw))


def acquire(base: str, epoch: str, role: str = ROLE, **kw: Any) -> httpx.Response:
    return post(base, f"/v1/roles/{role}/acquire", {"epoch": epoch}, **kw)


def holder(base: str, role: str = ROLE, **kw: Any) -> dict[str, Any]:
    return ok(httpx.get(f"{base}/v1/roles/{role}", timeout=60, **kw))


def grants(url: str) -> list[RoleGranted]:
    with open_ledger(url, create=False) as lg:
        return [r.event for r in lg.events() if isinstance(r.event, RoleGranted)]


def head(url: str) -> int:
    with open_ledger(url, create=False) as lg:
        return lg._store.max_position()


@pytest.fixture
def base(store_url: str) -> Iterator[str]:
    open_ledger(store_url, init=True).close()
    with served(store_url) as url:
        yield url


def test_T7_H2_acquire_keep_refuse_and_pass_on_over_http(base: str, store_url: str) -> None:
    """The facade's rule, over HTTP: the first live epoch gets token 1 (`recorded`);
    asking again appends nothing (`already`, the same token); another live epoch is 409
    `role-held` naming the role, the holder and its token, nothing appended. The read
    says who holds it and whether that holder is live by O7: once its epoch stops, the
    read says `O2-stopped` while the grant still names it; its own late acquire is 409
    `stale-epoch`; the other epoch then takes the role with token 2, the grant naming
    the previous holder and the fact that ended it. Mutations caught: the route
    granting without the decider (two holders), the read judging liveness itself (a
    stopped holder read as live)."""
    boot(base, "driver-a", "ea")
    boot(base, "driver-b", "eb")
    assert holder(base) == {"role": ROLE, "grant": None, "live": None, "ended": None, "why": None}
    first = ok(acquire(base, "ea"))
    assert (first["recorded"], first["already"]) == (True, False)
    assert {k: first["grant"][k] for k in ("role", "epoch", "process", "token")} == {
        "role": ROLE,
        "epoch": "ea",
        "process": "driver-a",
        "token": 1,
    }
    at = head(store_url)
    again = ok(acquire(base, "ea"))
    assert (again["recorded"], again["already"], again["grant"]) == (False, True, first["grant"])
    refused = problem(acquire(base, "eb"), 409, "role-held")
    assert refused["fields"] == {
        "role": ROLE,
        "epoch": "eb",
        "holder_epoch": "ea",
        "holder_process": "driver-a",
        "token": 1,
    }
    assert "driver-a" in refused["detail"] and refused["error"] == "RoleHeld"
    assert head(store_url) == at  # neither the holder's retry nor the refusal appended anything
    read = holder(base)
    assert (read["grant"], read["live"], read["ended"]) == (first["grant"], True, None)

    ok(post(base, "/v1/epochs/ea/stop", {"reason": "redeploy"}))
    read = holder(base)
    assert (read["grant"]["epoch"], read["live"], read["ended"]) == ("ea", False, "O2-stopped")
    assert read["why"]
    at = head(store_url)
    stale = problem(acquire(base, "ea"), 409, "stale-epoch")
    assert "rule T7" in stale["detail"] and stale["fields"]["epoch"] == "ea"
    assert head(store_url) == at
    passed = ok(acquire(base, "eb"))
    assert (passed["recorded"], passed["grant"]["epoch"], passed["grant"]["token"]) == (True, "eb", 2)
    read = holder(base)
    assert (read["grant"]["process"], read["grant"]["token"], read["live"]) == ("driver-b", 2, True)
    last = grants(store_url)[-1]
    assert (last.token, last.previous_epoch, last.previous_token, last.previous_rule) == (2, "ea", 1, "O2-stopped")


def test_T7_H3_H2_retries_and_bad_input_append_nothing(base: str, store_url: str) -> None:
    """An Idempotency-Key answers a retried grant with its first outcome (replayed,
    `recorded` false), even after the role passed on. Bad input is a 422 naming what:
    a role that is not a name (in the path), an epoch no slot booted, a body without
    its epoch, an unknown field; nothing appended from any of them."""
    boot(base, "driver-a", "ea")
    key = {"Idempotency-Key": "admission-ea-1"}
    first = ok(acquire(base, "ea", headers=key))
    retried = acquire(base, "ea", headers=key)
    assert retried.headers["idempotency-replayed"] == "true"
    assert ok(retried)["grant"] == first["grant"] and ok(retried)["recorded"] is False
    at = head(store_url)
    bad_role = problem(acquire(base, "ea", role="two%20words"), 422, "invalid-input")
    assert "`$.role`" in bad_role["detail"]  # the event's own check names its field
    read = problem(httpx.get(f"{base}/v1/roles/two%20words", timeout=60), 422, "invalid-input")
    assert read["fields"]["where"] == "role"
    nobody = problem(acquire(base, "e-nobody-booted"), 422, "unknown-epoch")
    assert nobody["fields"]["where"] == "epoch"
    missing = problem(post(base, f"/v1/roles/{ROLE}/acquire", {}), 422, "invalid-input")
    assert "epoch" in json.dumps(missing["fields"])
    extra = problem(post(base, f"/v1/roles/{ROLE}/acquire", {"epoch": "ea", "ttl": 5}), 422, "invalid-input")
    assert "ttl" in json.dumps(extra["fields"])
    assert head(store_url) == at


def test_T7_H4_writers_acquire_for_their_own_slots_readers_only_read(sqlite_url: str) -> None:
    """The role table (ledger/access.py): `acquire_role` is a scheduler's write, bound
    to a writer's slots (an epoch of another slot, or one nobody booted, is 403 naming
    it, nothing appended); `role_holder` is a read every role has. Mutation caught:
    the route without its `auth.check_epoch` (a writer of one slot taking the role for
    another slot's epoch)."""
    with open_ledger(sqlite_url, init=True) as lg:
        mine = lg.issue_token("writer", name="a", slots=["driver-a"]).secret
        theirs = lg.issue_token("writer", name="b", slots=["driver-b"]).secret
        reader = lg.issue_token("reader", name="dash").secret

    def as_(token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    with served(sqlite_url) as base:
        boot(base, "driver-a", "ea", headers=as_(mine))
        boot(base, "driver-b", "eb", headers=as_(theirs))
        at = head(sqlite_url)
        for epoch, where in (("eb", "slot"), ("e-nobody-booted", "epoch")):
            refused = problem(acquire(base, epoch, headers=as_(mine)), 403, "forbidden")
            assert refused["fields"][where] in (epoch, "driver-b"), refused
        read_only = problem(acquire(base, "ea", headers=as_(reader)), 403, "forbidden")
        assert read_only["fields"]["op"] == "acquire_role"
        assert head(sqlite_url) == at
        assert ok(acquire(base, "ea", headers=as_(mine)))["grant"]["token"] == 1
        assert holder(base, headers=as_(reader))["grant"]["process"] == "driver-a"
        problem(httpx.get(f"{base}/v1/roles/{ROLE}", timeout=60), 401, "unauthorized")


# ------------------------------------------- two foreign drivers, two OS processes
# A driver in "any language": the standard library's HTTP client only. It boots its slot,
# then each tick asks for the role; while it holds it, it "admits" (a line to the sink,
# the system it drives, with the grant's fencing token).
DRIVER = r"""
import json, os, sys, time, urllib.error, urllib.request

base, token, slot, log, sink, stop = sys.argv[1:]

def post(path, body):
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
        headers={"content-type": "application/json", "authorization": "Bearer " + token})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)

def note(path, line):
    with open(path, "a") as f:
        f.write(json.dumps(line) + "\n")

booted_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
status, booted = post(f"/v1/processes/{slot}/boot", {"booted_at": booted_at, "host": "foreign-host", "pid": os.getpid()})
assert status == 200, booted
epoch = booted["epoch"]["epoch"]
note(log, {"booted": epoch, "pid": os.getpid()})
while not os.path.exists(stop):
    status, got = post("/v1/roles/admission/acquire", {"epoch": epoch})
    if status == 200:
        note(sink, {"slot": slot, "token": got["grant"]["token"]})
        note(log, {"held": got["grant"]["token"]})
    else:
        note(log, {"refused": got["type"].rsplit(":", 1)[1], "fields": got["fields"]})
    time.sleep(0.05)
post(f"/v1/epochs/{epoch}/stop", {})
"""


def test_T7_H6_two_foreign_drivers_over_http_one_admits_the_holder_sigkilled_passes_it_on(
    store_url: str, tmp_path: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    """Two drivers in two OS processes, each through its own server on one store, each
    with a writer token bound to its slot, ask for `admission` every tick: only the
    first admits, the other is refused `role-held` naming the first and token 1. The
    holder is SIGKILLed: silence is no fact of O7, so the role stays with it (the read
    still says live) until its supervisor records the exit over HTTP; then the
    survivor's next acquire takes the role with token 2, and the dead holder's epoch is
    refused `stale-epoch`. The driven system (the sink) sees the first's calls with
    token 1, then only the second's with token 2: never both, never a token going back.
    Mutations caught: a grant ignoring the holder's liveness (both admit), a token that
    restarts at 1, a dead epoch allowed to take the role back."""
    with open_ledger(store_url, init=True) as lg:
        token = {slot: lg.issue_token("writer", name=slot, slots=[slot]).secret for slot in ("driver-a", "driver-b")}
        supervisor = {"Authorization": f"Bearer {lg.issue_token('writer', name='supervisor').secret}"}
    sink, stop = tmp_path / "sink.ndjson", tmp_path / "stop"
    with served(store_url) as one, served(store_url) as two:

        def spawn(base: str, slot: str) -> Path:
            log = tmp_path / f"{slot}.ndjson"
            children.append(
                subprocess.Popen(
                    [sys.executable, "-c", DRIVER, base, token[slot], slot, str(log), str(sink), str(stop)]
                )
            )
            return log

        log_a = spawn(one, "driver-a")
        wait_for(log_a, lambda x: x.get("held") == 1)
        log_b = spawn(two, "driver-b")
        a = wait_for(log_a, lambda x: "booted" in x)
        refused = wait_for(log_b, lambda x: x.get("refused") == "role-held")
        assert refused["fields"] == {
            "role": ROLE,
            "epoch": wait_for(log_b, lambda x: "booted" in x)["booted"],
            "holder_epoch": a["booted"],
            "holder_process": "driver-a",
            "token": 1,
        }
        time.sleep(0.3)  # a few more ticks of both: the second still admits nothing
        assert {s["slot"] for s in lines(sink)} == {"driver-a"}

        killed = children[0]
        killed.send_signal(signal.SIGKILL)
        assert killed.wait(timeout=30) == -signal.SIGKILL
        time.sleep(0.3)  # silence is no fact of O7: the dead holder keeps the role
        assert {s["slot"] for s in lines(sink)} == {"driver-a"}
        read = holder(two, headers=supervisor)
        assert (read["grant"]["epoch"], read["grant"]["token"], read["live"]) == (a["booted"], 1, True)
        exited = {"observed_by": "supervisor:test", "signal": int(signal.SIGKILL), "evidence": "SIGKILL"}
        ok(post(one, f"/v1/processes/driver-a/epochs/{a['booted']}/exited", exited, headers=supervisor))
        wait_for(log_b, lambda x: x.get("held") == 2)
        wait_for(sink, lambda x: x["slot"] == "driver-b")
        stale = acquire(one, a["booted"], headers={"Authorization": f"Bearer {token['driver-a']}"})
        assert problem(stale, 409, "stale-epoch")["fields"]["epoch"] == a["booted"]
        stop.touch()
        assert children[1].wait(timeout=60) == 0

    calls = lines(sink)
    tokens = [c["token"] for c in calls]
    assert tokens == sorted(tokens) and {c["slot"]: c["token"] for c in calls} == {"driver-a": 1, "driver-b": 2}
    first_b = next(i for i, c in enumerate(calls) if c["slot"] == "driver-b")
    assert all(c["slot"] == "driver-b" for c in calls[first_b:])
    granted = grants(store_url)
    assert [(g.process, g.token) for g in granted] == [("driver-a", 1), ("driver-b", 2)]
    assert (granted[-1].previous_epoch, granted[-1].previous_rule) == (a["booted"], "O2-exited")
