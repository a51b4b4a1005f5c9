"""The service's reads (rule H2, the read half; docs/service.md "Reads"), over HTTP
against a real `epochledger serve` process (tests/helpers/server.py): each route's happy path
against the facade's own answer or the CLI's bytes, its 404 and 422 problem documents,
and the listing's cursor pagination walked while another writer appends."""

from __future__ import annotations

import ast
import inspect
import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import msgspec
import pytest

from epochledger import ManualClock, open_ledger, reports
from epochledger.app import Ledger
from epochledger.cli import main
from epochledger.ledger.errors import StaleEpoch
from epochledger.ledger.events import RunTickFailed, Status
from epochledger.service import reads
from tests.helpers.server import served

T0 = datetime(2026, 9, 9, 14, 0, 0, tzinfo=UTC)
PROBLEM = "application/problem+json"
# One client for the module: httpx.get() makes a client (and its TLS context) per call,
# ~0.3 s each, which is the test's cost, not the server's.
HTTP = httpx.Client(timeout=30)


def build(lg: Ledger, clock: ManualClock) -> None:
    """A small history with one of each thing a read shows: labels and lineage (I2), a
    checkpoint and a resumable failure, a correction (C1), a fenced late report (F1),
    an orphan of a superseded epoch (O2), a run no slot can judge (O9), an open tick
    streak (T3), and some queued runs to page through."""
    lg.boot("w1", epoch="w1.e1", host="h", pid=11)
    lg.boot("w2", epoch="w2.e1", host="h", pid=12)
    clock.advance(1)
    lg.queue("parent", workflow="nightly", process="w1", labels={"team": "data"})
    lg.start("parent", epoch="w1.e1", process="w1")
    lg.checkpoint("parent", "extract", "ckpt/parent/1", epoch="w1.e1")
    clock.advance(1)
    lg.fail("parent", "TIMEOUT", resumable=True, epoch="w1.e1")
    lg.queue("child-a", process="w2", labels={"team": "data", "env": "prod"}, parent="parent")
    lg.queue("child-b", process="w2", labels={"team": "ml"}, parent="parent")
    lg.start("child-a", epoch="w2.e1", process="w2")
    lg.submit(RunTickFailed(at=clock.now(), run="child-a", tick="t1", step="admit", error_class="KeyError"))
    lg.queue("fixed", process="w1")
    lg.start("fixed", epoch="w1.e1", process="w1")
    lg.finish("fixed", epoch="w1.e1")
    lg.correct("fixed", Status.FAILED, code="BAD_OUTPUT", actor="alice", reason="empty export")
    lg.queue("late", process="w1")
    lg.start("late", epoch="w1.e1", process="w1")
    clock.advance(60)
    lg.boot("w1", epoch="w1.e2", host="h", pid=13)  # supersedes w1.e1: `late` is an orphan (O2)
    with pytest.raises(StaleEpoch):
        lg.finish("late", epoch="w1.e1")  # refused, kept as run.fenced evidence (F1)
    lg.queue("unjudged")
    lg.start("unjudged")  # neither epoch nor process: no slot can judge it (O9)
    for i in range(40):
        lg.queue(f"q-{i:03d}", process="w2" if i % 2 else "w1")


class Small(msgspec.Struct):
    url: str
    base: str


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Small]:
    url = f"sqlite:///{tmp_path_factory.mktemp('reads') / 'ledger.db'}"
    clock = ManualClock(T0, uptime=60.0)
    with open_ledger(url, clock=clock, init=True) as lg:
        build(lg, clock)
    with served(url) as base:
        yield Small(url, base)


def get(small: Small, path: str, **params: Any) -> httpx.Response:
    return HTTP.get(small.base + path, params=params, timeout=30)


def ok(small: Small, path: str, **params: Any) -> Any:
    r = get(small, path, **params)
    assert r.status_code == 200, r.text
    return r.json()


def facade(small: Small) -> Ledger:
    return open_ledger(small.url, create=False)


def plain(value: Any) -> Any:
    """A facade result as the JSON the service sends."""
    return msgspec.json.decode(msgspec.json.encode(value))


def walk(base: str, **params: Any) -> tuple[list[str], int]:
    """Every page of GET /v1/runs: the run ids in the order served, and the pages read."""
    seen: list[str] = []
    after: str | None = None
    pages = 0
    while True:
        query = {**params, **({"after": after} if after is not None else {})}
        r = HTTP.get(base + "/v1/runs", params=query, timeout=30)
        assert r.status_code == 200, r.text
        page = r.json()
        pages += 1
        seen += [x["run"] for x in page["runs"]]
        after = page["next"]
        if after is None:
            return seen, pages


