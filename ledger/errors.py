"""One root, specific subclasses with structured attributes: the library's errors.

Library exceptions (eventsourcing, sqlite3, psycopg, msgspec) are translated at the
store adapter and never leak. These errors carry what a caller acts on (run, status,
attempt, epoch, streams, position, ...), never a process exit code or a command-line
flag: the CLI alone maps each class to its documented exit code
(epochledger/cli/__init__.py, EXIT_CODES).
"""

from __future__ import annotations


class LedgerError(Exception):
    """The root of every error the library raises on purpose."""


class InvalidInput(LedgerError):
    """Malformed payload, oversized field, bad time, unknown type (rule L4)."""

    def __init__(self, message: str, *, where: str | None = None):
        self.where = where  # what was wrong: a parameter, a field, a file, a line
        self._message = message  # private: the text of the error, not one of its fields
        super().__init__(f"{where}: {message}" if where else message)

    @property
    def message(self) -> str:
        """The message without `where` (a CLI may name its own flag instead)."""
        return self._message


class BadPolicy(InvalidInput):
    """`whatif --policy NAME[:ARG]` names no known policy (built in or installed under the
    `epochledger.policies` entry point group), or its argument is not one the policy
    takes (rule R4). Nothing was read or written."""

    def __init__(self, policy: str, message: str):
        self.policy = policy
        super().__init__(message, where="policy")


class NoSuchStore(InvalidInput):
    """The store named does not exist (no file, no table, no schema). Nothing was
    created: only `epochledger init` (or `open_ledger(..., create=True)`) creates one."""

    def __init__(self, url: str, detail: str):
        self.url = url
        super().__init__(
            f"{detail}; no ledger here: create one with `epochledger init`, or name another store", where=url
        )


class ImportRejected(InvalidInput):
    """A line of an NDJSON file was refused; nothing from the file was appended."""

    def __init__(self, line: int, reason: str):
        self.line = line
        self.reason = reason
        super().__init__(f"{reason} (nothing was imported)", where=f"line {line}")


class ForeignRunRejected(InvalidInput):
    """A run of a scheduler's history that an importer reads (rule I3) holds a value
    the ledger cannot record: a time that is not one (NaN, infinite, out of range), an
    id that is not text or not an id. `run` is the foreign run id as Python would
    print it, `field` the value's place in the foreign record. A strict import appends
    nothing; a tolerant one imports the other runs and lists this one (rule I1)."""

    def __init__(self, source: str, run: str, field: str, reason: str):
        self.source = source
        self.run = run
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason} (nothing was imported)", where=f"{source} run {run}")


class RunNotFound(LedgerError):
    def __init__(self, run: str, *, deleted: bool = False):
        self.run = run
        self.deleted = deleted
        super().__init__(f"run {run!r} was deleted" if deleted else f"run {run!r} not found")


class IllegalTransition(LedgerError):
    """The command is impossible from the run's current status (rule L4), or from the
    process slot's epochs (rule O1: `run` then names the slot, and `why` the epoch)."""

    def __init__(self, run: str, status: str | None, attempted: str, why: str = ""):
        self.run = run
        self.status = status
        self.attempted = attempted
        self.why = why
        if attempted.startswith("process."):  # a slot has epochs, not a status
            head = f"process slot {run!r}: {attempted} refused"
        else:
            head = f"run {run!r} is {status if status is not None else '(no such run)'}: {attempted} refused"
        super().__init__(head + (f" ({why})" if why else ""))


class ConflictError(LedgerError):
    """Another writer appended to the stream first (rule L5). Nothing was appended."""

    def __init__(self, streams: list[str], detail: str = ""):
        self.streams = streams
        super().__init__(
            "concurrent write to "
            + ", ".join(streams)
            + ": another writer appended first; nothing was appended"
            + (f" ({detail})" if detail else "")
        )


class StoreError(LedgerError):
    """The store is unreachable or failed; the operation may be retried."""


