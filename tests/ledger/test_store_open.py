"""Opening a store (rule L4): reads never create or change a store; a read-only ledger
can be read and exported; a store URL that names nothing is an error, not a default."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
from pathlib import Path

import pytest

from epochledger import open_ledger
from epochledger.cli import main
from epochledger.ledger.errors import DiskFull, InvalidInput, NoSuchStore, ReadOnlyStore
from epochledger.ledger.store import open_store
from tests.conftest import PG_BASE, fill_disk, need_pg, read_only_backup, small_disk

READS = [
    ["runs"],
    ["show", "r1"],
    ["history", "r1"],
    ["export"],
    ["epochs"],
    ["runs", "--orphaned"],
    ["tick-health"],
    ["replay"],
    ["verify"],
    ["parked"],
    ["audit", "status"],
]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("argv", READS, ids=[" ".join(a) for a in READS])
def test_L4_a_read_of_a_missing_sqlite_file_names_it_and_init_and_creates_nothing(
    tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Repro (before the fix): a mistyped path silently created an empty ledger there."""
    missing = tmp_path / "mistyped.db"
    assert main(["--store", str(missing), *argv]) == 3
    err = capsys.readouterr().err
    assert str(missing) in err and "epochledger init" in err
    assert list(tmp_path.iterdir()) == []


def test_L4_a_foreign_sqlite_database_is_refused_untouched(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Repro (before the fix): a read of someone else's SQLite database added ledger
    tables and switched it to WAL. Neither a read nor a write may touch it."""
    other = tmp_path / "app.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY)")
    before = _digest(other)
    assert main(["--store", str(other), "runs"]) == 3
    assert "not an epochledger store" in capsys.readouterr().err
    with pytest.raises(InvalidInput, match="not an epochledger store"):
        open_ledger(str(other))  # create=True does not make a foreign file a ledger
    assert _digest(other) == before and sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


def test_L4_a_full_disk_is_a_store_error_naming_it_for_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Repro (before the fix): on a 100% full disk every command, reads included, exited
    3 "not a readable SQLite ledger: disk I/O error", as if the file were not a ledger.
    It is the disk: a store error (7) that says so. Once space is freed, all is there."""
    with small_disk(tmp_path / "full") as disk:
        store = str(disk / "s.db")
        assert main(["--store", store, "init"]) == 0
        with open_ledger(store) as lg:
            lg.queue("r1")
        filler = fill_disk(disk)
        capsys.readouterr()
        for argv in [*READS, ["import", "-"]]:
            assert main(["--store", store, *argv]) == 7, argv
            err = capsys.readouterr().err
            assert "DiskFull" in err and "is full" in err and str(disk) in err, (argv, err)
        with pytest.raises(DiskFull) as caught:
            open_ledger(store, create=False)
        assert caught.value.path == store and caught.value.free == 0
        filler.unlink()
        assert main(["--store", store, "show", "r1"]) == 0


def test_L4_the_empty_store_url_is_an_error_not_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["--store", "", "runs"]) == 3
    assert "the store URL is empty" in capsys.readouterr().err
    with pytest.raises(InvalidInput, match="empty"):
        open_ledger("")
    assert list(tmp_path.iterdir()) == []


def _ledger_with_history(path: Path) -> None:
    with open_ledger(str(path)) as ledger:
        ledger.queue("r1", workflow="nightly")
        ledger.start("r1", process="w")
        ledger.checkpoint("r1", "extract", "ckpt/1")