# ------------------------------------------------------------------ a run
def test_H2_a_run_is_its_view_with_predicates_children_and_tick_health(small: Small) -> None:
    with facade(small) as lg:
        expected = plain(lg.run_view("parent"))
        child = plain(lg.run_view("child-a"))
    got = ok(small, "/v1/runs/parent")
    assert got == expected
    assert got["children"] == ["child-a", "child-b"]  # rule I2, from the parent column
    assert got["state"]["checkpoint"] == {"node": "extract", "ref": "ckpt/parent/1"}
    assert got["state"]["labels"] == {"team": "data"} and got["state"]["attempt"] == 1
    assert got["code_shown"] == "TIMEOUT"
    assert got["predicates"]["can_auto_resume"] and not got["predicates"]["is_final_failure"]
    a = ok(small, "/v1/runs/child-a")
    assert a == child and a["state"]["parent"] == "parent" and a["children"] == []
    assert a["tick_health"]["streak"]["step"] == "admit"


def test_H2_an_unknown_run_is_a_404_problem_and_a_bad_id_a_422(small: Small) -> None:
    for path in ("/v1/runs/nobody", "/v1/runs/nobody/history"):
        r = get(small, path)
        assert r.status_code == 404 and r.headers["content-type"].startswith(PROBLEM)
        doc = r.json()
        assert doc["type"] == "urn:epochledger:problem:run-not-found" and doc["fields"]["run"] == "nobody"
    r = get(small, "/v1/runs/" + "x" * 201)  # longer than a run id may be (rule L4)
    assert r.status_code == 422 and r.json()["fields"]["where"] == "run"


def test_H2_history_names_actor_reason_code_and_marks_corrections_and_fenced_reports(small: Small) -> None:
    with facade(small) as lg:
        assert ok(small, "/v1/runs/fixed/history") == plain(lg.history_of("fixed"))
    fixed = ok(small, "/v1/runs/fixed/history")
    correction = fixed[-1]
    assert correction["label"] == "CORRECTION finished -> failed" and correction["from_status"] == "finished"
    assert (correction["event"]["actor"], correction["event"]["reason"], correction["event"]["code"]) == (
        "alice",
        "empty export",
        "BAD_OUTPUT",
    )
    late = ok(small, "/v1/runs/late/history")
    assert [h["label"] for h in late] == ["run.queued", "run.started", "FENCED run.finished -> finished"]
    assert late[-1]["event"]["epoch"] == "w1.e1"


# ---------------------------------------------------------------- listings
FILTERS: list[dict[str, Any]] = [
    {},
    {"status": ["queued"]},
    {"status": ["running", "failed"]},
    {"predicate": ["can_auto_resume"]},
    {"code": ["TIMEOUT", "BAD_OUTPUT"]},
    {"label": ["team=data"]},
    {"label": ["team=data", "env=prod"]},
    {"process": ["w2"]},
    {"parent": ["parent"]},
    {"status": ["queued"], "process": ["w1"]},
]
CLI_FLAG = {"status": "--status", "predicate": "--where", "code": "--code", "label": "--label", "process": "--process"}