# ------------------------------------------------- what happened to a write
# A write that fails is in one of three states, and the caller needs to know which
# (docs/operations.md, "PostgreSQL: roles, retries and time bounds"): it landed (the
# append returns its positions, even when the connection dropped during the commit and
# the store checked), it did not (NotCommitted: retry it), or nobody can tell yet
# (CommitUnknown: check, or send the very same batch again, which appends nothing if
# it had landed).


class ReadOnlyStore(StoreError):
    """A write to a store opened read-only (a 0444 file, a read-only mount, a backup
    copy): it can be read and exported, never changed. Nothing was written."""

    def __init__(self, url: str, what: str):
        self.url = url
        self.what = what
        super().__init__(f"{what}: the store {url} is read-only (it can be read and exported); nothing was written")


class DiskFull(StoreError):
    """The disk that holds the store is full: SQLite cannot even open the file to read
    it (a WAL database's reader needs its -shm and -wal), nor write to it. `path` is the
    store's file, `directory` where the space ran out, `free` its free bytes. Nothing
    was written; free space and run the command again."""

    def __init__(self, what: str, path: str, directory: str, free: int, detail: str):
        self.what = what
        self.path = path
        self.directory = directory
        self.free = free
        self.detail = detail
        super().__init__(
            f"{what}: the disk holding {directory} is full ({free} bytes free; SQLite said: {detail}); "
            "nothing was written: free space and run the command again"
        )


class NotCommitted(StoreError):
    """The transaction was rolled back or never reached the database: nothing of it was
    written, and retrying it is safe."""

    def __init__(self, what: str, reason: str, *, streams: list[str] | None = None):
        self.what = what
        self.reason = reason
        self.streams = streams or []
        super().__init__(f"{what}: {reason}; nothing was written (rolled back), safe to retry")


class LockTimeout(NotCommitted):
    """A lock wait exceeded the store's lock_timeout: the waiting transaction was rolled
    back, so no writer blocks the fleet for longer than `seconds`."""

    def __init__(self, what: str, lock: str, seconds: float | None, *, streams: list[str] | None = None):
        self.lock = lock
        self.seconds = seconds
        bound = f"lock_timeout={seconds:g} s" if seconds is not None else "the store's lock_timeout"
        super().__init__(what, f"waited longer than {bound} for {lock}", streams=streams)


class StatementTimeout(NotCommitted):
    """A statement exceeded the store's statement_timeout and was cancelled."""

    def __init__(self, what: str, seconds: float | None, *, streams: list[str] | None = None):
        self.seconds = seconds
        bound = f"statement_timeout={seconds:g} s" if seconds is not None else "the store's statement_timeout"
        super().__init__(what, f"a statement ran longer than {bound}", streams=streams)


class CommitUnknown(StoreError):
    """The connection failed while the database was committing a batch, and checking
    afterwards failed too: the batch may or may not have been appended. `versions` maps
    each stream to the (first, last) version the batch writes; `appends` is the batch.
    Either check those versions, or send the same batch again (`Batch.commit()` on the
    same batch, or `Store.append(e.appends)`): if it had landed, that appends nothing and
    returns its positions."""

    def __init__(self, versions: dict[str, tuple[int, int]], error: str, appends: tuple[object, ...] = ()):
        self.versions = versions
        self.error = error
        self.appends = appends
        shown = ", ".join(f"{s} v{a}" + (f"-{b}" if b != a else "") for s, (a, b) in list(versions.items())[:5])
        more = f" and {len(versions) - 5} more streams" if len(versions) > 5 else ""
        super().__init__(
            f"the connection failed during the commit of {sum(b - a + 1 for a, b in versions.values())} events "
            f"({shown}{more}) and the outcome could not be checked ({error}): they may or may not have been "
            "appended; check those versions, or commit the same batch again (it appends nothing if it landed)"
        )


