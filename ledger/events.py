"""The event catalogue: the ledger's on-disk format.

WARNING: tags and field names below ARE the storage format, the NDJSON import/export
format and the audit schema. Never rename a tag or a field, never change a field's
type, and give every new field a default. Adding an event is local: define the class,
add it to `RunEvent` / `ProcessEvent` / `LedgerEvent` / `RoleEvent` / `PassEvent` /
`TokenEvent`, and
the type checker (via `assert_never` in the folds) names every fold that must learn
it. See docs/events.md.

Run events carry the run's resulting `status` and `code` (rule L1). A command is the
same class with `status` unset; `ledger.run.decide` stamps the result.
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, NamedTuple, NewType

import msgspec

# Field shapes. The limits are the "oversized field" rule of L4: they are checked on
# every write (API and import alike) by decoding the encoded event (ledger.codec).
#
# Character rules are a `Pattern` marker, not msgspec's `Meta(pattern=...)`: msgspec
# would re-run the regex on every string of every event read (docs/benchmarks.md, "The
# hot path, second round"), re-proving on read what every write already proved.
# ledger.codec.checked applies the markers at write time, for the API and import alike.


class Pattern(NamedTuple):
    regex: str
    meaning: str


class Bounds(NamedTuple):
    """Write-time bounds of an instant or an integer, low inclusive, high exclusive;
    checked like `Pattern` (ledger.codec.checked), never on read: a value stored before
    a bound existed still decodes."""

    low: Any  # a datetime for an instant, an int for an integer
    high: Any
    meaning: str


# Instants are written from 1970 up to (not including) 9000, UTC. Python's datetime
# ends at years 1 and 9999 and raises OverflowError beyond: 0001-01-01T00:00:00+14:00
# cannot even be converted to UTC, and `booted_at - margin` or `since + deadline` near
# either end would raise inside a fold, which must never raise. The slack on both
# sides is far more than any margin or deadline the ledger accepts.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)

# Nesting: a cause chain is at most MAX_CAUSE_DEPTH causes deep, and no event nests
# deeper than MAX_NESTING JSON objects/arrays (a run.fenced report holds a whole
# event, so it sits one level deeper than the event it keeps). Without a bound a
# chain accepted by a shallow stack could blow the recursion limit of a deeper reader.
MAX_CAUSE_DEPTH = 32
MAX_NESTING = 64

# Unicode format characters (category Cf: bidi overrides and isolates, zero-width
# spaces and joiners, the BOM, tag characters) print as nothing or reorder what follows,
# so an id holding one can display as another id (`nightly-\u202e2400` shows as
# nightly-0042). Ids and labels refuse them (rule L4, docs/events.md). The class is
# Unicode 15's Cf (Unicode 14 lacks U+13439-1343F); tests/ledger/test_hostile_input.py checks
# it against the running Python's unicodedata.
FORMAT_CHARS = (
    r"\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
    r"\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    r"\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
Name = Annotated[
    str,
    msgspec.Meta(min_length=1, max_length=200),
    Pattern(r"[^\s\x00-\x1f\x7f" + FORMAT_CHARS + "]+", "no whitespace, control or format characters"),
]
Text = Annotated[str, msgspec.Meta(max_length=4096)]
LongText = Annotated[str, msgspec.Meta(max_length=65536)]
Code = Annotated[str, msgspec.Meta(max_length=200), Pattern(r"[^\x00-\x1f\x7f]*", "no control characters")]
Instant = Annotated[datetime, msgspec.Meta(tz=True), Bounds(EARLIEST, LATEST, "from 1970 to before 9000 UTC")]
# A process id as an OS gives it (pid_t is a signed 32-bit integer; 0 and negative
# values name process groups to kill(2), never a process), and a signal number (POSIX
# and Linux signals are 1-64; 1-127 leaves room for real-time ones, an exit status
# 128+n names signal n). Write-time bounds (rule L4): beyond them the audit stored NULL
# and the probe left the epoch unjudged forever.
Pid = Annotated[int, Bounds(1, 2**31, "from 1 to 2147483647")]
Signal = Annotated[int, Bounds(1, 128, "from 1 to 127")]
Questions = Annotated[list[Text], msgspec.Meta(max_length=100)]
Answers = Annotated[dict[Text, Text], msgspec.Meta(max_length=100)]
# A run's labels (rule I2): team, owner, partition, a foreign scheduler's tags. Bounded
# so a label set stays a small part of an event: at most MAX_LABELS labels, a key is a
# Name (no whitespace), a value at most MAX_LABEL_VALUE characters without control or
# format characters (it may be empty). Checked on write by ledger.codec.checked.
MAX_LABELS = 64
MAX_LABEL_VALUE = 1024
LabelValue = Annotated[
    str,
    msgspec.Meta(max_length=MAX_LABEL_VALUE),
    Pattern(r"[^\x00-\x1f\x7f" + FORMAT_CHARS + "]*", "no control or format characters"),
]
Labels = Annotated[dict[Name, LabelValue], msgspec.Meta(max_length=MAX_LABELS)]


class Status(enum.StrEnum):
    """The nine statuses of a run. Which status answers which policy question lives in
    ledger/lifecycle.py and nowhere else (rules P1, P3)."""

    QUEUED = "queued"
    RUNNING = "running"
    PAUSED_OPERATOR = "paused_operator"
    PAUSED_WAITING_HUMAN = "paused_waiting_human"
    PAUSED_ORCHESTRATOR = "paused_orchestrator"  # the orchestrator's own wait, resumed by it (rule E1)
    FAILED_RESUMABLE = "failed_resumable"
    FAILED = "failed"
    CANCELLED = "cancelled"
    FINISHED = "finished"


# gc=False (events and Recorded): not tracked by the cyclic garbage collector. An event
# is a frozen value: nothing in it refers back to it (a label dict or list holding the
# event itself cannot be encoded, so `checked` refuses it), so it is in no cycle to
# collect. A group commit of 1,000 keeps ~3,000 of them alive until its commit; tracked,
# each collection walked them all (docs/benchmarks.md, "The hot path, third round").
class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", omit_defaults=True, gc=False):
    at: Instant
    actor: Name | None = None
    reason: LongText | None = None


# ---------------------------------------------------------------- run stream
class RunEventBase(Event, frozen=True, kw_only=True):
    run: Name
    status: Status | None = None  # resulting status; stamped by decide
    code: Code = ""  # failure code of the resulting status; "" = UNKNOWN on failures


class RunQueued(RunEventBase, frozen=True, kw_only=True, tag="run.queued"):
    workflow: Name | None = None
    process: Name | None = None
    labels: Labels = {}  # string -> string, bounded (MAX_LABELS, MAX_LABEL_VALUE; rule I2)
    parent: Name | None = None  # the run this one re-executes or retries (lineage, rule I2)


class RunStarted(RunEventBase, frozen=True, kw_only=True, tag="run.started"):
    epoch: Name | None = None  # the owner: the epoch this start names (rule O2)
    process: Name | None = None  # stamped with the owner epoch's slot when only `epoch` is given
    # A start that names no epoch: the current epoch of the run's slot when the start was
    # recorded, stamped by the ledger. A run started after an epoch's boot is never that
    # epoch's orphan under the O3 fallback, whatever the clock said (docs/operations.md).
    slot_epoch: Name | None = None


class RunCheckpointed(RunEventBase, frozen=True, kw_only=True, tag="run.checkpointed"):
    node: Name
    ref: Text
    epoch: Name | None = None  # written on behalf of this epoch (fencing, docs/operations.md)


class RunPaused(RunEventBase, frozen=True, kw_only=True, tag="run.paused"):
    # "orchestrator": the orchestrator that runs the work waits on its own (an Airflow
    # deferral or reschedule) and resumes it itself; the process that ran it may exit.
    kind: Literal["operator", "waiting_human", "orchestrator"]
    interaction: Name | None = None
    questions: Questions | None = None
    epoch: Name | None = None  # written on behalf of this epoch (fencing)


class RunResumed(RunEventBase, frozen=True, kw_only=True, tag="run.resumed"):
    # "orchestrator": the orchestrator ends its own wait (run.paused kind "orchestrator"),
    # not the ledger's automation: a retry lane ("auto") may not take it over.
    by: Literal["operator", "auto", "orchestrator"]
    answers: Answers | None = None


class Cause(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What caused a failure, itself possibly caused by something deeper (as Temporal's
    failures nest): `ENGINE_ERROR caused by OOM_KILLED: cgroup limit`."""

    code: Code = ""
    message: LongText | None = None
    cause: Cause | None = None