@pytest.mark.parametrize("filters", FILTERS, ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()) or "all")
def test_H2_the_listing_filters_and_pages_as_the_cli_lists(
    small: Small, filters: dict[str, Any], capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """Walked page by page, the HTTP listing is `runs --json` with the same filters,
    record for record (the parent filter: `--parent`)."""
    args = [x for k, vs in filters.items() for v in vs for x in ((CLI_FLAG.get(k, "--" + k)), v)]
    assert main(["--store", small.url, "runs", *args, "--json"]) == 0
    cli = msgspec.json.decode(capsysbinary.readouterr().out)
    served_runs: list[Any] = []
    after = None
    while True:
        page = ok(small, "/v1/runs", limit=7, **filters, **({"after": after} if after else {}))
        assert len(page["runs"]) <= 7 and page["lag"] == 0
        served_runs += page["runs"]
        if (after := page["next"]) is None:
            break
        assert len(page["runs"]) == 7  # a page short of its size is the last one
    assert served_runs == cli
    assert cli or filters  # the unfiltered listing is not empty: the comparison compared something


def test_H2_the_cli_pages_with_the_same_cursor(small: Small, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    """`runs --limit N --after CURSOR` is a skin over the same call: its pages are the
    service's, and the cursor it prints is the one the service hands out."""
    page = ok(small, "/v1/runs", limit=5)
    assert main(["--store", small.url, "runs", "--limit", "5", "--json"]) == 0
    captured = capsysbinary.readouterr()
    assert [r["run"] for r in msgspec.json.decode(captured.out)] == [r["run"] for r in page["runs"]]
    assert f"next page: --after {page['next']}".encode() in captured.err
    second = ok(small, "/v1/runs", limit=5, after=page["next"])
    assert main(["--store", small.url, "runs", "--limit", "5", "--after", page["next"], "--json"]) == 0
    assert msgspec.json.decode(capsysbinary.readouterr().out) == second["runs"]


def test_H2_a_page_is_a_key_range_of_the_runs_view_in_sql(small: Small) -> None:
    """Fast at a million runs: the page is read by the primary key's range with a LIMIT
    (SQLite's plan: a SEARCH on the key's index, no sort, no scan of the table), never
    a Python slice of every run. Mutation caught: dropping `after`/`limit` from the
    SQL (rows_query) turns the plan into a SCAN or reads the whole view."""
    from epochledger.projections import tables

    sql, params = tables.rows_query(
        _SqliteQuote(), "view_runs", [], [("status", ("queued",)), ("deleted", 0)], after="q-010", limit=8
    )
    assert params[-2:] == ["q-010", 8] and sql.endswith("ORDER BY k LIMIT ?")
    conn = sqlite3.connect(small.url[len("sqlite:///") :])
    try:
        plan = " ".join(r[-1] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, params))
        rows = conn.execute(sql, params).fetchall()
    finally:
        conn.close()
    assert "SEARCH" in plan and "k>?" in plan.replace(" ", "") and "TEMP B-TREE" not in plan, plan
    assert [r[0] for r in rows] == [f"q-{i:03d}" for i in range(11, 19)]


class _SqliteQuote:
    def quote(self, name: str) -> str:
        return f'"{name}"'


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": reads.PAGE_MAX + 1}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"status": "sleeping"}, "status"),
        ({"predicate": "is_lucky"}, "predicate"),
        ({"label": "team"}, "label"),
        ({"after": "not-a-cursor"}, "after"),
        ({"after": reports.encode_cursor("q-001")[:-2] + "zz"}, "after"),  # a hand-edited cursor
    ],
)
def test_H2_a_bad_listing_parameter_is_a_422_naming_it(small: Small, query: dict[str, Any], named: str) -> None:
    r = get(small, "/v1/runs", **query)
    assert r.status_code == 422 and r.headers["content-type"].startswith(PROBLEM), r.text
    fields = r.json()["fields"]
    assert named in (fields.get("where"), *(e.get("key") for e in fields.get("errors", ())))


def test_H2_a_cursor_is_opaque_and_only_its_own_spelling_passes() -> None:
    c = reports.encode_cursor("run/with:odd=chars")
    assert "run/with" not in c and reports.decode_cursor(c) == "run/with:odd=chars"
    for forged in (c + "A", c + "=", "cnVuOg", "", "!!"):
        with pytest.raises(Exception, match="not a cursor"):
            reports.decode_cursor(forged)


def _pages_under_appends(url: str, base: str) -> None:
    """300 runs listed in pages of 23 while another writer appends 150 runs whose keys
    fall between, before and after theirs: every run present throughout is served
    exactly once, in strictly increasing key order, with no duplicate."""
    with open_ledger(url) as lg:
        with lg.batch() as b:
            for i in range(300):
                b.queue(f"p-{i:04d}")
    stop = threading.Event()
    appended: list[str] = []

    def append() -> None:
        with open_ledger(url) as lg:
            for i in range(150):
                if stop.is_set():
                    return
                run = f"p-{(i * 2) % 300:04d}-new" if i % 3 else f"a-{i:04d}" if i % 2 else f"z-{i:04d}"
                lg.queue(run)
                appended.append(run)
                time.sleep(0.002)

    writer = threading.Thread(target=append)
    writer.start()
    try:
        seen, pages = walk(base, limit=23)
    finally:
        stop.set()
        writer.join(30)
    assert pages >= 300 // 23 and appended  # the walk and the appends overlapped
    assert len(seen) == len(set(seen)), "a run served twice"
    assert seen == sorted(seen), "the pages are not in key order"
    assert {f"p-{i:04d}" for i in range(300)} <= set(seen), "a run present throughout was skipped"


