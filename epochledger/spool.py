"""The spool: an adapter's durable outbox (rule E1, docs/adapters.md "The spool").

An adapter never writes to the store on the orchestrator's hot path. `Spool.append`
encodes each transition as the event the ledger would record, with its stamp (the
command and the moment it happened, docs/events.md), and appends it as one line to a
local append-only file: one `write(2)`, plus an `fsync` per line with
`fsync="always"`. That is all a task waits for: never the store. A writer thread
imports the lines, in order, through the ledger's one NDJSON import (rule I1), and
records how far it got in a position file.

Exactly once, with no protocol of its own: the import's rule I1 does it. A line
already recorded (same stream, type, stamp and fields) is a duplicate and appends
nothing, so a crash anywhere (after the store committed a chunk and before its
position was written, in the middle of an import, between two files) is repaired by
importing from the last position again: nothing is lost, nothing doubles. The position
file only saves work; losing it costs a re-import of duplicates.

In order: a chunk is imported strictly (one transaction, all or nothing). A line the
ledger refuses is held, with every line after it, for `hold` seconds and tried again,
because a refusal at replay can be an ordering effect between processes (a pool child's
redelivered attempt whose predecessor's exit fact is still in the supervisor's spool);
past `hold` it is imported alone in tolerant mode (a late report of an epoch that is no
longer live is kept as run.fenced evidence, rule F1), written to `NAME.rejected`, and
the spool moves on. A store that is unreachable (StoreError: NotCommitted,
CommitUnknown, a closed port) or a lost race (ConflictError) is retried with a backoff
of up to `retry_max` seconds, for as long as it takes; nothing is dropped.

The owner of a spool holds an exclusive flock on `NAME.lock` for its whole life; the
kernel drops it when the process dies, however it dies. So a lock that can be taken is
a dead owner: `reap` imports what a dead process's spool still holds (the files of
several dead processes merged by their stamps, one transaction) and says who owned it
(the slot and epoch written into the lock file), which is how a supervisor sees a pool
child's death (docs/adapters.md, "Celery").
"""

from __future__ import annotations

import _thread
import contextlib
import errno
import fcntl
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Literal

import msgspec

from epochledger.ledger import codec
from epochledger.ledger.errors import (
    CommitUnknown,
    ConflictError,
    ImportRejected,
    InvalidInput,
    LedgerError,
    StoreError,
)
from epochledger.ledger.events import StreamEvent

if TYPE_CHECKING:
    from epochledger.app import Ledger

log = logging.getLogger("epochledger.spool")

Fsync = Literal["always", "batch"]
CHUNK_BYTES = 1 << 20  # at most this much of the file per import (one transaction)
COMPACT_BYTES = 1 << 20  # a drained spool larger than this is truncated to zero
HOLD_S = 3.0  # how long a refused line waits for another process's line to land first
RETRY_MAX_S = 2.0  # the longest pause between two tries against an unreachable store
FIRST_RETRY_S = 0.05
LINGER_S = 0.01  # after a wake-up, the writer waits this long so that a burst is one commit