class RunFailed(RunEventBase, frozen=True, kw_only=True, tag="run.failed"):
    resumable: bool
    error: LongText | None = None
    cause: Cause | None = None
    epoch: Name | None = None  # written on behalf of this epoch (fencing)


class RunCancelled(RunEventBase, frozen=True, kw_only=True, tag="run.cancelled"):
    pass


class RunFinished(RunEventBase, frozen=True, kw_only=True, tag="run.finished"):
    epoch: Name | None = None  # written on behalf of this epoch (fencing)


class RunRewound(RunEventBase, frozen=True, kw_only=True, tag="run.rewound"):
    to_ref: Text | None = None


class RunDeleted(RunEventBase, frozen=True, kw_only=True, tag="run.deleted"):
    pass


class RunCorrected(RunEventBase, frozen=True, kw_only=True, tag="run.corrected"):
    """The one way out of an absorbing status (failed, finished): an audited correction
    with an actor and a reason, e.g. a run recorded as finished whose output proved
    bad, or a crash that had in fact completed. `to` is the corrected status; `code`
    (on a failure status) the corrected failure code."""

    to: Status
    error: LongText | None = None


# -- tick fault isolation (rules T1-T3; docs/tick.md). Written by epochledger.tick only.
class RunTickFailed(RunEventBase, frozen=True, kw_only=True, tag="run.tick_failed"):
    """One of the scheduler's per-run steps raised on this run in tick `tick`. Opens or
    extends the run's failure streak; the status does not change."""

    tick: Name
    step: Name
    error_class: Name
    error: LongText = ""
    epoch: Name | None = None  # the ticking epoch: fenced like any report (rule F1)


