"""Files the ledger writes for its user (exports, and later digests and timelines).

Two rules, kept here so every command that writes a file follows both:

- Never overwrite the ledger itself. `epochledger --store runs.db export -o runs.db`
  used to open (and so truncate) the output before the store was read: the whole
  ledger went to 0 bytes. An output that is one of the store's own files (the same
  file by device and inode, or by resolved path for a sibling that does not exist
  right now, such as SQLite's -wal, -shm or -journal) is refused before anything is
  opened.
- Never leave a partial file. The content goes to a temporary file in the target's
  directory, is flushed and fsynced, and only then renamed over the target
  (`os.replace`, atomic on POSIX), then the directory is fsynced so the rename
  survives a crash. A write that fails or is interrupted leaves the previous file (or
  no file) and removes its temporary file. Only a SIGKILL or a power cut between
  creating and renaming can leave a `.NAME.XXXXXXXX.tmp` file behind; never a partial
  NAME. The writer holds an exclusive lock (flock) on its temporary file while it
  writes, and the kernel drops it when the writer dies however it dies, so the next
  write of NAME removes every temporary file of NAME that no one holds: the leftovers
  of a killed writer, never a live writer's. (A NAME never written again keeps its
  leftover; its name says what it is. On a file system without flock, a lock cannot
  be taken and nothing is removed: docs/operations.md.)
"""

from __future__ import annotations

import fcntl
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import IO

from epochledger.ledger.errors import InvalidInput


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def refuse_protected(path: str, protected: Iterable[str], where: str = "--output") -> None:
    """InvalidInput if `path` is one of the `protected` files: the same file (device
    and inode, so hard links and symlinks are caught), or the same resolved path."""
    target = _identity(path)
    real = os.path.realpath(path)
    for p in protected:
        same = target is not None and target == _identity(p)
        if same or real == os.path.realpath(p):
            raise InvalidInput(
                f"{path} is the ledger's own file {p}: refusing to overwrite it (nothing was written)", where=where
            )


def _mode_for(path: str) -> int:
    """The permissions the target keeps (an existing file's), else what a plain open()
    would give under the current umask: mkstemp's 0600 must not leak into the result."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextmanager
def atomic_write(path: str, *, protected: Iterable[str] = (), where: str = "--output") -> Iterator[IO[bytes]]:
    """Write `path` atomically: yields a binary file; when the block ends without an
    exception, the content replaces `path` in one rename. If the block raises (or a
    write, fsync or rename fails), `path` is left as it was and the temporary file is
    removed. `protected`: files that must never be the target (the ledger's own; see
    `refuse_protected`). OS errors become InvalidInput naming the path."""
    if not path or "\x00" in path:
        raise InvalidInput("needs a file name (without NUL characters)", where=where)
    refuse_protected(path, protected, where)
    directory = os.path.dirname(os.path.abspath(path))
    prefix = f".{os.path.basename(path)}."
    _remove_stale(directory, prefix)
    try:
        fd, tmp = _locked_temp(directory, prefix)
    except OSError as e:
        raise InvalidInput(f"cannot write: {e.strerror}", where=path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fchmod(f.fileno(), _mode_for(path))
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise InvalidInput(f"cannot write: {e.strerror or e}", where=path) from None
        raise
    _fsync_dir(directory)


_SUFFIX = ".tmp"
_RANDOM = 8  # the characters mkstemp puts between prefix and suffix


def _locked_temp(directory: str, prefix: str) -> tuple[int, str]:
    """A new temporary file for `prefix`, locked by this process. A cleaner may take
    it between its creation and the lock (it looks like a dead writer's): then it is
    unlinked by the time the lock is ours, and a new one is made. Where the file
    system takes no lock, the file is written unlocked (no cleaner can lock it there
    either, so none removes it)."""
    while True:
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=_SUFFIX, dir=directory)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            return fd, tmp
        try:
            if os.fstat(fd).st_nlink > 0:
                return fd, tmp
        except OSError:
            os.close(fd)
            _unlink(tmp)
            raise
        os.close(fd)


def _remove_stale(directory: str, prefix: str) -> None:
    """Remove the temporary files of `prefix` in `directory` that no writer holds
    locked: writers killed before their rename (SIGKILL, OOM). Best effort: a file
    that cannot be opened or locked is left alone."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if not (
            name.startswith(prefix) and name.endswith(_SUFFIX) and len(name) == len(prefix) + _RANDOM + len(_SUFFIX)
        ):
            continue
        stale = os.path.join(directory, name)
        try:
            fd = os.open(stale, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held: a live writer's
            if os.path.samestat(os.fstat(fd), os.lstat(stale)):
                os.unlink(stale)
        except OSError:
            pass
        finally:
            os.close(fd)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # some platforms cannot open a directory; the rename itself is done
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
