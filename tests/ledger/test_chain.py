"""Tamper evidence (rule S1): the hash chain over the log, digests, the upgrade.

Every attack is made on the database directly, as someone with write access to it
would: sqlite3 on the file, psycopg as the owner role on PostgreSQL (which must first
disable the append-only trigger, in the same transaction, as the documented migration
does). Each runs on both stores (`store_url`). Before the chain, `verify` compared views
with a replay of the log, so it passed on every one of these: an edit made before the
first build, a forged well-formed append, a row moved to another stream, an edited
payload (a run.finished saying `failed`), a reordering, a truncation.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

import msgspec
import pytest

from epochledger import ManualClock, open_ledger
from epochledger.app import Ledger
from epochledger.cli import main
from epochledger.ledger import codec
from epochledger.ledger.errors import ChainBroken, ConflictError
from epochledger.ledger.events import RunFinished, Status, tag_of
from epochledger.ledger.store import Append, open_store
from epochledger.ledger.store.chain import CHAIN_TABLE, links, pack, unpack
from epochledger.projections import engine, runs
from epochledger.replay import verify as verify_mod
from tests.conftest import T0
from tests.helpers.engine_helpers import tamper_view


# ------------------------------------------------------------------ the attacker
class DB:
    """Direct access to one store's tables, as their owner."""

    def __init__(self, url: str):
        self.url = url
        self.pg = url.startswith("postgresql://")
        if self.pg:
            schema = parse_qs(urlsplit(url).query)["schema"][0]
            self.events, self.chain, self.pos = (
                f'"{schema}".epochledger_events',
                f'"{schema}".{CHAIN_TABLE}',
                "notification_id",
            )
        else:
            self.events, self.chain, self.pos = "epochledger_events", CHAIN_TABLE, "rowid"

    @contextmanager
    def tx(self) -> Iterator[Any]:
        """One transaction; on PostgreSQL with both tables' append-only triggers off."""
        if self.pg:
            import psycopg

            with psycopg.connect(self.url.split("?", 1)[0]) as conn:
                for table in (self.events, self.chain):
                    conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER epochledger_append_only")
                yield _Qmark(conn)
                for table in (self.events, self.chain):
                    conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER epochledger_append_only")
            return
        conn = sqlite3.connect(self.url[len("sqlite:///") :])
        try:
            with conn:
                yield _Qmark(conn)
        finally:
            conn.close()

    def sql(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        with self.tx() as c:
            return c.execute(statement.format(events=self.events, chain=self.chain, pos=self.pos), params)

    def drop_chain(self) -> None:
        """Back to a store made before the chain (DROP is not refused by the trigger)."""
        with self.tx() as c:
            c.execute(f"DELETE FROM {self.chain}")
        if self.pg:
            import psycopg

            with psycopg.connect(self.url.split("?", 1)[0]) as conn:
                conn.execute(f"DROP TABLE {self.chain}")
        else:
            self.sql("DROP TABLE {chain}")

    def row(self, position: int) -> tuple[str, int, str, bytes]:
        return self.sql("SELECT originator_id, originator_version, topic, state FROM {events} WHERE {pos}=?", position)[
            0
        ]


class _Qmark:
    def __init__(self, conn: Any):
        self.conn = conn
        self.pg = not isinstance(conn, sqlite3.Connection)

    def execute(self, statement: str, params: Any = ()) -> list[tuple[Any, ...]]:
        cur = self.conn.execute(statement.replace("?", "%s") if self.pg else statement, params)
        return list(cur.fetchall()) if cur.description else []


def history(lg: Ledger) -> dict[str, int]:
    """A small fleet: runs a (finished), b (running), c (failed_resumable); returns the
    position of a's run.finished."""
    lg.boot("w1", epoch="e1")
    for run in ("a", "b", "c"):
        lg.queue(run, workflow="nightly", process="w1")
        lg.start(run, epoch="e1", process="w1")
        lg.clock.advance(60)  # type: ignore[attr-defined]
    lg.checkpoint("b", "extract", "ckpt/b/1", epoch="e1")
    finished = lg.finish("a", epoch="e1")
    lg.fail("c", "TIMEOUT", resumable=True, epoch="e1")
    lg.queue("d", workflow="hourly")
    del finished
    return {"a_finished": next(r.position for r in lg._store.read_stream("run:a") if tag_of(r.event) == "run.finished")}


def verify_json(url: str, capsys: pytest.CaptureFixture[str], *digests: str) -> tuple[int, dict[str, Any]]:
    code = main(["--store", url, "verify", "--json", *[a for d in digests for a in ("--digest", d)]])
    return code, json.loads(capsys.readouterr().out)


@pytest.fixture
def lg(store_url: str, clock: ManualClock) -> Iterator[Ledger]:
    with open_ledger(store_url, clock=clock) as ledger:
        yield ledger


# ------------------------------------------------------------------- the attacks
def test_S1_an_untouched_log_verifies_every_event_linked_in_log_order(store_url, lg, capsys) -> None:
    """Mutation caught: PostgresStore._insert not calling the chain's hook."""
    history(lg)
    code, out = verify_json(store_url, capsys)
    assert code == 0 and out["chain"]["failure"] is None
    assert out["chain"]["links"] == out["chain"]["events"] == lg._store.max_position() == 11
    stored = [
        e
        for row in DB(store_url).sql("SELECT position, hash, links FROM {chain} ORDER BY position")
        for e in unpack(*row)
    ]
    raw = [r for chunk in lg._store.read_raw() for r in chunk]
    topics = [DB(store_url).row(r[0])[2] for r in raw]
    expected = links(bytes(32), [(p, s, v, t, b) for (p, s, v, b), t in zip(raw, topics, strict=True)])
    assert [(p, bytes(h)) for p, h in stored] == expected and out["chain"]["hash"] == expected[-1][1].hex()


def test_S1_an_edited_payload_made_before_the_first_build_is_named(store_url, lg, capsys) -> None:
    """The run.finished of run a is rewritten to say `failed` before any view was ever
    built: the views' check has nothing to compare (the runs view "not built"), and a
    build would show a as failed. The chain names the event.
    Mutation caught: `event_link` not hashing the state (the test then exits 0)."""
    at = history(lg)["a_finished"]
    db = DB(store_url)
    event = codec.decode(db.row(at)[3])
    forged = codec.encode(msgspec.structs.replace(event, status=Status.FAILED))
    db.sql("UPDATE {events} SET state=? WHERE {pos}=?", forged, at)
    code, out = verify_json(store_url, capsys)
    assert code == 12
    # the views' check alone saw nothing: the runs view was never built, and the one a
    # write builds (hosts, for the fence's host facts, rule O7) holds no run events
    views = {v["view"]: v for v in out["views"]}
    assert not views["runs"]["built"] and all(v["difference"] is None for v in views.values())
    f = out["chain"]["failure"]
    assert (f["kind"], f["position"], f["stream"], f["version"]) == ("altered", at, "run:a", 3)
    # a build now shows the forged status: the payload is trusted by every view
    assert lg.get_run("a").status == Status.FAILED


def test_S1_an_edited_payload_with_views_rebuilt_over_it_still_fails_with_12_not_10(store_url, lg, capsys) -> None:
    """An edit, then a rebuild so that views equal the edited log: the views' check
    passes; the chain does not. And with a view edited too, 12 wins over 10."""
    at = history(lg)["a_finished"]
    db = DB(store_url)
    forged = codec.encode(msgspec.structs.replace(codec.decode(db.row(at)[3]), status=Status.FAILED))
    db.sql("UPDATE {events} SET state=? WHERE {pos}=?", forged, at)
    assert main(["--store", store_url, "rebuild"]) == 0
    capsys.readouterr()
    code, out = verify_json(store_url, capsys)
    assert code == 12 and all(v["difference"] is None for v in out["views"])
    tamper_view(store_url, "view_runs", "b", "status", "finished")  # now a view differs too
    assert main(["--store", store_url, "verify"]) == 12
    assert "runs: DIFFERS" in capsys.readouterr().out


def test_S1_a_forged_well_formed_append_is_named(store_url, lg, capsys) -> None:
    """A well-formed run.finished for the running run b, inserted at its next version
    around the ledger: every view applies it (b shows finished). The chain has no link
    for it. At the tail: "unchained"; once a real append follows: "inserted".
    Mutation caught: a walk that skips events without a link."""
    history(lg)
    db = DB(store_url)
    version = lg._store.stream_version("run:b") + 1
    forged = RunFinished(at=T0, run="b", status=Status.FINISHED, epoch="e1", actor="worker")
    db.sql(
        "INSERT INTO {events} (originator_id, originator_version, topic, state) VALUES (?, ?, ?, ?)",
        "run:b",
        version,
        "run.finished",
        codec.encode(forged),
    )
    head = lg._store.max_position()
    assert lg.get_run("b").status == Status.FINISHED  # the views believe it
    code, out = verify_json(store_url, capsys)
    f = out["chain"]["failure"]
    assert code == 12 and (f["kind"], f["position"], f["stream"], f["version"]) == ("unchained", head, "run:b", version)
    lg.queue("e")  # a real append after it: the forged row is now inside the chain
    code, out = verify_json(store_url, capsys)
    assert code == 12 and (out["chain"]["failure"]["kind"], out["chain"]["failure"]["position"]) == ("inserted", head)


def test_S1_a_row_moved_to_another_stream_is_named(store_url, lg, capsys) -> None:
    """b's checkpoint moved to run x (same bytes, another stream): a replay would fold a
    run x out of it. Mutation caught: `event_link` not hashing the stream."""
    history(lg)
    db = DB(store_url)
    at = next(r.position for r in lg._store.read_stream("run:b") if tag_of(r.event) == "run.checkpointed")
    db.sql("UPDATE {events} SET originator_id='run:x' WHERE {pos}=?", at)  # same version, same bytes
    code, out = verify_json(store_url, capsys)
    f = out["chain"]["failure"]
    assert code == 12 and (f["kind"], f["position"], f["stream"], f["version"]) == ("altered", at, "run:x", 3)


def test_S1_two_rows_swapped_are_named_at_the_first(store_url, lg, capsys) -> None:
    """Two events exchange positions (each row keeps its bytes and stream): the log
    order, and so every replay, changes. Mutation caught: `event_link` not hashing the
    position (the swap of two rows of one stream is then caught only by luck)."""
    history(lg)
    db = DB(store_url)
    a = next(r.position for r in lg._store.read_stream("run:a") if r.version == 1)
    b = next(r.position for r in lg._store.read_stream("run:b") if r.version == 1)
    with db.tx() as c:
        for old, new in ((a, 10_000), (b, a), (10_000, b)):
            c.execute(f"UPDATE {db.events} SET {db.pos}=? WHERE {db.pos}=?", (new, old))
    code, out = verify_json(store_url, capsys)
    f = out["chain"]["failure"]
    assert code == 12 and (f["kind"], f["position"], f["stream"]) == ("altered", a, "run:b")


def test_S1_an_event_moved_to_another_position_with_its_link_is_named(store_url, lg, capsys) -> None:
    """The last event and its link both moved to a later position (the order is kept):
    readers and trackers would see another position. Mutation caught: `event_link` not
    hashing the position."""
    history(lg)
    db = DB(store_url)
    head = lg._store.max_position()
    db.sql("UPDATE {events} SET {pos}=? WHERE {pos}=?", head + 100, head)
    link = bytes(db.sql("SELECT hash FROM {chain} WHERE position=?", head)[0][0])
    db.sql("UPDATE {chain} SET position=?, links=? WHERE position=?", head + 100, pack([(head + 100, link)]), head)
    code, out = verify_json(store_url, capsys)
    f = out["chain"]["failure"]
    assert code == 12 and (f["kind"], f["position"]) == ("altered", head + 100)


def test_S1_a_removed_event_is_named_with_or_without_its_link(store_url, lg, capsys) -> None:
    history(lg)
    db = DB(store_url)
    at = next(r.position for r in lg._store.read_stream("run:c") if tag_of(r.event) == "run.failed")
    db.sql("DELETE FROM {events} WHERE {pos}=?", at)
    code, out = verify_json(store_url, capsys)
    assert code == 12 and (out["chain"]["failure"]["kind"], out["chain"]["failure"]["position"]) == ("removed", at)
    db.sql("DELETE FROM {chain} WHERE position=?", at)  # its link too: the next link breaks
    code, out = verify_json(store_url, capsys)
    f = out["chain"]["failure"]
    assert code == 12 and (f["kind"], f["position"]) == ("altered", at + 1)
    assert f"after position {at - 1} was removed" in f["message"]


# ------------------------------------------------------------------------ digests
def test_S1_a_truncation_or_a_recomputed_chain_after_a_digest_is_caught_only_with_it(
    store_url, lg, capsys, tmp_path
) -> None:
    """The residual risk, shown: someone who can write both tables removes the tail (or
    rewrites an event and recomputes every link after it). The log then checks against
    its own chain (exit 0); the digest kept elsewhere catches it (exit 12).
    Mutation caught: the walk not comparing a digest's hash."""
    history(lg)
    digest = str(tmp_path / "d.json")
    assert main(["--store", store_url, "digest", "-o", digest]) == 0
    kept = json.loads(open(digest).read())
    assert set(kept) == {"position", "hash", "at"} and kept["position"] == lg._store.max_position()
    assert main(["--store", store_url, "verify", "--digest", digest]) == 0
    db = DB(store_url)
    head = lg._store.max_position()
    db.sql("DELETE FROM {events} WHERE {pos}>=?", head - 1)
    db.sql("DELETE FROM {chain} WHERE position>=?", head - 1)
    capsys.readouterr()
    assert verify_json(store_url, capsys)[0] == 0  # the chain alone cannot see a clean truncation
    code, out = verify_json(store_url, capsys, digest)
    f = out["chain"]["failure"]
    assert code == 12 and (f["kind"], f["position"]) == ("digest", head) and "chain ends before it" in f["message"]


def test_S1_a_rewrite_with_the_chain_recomputed_is_caught_by_the_digest(store_url, lg, capsys, tmp_path) -> None:
    at = history(lg)["a_finished"]
    digest = str(tmp_path / "d.json")
    assert main(["--store", store_url, "digest", "-o", digest]) == 0
    db = DB(store_url)
    forged = codec.encode(msgspec.structs.replace(codec.decode(db.row(at)[3]), status=Status.FAILED))
    with db.tx() as c:
        c.execute(f"UPDATE {db.events} SET state=? WHERE {db.pos}=?", (forged, at))
        prev = bytes(c.execute(f"SELECT hash FROM {db.chain} WHERE position=?", (at - 1,))[0][0])
        rows = c.execute(
            f"SELECT {db.pos}, originator_id, originator_version, topic, state FROM {db.events} "
            f"WHERE {db.pos}>=? ORDER BY {db.pos}",
            (at,),
        )
        for position, link in links(prev, rows):  # one row per append here: one link per row
            c.execute(
                f"UPDATE {db.chain} SET hash=?, links=? WHERE position=?", (link, pack([(position, link)]), position)
            )
    capsys.readouterr()
    assert verify_json(store_url, capsys)[0] == 0  # a consistent forgery of both tables
    code, out = verify_json(store_url, capsys, digest)
    f = out["chain"]["failure"]
    assert code == 12 and f["kind"] == "digest" and "no chained event there has that hash" in f["message"]


def test_S1_a_newer_digest_must_extend_the_older(store_url, lg, capsys, tmp_path) -> None:
    history(lg)
    old, new = str(tmp_path / "old.json"), str(tmp_path / "new.json")
    assert main(["--store", store_url, "digest", "-o", old]) == 0
    lg.queue("later")
    assert main(["--store", store_url, "digest", "-o", new]) == 0
    assert main(["--store", store_url, "verify", "--digest", old, "--digest", new]) == 0
    assert "digest of" in capsys.readouterr().out
    code, out = verify_json(store_url, capsys, new, old)  # given the wrong way round
    assert code == 12 and out["chain"]["failure"]["kind"] == "order"
    # stdout without -o is the same digest a file gets
    assert main(["--store", store_url, "digest"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["position"], printed["hash"]) == tuple(
        json.loads(open(new).read())[k] for k in ("position", "hash")
    )


def test_S1_digest_refuses_a_broken_chain_its_own_ledger_and_a_bad_digest_file(store_url, lg, capsys, tmp_path) -> None:
    """Mutation caught: `event_link` not hashing the topic column (the edit below)."""
    at = history(lg)["a_finished"]
    if store_url.startswith("sqlite"):
        path = store_url[len("sqlite:///") :]
        assert main(["--store", store_url, "digest", "-o", path]) == 3  # the ledger's own file
        assert open_store(store_url).max_position() == 11
    bad = tmp_path / "bad.json"
    bad.write_text('{"position": 1}')
    assert main(["--store", store_url, "verify", "--digest", str(bad)]) == 3
    assert "not a digest" in capsys.readouterr().err
    DB(store_url).sql("UPDATE {events} SET topic='run.failed' WHERE {pos}=?", at)  # the topic is covered too
    out = tmp_path / "d.json"
    assert main(["--store", store_url, "digest", "-o", str(out)]) == 12
    assert not out.exists() and "no digest taken" in capsys.readouterr().err


# ------------------------------------------------------------- writers and gaps
def test_S1_positions_burnt_by_failed_appends_and_concurrent_writers_keep_one_chain(store_url, lg) -> None:
    """A conflict rolls its batch back (on PostgreSQL its ids are burnt: a gap); four
    writers append at once while the chain is checked again and again. The chain
    follows the log's order and verifies. Mutation caught: check_chain reading events
    and links outside one snapshot (a link read before its event, or after)."""
    lg.queue("r")
    stale = [Append("run:r", 1, codec.decode(DB(store_url).row(1)[3]))]
    with pytest.raises(ConflictError) as refused:
        lg._store.append(stale)
    assert refused.value.streams == ["run:r"]
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            with open_ledger(store_url, clock=ManualClock(T0)) as w:
                for i in range(15):
                    with w.batch() as b:
                        b.queue(f"w{n}-{i}")
                        b.queue(f"w{n}-{i}-x")
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    reader = open_store(store_url)
    checks = 0
    try:
        while any(t.is_alive() for t in threads):  # verifying while they append: one snapshot each time
            assert reader.check_chain().failure is None
            checks += 1
    finally:
        reader.close()
    for t in threads:
        t.join()
    assert not errors and checks
    report = lg._store.check_chain()
    assert report.failure is None and report.links == 1 + 4 * 15 * 2 == report.events
    if store_url.startswith("postgresql"):
        assert report.position > report.links  # the gap the conflict left


# -------------------------------------------------------------------- the upgrade
def test_S1_a_ledger_made_before_the_chain_is_refused_until_upgraded(store_url, lg, capsys) -> None:
    """A store without the chain table (as every store before rule S1): appends still
    work, unlinked; verify says the log is not chained (12); `chain --upgrade` (or init,
    where the table is missing) seals every event and says how many."""
    history(lg)
    DB(store_url).drop_chain()
    with open_ledger(store_url, clock=ManualClock(T0)) as old:
        old.queue("after")
    assert main(["--store", store_url, "verify"]) == 12
    assert "no hash chain" in capsys.readouterr().err
    assert main(["--store", store_url, "chain", "--upgrade"]) == 0
    said = capsys.readouterr().out
    assert "created the chain table; sealed 12 events (positions 1 to 12)" in said
    assert main(["--store", store_url, "verify"]) == 0
    assert main(["--store", store_url, "chain", "--upgrade"]) == 0
    assert "sealed 0 events" in capsys.readouterr().out
    DB(store_url).drop_chain()
    assert main(["--store", store_url, "init"]) == 0
    assert "created the hash chain: sealed 12 events" in capsys.readouterr().out
    assert main(["--store", store_url, "chain"]) == 0


def test_S1_the_upgrade_seals_only_a_tail_and_never_over_a_broken_chain(store_url, lg, capsys) -> None:
    at = history(lg)["a_finished"]
    db = DB(store_url)
    db.sql("DELETE FROM {chain} WHERE position>?", at)  # a tail left unlinked (an old writer's)
    assert main(["--store", store_url, "chain", "--upgrade", "--json"]) == 0
    sealed = json.loads(capsys.readouterr().out)
    assert (sealed["created"], sealed["sealed"], sealed["first"]) == (False, 11 - at, at + 1)
    forged = codec.encode(msgspec.structs.replace(codec.decode(db.row(at)[3]), status=Status.FAILED))
    db.sql("UPDATE {events} SET state=? WHERE {pos}=?", forged, at)
    db.sql("DELETE FROM {chain} WHERE position>?", at)
    assert main(["--store", store_url, "chain", "--upgrade"]) == 12
    assert "nothing was sealed" in capsys.readouterr().err
    assert len(db.sql("SELECT position FROM {chain}")) == at  # nothing was sealed
    with pytest.raises(ChainBroken) as e:
        lg._store.upgrade_chain()
    assert (e.value.kind, e.value.position) == ("altered", at)


def test_S1_the_views_side_and_the_chain_side_are_one_verification(lg) -> None:
    history(lg)
    engine.catch_up(lg._store, runs)
    result = verify_mod.verify_all(lg._store)
    assert result.error() is None and result.chain.links == 11
    assert [v.view for v in result.views][0] == "runs"


def test_S1_a_group_commit_is_one_chain_row_that_still_names_the_event_inside_it(store_url, lg, capsys) -> None:
    """One append of 50 events is one chain row holding 50 links: an edit of the 30th
    names the 30th. An edited or cut `links` blob fails at the row's first event.
    Mutation caught: `unpack` trusting a row whose head is not its last entry."""
    with lg.batch() as b:
        for i in range(50):
            b.queue(f"g{i}")
    db = DB(store_url)
    assert len(db.sql("SELECT position FROM {chain}")) == 1
    first = lg._store.max_position() - 49
    original = bytes(db.row(first + 29)[3])
    forged = codec.encode(msgspec.structs.replace(codec.decode(original), workflow="forged"))
    db.sql("UPDATE {events} SET state=? WHERE {pos}=?", forged, first + 29)
    code, out = verify_json(store_url, capsys)
    assert code == 12 and (out["chain"]["failure"]["kind"], out["chain"]["failure"]["position"]) == (
        "altered",
        first + 29,
    )
    db.sql("UPDATE {events} SET state=? WHERE {pos}=?", original, first + 29)
    assert verify_json(store_url, capsys)[0] == 0
    head, packed = db.sql("SELECT hash, links FROM {chain}")[0]
    entries = unpack(first + 49, head, packed)
    assert [p for p, _ in entries] == list(range(first, first + 50))
    # the head kept, an entry in the middle replaced by the forger's own link: caught at its event
    db.sql("UPDATE {chain} SET links=?", pack([*entries[:29], (first + 29, bytes(32)), *entries[30:]]))
    code, out = verify_json(store_url, capsys)
    assert code == 12 and out["chain"]["failure"]["position"] == first + 29
    db.sql("UPDATE {chain} SET links=?", bytes(packed)[:-40])  # the last entry cut off: the head no longer matches
    code, out = verify_json(store_url, capsys)
    assert code == 12 and (out["chain"]["failure"]["kind"], out["chain"]["failure"]["position"]) == ("altered", first)


def test_S1_the_chain_table_is_append_only_on_postgresql_like_the_events(pg_url: str, clock: ManualClock) -> None:
    """The owner (and a superuser) is refused UPDATE, DELETE and TRUNCATE of the chain by
    the same trigger as the events table's, unless a migration disables it."""
    import psycopg

    with open_ledger(pg_url, clock=clock) as ledger:
        ledger.queue("r")
    db = DB(pg_url)
    for statement in (f"UPDATE {db.chain} SET hash = hash", f"DELETE FROM {db.chain}", f"TRUNCATE {db.chain}"):
        with (
            pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"),
            psycopg.connect(pg_url.split("?", 1)[0]) as conn,
        ):
            conn.execute(statement)