class RunTickRecovered(RunEventBase, frozen=True, kw_only=True, tag="run.tick_recovered"):
    """Every step succeeded on a run whose streak was open: the streak closes. Never
    written for a healthy run (rule T3)."""

    tick: Name
    epoch: Name | None = None  # the ticking epoch (rule F1)


class RunDeadLettered(RunEventBase, frozen=True, kw_only=True, tag="run.dead_lettered"):
    """The streak outlived the tick failure deadline: `failed` with
    TICK_DEADLINE_EXCEEDED (rule T2). Carries the last failure and the bound."""

    tick: Name
    step: Name
    error_class: Name
    error: LongText = ""
    failing_since: Instant  # first failure of the streak
    failures: int  # failures in the streak, this tick's included
    deadline_s: float  # the bound, seconds
    cleanup_error: LongText | None = None  # best-effort cleanup that raised
    epoch: Name | None = None  # the ticking epoch (rule F1)


# ----------------------------------------- orphans and fencing (rules O2-O5, F1, F2)
class RunRecovered(RunEventBase, frozen=True, kw_only=True, tag="run.recovered"):
    """A sweep recovered an orphan: moves it to failed_resumable / PROCESS_ORPHANED and
    is the audit record of why (rule O5). `actor` is the sweeping epoch."""

    # "O2-superseded" | "O2-stopped" | "O2-exited" | "O2-host-rebooted" | "O3-fallback"
    # (ledger/process.py end_of, projections/orphans.py)
    rule: Name
    swept_by: Name  # the sweeping epoch
    swept_by_process: Name
    owner_process: Name | None = None
    owner_epoch: Name | None = None
    superseded_by: Name | None = None  # O2-superseded: the epoch that superseded the owner
    stopped_at: Instant | None = None  # O2-stopped: when the owner recorded its clean stop
    started_at: Instant | None = None  # the run's last start
    booted_at: Instant | None = None  # O3: boot instant of the epoch the verdict is relative to
    cutoff: Instant | None = None  # O3: booted_at - margin
    margin: float | None = None  # O3: seconds
    # O2-exited: the owner's process.exited, as recorded (rule O7)
    exited_at: Instant | None = None
    observed_by: Name | None = None
    exit_code: int | None = None
    signal: Signal | None = None
    # O2-host-rebooted: the owner's host and host boot id, and the later boot on that host
    # that carried another host boot id (rule O7)
    host: Name | None = None
    host_boot: Name | None = None
    rebooted_to: Name | None = None  # the host boot id of the later boot
    rebooted_by: Name | None = None  # the epoch whose boot carried it
    evidence: Text | None = None  # O2-exited: the exit's evidence; O2-host-rebooted: a sentence


