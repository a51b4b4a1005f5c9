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
from tests.helpers.store_contract import queued_append

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


def _sqlite_error(code: int | None, text: str) -> sqlite3.Error:
    """An error as SQLite's driver raises it: its text and, as `sqlite_errorcode`, the
    extended result code (None: an error raised without one, as the driver's own misuse
    errors are)."""
    e = sqlite3.OperationalError(text)
    if code is not None:
        e.sqlite_errorcode = code  # type: ignore[attr-defined]  # the driver sets it on a real error
    return e


_IOERR_SHMOPEN = sqlite3.SQLITE_IOERR | (18 << 8)  # an extended code: SQLITE_IOERR in its low byte

# SQLite's code x the free space of the file's directory ((free blocks, block size); None:
# statvfs fails) -> the error's type and the free bytes it tells (DiskFull only). Under
# 64 KiB free an I/O error is the full disk (a reader's -shm alone is 32 KiB); SQLITE_FULL
# is one at any free space.
_OPEN_ERRORS = [
    (_IOERR_SHMOPEN, (0, 4096), "DiskFull", 0),
    (_IOERR_SHMOPEN, (3, 4096), "DiskFull", 3 * 4096),
    (_IOERR_SHMOPEN, (64 * 1024 - 1, 1), "DiskFull", 64 * 1024 - 1),
    (_IOERR_SHMOPEN, (16, 4096), "StoreError", None),
    (sqlite3.SQLITE_IOERR, (1 << 18, 4096), "StoreError", None),
    (_IOERR_SHMOPEN, None, "StoreError", None),
    (sqlite3.SQLITE_FULL, (1 << 18, 4096), "DiskFull", 1 << 30),
    (sqlite3.SQLITE_FULL, None, "DiskFull", 0),
    (sqlite3.SQLITE_NOTADB, (0, 4096), "InvalidInput", None),
    (None, (0, 4096), "InvalidInput", None),
]


@pytest.mark.parametrize(("code", "free", "kind", "told"), _OPEN_ERRORS)
def test_L4_why_a_file_cannot_be_opened_is_read_from_sqlites_code_and_the_free_space(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    code: int | None,
    free: tuple[int, int] | None,
    kind: str,
    told: int | None,
) -> None:
    """A failing disk is the store's error (exit 7), a full one naming where and how much
    is free; anything else is the file's fault (exit 3), naming the file. The free space
    is the file system's own answer (statvfs of the file's directory), faked here to
    reach each bound exactly."""
    from epochledger.ledger.errors import StoreError
    from epochledger.ledger.store.sqlite import _open_error

    path = str(tmp_path / "runs.db")
    real = os.statvfs

    def statvfs(p: str) -> os.statvfs_result:
        if p != str(tmp_path):
            return real(p)
        if free is None:
            raise PermissionError(13, "Permission denied", p)
        fields = list(real(p))
        fields[4], fields[1] = free  # f_bavail, f_frsize
        return os.statvfs_result(fields)

    monkeypatch.setattr(os, "statvfs", statvfs)
    e = _open_error(path, _sqlite_error(code, "disk I/O error"))
    assert type(e).__name__ == kind
    if isinstance(e, DiskFull):
        assert (e.what, e.path, e.directory, e.free, e.detail) == (
            f"open {path}",
            path,
            str(tmp_path),
            told,
            "disk I/O error",
        )
        assert str(e) == (
            f"open {path}: the disk holding {tmp_path} is full ({told} bytes free; SQLite said: disk I/O error); "
            "nothing was written: free space and run the command again"
        )
    elif isinstance(e, StoreError):
        assert str(e) == f"open {path}: disk I/O error (the disk or file system failed; nothing was written)"
    else:
        assert isinstance(e, InvalidInput)
        assert (e.where, e.message) == (path, "not a readable SQLite ledger: disk I/O error")


def test_L4_a_file_that_is_no_database_or_no_ledger_is_refused_naming_it(tmp_path: Path) -> None:
    """The file's fault (exit 3), with the file as `where`: bytes that are no SQLite
    database, and a database without the events table, each refused untouched."""
    from epochledger.ledger.store import EVENTS_TABLE

    junk = tmp_path / "notes.db"
    junk.write_bytes(b"these are my notes, not a database\n" * 200)
    before = _digest(junk)
    with pytest.raises(InvalidInput) as refused:
        open_store(str(junk))
    assert (refused.value.where, refused.value.message) == (
        str(junk),
        "not a readable SQLite ledger: file is not a database",
    )
    other = tmp_path / "app.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY)")
    with pytest.raises(InvalidInput) as refused:
        open_store(str(other))
    assert (refused.value.where, refused.value.message) == (
        str(other),
        f"not an epochledger store (no table {EVENTS_TABLE})",
    )
    assert _digest(junk) == before and sorted(p.name for p in tmp_path.iterdir()) == ["app.db", "notes.db"]