class PermissionDenied(StoreError):
    """The database role may not do this (docs/operations.md, PostgreSQL roles): e.g. a
    read-only role asked to catch a view up, or a writer asked to create the store."""

    def __init__(self, what: str, role: str | None, detail: str, hint: str = ""):
        self.what = what
        self.role = role
        self.detail = detail
        super().__init__(f"{what}: role {role!r} may not: {detail}" + (f" ({hint})" if hint else ""))


class DamagedLog(LedgerError):
    """The stored log is damaged: an event does not decode, or a stream has a gap."""


class DecodeError(DamagedLog):
    """A stored payload does not decode (a poison event)."""

    def __init__(self, position: int, tag: str | None, error: str):
        self.position = position
        self.tag = tag
        self.error = error
        super().__init__(f"event at position {position} ({tag or 'unknown type'}) does not decode: {error}")


class StreamGap(DamagedLog):
    """A stream's versions are not contiguous: an event was removed from the store
    (by hand, or by a failed restore). Writing to the stream would collide with the
    version after the gap, so the stream is refused with this error instead of a
    misleading write conflict. `missing` is the first absent version; `after` and
    `before` are the log positions either side of the gap (None at the start)."""

    def __init__(self, stream: str, missing: int, after: int | None, before: int):
        self.stream = stream
        self.missing = missing
        self.after = after
        self.before = before
        where = f"after position {after}" if after is not None else "at the start of the stream"
        super().__init__(
            f"stream {stream} has a gap: version {missing} is missing ({where}, before position "
            f"{before}); an event was removed from the store"
        )


class DamagedRuns(DamagedLog):
    """A sweep did not judge these runs because their streams are damaged (a row that
    does not decode, or a gap): what the undecodable event said is unknown, so
    recovering the run could overwrite an outcome it recorded. The sweep recovered
    every other orphan (rules T4, O5); `runs` is [(run, log position of the bad row)]."""

    def __init__(self, process: str, epoch: str, runs: list[tuple[str, int]]):
        self.process = process
        self.epoch = epoch
        self.runs = runs
        named = ", ".join(f"{run} (position {position})" for run, position in runs)
        super().__init__(
            f"sweep of {process} epoch {epoch!r} did not judge {len(runs)} run(s) whose stream is "
            f"damaged: {named}; every other orphan was recovered"
        )


# -------------------------------------------------------- fencing and the sweep
class StaleEpoch(IllegalTransition):
    """A report written on behalf of an epoch that is no longer live (superseded by a
    later boot of its process, or cleanly stopped) was refused: the run's verdict
    stands. Unlike other refusals this one APPENDS: the late report is kept as a
    `run.fenced` event (`evidence`), so nothing the old process said is lost
    (docs/operations.md, "Fencing")."""

    def __init__(
        self, run: str, status: str | None, attempted: str, epoch: str, why: str, evidence: object | None = None
    ):
        self.epoch = epoch
        self.evidence = evidence  # the run.fenced command to keep, or None once kept
        self.kept_at: int | None = None  # log position of the kept run.fenced event
        super().__init__(run, status, attempted, f"stale epoch {epoch!r}: {why}")


class UnknownEpoch(InvalidInput):
    """A report names an epoch no process slot ever booted, or one that belongs to
    another slot than the report says. Its liveness cannot be judged, so it is refused
    and nothing is appended (rule F1: every report naming an epoch is fenced by that
    epoch's liveness)."""

    def __init__(self, epoch: str, message: str, *, where: str = "epoch"):
        self.epoch = epoch
        super().__init__(message, where=where)


class UnknownSlot(InvalidInput):
    """A hand sweep names a process slot the ledger has never seen (no event in its
    stream): booting it would create a new slot for good and recover nothing of the
    slot meant (a typo). Refused, nothing appended, unless a new slot is asked for."""

    def __init__(self, process: str):
        self.process = process
        super().__init__(
            f"process slot {process!r} was never booted in this ledger; sweeping it would boot a new "
            "slot for good (a mistyped name?): ask for a new slot explicitly (new_slot)",
            where="process",
        )