class RunFenced(RunEventBase, frozen=True, kw_only=True, tag="run.fenced"):
    """A report written on behalf of a stale epoch, refused and kept as evidence. It
    changes nothing: status and code stay what they were."""

    epoch: Name  # the stale epoch the refused report was written for
    refused: Name  # tag of the refused report
    why: Text
    superseded_by: Name | None = None
    stopped_at: Instant | None = None
    report: dict[str, Any] = {}  # the refused report as it was submitted
    # For an outcome report (run.finished, run.failed): the status it would have set,
    # stamped when it was refused. Such evidence binds automation: the run is not
    # auto-resumed until it starts again (rule F2).
    reported: Status | None = None
    rule: Name | None = None  # why the epoch is no longer live (ledger/process.py end_of): O2-superseded, ...


class RunImported(RunEventBase, frozen=True, kw_only=True, tag="run.imported"):
    """An importer read this run's history in its source scheduler up to `cursor`: the
    per-run cursor of an incremental import, kept in the run's own stream (rule I3,
    docs/import-dagster.md). Bookkeeping, not a transition: status, code, the last
    report and who made it stay. Written only by importers, only when the cursor moved."""

    source: Name  # the scheduler it came from: "dagster"
    cursor: int  # the source's position read so far in this run's history (Dagster: the event log's storage id)
    source_status: Name | None = None  # the source's own status of the run when read (Dagster: "SUCCESS", ...)
    source_updated: Instant | None = None  # when the source last updated its record of the run, as read


RunEvent = (
    RunQueued
    | RunStarted
    | RunCheckpointed
    | RunPaused
    | RunResumed
    | RunFailed
    | RunCancelled
    | RunFinished
    | RunRewound
    | RunDeleted
    | RunCorrected
    | RunTickFailed
    | RunTickRecovered
    | RunDeadLettered
    | RunRecovered
    | RunFenced
    | RunImported
)


# ------------------------------------------------------------ process stream
class ProcessEventBase(Event, frozen=True, kw_only=True):
    process: Name
    epoch: Name


class ProcessBooted(ProcessEventBase, frozen=True, kw_only=True, tag="process.booted"):
    booted_at: Instant
    host: Name | None = None
    pid: Pid | None = None
    # Liveness facts (rule O7), recorded by boot() by default on Linux (ledger/host.py):
    # the host's boot id (/proc/sys/kernel/random/boot_id), so a later boot on the same
    # host with another id says the host rebooted; and the process's start time in clock
    # ticks after host boot (field 22 of /proc/<pid>/stat), so a reused pid is told apart.
    host_boot: Name | None = None
    pid_start: Annotated[int, msgspec.Meta(ge=0)] | None = None
    # The machine's identity (a keyed hash of /etc/machine-id, rule O10): a host is known
    # by it, not by its name, so a later boot with another host boot id says "rebooted"
    # only when it carries the same machine id. A boot without one (an old log, a machine with none)
    # never proves a reboot.
    machine: Name | None = None


class ProcessStopping(ProcessEventBase, frozen=True, kw_only=True, tag="process.stopping"):
    pass


class ProcessStopped(ProcessEventBase, frozen=True, kw_only=True, tag="process.stopped"):
    pass


