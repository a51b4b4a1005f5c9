"""Helpers for the projection engine tests: random histories through the public API,
and on-disk corruption of one stored payload (a poison event, rule T4)."""

from __future__ import annotations

import random
import sqlite3
from urllib.parse import parse_qs, urlsplit

from epochledger.app import Ledger
from epochledger.ledger.errors import IllegalTransition

OPS = (
    "queue",
    "start",
    "checkpoint",
    "pause",
    "resume",
    "fail",
    "fail_final",
    "cancel",
    "finish",
    "rewind",
    "delete",
    "boot",
)
CODES = ("", "TIMEOUT", "NODE_NOT_FOUND", "weird code/7")


def apply_op(ledger: Ledger, op: str, run: str, n: int) -> None:
    """One command; an illegal one is refused by decide and appends nothing."""
    try:
        match op:
            case "queue":
                ledger.queue(run, workflow="wf")
            case "start":
                ledger.start(run, epoch=f"e{n % 3}", process=f"w{n % 3}")
            case "checkpoint":
                ledger.checkpoint(run, "node", f"ref-{n}")
            case "pause":
                ledger.pause(run, "waiting_human" if n % 2 else "operator", interaction=f"i{n}", questions=["ok?"])
            case "resume":
                ledger.resume(run, "operator", answers={"ok?": "yes"})
            case "fail":
                ledger.fail(run, CODES[n % len(CODES)], resumable=True, error="boom")
            case "fail_final":
                ledger.fail(run, CODES[n % len(CODES)], resumable=False)
            case "cancel":
                ledger.cancel(run, reason="dup")
            case "finish":
                ledger.finish(run)
            case "rewind":
                ledger.rewind(run, to_ref=f"ref-{n}" if n % 2 else None)
            case "delete":
                ledger.delete(run)
            case "boot":  # supersedes e1: its later reports are fenced (rule F1)
                ledger.boot("w1", epoch=f"boot-{n}")
    except IllegalTransition:
        pass
    ledger.clock.advance(1)  # type: ignore[attr-defined]


def boot_once(ledger: Ledger, process: str, epoch: str) -> None:
    """Boot `epoch` of `process` unless the slot already has it: every report naming an
    epoch needs one that some slot booted (rule F1)."""
    state = ledger.process(process)
    if state is None or state.epoch(epoch) is None:
        ledger.boot(process, epoch=epoch)


def random_history(ledger: Ledger, seed: int, runs: int = 20, ops: int = 300) -> None:
    rnd = random.Random(seed)
    for i in range(3):
        boot_once(ledger, f"w{i}", f"e{i}")
    queued: set[str] = set()
    for n in range(ops):
        run = f"run-{rnd.randrange(runs):03d}"
        op = "queue" if rnd.random() < 0.15 or run not in queued else rnd.choice(OPS)
        queued.add(run)
        apply_op(ledger, op, run, n)


def bulk_history(ledger: Ledger, runs: int, per_batch: int = 200, prefix: str = "bulk") -> None:
    """queue, start (no epoch: the O3 path), checkpoint and an end for `runs` runs,
    group-committed."""
    for base in range(0, runs, per_batch):
        with ledger.batch() as b:
            for i in range(base, min(runs, base + per_batch)):
                run = f"{prefix}-{i:06d}"
                b.queue(run, workflow="wf")
                b.start(run, process="w1")
                b.checkpoint(run, "n", "r")
                if i % 5 == 0:
                    b.fail(run, ("TIMEOUT", "")[i % 2], resumable=True)
                else:
                    b.finish(run)
        ledger.clock.advance(1)  # type: ignore[attr-defined]


def corrupt(url: str, position: int, payload: bytes) -> None:
    """Overwrite the stored payload at `position`, as a disk fault or a bad migration
    would: the write side never writes such a thing."""
    if url.startswith("postgresql://"):
        import psycopg

        parts = urlsplit(url)
        schema = parse_qs(parts.query)["schema"][0]
        base = url.split("?", 1)[0]
        with psycopg.connect(base) as conn:  # one transaction: the documented migration path
            table = f'"{schema}".epochledger_events'
            conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER epochledger_append_only")
            conn.execute(f"UPDATE {table} SET state=%s WHERE notification_id=%s", (payload, position))
            conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER epochledger_append_only")
        return
    path = url[len("sqlite:///") :]
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE epochledger_events SET state=? WHERE rowid=?", (payload, position))


def tamper_view(url: str, table: str, key: str, column: str, value: object) -> None:
    if url.startswith("postgresql://"):
        import psycopg

        parts = urlsplit(url)
        schema = parse_qs(parts.query)["schema"][0]
        with psycopg.connect(url.split("?", 1)[0], autocommit=True) as conn:
            conn.execute(f'UPDATE "{schema}"."{table}" SET {column}=%s WHERE k=%s', (value, key))
        return
    with sqlite3.connect(url[len("sqlite:///") :]) as conn:
        conn.execute(f'UPDATE "{table}" SET {column}=? WHERE k=?', (value, key))


def delete_row(url: str, position: int) -> None:
    """Remove the stored event at `position`, as a hand edit or a bad restore would."""
    if url.startswith("postgresql://"):
        import psycopg

        schema = parse_qs(urlsplit(url).query)["schema"][0]
        with psycopg.connect(url.split("?", 1)[0]) as conn:  # one transaction, as corrupt() does
            table = f'"{schema}".epochledger_events'
            conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER epochledger_append_only")
            conn.execute(f"DELETE FROM {table} WHERE notification_id=%s", (position,))
            conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER epochledger_append_only")
        return
    with sqlite3.connect(url[len("sqlite:///") :]) as conn:
        conn.execute("DELETE FROM epochledger_events WHERE rowid=?", (position,))


def canonical(value: object) -> bytes:
    """A view's canonical bytes, as replay encodes them (a slot's state as its ProcessRow)."""
    import msgspec

    from epochledger.ledger import process as process_mod

    return msgspec.json.encode(value, order="sorted", enc_hook=process_mod.enc_hook)


def view_indexes(store, table: str) -> dict[str, tuple[str, ...]]:
    """The indexes of a view's table other than its primary key: name -> columns, read
    from the database's own catalogue (SQLite's pragmas, PostgreSQL's pg_index)."""
    with store.transaction(commit=False) as cur:
        if store.kind == "sqlite":
            cur.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL", (table,)
            )
            names = [r[0] for r in cur.fetchall()]
            out = {}
            for name in names:
                cur.execute(f"SELECT name FROM pragma_index_info('{name}') ORDER BY seqno")
                out[name] = tuple(r[0] for r in cur.fetchall())
            return out
        cur.execute(
            "SELECT i.relname, a.attname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
            "JOIN pg_class t ON t.oid = x.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace "
            "CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS c(attnum, ord) "
            "JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = c.attnum "
            "WHERE n.nspname = ? AND t.relname = ? AND NOT x.indisprimary ORDER BY i.relname, c.ord",
            (store.schema, table),
        )
        found: dict[str, tuple[str, ...]] = {}
        for name, col in cur.fetchall():
            found[name] = (*found.get(name, ()), col)
        return found
