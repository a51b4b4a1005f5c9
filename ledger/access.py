"""Who may do what (rule H4): the roles of the service's bearer tokens, ONE table.

Each role names the operations it may call. An operation is a facade method name
(`Ledger.queue`, `Ledger.run_view`, ...), the name a route declares with
`opt={"op": ...}`; an act that only some callers of an operation may make is an
operation of its own here, named `<op>.<who>` (`resume.operator`: see `act`). An
operation in no role's set is refused to every token (deny by default), and a test
fails when a served route declares an operation that is not in this table
(tests/service/test_service_auth.py).

Pure: no I/O. The service's guard (epochledger/service/auth.py) asks `allows` and
`needed`; `token create` asks `ROLES` which role names exist.
"""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase
from typing import Final

# Reads that disclose runs, slots and the log; every role has them.
READS: Final = frozenset(
    {
        "run_view",
        "get_run",
        "list_runs",
        "runs",
        "history",
        "history_of",
        "labels",
        "status",
        "epoch",
        "epochs",
        "epoch_liveness",
        "liveness",
        "orphaned",
        "orphans",
        "unjudged",
        "preview_sweep",
        "tick_health_summary",
        "error_class_health",
        "streaking",
        "settings",
        "role",
        "role_holder",
        "head",
        "parked",
        "replay",
        "whatif",
        "timeline",
        "verify",
        "chain",
        "take_digest",
        "events",
        "follow",
        "stream",
        "metrics",
        "fleet",
    }
)
# What a scheduler writes: its runs' transitions, its slots' boots, stops, exits and
# sweeps, its ticks' outcomes, and a group commit of them. A writer bound to slots makes
# the slot-bound ones only for its slots (SLOT_BOUND).
SCHEDULER_WRITES: Final = frozenset(
    {
        "queue",
        "start",
        "checkpoint",
        "pause",
        "resume",
        "fail",
        "finish",
        "cancel",
        "boot",
        "begin_stop",
        "stop",
        "exited",
        "sweep",
        "startup",
        "probe",
        "tick_report",
        "acquire_role",
        "batch",
    }
)
# The acts of a human operator on a run: a correction of a final verdict, and a resume
# or cancel made by an operator (`act`), which automation must not make in its name
# (rule P1: automation never overrides an operator's stop).
OPERATOR_ACTS: Final = frozenset({"correct", "resume.operator", "cancel.operator", "rewind", "delete"})
# The audit's SQL over the whole history (rule A1), its reports, its file and exports.
AUDIT: Final = frozenset({"audit_report", "audit_query", "audit_status", "audit_sync", "export_ndjson"})
# The ledger's own administration: its tokens (rule H4), its settings, an import (whose
# lines may hold any event of the catalogue, tokens' included), a rebuild, the chain.
ADMINISTRATION: Final = frozenset(
    {
        "token_create",
        "token_list",
        "token_revoke",
        "set_default_slot",
        "import_ndjson",
        "import_dagster",
        "rebuild",
        "upgrade_chain",
        "write_digest",
    }
)
# Served to anyone, with or without a token: they disclose nothing of the ledger
# (liveness and readiness probes, the OpenAPI document), and the console's login page and
# its own style sheet and script (the package's files).
PUBLIC: Final = frozenset({"healthz", "readyz", "openapi", "console_login", "console_static"})
# Checked against the last token registry read when the store does not answer: the
# metrics say that the store is away (rule H7), which is when they are needed most. A
# token revoked during the outage is refused again from the store's return on.
WHEN_STORE_AWAY: Final = frozenset({"metrics"})

ROLES: Final[dict[str, frozenset[str]]] = {
    "reader": READS,
    "writer": READS | SCHEDULER_WRITES,
    "operator": READS | {"pause", "resume", "cancel", "exited", "sweep"} | OPERATOR_ACTS,
    "auditor": READS | AUDIT,
    "admin": READS | SCHEDULER_WRITES | OPERATOR_ACTS | AUDIT | ADMINISTRATION,
}
ADMIN: Final = "admin"  # the role every loopback caller has while a ledger has no token

# Operations a writer token bound to slots makes only for its slots: the service checks
# the slot (or the epoch's slot) they act for (auth.check_slot, auth.check_epoch).
SLOT_BOUND: Final = frozenset(
    {"boot", "begin_stop", "stop", "exited", "sweep", "startup", "probe", "tick_report", "acquire_role"}
)

# Every operation the table knows; a route's op outside it is refused to every caller.
OPERATIONS: Final = frozenset().union(*ROLES.values(), PUBLIC)

# An actor that names an operator: `operator`, or `operator:<who>` (docs/service.md).
OPERATOR_ACTOR: Final = "operator"


def act(op: str, *, by: str | None = None, actor: str | None = None) -> str:
    """The act a call of `op` makes: `resume` with `by="operator"` is `resume.operator`;
    `cancel` whose actor names an operator (`operator` or `operator:<who>`) is
    `cancel.operator`; anything else is `op` itself."""
    if op == "resume" and by == "operator":
        return "resume.operator"
    if op == "cancel" and actor is not None and (actor == OPERATOR_ACTOR or actor.startswith(OPERATOR_ACTOR + ":")):
        return "cancel.operator"
    return op


def allows(role: str, op: str) -> bool:
    """May a token of `role` call `op`? Unknown roles and operations: no."""
    return op in PUBLIC or op in ROLES.get(role, frozenset())


def needed(op: str) -> list[str]:
    """The roles that may call `op`, in the table's order (empty: none may)."""
    return [role for role, ops in ROLES.items() if op in ops]


def slot_allowed(slots: Iterable[str], slot: str) -> bool:
    """Is `slot` one of `slots` (names or fnmatch patterns, case-sensitive)? An empty
    binding allows every slot."""
    patterns = list(slots)
    return not patterns or any(fnmatchcase(slot, p) for p in patterns)


def render() -> str:
    """The table as docs/service.md shows it: the reads every role has, then what each
    role has besides (tests/ledger/test_tokens.py keeps the page equal to it)."""

    def ops(names: Iterable[str]) -> str:
        return ", ".join(f"`{op}`" for op in sorted(names)) or "nothing else"

    lines = ["| role | may call, besides the reads |", "|---|---|"]
    lines += [f"| {role} | {ops(names - READS)} |" for role, names in ROLES.items()]
    lines.append(f"| (anyone, no token needed) | {ops(PUBLIC)} |")
    return f"The reads, every role's: {ops(READS)}.\n\n" + "\n".join(lines) + "\n"