def test_L4_a_read_only_ledger_can_be_read_and_exported_and_refuses_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A backup copy on a read-only mount: a 0444 file in a 0555 directory, its views
    never built. Reads fold in memory, export works, writes say read-only, and not one
    byte of the directory changes (root may write anyway, so the store goes by its
    mode bits, not by whether a write would succeed)."""
    live = tmp_path / "live"
    live.mkdir()
    _ledger_with_history(live / "runs.db")
    with read_only_backup(live / "runs.db", tmp_path / "backup") as copy:
        before = {p.name: _digest(p) for p in copy.parent.iterdir()}
        assert main(["--store", str(copy), "show", "r1", "--json"]) == 0
        assert '"checkpoint"' in capsys.readouterr().out
        assert main(["--store", str(copy), "runs"]) == 0
        assert "r1" in capsys.readouterr().out
        out = tmp_path / "export.ndjson"
        assert main(["--store", str(copy), "export", "-o", str(out)]) == 0
        assert out.read_bytes().count(b"\n") == 3
        with open_ledger(str(copy)) as ledger, pytest.raises(ReadOnlyStore, match="read-only"):
            ledger.finish("r1")
        assert {p.name: _digest(p) for p in copy.parent.iterdir()} == before


def test_L4_a_read_of_a_missing_postgresql_schema_creates_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    need_pg()
    import psycopg

    url = f"{PG_BASE}?schema=t_missing_{os.getpid()}"
    assert main(["--store", url, "runs"]) == 3
    assert "no epochledger store in schema" in capsys.readouterr().err
    with psycopg.connect(PG_BASE) as conn:
        assert (
            conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (f"t_missing_{os.getpid()}",)).fetchone()
            is None
        )
    with pytest.raises(NoSuchStore) as refused:
        open_ledger(url, create=False)
    assert refused.value.url == url


def test_L4_init_creates_and_then_every_command_finds_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "runs.db"
    assert main(["--store", str(store), "init"]) == 0
    assert store.exists() and stat.S_ISREG(store.stat().st_mode)
    assert main(["--store", str(store), "runs"]) == 0


def test_L4_bad_store_urls_say_what_is_wrong(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput, match="unsupported store URL scheme 'mysql'"):
        open_store("mysql://x/y")
    with pytest.raises(InvalidInput, match="needs a path"):
        open_store("sqlite://")
    for url in ("://", ":///x.db", "://u@h/db"):  # "://" alone once made a SQLite file named ':' in the cwd
        with pytest.raises(InvalidInput, match="needs a scheme before '://'"):
            open_store(url)
    for url in ("sqlite:///:memory:", ":memory:"):  # each connection would see its own empty database
        with pytest.raises(InvalidInput, match="in-memory SQLite store is not supported"):
            open_store(url)
    with pytest.raises(NoSuchStore, match="does not exist"):
        open_store(str(tmp_path / "missing" / "x.db"))


def test_store_url_forms(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert open_store("sqlite:///rel.db").url == f"sqlite:///{tmp_path}/rel.db"
    assert open_store(f"sqlite:///{tmp_path}/abs.db").url == f"sqlite:///{tmp_path}/abs.db"
    assert open_store("bare.db").url == f"sqlite:///{tmp_path}/bare.db"
    monkeypatch.setenv("EPOCHLEDGER_STORE", "fromenv.db")
    assert open_store().url == f"sqlite:///{tmp_path}/fromenv.db"
    monkeypatch.delenv("EPOCHLEDGER_STORE")
    assert open_store().url == f"sqlite:///{tmp_path}/epochledger.db"


@pytest.mark.parametrize("name", ["runs#1.db", "runs?v=1.db", "runs%41.db", "runs 1.db"])
def test_L4_a_ledger_whose_name_holds_a_uri_character_opens_again_and_nothing_is_made_beside_it(
    tmp_path: Path, name: str
) -> None:
    """Repro (before the fix): the file's path went into SQLite's URI as it was, so a
    `#` or `?` in its name began the URI's fragment or query and `%41` was read as `A`:
    the check of a ledger named runs#1.db opened (and made) an empty `runs` beside it
    and refused the ledger it had just written as "not an epochledger store"."""
    path = tmp_path / name
    with open_ledger(str(path)) as lg:
        lg.queue("r1", workflow="nightly")
    with open_ledger(str(path), create=False) as lg:
        assert lg.get_run("r1").workflow == "nightly"
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    with read_only_backup(path, tmp_path / "backup") as copy, open_ledger(str(copy)) as lg:
        assert lg.get_run("r1").workflow == "nightly"
        assert sorted(p.name for p in copy.parent.iterdir()) == [name]