def test_H2_pagination_has_no_gap_and_no_duplicate_under_concurrent_appends_sqlite(small: Small) -> None:
    """On the module's server (its other runs sort apart from these: the walk is
    checked on the runs this test writes)."""
    _pages_under_appends(small.url, small.base)


def test_H2_pagination_has_no_gap_and_no_duplicate_under_concurrent_appends_postgresql(pg_url: str) -> None:
    open_ledger(pg_url, init=True).close()
    with served(pg_url) as base:
        _pages_under_appends(pg_url, base)
        r = HTTP.get(base + "/v1/runs/p-0007", timeout=30)  # a run, and its 404, on PostgreSQL too
        assert r.status_code == 200 and r.json()["state"]["status"] == "queued"
        assert HTTP.get(base + "/v1/runs/nobody", timeout=30).status_code == 404


# ------------------------------------------------- slots, orphans, the tick
def test_H2_epochs_carry_their_liveness_facts(small: Small) -> None:
    with facade(small) as lg:
        assert ok(small, "/v1/epochs") == plain(lg.epoch_liveness())
    by_epoch = {e["epoch"]["epoch"]: e for e in ok(small, "/v1/epochs")}
    assert by_epoch["w1.e2"]["live"] and by_epoch["w1.e2"]["ended"] is None
    old = by_epoch["w1.e1"]
    assert not old["live"] and old["ended"] and "w1.e2" in old["why"]
    live = ok(small, "/v1/epochs", live="true", process="w1")
    assert [e["epoch"]["epoch"] for e in live] == ["w1.e2"]
    r = get(small, "/v1/epochs", live="perhaps")
    assert r.status_code == 422 and r.json()["fields"]["errors"][0]["key"] == "live"


def test_H2_orphans_come_with_their_evidence_and_unjudged_runs_are_listed(small: Small) -> None:
    with facade(small) as lg:
        expected = plain(lg.orphaned())
    got = ok(small, "/v1/orphans")
    assert got == expected
    by_run = {o["state"]["run"]: o for o in got}
    assert set(by_run) == {"late", "unjudged"}
    assert by_run["late"]["rule"] == by_run["late"]["verdict"]["rule"] and by_run["late"]["unjudged"] is None
    assert by_run["late"]["verdict"]["superseded_by"] == "w1.e2" and "w1.e2" in by_run["late"]["why"]
    assert by_run["unjudged"]["rule"].startswith("O9") and by_run["unjudged"]["verdict"] is None
    assert ok(small, "/v1/orphans", label="team=nobody") == []


def test_H2_tick_health_and_streaking_runs(small: Small) -> None:
    health = ok(small, "/v1/tick-health")
    assert [s["run"] for s in health["open_streaks"]] == ["child-a"] and health["dead_letters"] == 0
    streaking = ok(small, "/v1/streaking")
    assert [s["state"]["run"] for s in streaking["runs"]] == ["child-a"]
    assert streaking["runs"][0]["streak"]["error_class"] == "KeyError"
    assert ok(small, "/v1/streaking", process="w1")["runs"] == []