class Owner(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Who writes a spool, kept in its lock file: the slot and epoch the owner booted
    (for the exit fact of whoever finds the lock free), its pid, and whether it stopped
    cleanly (then its death is no exit: its stop is in its spool)."""

    process: str | None = None
    epoch: str | None = None
    pid: int | None = None
    stopped: bool = False


class Dead(msgspec.Struct, kw_only=True):
    """A spool whose owner died, as `reap` found and emptied it."""

    name: str
    owner: Owner
    lines: int  # lines it still held, imported now (duplicates included)
    rejected: int


class _Stamp(msgspec.Struct):
    at: datetime


_stamp_decoder = msgspec.json.Decoder(_Stamp)
_owner_decoder = msgspec.json.Decoder(Owner)
_rejected_encoder = msgspec.json.Encoder()
_SPOOLS: weakref.WeakSet[Spool] = weakref.WeakSet()
FORK_WAIT_S = 5.0  # the longest a fork() waits for a writer to leave the store


class _StoreGuard:
    """Held by a writer thread while it is inside the store, and taken by `fork()`
    before it forks (`os.register_at_fork`), so that no process forks while one of its
    threads is inside SQLite: a child forked then inherits SQLite's process-wide locks
    as that thread held them, and hangs at its own first open (seen with Airflow's
    scheduler, which forks its executor's workers while its spool writes). A fork waits
    for the writer's current transaction, at most FORK_WAIT_S (a store that does not
    answer: then it forks anyway, the writer being in a socket, not in SQLite)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.held = False

    def before(self) -> None:
        self.held = self.lock.acquire(timeout=FORK_WAIT_S)

    def after_in_parent(self) -> None:
        if self.held:
            self.held = False
            self.lock.release()


_guard = _StoreGuard()


class _Writer:
    """A spool's writer thread, started without waiting for it to run.
    `threading.Thread.start()` blocks its caller until the new thread has been scheduled
    and has said so, and a spool opens on a hook's path (an Airflow task runner's boot,
    a Celery pool child's start, a Prefect flow run's first hook): on a loaded host the
    hook would wait for the kernel to schedule another thread (docs/benchmarks.md,
    "Airflow, a process per try"). A daemon, as the spool's writer
    always was: a process that ends leaves its lines in the file. `delay`: its first
    round waits that long (the spool's linger, as after every wake-up) unless `hurry`
    ends it (a flush, a close). `join` waits for `run` to return."""

    def __init__(self, run: Callable[[], None], name: str, *, delay: float = 0.0):
        self._run, self._name, self._delay = run, name, delay
        self._done = threading.Event()
        self._hurry = threading.Event()  # `hurry`: someone waits for the writer, its delay ends
        self.ident: int = _thread.start_new_thread(self._main, ())

    def _main(self) -> None:
        try:
            # Asleep first, before any other work: the new thread holds the interpreter
            # from its first instruction until it blocks, and on a loaded host it may be
            # descheduled holding it, the hook that started it waiting meanwhile. The
            # lines that follow at once (a task runner's boot, its try's start) are one
            # round after it (docs/benchmarks.md, "Airflow, a process per try").
            if self._delay:
                self._hurry.wait(self._delay)
            threading.current_thread().name = self._name  # for the log lines it writes
            self._run()
        finally:
            self._done.set()

    def hurry(self) -> None:
        """End the start's delay now: a flush or a close waits for the writer."""
        self._hurry.set()

    def join(self, timeout: float) -> None:
        self._done.wait(timeout)

    def is_current(self) -> bool:
        return threading.get_ident() == self.ident


def _forked_child() -> None:
    """In a forked child, the parent's spools are not the child's: their descriptors are
    closed (never unlocked: the flock is the parent's, and LOCK_UN on a shared open file
    would release it for the parent too) and they refuse appends. The child opens its own,
    with a store guard of its own (the parent's was held across the fork)."""
    global _guard
    _guard = _StoreGuard()
    for spool in list(_SPOOLS):
        spool._abandon()


os.register_at_fork(
    before=lambda: _guard.before(),
    after_in_parent=lambda: _guard.after_in_parent(),
    after_in_child=_forked_child,
)


def _read_pos(path: str, size: int) -> int:
    try:
        with open(path, "rb") as f:
            pos = int(f.read().strip() or b"0")
    except (OSError, ValueError):
        return 0
    return pos if 0 <= pos <= size else 0  # a position past the end: the file was compacted since


def _write_pos(path: str, pos: int) -> None:
    # Not fsynced: a lost position only re-imports duplicates (rule I1).
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(b"%d" % pos)
    os.replace(tmp, path)


def _complete_lines(data: bytes) -> list[bytes]:
    end = data.rfind(b"\n")
    return [] if end < 0 else data[: end + 1].splitlines(keepends=True)


class Spool:
    """One process's spool in `directory`, named `name` (NAME.spool, NAME.pos,
    NAME.lock, NAME.rejected). `ledger`: the ledger, or a function that opens it (called
    by the writer thread, again after a failure: a store that is down at start-up is
    not a failure of the process). Opening takes the lock: a second live owner of the
    same name is refused (InvalidInput)."""

    def __init__(
        self,
        ledger: Ledger | Callable[[], Ledger],
        directory: str,
        name: str,
        *,
        fsync: Fsync = "batch",
        hold: float = HOLD_S,
        retry_max: float = RETRY_MAX_S,
        owner: Owner | None = None,
        linger: float = LINGER_S,
    ):
        if fsync not in ("always", "batch"):
            raise InvalidInput(f"expected 'always' or 'batch', got {fsync!r}", where="fsync")
        if not name or "/" in name or name.startswith("."):
            raise InvalidInput(f"a spool's name is a file name, got {name!r}", where="name")
        self.directory = directory
        self.name = name
        self.path = os.path.join(directory, name + ".spool")
        self.pos_path = os.path.join(directory, name + ".pos")
        self.lock_path = os.path.join(directory, name + ".lock")
        self.rejected_path = os.path.join(directory, name + ".rejected")
        self.fsync = fsync
        self.hold = hold
        self.retry_max = retry_max
        self.linger = linger
        self._ledger: Ledger | None = None
        self._open: Callable[[], Ledger] | None = None
        if callable(ledger):
            self._open = ledger
        else:
            self._ledger = ledger
        try:
            self._lock_fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except FileNotFoundError:  # the directory's first spool: not a makedirs at every open
            os.makedirs(directory, exist_ok=True)
            self._lock_fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise InvalidInput(f"spool {self.path} is in use by another live process", where="name") from None
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        size = os.fstat(self._fd).st_size
        self._pos = _read_pos(self.pos_path, size) if size else 0  # an empty spool: any position reads as 0
        # Lines a previous owner left: some may have landed after its last position,
        # so they go through the import, whose rule I1 finds them (duplicates).
        self._unsure = self._pos < size
        self._owner = owner if owner is not None else Owner(pid=os.getpid())
        self._write_owner()
        self._mutex = threading.Lock()  # appends vs compaction (truncate)
        self._wake = threading.Event()
        self._idle = threading.Condition()
        self._stop = False
        self._thread: _Writer | None = None
        self._held: tuple[int, float] | None = None  # (offset of a refused line, when first refused)
        self._names: list[str] = []  # the other spools of the directory, listed again every second
        self._names_at = 0.0
        self._stalled: dict[str, tuple[int, float]] = {}  # another spool's oldest pending line, since when
        self._drained: dict[str, tuple[int, int, int]] = {}  # another spool found drained: its file's stat then
        self._when_drained: list[Callable[[Ledger], object]] = []
        self._periodic: tuple[float, Callable[[Ledger], object]] | None = None
        self._abandoned = False
        self._left = False  # `leave`: the writer finishes alone, a reaper takes the rest
        self.landed = 0  # lines imported as new events
        self.duplicates = 0  # lines already recorded (a re-send after a crash): nothing appended
        self.held = 0  # lines whose effect already held
        self.rejected = 0  # lines refused for good (NAME.rejected)
        self.failures = 0  # store calls that failed and were retried
        self.last_error: str | None = None
        _SPOOLS.add(self)

    # ------------------------------------------------------------ the hot path
    def append(self, *events: StreamEvent) -> None:
        """Append `events` (each a ledger command with its stamp, e.g. `RunStarted(at=
        clock.now(), ...)`) as one line each, in one write, and wake the writer. Never
        touches the store. Encoded, not checked here: the writer's submit checks each
        line (rule L4), and one the catalogue refuses goes to NAME.rejected with its
        reason (checking on the hot path cost ~0.1 ms a line, docs/benchmarks.md)."""
        if self._abandoned:
            raise InvalidInput(
                f"spool {self.path} belongs to the parent process (forked): open one here", where="spool"
            )
        if self._left:
            raise InvalidInput(f"spool {self.path} was left to a reaper: its owner's part is over", where="spool")
        data = b"".join([codec.encode(e) + b"\n" for e in events])
        with self._mutex:
            os.write(self._fd, data)
            if self.fsync == "always":
                os.fsync(self._fd)
        self._wake.set()

    def set_owner(self, **facts: object) -> None:
        """Update the owner facts in the lock file (the epoch once booted, `stopped`)."""
        self._owner = msgspec.structs.replace(self._owner, **facts)
        self._write_owner()

    @property
    def owner(self) -> Owner:
        return self._owner

    def _write_owner(self) -> None:
        data = msgspec.json.encode(self._owner)
        os.ftruncate(self._lock_fd, 0)
        os.pwrite(self._lock_fd, data, 0)

    # ----------------------------------------------------------- the writer
    def when_drained(self, action: Callable[[Ledger], object]) -> None:
        """Run `action(ledger)` in the writer thread once every line appended so far is
        in the store (a sweep after an exit fact); tried again after a store error."""
        with self._idle:
            self._when_drained.append(action)
        self._wake.set()

    def every(self, seconds: float, action: Callable[[Ledger], object] | None) -> None:
        """Run `action(ledger)` in the writer thread every `seconds`, whenever the spool
        is drained (a supervisor's reap of its children's spools); None: no more."""
        self._periodic = None if action is None else (seconds, action)
        self._wake.set()

    def start(self) -> Spool:
        """Start the writer thread (a daemon: a process that exits without `close`
        leaves its lines in the file, for its next start or a `reap`)."""
        if self._thread is None:
            self._thread = _Writer(self._run, f"epochledger-spool-{self.name}", delay=self.linger)
        return self

    def pending(self) -> int:
        """Bytes appended and not yet in the store."""
        return os.fstat(self._fd).st_size - self._pos

    def flush(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for every line appended so far (and every
        `when_drained` action) to be in the store; True if they are. Without a writer
        thread, replays in the caller's thread."""
        if self._thread is None:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    if self.replay() and not self._when_drained:
                        return True
                except LedgerError:
                    pass
                if time.monotonic() >= deadline:
                    return False
                time.sleep(FIRST_RETRY_S)
        deadline = time.monotonic() + timeout
        self._thread.hurry()
        with self._idle:
            while self.pending() or self._when_drained:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._wake.set()
                self._idle.wait(min(left, 0.05))
        return True

    def close(self, timeout: float = 5.0) -> bool:
        """Flush (bounded by `timeout`), stop the writer, release the lock. A drained
        spool's files are removed (its rejects stay); one that is not keeps its lines
        for the next owner of the name or a `reap`. True if it was drained. Closing a
        closed spool does nothing (False)."""
        if self._abandoned or self._left:
            return False
        drained = self.flush(timeout)
        self._stop = True
        self._wake.set()
        if self._thread is not None and not self._thread.is_current():
            self._thread.hurry()
            self._thread.join(timeout=max(timeout, 1.0))
        _SPOOLS.discard(self)
        if drained:
            for path in (self.path, self.pos_path):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
        os.close(self._fd)
        if drained:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.lock_path)  # unlinked while locked: a reaper's flock on it finds no file
        os.close(self._lock_fd)  # releases the flock
        self._abandoned = True
        return drained

    def leave(self) -> None:
        """End this owner's part without waiting for the store, for a process about to
        exit while a reaper watches the directory (`watched`): its lines are in the file
        as every append left them (in the kernel: a killed process loses none; a power
        loss before the reaper imports them loses them unless `fsync="always"` flushed
        each, as for any line not yet in the store), the writer goes on alone until it
        is drained or the process ends, and the lock stays held until the process exits,
        so that no reaper imports beside a writer that may still be in the store (the
        writer's batch path does not look for duplicates). Once the process is gone, the
        reaper imports what is left (`reap`; what the writer landed meanwhile is a
        duplicate, rule I1) and removes the files. Appends are refused from then on."""
        if self._abandoned or self._left:
            return
        self._left = True
        self._stop = True
        self._wake.set()

    def _abandon(self) -> None:
        if self._abandoned:
            return
        self._abandoned = True
        self._thread = None  # not running here: threads do not survive fork
        self._mutex = threading.Lock()
        self._idle = threading.Condition()
        for fd in (self._fd, self._lock_fd):
            with contextlib.suppress(OSError):
                os.close(fd)  # close, never LOCK_UN: the lock stays the parent's

    def ledger(self) -> Ledger:
        if self._ledger is None:
            assert self._open is not None
            self._ledger = self._open()
        return self._ledger

    def _run(self) -> None:
        delay = FIRST_RETRY_S
        next_periodic = 0.0
        while True:
            self._wake.clear()
            failing = False
            try:
                with _guard.lock:  # no fork while this thread is inside the store (`_StoreGuard`)
                    drained = self.replay()
                    if drained:
                        self._drained_actions()
                    if drained and self._periodic is not None and time.monotonic() >= next_periodic:
                        next_periodic = time.monotonic() + self._periodic[0]
                        self._periodic[1](self.ledger())
            except Exception as e:  # the writer outlives any one failure, and says what it was
                if not isinstance(e, (StoreError, ConflictError)):
                    log.exception("spool %s: the writer failed, retrying", self.path)
                self._failed(e)
                failing = True
            with self._idle:
                self._idle.notify_all()
            if self._stop and (failing or not self.pending()):
                return
            if failing:
                self._wake.wait(delay)
                delay = min(delay * 2, self.retry_max)
                continue
            delay = FIRST_RETRY_S
            if self._held is not None or self.pending():
                self._wake.wait(FIRST_RETRY_S)  # a held line, or a line still being written
                continue
            timeout = 1.0
            if self._periodic is not None:
                timeout = min(timeout, max(next_periodic - time.monotonic(), 0.0))
            if self._wake.wait(timeout) and self.linger:
                time.sleep(self.linger)  # gather what comes next into the same commit

    def _failed(self, e: Exception) -> None:
        self.failures += 1
        self.last_error = f"{type(e).__name__}: {e}"
        log.warning("spool %s: %s (kept; retrying)", self.path, self.last_error)
        if isinstance(e, StoreError) and self._open is not None:
            self._ledger = None  # reopened on the next try (a store that was down at open)

    def _drained_actions(self) -> None:
        while True:
            with self._idle:
                if not self._when_drained:
                    return
                action = self._when_drained[0]
            action(self.ledger())  # raises StoreError: kept, tried again
            with self._idle:
                self._when_drained.pop(0)

    def replay(self) -> bool:
        """Import the lines after the position, one chunk per transaction, holding a
        refused line as described above. True when nothing is left (drained). Raises
        StoreError or ConflictError for the caller to retry."""
        while True:
            size = os.fstat(self._fd).st_size
            if self._pos >= size:
                self.last_error = None
                self._compact(size)
                return True
            data = os.pread(self._fd, min(size - self._pos, CHUNK_BYTES), self._pos)
            lines = _complete_lines(data)
            if not lines:
                if size - self._pos >= CHUNK_BYTES:  # a line longer than a chunk: never written by append
                    raise InvalidInput(f"spool {self.path}: a line at byte {self._pos} is too long", where="spool")
                return True  # a line being written: the rest comes with the next wake-up
            lines = self._before_others(lines)
            if not lines:
                self.last_error = "waiting: another process's spool holds older lines"
                return False
            ledger = self.ledger()
            if not self._unsure and self._submit(ledger, lines):
                continue
            try:
                result = ledger.import_ndjson(lines)
            except ImportRejected as e:
                k = e.line - 1
                if k > 0:
                    self._count(ledger.import_ndjson(lines[:k]))
                    self._advance(lines[:k])
                offset = self._pos
                if self._held is None or self._held[0] != offset:
                    self._held = (offset, time.monotonic())
                if time.monotonic() - self._held[1] < self.hold:
                    self.last_error = f"held: {e.reason}"
                    return False
                self._reject(ledger, lines[k])
                self._held = None
                continue
            self._count(result)
            self._advance(lines)
            self._held = None
            self._unsure = False
            self.last_error = None

    def _before_others(self, lines: list[bytes]) -> list[bytes]:
        """The lines stamped before the oldest line still pending in another spool of
        the directory: across processes, the store gets transitions in the order they
        happened (one host's clock), even when every spool was held back by an outage
        and all their writers resume at once (a retry's failure in one pool child, its
        next attempt in the other). A spool whose oldest pending line has not moved for
        `hold` seconds (a dead owner not yet reaped, a writer stuck) is not waited for."""
        oldest = self._oldest_elsewhere()
        if oldest is None:
            return lines
        stamps = [_stamp_decoder.decode(line).at for line in lines]
        k = next((i for i, at in enumerate(stamps) if at > oldest), len(lines))
        return lines[:k]

    def _oldest_elsewhere(self) -> datetime | None:
        """The oldest stamp pending in another spool of the directory. A spool found
        drained is not read again while its file is the same (its inode, size and
        modification time, one `stat`): every line it held then had landed, and a line
        appended since changes its size, a compaction its size too. A round reads only
        the spools that moved (a round over 50 drained spools: 3.7 ms reading each one's
        position and head, 0.32 ms with them known drained; docs/benchmarks.md)."""
        now = time.monotonic()
        if now >= self._names_at:
            self._names = [n for n in names(self.directory) if n != self.name]
            self._names_at = now + 1.0
            listed = set(self._names)
            self._drained = {n: k for n, k in self._drained.items() if n in listed}
        oldest: datetime | None = None
        for name in self._names:
            try:
                st = os.stat(os.path.join(self.directory, name + ".spool"))
            except FileNotFoundError:
                self._stalled.pop(name, None)
                continue
            key = (st.st_ino, st.st_size, st.st_mtime_ns)
            if self._drained.get(name) == key:
                continue  # drained when last read, and unchanged since
            head = _head_of(self.directory, name)
            if head is None or head == DRAINED:
                self._stalled.pop(name, None)
                if head == DRAINED:
                    self._drained[name] = key
                continue
            offset, at = head
            seen = self._stalled.get(name)
            if seen is None or seen[0] != offset:
                self._stalled[name] = (offset, now)
            elif now - seen[1] >= self.hold:
                continue  # not moving: not waited for
            if oldest is None or at < oldest:
                oldest = at
        return oldest

    def _submit(self, ledger: Ledger, lines: list[bytes]) -> bool:
        """The healthy path: the chunk's commands through one batch (the write path's
        own group commit, without the import's duplicate search), when nothing of it
        can have landed before: this process appended it, and no commit of it went
        unanswered. True if it landed. A refusal appends nothing and returns False:
        the import judges the chunk line by line (held, rejected, evidence kept). A
        commit whose outcome is unknown raises, and from then on the import (rule I1)
        sends the chunk, so that what landed is a duplicate."""
        events = [codec.decode(line) for line in lines]
        try:
            with ledger.batch() as batch:
                for event in events:
                    batch.submit(event)
        except CommitUnknown:
            self._unsure = True
            raise
        except (StoreError, ConflictError):
            raise  # nothing appended: tried again as is
        except LedgerError:
            return False
        self.landed += len(batch.recorded)
        self.held += len(events) - len(batch.recorded)
        self._advance(lines)
        self._held = None
        self.last_error = None
        return True

    def _count(self, result: object) -> None:
        self.landed += getattr(result, "landed", 0)
        self.duplicates += getattr(result, "duplicates", 0)
        self.held += getattr(result, "held", 0)

    def _advance(self, lines: list[bytes]) -> None:
        self._pos += sum(len(line) for line in lines)
        _write_pos(self.pos_path, self._pos)

    def _reject(self, ledger: Ledger, line: bytes) -> None:
        result = ledger.import_ndjson([line], on_error="skip")  # keeps a stale report as evidence (F1)
        self._count(result)
        reasons = [r.reason for r in result.rejected] or ["refused"]
        record = {"line": line.rstrip(b"\n").decode(), "reason": "; ".join(reasons), "kept": result.evidence > 0}
        with open(self.rejected_path, "ab") as f:
            f.write(_rejected_encoder.encode(record) + b"\n")
        self.rejected += 1
        log.warning("spool %s: a line was refused for good (%s): %s", self.path, record["reason"], record["line"])
        self._advance([line])

    def _compact(self, size: int) -> None:
        if size < COMPACT_BYTES:
            return
        with self._mutex:
            if os.fstat(self._fd).st_size != size:
                return  # appended meanwhile: next time
            os.ftruncate(self._fd, 0)
            self._pos = 0
            _write_pos(self.pos_path, 0)  # a crash before this: a position past the end reads as 0


DRAINED: Literal["drained"] = "drained"


def _head_of(directory: str, name: str) -> tuple[int, datetime] | Literal["drained"] | None:
    """Where another spool's oldest pending line starts, and its stamp; DRAINED if every
    line it holds has landed (its position at its end); None if it is gone, or its first
    pending line is being written."""
    path = os.path.join(directory, name + ".spool")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        pos = _read_pos(os.path.join(directory, name + ".pos"), size)
        if pos >= size:
            return DRAINED
        data = os.pread(fd, min(size - pos, 8192), pos)
    finally:
        os.close(fd)
    end = data.find(b"\n")
    if end < 0:
        return None  # being written
    try:
        return pos, _stamp_decoder.decode(data[:end]).at
    except msgspec.DecodeError:
        return None


def _pending_of(directory: str, name: str) -> list[bytes]:
    path = os.path.join(directory, name + ".spool")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    pos = _read_pos(os.path.join(directory, name + ".pos"), len(data))
    return _complete_lines(data[pos:])


def names(directory: str) -> list[str]:
    """The spools in `directory` (by their lock files)."""
    try:
        found = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(f[: -len(".lock")] for f in found if f.endswith(".lock"))


def owners(directory: str) -> list[Owner]:
    """The owners named in the lock files of the spools in `directory`, live or dead
    (read, not locked: a live owner's facts as it last wrote them)."""
    found = []
    for name in names(directory):
        try:
            with open(os.path.join(directory, name + ".lock"), "rb") as f:
                raw = f.read(4096)
            found.append(_owner_decoder.decode(raw) if raw.strip() else Owner())
        except (FileNotFoundError, msgspec.DecodeError):
            continue  # closed meanwhile, or being written
    return found


# ------------------------------------------------------------- a reaper's watch
WATCHING = "reaper.watching"  # not NAME.lock: `names` lists spools by their lock files


def watch(directory: str) -> int | None:
    """Say that a reaper watches `directory` (it imports what dead owners' spools hold,
    `reap`, every round of its life): an exclusive flock on `reaper.watching`, held for
    as long as the returned descriptor is open, so the kernel drops it when the reaper
    dies, however it dies. None if another reaper holds it (two schedulers on a host), or
    an owner's `watched` is looking this instant: try again next round."""
    os.makedirs(directory, exist_ok=True)
    fd = os.open(os.path.join(directory, WATCHING), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def watched(directory: str) -> bool:
    """True if a live reaper watches `directory` (`watch`). An owner asks with a shared
    lock, which fails only against the reaper's exclusive one (owners asking at the same
    time never see each other), and lets it go at once."""
    try:
        fd = os.open(os.path.join(directory, WATCHING), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def reap(
    ledger: Ledger,
    directory: str,
    *,
    exclude: Iterable[str] = (),
    then: Callable[[list[Dead]], object] | None = None,
) -> list[Dead]:
    """Empty the spools in `directory` whose owner is dead (its lock can be taken):
    their remaining lines, of every dead spool at once merged by their stamps (the
    order they happened in, on one host's clock), in one tolerant import (rule I1:
    duplicates of lines that had landed append nothing; a refused line is written to
    its NAME.rejected), then their files are removed. A SIGKILL in the middle leaves
    the files: the next reap imports them again, and what had landed is a duplicate.
    `then(dead)` runs after the import and before the files go (the caller's exit
    facts): if it raises, the files stay, and the next reap does it all again (a second
    exit of an epoch appends nothing). Returns each dead spool with its owner facts.
    Nothing dead: nothing read from the store."""
    skip = set(exclude)
    taken: list[tuple[str, int, Owner, list[bytes]]] = []
    try:
        for name in names(directory):
            if name in skip:
                continue
            lock_path = os.path.join(directory, name + ".lock")
            try:
                fd = os.open(lock_path, os.O_RDWR | os.O_CLOEXEC)
            except FileNotFoundError:
                continue  # closed cleanly meanwhile
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    continue  # alive
                raise
            if not os.path.exists(lock_path):  # removed by its owner's clean close before our lock
                os.close(fd)
                continue
            raw = os.pread(fd, 4096, 0)
            try:
                owner = _owner_decoder.decode(raw) if raw.strip() else Owner()
            except msgspec.DecodeError:
                owner = Owner()
            taken.append((name, fd, owner, _pending_of(directory, name)))
        merged = sorted(
            ((_stamp_decoder.decode(line).at, i, j, line) for i, t in enumerate(taken) for j, line in enumerate(t[3])),
            key=lambda x: (x[0], x[1], x[2]),
        )
        rejected: dict[str, int] = {}
        if merged:
            result = ledger.import_ndjson([m[3] for m in merged], on_error="skip")
            for r in result.rejected:
                i = merged[r.line - 1][1]
                name = taken[i][0]
                rejected[name] = rejected.get(name, 0) + 1
                with open(os.path.join(directory, name + ".rejected"), "ab") as f:
                    record = {"line": r.content.decode(), "reason": r.reason, "kept": r.kept is not None}
                    f.write(_rejected_encoder.encode(record) + b"\n")
        dead = [
            Dead(name=name, owner=owner, lines=len(lines), rejected=rejected.get(name, 0))
            for name, _, owner, lines in taken
        ]
        if then is not None and dead:
            then(dead)
        for name, _, _, _ in taken:
            for ext in (".spool", ".pos", ".lock"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(directory, name + ext))
        return dead
    finally:
        for _, fd, _, _ in taken:
            os.close(fd)