class EpochNotLive(InvalidInput):
    """A sweep asked to sweep with an existing epoch (`sweep(..., require_live=True)`)
    that is no longer live (rule O7): a dead epoch's sweep would recover nothing, and
    saying "swept" would hide that. `rule` and `why` are end_of's answer."""

    def __init__(self, epoch: str, process: str, rule: str, why: str):
        self.epoch = epoch
        self.process = process
        self.rule = rule
        self.why = why
        super().__init__(
            f"epoch {epoch!r} of {process!r} is not live ({rule}): {why}; sweep with a live epoch", where="epoch"
        )


class RoleHeld(LedgerError):
    """An epoch asked for an exclusive role (rule T7) that another epoch holds, and that
    holder is live by the facts of O7 (ledger.process.end_of): refused, nothing
    appended. `holder_epoch`, `holder_process` and `token` name the grant that stands.
    A holder alive but stuck keeps its role (docs/operations.md): only a fact of O7
    ends its epoch, never its silence."""

    def __init__(self, role: str, epoch: str, holder_epoch: str, holder_process: str, token: int):
        self.role = role
        self.epoch = epoch  # the epoch that asked
        self.holder_epoch = holder_epoch
        self.holder_process = holder_process
        self.token = token
        super().__init__(
            f"role {role!r} is held by epoch {holder_epoch!r} of {holder_process!r} (fencing token "
            f"{token}), which is live: epoch {epoch!r} cannot take it until a fact of O7 ends that "
            "epoch (rule T7)"
        )


class SweepFailed(StoreError):
    """The startup sweep gave up after its bounded retries (rule O5). It was logged at
    ERROR on logger `epochledger.sweep` and, if the store took it, recorded as
    `process.sweep_failed` on the process stream."""

    def __init__(self, process: str, epoch: str, attempts: int, error: str, alert_recorded: bool):
        self.process = process
        self.epoch = epoch
        self.attempts = attempts
        self.error = error
        self.alert_recorded = alert_recorded
        super().__init__(
            f"sweep of {process} epoch {epoch!r} gave up after {attempts} attempts: {error}"
            + ("" if alert_recorded else " (the process.sweep_failed event could not be written either)")
        )


# -------------------------------------------------------------------- audit
class QueryRefused(InvalidInput):
    """An audit query that is not one read-only statement, or that DuckDB rejects
    (docs/audit.md). Nothing was changed."""

    def __init__(self, reason: str, sql: str):
        self.reason = reason
        self.sql = sql
        super().__init__(reason, where="audit query")


class QueryInterrupted(QueryRefused):
    """An audit query or report stopped by one of its bounds (`limit`: "timeout" or
    "memory"; docs/audit.md, "Bounds"). Nothing was changed."""

    def __init__(self, reason: str, sql: str, limit: str):
        self.limit = limit
        super().__init__(reason, sql)


# -------------------------------------------------------------- projections
class ViewMismatch(LedgerError):
    """A live view differs from a replay from zero (rule R2, `epochledger verify`)."""

    def __init__(self, view: str, message: str):
        self.view = view
        super().__init__(message)


# -------------------------------------------------------------- tamper evidence
class ChainBroken(LedgerError):
    """The log does not match its hash chain, or a digest kept elsewhere (rule S1,
    `epochledger verify`). `kind` says how (ledger/store/chain.py, `Failure`: altered,
    removed, inserted, unchained, digest, order); `position` (with `stream` and
    `version` when an event is there) names the first place it fails. Nothing was
    changed."""

    def __init__(
        self, kind: str, position: int, message: str, *, stream: str | None = None, version: int | None = None
    ):
        self.kind = kind
        self.position = position
        self.stream = stream
        self.version = version
        super().__init__(message)


class TokenNotFound(InvalidInput):
    """No token with this id was ever issued on this ledger (rule H4): nothing to revoke."""

    def __init__(self, token: str):
        self.token = token
        super().__init__(f"no token {token!r} was issued on this ledger", where="token")
