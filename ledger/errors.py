"""One root, specific subclasses with structured attributes (STYLE.md, Errors).

Library exceptions (eventsourcing, sqlite3, psycopg, msgspec) are translated at the
adapter and never leak. The CLI catches `LedgerError` alone and maps each subclass to
its `exit_code` (documented in README.md); anything else is a bug.
"""

from __future__ import annotations


class LedgerError(Exception):
    exit_code = 1


class InvalidInput(LedgerError):
    """Malformed payload, oversized field, bad time, unknown type (BRIEF L4)."""

    exit_code = 3

    def __init__(self, message: str, *, where: str | None = None):
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class ImportRejected(InvalidInput):
    """A line of an NDJSON file was refused; nothing from the file was appended."""

    def __init__(self, line: int, reason: str):
        self.line = line
        self.reason = reason
        super().__init__(f"{reason} (nothing was imported)", where=f"line {line}")


class RunNotFound(LedgerError):
    exit_code = 4

    def __init__(self, run: str, *, deleted: bool = False):
        self.run = run
        self.deleted = deleted
        super().__init__(f"run {run!r} was deleted" if deleted else f"run {run!r} not found")


class IllegalTransition(LedgerError):
    """The command is impossible from the run's current status (BRIEF L4)."""

    exit_code = 5

    def __init__(self, run: str, status: str | None, attempted: str, why: str = ""):
        self.run = run
        self.status = status
        self.attempted = attempted
        self.why = why
        shown = status if status is not None else "(no such run)"
        super().__init__(
            f"run {run!r} is {shown}: {attempted} refused" + (f" ({why})" if why else "")
        )


class ConflictError(LedgerError):
    """Another writer appended to the stream first (BRIEF L5). Nothing was appended."""

    exit_code = 6

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

    exit_code = 7


class DecodeError(LedgerError):
    """A stored payload does not decode (a poison event)."""

    exit_code = 8

    def __init__(self, position: int, tag: str | None, error: str):
        self.position = position
        self.tag = tag
        self.error = error
        super().__init__(f"event at position {position} ({tag or 'unknown type'}) does not decode: {error}")


# ------------------------------------------------ issue 4: fencing and the sweep
class StaleEpoch(IllegalTransition):
    """A report written on behalf of an epoch that is no longer live (superseded by a
    later boot of its process, or cleanly stopped) was refused: the run's verdict
    stands. Unlike other refusals this one APPENDS: the late report is kept as a
    `run.fenced` event (`evidence`), so nothing the old process said is lost
    (docs/operations.md, "Fencing")."""

    exit_code = 9

    def __init__(self, run: str, status: str | None, attempted: str, epoch: str, why: str,
                 evidence: object | None = None):  # fmt: skip
        self.epoch = epoch
        self.evidence = evidence  # the run.fenced command to keep, or None once kept
        self.kept_at: int | None = None  # log position of the kept run.fenced event
        super().__init__(run, status, attempted, f"stale epoch {epoch!r}: {why}")


class SweepFailed(StoreError):
    """The startup sweep gave up after its bounded retries (BRIEF O5). It was logged at
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


# ------------------------------------------------------- issue 7: audit
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


# ------------------------------------------------ issue 6: projections
class ViewMismatch(LedgerError):
    """A live view differs from a replay from zero (BRIEF R2, `epochledger verify`)."""

    exit_code = 10

    def __init__(self, view: str, message: str):
        self.view = view
        super().__init__(message)