class ProcessSweepSkipped(ProcessEventBase, frozen=True, kw_only=True, tag="process.sweep_skipped"):
    """The sweep of this epoch did not apply the O3 time fallback, and why (e.g. the
    wall clock read earlier than the boot instant: it stepped back)."""

    why: Text
    now: Instant | None = None
    booted_at: Instant | None = None


class ProcessSweepFailed(ProcessEventBase, frozen=True, kw_only=True, tag="process.sweep_failed"):
    """The sweep of this epoch gave up after its bounded retries (rule O5 alert)."""

    attempts: int
    error: LongText


class ProcessExited(ProcessEventBase, frozen=True, kw_only=True, tag="process.exited"):
    """Someone who saw the epoch's process die says so (rule O7): its supervisor, a probe
    on its own host that found its pid gone or reused, an importer that read the exit
    from the orchestrator. The epoch is no longer live from here on."""

    observed_by: Name  # "probe@<host>", "supervisor:<name>", "dagster-import", ...
    exit_code: int | None = None
    signal: Signal | None = None
    evidence: Text | None = None  # e.g. "pid 4242 not running", "pid 4242 start 901 != recorded 777"


class ProcessRetired(ProcessEventBase, frozen=True, kw_only=True, tag="process.retired"):
    """The slot's last epoch (`epoch`) is over and no run of the slot is left running, so
    the slot retires (rule O8): the live reads (`epochs`, the orphan view, the sweep)
    skip it from here on; its history stays in the log, replay and the audit. A later
    boot of the slot brings it back."""


ProcessEvent = (
    ProcessBooted
    | ProcessStopping
    | ProcessStopped
    | ProcessExited
    | ProcessSweepSkipped
    | ProcessSweepFailed
    | ProcessRetired
)


# ------------------------------------------------------------ the ledger's own stream
class LedgerEventBase(Event, frozen=True, kw_only=True):
    """A fact about the ledger itself, on its one stream (`ledger_stream()`): settings
    the rules read, kept as events so a replay of any prefix knows them as they were."""


class LedgerDefaultSlot(LedgerEventBase, frozen=True, kw_only=True, tag="ledger.default_slot"):
    """The slot whose boots judge running runs recorded with neither an epoch nor a
    process, by the O3 time fallback (rule O9); None: no slot does (the default)."""

    slot: Name | None = None


LedgerEvent = LedgerDefaultSlot  # one setting so far; a second joins as a union


# ------------------------------------------------------------------ role streams
class RoleEventBase(Event, frozen=True, kw_only=True):
    """A fact about one exclusive role (rule T7), on that role's own stream
    (`role_stream(role)`): one stream, so "one holder at a time" is the stream's
    optimistic version check."""

    role: Name


class RoleGranted(RoleEventBase, frozen=True, kw_only=True, tag="role.granted"):
    """Epoch `epoch` of slot `process` holds `role` from here on, with fencing token
    `token` (1 for the role's first grant, the previous grant's + 1 after: it only
    grows), until the facts of O7 end that epoch (rule T7). A command is the same class
    with `token` unset; `ledger.role.decide` stamps it and the previous holder."""

    epoch: Name
    process: Name
    token: int = 0  # stamped by decide
    # The holder this grant passed the role on from, and the O7 fact that ended its epoch
    # (ledger.process.end_of: its rule and sentence); absent on the role's first grant.
    previous_epoch: Name | None = None
    previous_process: Name | None = None
    previous_token: int | None = None
    previous_rule: Name | None = None  # O2-superseded | O2-stopped | O2-exited | O2-host-rebooted
    previous_evidence: LongText | None = None


RoleEvent = RoleGranted  # one event so far; a second joins as a union


# ------------------------------------------------------------------ pass streams
class PassEventBase(Event, frozen=True, kw_only=True):
    """A fact about one item of a cross-run pass (rule T6: an outbox of teardowns, a
    reconcile of cancellations), on the pass's own stream (`pass_stream(name)`). Never a
    run's event: a failing item changes no run's state."""

    name: Name  # the pass
    item: Name  # the item's id, as the pass lists it
    tick: Name
    epoch: Name | None = None  # the ticking epoch (rule F1)