def test_L4_a_ledger_in_a_directory_made_read_only_is_read_only_though_its_file_is_writable(tmp_path: Path) -> None:
    """The directory's mode bits decide too (root could write there anyway): a 0644
    file in a 0555 directory is read and never written, and an append to it is refused
    as ReadOnlyStore naming the store, with nothing written."""
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    _ledger_with_history(shelf / "runs.db")
    shelf.chmod(0o555)
    try:
        before = {p.name: _digest(p) for p in shelf.iterdir()}
        store = open_store(str(shelf / "runs.db"))
        try:
            assert store.read_only
            with pytest.raises(ReadOnlyStore) as refused:
                store.append([queued_append("r2")])
            assert (refused.value.url, refused.value.what) == (store.url, "write")
            assert store.max_position() == 3
        finally:
            store.close()
        assert {p.name: _digest(p) for p in shelf.iterdir()} == before
    finally:
        shelf.chmod(0o755)


def _copy_with_its_wal(live: Path, directory: Path, *, wal: bytes | None = None) -> Path:
    """The ledger `live` copied file by file while it is open, its -wal beside it holding
    what was not yet checkpointed (or `wal`, as given), as a read-only backup: 0444
    files in the 0555 `directory`."""
    import shutil

    directory.mkdir()
    copy = directory / live.name
    shutil.copyfile(live, copy)
    if wal is None:
        shutil.copyfile(str(live) + "-wal", str(copy) + "-wal")
    else:
        Path(str(copy) + "-wal").write_bytes(wal)
    for p in directory.iterdir():
        p.chmod(0o444)
    directory.chmod(0o555)
    return copy


def test_L4_a_read_only_copy_whose_wal_holds_events_reads_them_and_changes_neither_file(tmp_path: Path) -> None:
    """A copy taken while the ledger was open: its latest events are in the -wal alone.
    Read-only, SQLite reads the -wal through it (not as an immutable file, which would
    miss them) and never checkpoints it into the file (a read-write connection's close
    would): the ledger and its -wal keep every byte."""
    live = tmp_path / "live" / "runs.db"
    live.parent.mkdir()
    with open_ledger(str(live)) as lg:
        lg.queue("r1", workflow="nightly")
        lg.queue("r2", workflow="hourly")
        assert os.path.getsize(str(live) + "-wal") > 0
        copy = _copy_with_its_wal(live, tmp_path / "backup")
    try:
        files = {p.name: _digest(p) for p in copy.parent.iterdir() if not p.name.endswith("-shm")}
        with open_ledger(str(copy)) as lg:
            assert lg._store.read_only
            assert (lg.get_run("r1").workflow, lg.get_run("r2").workflow) == ("nightly", "hourly")
        with open_ledger(str(copy)) as lg:  # and again, once the first reader closed
            assert lg.get_run("r2").workflow == "hourly"
        assert {p.name: _digest(p) for p in copy.parent.iterdir() if not p.name.endswith("-shm")} == files
    finally:
        copy.parent.chmod(0o755)


def test_L4_a_read_only_copy_with_an_empty_wal_is_read_as_immutable_leaving_the_directory_as_it_was(
    tmp_path: Path,
) -> None:
    """An empty -wal (a checkpointed ledger's, copied with it) holds nothing to read:
    the file is read as immutable, so SQLite makes no -shm beside it."""
    live = tmp_path / "runs.db"
    _ledger_with_history(live)
    copy = _copy_with_its_wal(live, tmp_path / "backup", wal=b"")
    try:
        before = {p.name: _digest(p) for p in copy.parent.iterdir()}
        with open_ledger(str(copy)) as lg:
            assert lg.get_run("r1").workflow == "nightly"
        assert {p.name: _digest(p) for p in copy.parent.iterdir()} == before
    finally:
        copy.parent.chmod(0o755)


def test_L4_a_read_only_ledger_read_on_other_threads_closes_on_the_thread_that_opened_it(tmp_path: Path) -> None:
    """Each thread reads on its own connection; the store's close (on its own thread)
    closes them all: a read-only store's connections are not bound to the thread that
    made them, as a writable store's are not."""
    import threading

    live = tmp_path / "live"
    live.mkdir()
    _ledger_with_history(live / "runs.db")
    with read_only_backup(live / "runs.db", tmp_path / "backup") as copy:
        lg = open_ledger(str(copy))
        seen: list[str | None] = []
        reader = threading.Thread(target=lambda: seen.append(lg.get_run("r1").workflow))
        reader.start()
        reader.join()
        assert seen == ["nightly"]
        lg.close()