# ---------------------------------------------------------------- forensics
def test_H2_replay_is_the_cli_replay_byte_for_byte(small: Small, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    """The same prefix, the same bytes and state hash over HTTP as `replay --json`
    prints (rule R1), at a position and at an instant, in either cut."""
    for http, cli in (
        ({"position": 12}, ["--position", "12"]),
        ({"at": "2026-09-09T14:00:02Z"}, ["--at", "2026-09-09T14:00:02Z"]),
        (
            {"at": "2026-09-09T16:00:02+02:00", "by": "event-time"},
            ["--at", "2026-09-09T16:00:02+02:00", "--by", "event-time"],
        ),
        ({}, []),
    ):
        assert main(["--store", small.url, "replay", *cli, "--json"]) == 0
        expected = capsysbinary.readouterr().out
        r = get(small, "/v1/replay", **http)
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
        assert r.content + b"\n" == expected
        assert len(r.json()["state_hash"]) == 64
    assert ok(small, "/v1/replay", position=12)["state"]["position"] == 12


@pytest.mark.parametrize(
    ("path", "query", "named"),
    [
        ("/v1/replay", {"at": "2026-09-09T14:00:00"}, "at"),  # no time zone
        ("/v1/replay", {"at": "yesterday"}, "at"),
        ("/v1/replay", {"position": -1}, "position"),
        ("/v1/replay", {"by": "wall-clock"}, "by"),
        ("/v1/whatif", {"policy": "flat-age:soon"}, "policy"),
        ("/v1/whatif", {}, "policy"),
        ("/v1/whatif", {"policy": "clamp", "at": "9999-01-01T00:00:00Z"}, "at"),
        ("/v1/verify", {"digest": '{"position": 1}'}, "digest"),
        ("/v1/audit/reports/failure_codes", {"as_of": "noon"}, "as_of"),
    ],
)
def test_H2_a_bad_forensics_parameter_is_a_422_naming_it(
    small: Small, path: str, query: dict[str, Any], named: str
) -> None:
    r = get(small, path, **query)
    assert r.status_code == 422 and r.headers["content-type"].startswith(PROBLEM), r.text
    doc = r.json()
    named_by = (doc["fields"].get("where"), *(e.get("key") for e in doc["fields"].get("errors", ())))
    assert named in named_by or f"parameter '{named}'" in doc["detail"], doc  # a missing one: named in the detail


def test_H2_whatif_is_the_facade_s_replay_under_the_policy(small: Small) -> None:
    with facade(small) as lg:
        expected = plain(lg.whatif("flat-age:30s", name="flat-age:30s"))
    got = ok(small, "/v1/whatif", policy="flat-age:30s")
    assert got == expected and got["policy"] == "flat-age:30s" and got["sweeps"] >= 0


def test_H2_digest_and_verify_and_a_broken_chain_is_a_report_not_a_500(
    small: Small, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """The digest is the chain's head (`chain --json`), verify checks the log against
    it; an event altered in the store makes verify's report name it (200, not a
    server error) and the digest refused. The event's bytes are put back after."""
    from epochledger.ledger import codec
    from tests.ledger.test_chain import DB

    digest = ok(small, "/v1/digest")
    assert main(["--store", small.url, "chain", "--json"]) == 0
    assert digest["hash"] == msgspec.json.decode(capsysbinary.readouterr().out)["hash"]
    report = ok(small, "/v1/verify", digest=msgspec.json.encode(digest).decode())
    assert report["chain"]["failure"] is None and all(v["difference"] is None for v in report["views"])
    assert [d["position"] for d in report["chain"]["digests"]] == [digest["position"]]
    db = DB(small.url)
    at = 5
    original = db.row(at)[3]
    forged = codec.encode(msgspec.structs.replace(codec.decode(original), at=T0.replace(year=2030)))
    db.sql("UPDATE {events} SET state=? WHERE {pos}=?", forged, at)
    try:
        broken = get(small, "/v1/verify")
        assert broken.status_code == 200, broken.text  # the report says what is wrong; it is no server error
        failure = broken.json()["chain"]["failure"]
        assert (failure["kind"], failure["position"]) == ("altered", at)
        refused = get(small, "/v1/digest")  # no digest of a tampered log
        assert refused.json()["type"] == "urn:epochledger:problem:chain-broken"
    finally:
        db.sql("UPDATE {events} SET state=? WHERE {pos}=?", original, at)
    assert ok(small, "/v1/verify")["chain"]["failure"] is None


# -------------------------------------------------------------------- audit
def test_H2_audit_reports_and_read_only_sql(small: Small, tmp_path_factory: pytest.TempPathFactory) -> None:
    with facade(small) as lg:
        lg.audit_sync(reports.audit_path(small.url))
    report = ok(small, "/v1/audit/reports/failure_codes", as_of="2026-09-10T00:00:00Z")
    expected = reports.audit_report(small.url, "failure_codes", as_of=datetime(2026, 9, 10, tzinfo=UTC))
    assert report == plain(reports.AuditTable.of(expected)) and report["columns"]
    counted = ok(small, "/v1/audit/query", sql="SELECT count(*) AS n FROM events")
    assert counted == {"columns": ["n"], "rows": [[len(list(open_ledger(small.url, create=False).events()))]]}
    r = get(small, "/v1/audit/query", sql="DROP TABLE events")
    assert r.status_code == 422 and r.json()["type"] == "urn:epochledger:problem:query-refused"
    r = get(small, "/v1/audit/query", sql="SELECT count(*) FROM range(100000000000) a, range(1000000) b", timeout=0.2)
    assert r.status_code == 422 and r.json()["type"] == "urn:epochledger:problem:query-interrupted"
    assert get(small, "/v1/audit/reports/no_such_report").status_code == 422


# ------------------------------------------------------------- the skin itself
def test_H2_every_read_route_is_one_facade_call_named_by_its_op() -> None:
    """Each route's `op` is the facade method (or the audit file's facade function) it
    calls, and the handler calls nothing else of the ledger (rule H1: parse, one call,
    encode); the role table of rule H4 keys on these names."""
    from epochledger.app import Ledger as Facade

    ops = []
    for route in reads.ROUTES:
        op = route.opt["op"]
        ops.append(op)
        tree = ast.parse(inspect.getsource(route.fn))
        calls = {
            n.func.attr
            for n in ast.walk(tree)
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and isinstance(n.func.value, ast.Name)
            and n.func.value.id in ("ledger", "reports")
        }
        facade_calls = {c for c in calls if hasattr(Facade, c) or c in ("audit_report", "audit_query")}
        assert facade_calls == {op}, (route.paths, calls)
        assert route.sync_to_thread and route.http_methods == {"GET"}
    assert len(ops) == len(set(ops))


def test_H2_a_filter_without_a_column_reads_a_bounded_scan_per_page(
    small: Small, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A label filter keeps few runs: a page reads at most engine.PAGE_SCAN rows, then
    ends short with the cursor of the last row read (rule H8: a request's cost is
    bounded at any fleet size); walking on still lists exactly the runs the unpaged
    listing has. Mutation caught: a page that reads until it is full (no bound) has
    no short page with a cursor; a cursor at the last kept run instead of the last
    read row walks the same rows again forever."""
    from epochledger.projections import engine

    monkeypatch.setattr(engine, "PAGE_SCAN", 6)
    with facade(small) as lg:
        wanted = [r.run for r in lg.list_runs(labels=[("team", "ml")]).runs]
        got, short, after = [], 0, None
        for _ in range(200):
            page = lg.list_runs(labels=[("team", "ml")], limit=2, after=after)
            got += [r.run for r in page.runs]
            short += len(page.runs) < 2 and page.next is not None
            if (after := page.next) is None:
                break
    assert got == wanted == ["child-b"] and short > 0


def test_H2_the_cli_refuses_paging_what_is_not_a_listing(small: Small, capsys: pytest.CaptureFixture[str]) -> None:
    """`--limit`, `--after` and `--parent` page or filter a listing; `--orphaned` and
    `--streaking` are other reports, so the flags are refused (exit 3, naming the
    command), never silently ignored; a cursor needs its page size, a bad cursor is
    named, and a page holds at least one run."""
    for args, named in (
        (["--orphaned", "--limit", "5"], "runs"),
        (["--streaking", "--parent", "parent"], "runs"),
        (["--orphaned", "--process", "w1"], "runs"),
        (["--after", reports.encode_cursor("q-001")], "limit"),
        (["--limit", "5", "--after", "forged"], "after"),
        (["--limit", "0"], "limit"),
    ):
        assert main(["--store", small.url, "runs", *args]) == 3, args
        assert f"{named}:" in capsys.readouterr().err, args


def test_H2_a_read_only_copy_pages_as_the_live_ledger(
    small: Small, tmp_path: Any, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """A backup on a read-only mount folds the view in memory (nothing can be written),
    then cuts the same pages: the same runs, the same cursors, for the column filters
    too (the parent, a slot), as `runs --limit --after` on the live ledger."""
    from pathlib import Path

    from tests.conftest import read_only_backup

    with facade(small) as lg:
        lg.queue("after-the-view", parent="parent", process="w2")  # in the log, not yet in the stored view
    live = Path(small.url[len("sqlite:///") :])
    with read_only_backup(live, tmp_path / "backup") as backup:
        for filters in ([], ["--parent", "parent"], ["--process", "w2", "--status", "queued"]):
            pages: dict[str, list[tuple[list[str], str]]] = {}
            for store in (small.url, f"sqlite:///{backup}"):
                after: list[str] = []
                walked = pages.setdefault(store, [])
                while True:
                    assert main(["--store", store, "runs", *filters, "--limit", "97", *after, "--json"]) == 0
                    out = capsysbinary.readouterr()
                    cursor = out.err.decode().rpartition("next page: --after ")[2].strip()
                    walked.append(([r["run"] for r in msgspec.json.decode(out.out)], cursor))
                    if not cursor:
                        break
                    after = ["--after", cursor]
            assert pages[small.url] == pages[f"sqlite:///{backup}"], filters
            assert "after-the-view" in {r for runs, _ in pages[small.url] for r in runs}  # it matches every filter