class PassItemFailed(PassEventBase, frozen=True, kw_only=True, tag="pass.item_failed"):
    """Handling the item raised in tick `tick`; `deliveries` counts its failed deliveries
    so far, this one included. It is delivered again on later ticks."""

    error_class: Name
    error: LongText = ""
    deliveries: int


class PassItemRecovered(PassEventBase, frozen=True, kw_only=True, tag="pass.item_recovered"):
    """The item was handled after failed deliveries: its failures close. Never written
    for an item that had none (rule T6, as T3)."""


class PassItemRetired(PassEventBase, frozen=True, kw_only=True, tag="pass.item_retired"):
    """The item failed its `ceiling`-th delivery: it is retired, never delivered again
    (for an outbox of teardowns: "teardown abandoned"). A diagnostic: no run's state
    changes. Carries the last failure."""

    error_class: Name
    error: LongText = ""
    deliveries: int
    ceiling: int


PassEvent = PassItemFailed | PassItemRecovered | PassItemRetired


# ------------------------------------------------------------ idempotency keys
KeptBody = Annotated[str, msgspec.Meta(max_length=64 * 1024 * 1024)]


class IdempotencyEventBase(Event, frozen=True, kw_only=True):
    """A write's first outcome kept under the client's Idempotency-Key (rule H3), on
    the key's own stream (`idempotency_stream(key)`). Never a run's or a slot's event:
    no view reads it."""

    key: Name


class IdempotencyKept(IdempotencyEventBase, frozen=True, kw_only=True, tag="idempotency.kept"):
    """The outcome of the request first sent with `key`: its `fingerprint` (a digest
    of the operation, its path and its body), the HTTP `status` and the response `body`
    it got. A retry with the same key and fingerprint is answered with them."""

    fingerprint: Name
    status: int
    body: KeptBody


IdempotencyEvent = IdempotencyKept  # one event so far; a second joins as a union


# ------------------------------------------------------------------ the token stream
# Bearer tokens of the HTTP service (rule H4, docs/service.md "Tokens and roles"). One
# stream holds every token (`token_stream()`): "is there any token?", the listing and a
# server's check of a request are one read of it, and a revocation is seen by every
# server on the store at its next request. The token itself is never stored: only its
# SHA-256 digest, which names it without revealing it (ledger/tokens.py says why a fast
# hash is enough for a random token).
class TokenEventBase(Event, frozen=True, kw_only=True):
    """A fact about one bearer token, on the ledger's one token stream."""

    token: Name  # the token's id: the public part of the token, as `token list` shows it


MAX_TOKEN_SLOTS = 64


class TokenIssued(TokenEventBase, frozen=True, kw_only=True, tag="token.issued"):
    """Token `token` was issued with `role` (ledger/access.py); `digest` is the SHA-256 of
    the whole token, hex. `slots`: a writer token's process slots (names or fnmatch
    patterns); empty: every slot. `name`: what it is for ("rust-tick", "alice")."""

    role: Name
    digest: Annotated[str, msgspec.Meta(min_length=64, max_length=64), Pattern(r"[0-9a-f]{64}", "64 hex digits")]
    name: Name | None = None
    slots: Annotated[list[Name], msgspec.Meta(max_length=MAX_TOKEN_SLOTS)] = []


class TokenRevoked(TokenEventBase, frozen=True, kw_only=True, tag="token.revoked"):
    """Token `token` is refused from here on, by every server on the store."""


TokenEvent = TokenIssued | TokenRevoked

AnyEvent = RunEvent | ProcessEvent | LedgerEvent | RoleEvent | PassEvent | IdempotencyEvent | TokenEvent
# The base class of each stream family: what a write path dispatches on and an
# `isinstance` check names. A new family joins here, once.
StreamEvent = (
    RunEventBase
    | ProcessEventBase
    | LedgerEventBase
    | RoleEventBase
    | PassEventBase
    | IdempotencyEventBase
    | TokenEventBase
)

