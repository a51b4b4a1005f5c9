"""Output files (epochledger/files.py): an export never overwrites the ledger it reads, and
never leaves a partial file (L3: history round-trips unharmed through export)."""

from __future__ import annotations

import errno
import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from epochledger import open_ledger
from epochledger.cli import main
from epochledger.files import atomic_write
from epochledger.ledger.errors import InvalidInput, StoreError
from tests.app.test_ndjson import GOOD, lines


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A SQLite ledger holding the GOOD history, closed."""
    history = tmp_path / "history.ndjson"
    history.write_bytes(b"".join(lines(GOOD)))
    db = tmp_path / "runs.db"
    assert main(["--store", str(db), "init"]) == 0
    assert main(["--store", str(db), "import", str(history)]) == 0
    capsys.readouterr()
    return db


def _outputs(db: Path) -> list[str]:
    d = db.parent
    (d / "hard.db").unlink(missing_ok=True)
    os.link(db, d / "hard.db")
    if not (d / "soft.db").exists():
        os.symlink(db, d / "soft.db")
    return [
        str(db),
        f"{db}-wal",
        f"{db}-shm",
        f"{db}-journal",
        str(d / "hard.db"),
        str(d / "soft.db"),
        os.path.relpath(db),
        f"sqlite-dir/../{db.name}",
    ]


def test_L3_export_to_the_ledger_itself_is_refused_and_the_ledger_survives(
    store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Repro (before the fix): `epochledger --store runs.db export -o runs.db` opened the
    output for writing before reading the store and left runs.db at 0 bytes. The
    store's -wal/-shm/-journal siblings, a hard link and a symlink are the same files."""
    monkeypatch.chdir(store.parent)
    (store.parent / "sqlite-dir").mkdir()
    before = digest(store)
    for out in _outputs(store):
        code = main(["--store", str(store), "export", "-o", out])
        err = capsys.readouterr().err
        assert code == 3, out
        assert "refusing to overwrite" in err and "nothing was written" in err, err
        assert "Traceback" not in err
        assert digest(store) == before, out
    with open_ledger(str(store)) as lg:
        assert lg._store.max_position() == len(GOOD)
    assert not [p for p in os.listdir(store.parent) if p.endswith(".tmp")]


def test_L3_a_store_that_fails_mid_export_leaves_the_old_output_untouched(
    store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mutation caught: writing straight into the output (open(path, "wb")) leaves a
    truncated file with the lines written before the store failed."""
    import epochledger.ndjson as nd

    out = store.parent / "history-out.ndjson"
    out.write_bytes(b"the previous export\n")
    real = nd.export_lines

    def failing(ledger, after=0):
        for i, line in enumerate(real(ledger, after)):
            if i == 3:
                raise StoreError("read the log: disk I/O error (injected)")
            yield line

    monkeypatch.setattr(nd, "export_lines", failing)
    assert main(["--store", str(store), "export", "-o", str(out)]) == 7
    assert "injected" in capsys.readouterr().err
    assert out.read_bytes() == b"the previous export\n"
    assert sorted(os.listdir(store.parent)) == sorted(
        ["history.ndjson", "history-out.ndjson", "runs.db", *_sidecars(store)]
    )


def _sidecars(db: Path) -> list[str]:
    return [p for p in os.listdir(db.parent) if p.startswith(db.name + "-")]


def test_L3_a_write_error_leaves_the_old_output_untouched_and_no_temporary_file(
    store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fails at fsync (after every line was written): the target keeps its old
    content, the temporary file is removed, and the error names the path (exit 3)."""
    out = store.parent / "history-out.ndjson"
    out.write_bytes(b"the previous export\n")

    def fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", fsync)
    assert main(["--store", str(store), "export", "-o", str(out)]) == 3
    err = capsys.readouterr().err
    assert f"{out}: cannot write: Input/output error" in err
    assert out.read_bytes() == b"the previous export\n"
    assert not [p for p in os.listdir(store.parent) if p.endswith(".tmp")]


def test_L3_export_replaces_the_whole_file_and_keeps_its_permissions(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = store.parent / "history-out.ndjson"
    out.write_bytes(b"x" * 100_000)  # longer than the export: no tail may survive
    out.chmod(0o640)
    assert main(["--store", str(store), "export", "-o", str(out)]) == 0
    assert f"exported {len(GOOD)} events" in capsys.readouterr().err
    assert main(["--store", str(store), "export"]) == 0
    assert out.read_bytes() == capsys.readouterr().out.encode()
    assert out.stat().st_mode & 0o777 == 0o640
    fresh = store.parent / "fresh.ndjson"
    assert main(["--store", str(store), "export", "-o", str(fresh)]) == 0
    umask = os.umask(0)
    os.umask(umask)
    assert fresh.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600


def test_L3_atomic_write_interrupted_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "out.bin"
    with pytest.raises(KeyboardInterrupt), atomic_write(str(target)) as f:
        f.write(b"half")
        raise KeyboardInterrupt
    assert os.listdir(tmp_path) == []
    with pytest.raises(InvalidInput, match="cannot write"), atomic_write(str(tmp_path / "no-such-dir" / "x")):
        pass


# A writer that is killed inside atomic_write, after writing part of its file: a real
# process, SIGKILLed, so nothing of Python's own cleanup runs.
_KILLED_WRITER = """
import sys, time
from epochledger.files import atomic_write
with atomic_write(sys.argv[1]) as f:
    f.write(b"partial")
    f.flush()
    print("writing", flush=True)
    time.sleep(120)
"""


def _writer(target: Path) -> subprocess.Popen[bytes]:
    child = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(target)], stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline() == b"writing\n"
    return child


def _temps(target: Path) -> list[str]:
    return sorted(n for n in os.listdir(target.parent) if n.startswith(f".{target.name}.") and n.endswith(".tmp"))


@pytest.mark.parametrize("command", ["export", "import"])
def test_I1_L3_a_writer_killed_by_sigkill_leaves_a_temp_file_the_next_write_removes(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """`export -o FILE` and `import --rejects FILE` write FILE through atomic_write. A
    writer SIGKILLed mid-write leaves its `.FILE.XXXXXXXX.tmp`; the next write of FILE
    removes it (no one holds its lock), and never the temporary file of a writer that
    is still alive (it holds its lock): that one renames its file over FILE when done.
    Mutation caught: `_remove_stale` not called (the killed writers' files pile up),
    or removing without taking the lock (the live writer's file is removed and its
    rename fails)."""
    target = tmp_path / "out.ndjson"
    history = tmp_path / "history.ndjson"
    argv = {
        "export": ["--store", str(store), "export", "-o", str(target)],
        "import": ["--store", str(store), "import", str(history), "--on-error", "skip", "--rejects", str(target)],
    }[command]
    left: list[str] = []
    for _ in range(2):  # the second writer removes the first one's leftover as it starts
        killed = _writer(target)
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
        assert len(_temps(target)) == 1 and _temps(target) != left and not target.exists()
        left = _temps(target)
    alive = _writer(target)
    try:
        main(argv)
        capsys.readouterr()
        assert len(_temps(target)) == 1  # the live writer's, and only it
        assert len(target.read_bytes().splitlines()) == (len(GOOD) if command == "export" else 0)  # whole
    finally:
        alive.terminate()  # SIGTERM: the writer dies without renaming; its file is left, unlocked
        alive.wait()
    main(argv)
    assert _temps(target) == []