RUN_EVENT_TYPES: tuple[type[RunEventBase], ...] = RunEvent.__args__
PROCESS_EVENT_TYPES: tuple[type[ProcessEventBase], ...] = ProcessEvent.__args__
LEDGER_EVENT_TYPES: tuple[type[LedgerEventBase], ...] = (LedgerDefaultSlot,)
ROLE_EVENT_TYPES: tuple[type[RoleEventBase], ...] = (RoleGranted,)
PASS_EVENT_TYPES: tuple[type[PassEventBase], ...] = PassEvent.__args__
IDEMPOTENCY_EVENT_TYPES: tuple[type[IdempotencyEventBase], ...] = (IdempotencyKept,)
TOKEN_EVENT_TYPES: tuple[type[TokenEventBase], ...] = TokenEvent.__args__
EVENT_TYPES: tuple[type[Event], ...] = (
    *RUN_EVENT_TYPES,
    *PROCESS_EVENT_TYPES,
    *LEDGER_EVENT_TYPES,
    *ROLE_EVENT_TYPES,
    *PASS_EVENT_TYPES,
    *IDEMPOTENCY_EVENT_TYPES,
    *TOKEN_EVENT_TYPES,
)
TAGS: dict[str, type[Event]] = {cls.__struct_config__.tag: cls for cls in EVENT_TYPES}  # type: ignore[misc]


_TAG_OF_TYPE: dict[type, str] = {cls: tag for tag, cls in TAGS.items()}


def tag_of(event: Event | type[Event]) -> str:
    # By the event's class first: `__struct_config__` builds an object on every access
    # (once per appended event: docs/benchmarks.md, "The hot path, third round"). A
    # class given, or one outside the catalogue, takes the config's tag as before.
    return _TAG_OF_TYPE.get(type(event)) or event.__struct_config__.tag  # type: ignore[return-value]


# A stream id's kind, for the type checker: each is a plain `str` at run time (the
# NewType's call returns its argument), so a read of `run_stream(r)` is typed as a run's
# state (Ledger.read_state, Batch.state; the states are named in ledger/streams.py). A
# stream id from anywhere else (a stored row, a caller's string) is only a `str`.
RunStream = NewType("RunStream", str)
ProcessStream = NewType("ProcessStream", str)
LedgerStream = NewType("LedgerStream", str)
RoleStream = NewType("RoleStream", str)
PassStream = NewType("PassStream", str)
IdempotencyStream = NewType("IdempotencyStream", str)
TokenStream = NewType("TokenStream", str)


def run_stream(run: str) -> RunStream:
    """Stream id of a run. Prefixed so run and process ids can never collide."""
    return RunStream("run:" + run)


def process_stream(process: str) -> ProcessStream:
    return ProcessStream("process:" + process)


LEDGER_STREAM = LedgerStream("ledger:settings")  # the ledger's own stream: its settings (LedgerEvent)


def ledger_stream() -> LedgerStream:
    """Stream id of the ledger's own events. Its prefix collides with no run or slot."""
    return LEDGER_STREAM


def role_stream(role: str) -> RoleStream:
    """Stream id of an exclusive role (rule T7). Prefixed: collides with no run or slot."""
    return RoleStream("role:" + role)


def pass_stream(name: str) -> PassStream:
    """Stream id of a cross-run pass (rule T6). Prefixed: collides with no run or slot."""
    return PassStream("pass:" + name)


def idempotency_stream(key: str) -> IdempotencyStream:
    """Stream id of an Idempotency-Key's kept outcome (rule H3). Prefixed: collides with
    no run or slot."""
    return IdempotencyStream("idempotency:" + key)


TOKEN_STREAM = TokenStream("tokens")  # every bearer token's events (rule H4): collides with no prefixed stream


def token_stream() -> TokenStream:
    """Stream id of the service's bearer tokens (rule H4): one stream for all of them."""
    return TOKEN_STREAM


class Recorded(msgspec.Struct, frozen=True, gc=False):  # gc=False: as Event
    """An event as the log holds it: its position in the notification log (contiguous on
    SQLite, gapped on PostgreSQL), its stream, its version within the stream."""

    position: int
    stream: str
    version: int
    event: AnyEvent
