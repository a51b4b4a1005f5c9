"""Negative space (rule P3): no hand-written set of statuses outside
ledger/lifecycle.py.

Walks the AST of every package and flags any literal set, tuple, list or dict keyed by
two or more status values (strings such as "failed" or members such as Status.FAILED),
and any `or`/`and` of comparisons of something against two or more status values.
Deliberate exceptions sit on ALLOWLIST, each anchored to (file, enclosing function,
the exact statuses) with its reason, so a removed set and an added one cannot trade
places behind a count, and a stale entry fails too.
"""

from __future__ import annotations

import ast
from pathlib import Path

from epochledger.ledger.events import Status

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["epochledger", "ledger", "projections", "replay", "bench"]
HOME = "ledger/lifecycle.py"
VALUES = {s.value for s in Status}
MEMBERS = {s.name for s in Status}

# (file, enclosing function qualname, statuses) -> why this one is deliberate.
ALLOWLIST: dict[tuple[str, str, tuple[str, ...]], str] = {}


def _status(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in VALUES:
        return node.value
    if isinstance(node, ast.Attribute) and node.attr in MEMBERS and isinstance(node.value, ast.Name | ast.Attribute):
        return Status[node.attr].value
    return None


def findings(source: str, path: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """(file, enclosing function, statuses) for every hand-written status set."""
    found: list[tuple[str, str, tuple[str, ...]]] = []

    def visit(node: ast.AST, scope: list[str]) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            scope = [*scope, node.name]
        statuses: list[str] = []
        if isinstance(node, ast.Set | ast.List | ast.Tuple):
            statuses = [s for s in map(_status, node.elts) if s]
        elif isinstance(node, ast.Dict):
            statuses = [s for s in map(_status, [k for k in node.keys if k is not None]) if s]
        elif isinstance(node, ast.BoolOp):
            for v in node.values:
                if isinstance(v, ast.Compare):
                    statuses += [s for s in map(_status, [v.left, *v.comparators]) if s]
        elif isinstance(node, ast.Compare) and len(node.comparators) > 1:
            statuses = [s for s in map(_status, [node.left, *node.comparators]) if s]
        if len(statuses) >= 2:
            found.append((path, ".".join(scope) or "<module>", tuple(sorted(set(statuses)))))
        for child in ast.iter_child_nodes(node):
            visit(child, scope)

    visit(ast.parse(source), [])
    return found


def scan() -> list[tuple[str, str, tuple[str, ...]]]:
    out = []
    for pkg in PACKAGES:
        for file in sorted((ROOT / pkg).rglob("*.py")):
            rel = file.relative_to(ROOT).as_posix()
            if rel != HOME:
                out += findings(file.read_text(), rel)
    return out


def test_P3_no_status_sets_outside_lifecycle() -> None:
    offending = [f for f in scan() if f not in ALLOWLIST]
    assert not offending, (
        "hand-written status sets outside ledger/lifecycle.py (ask a lifecycle predicate, "
        f"or add an ALLOWLIST entry with its reason): {offending}"
    )


def test_P3_allowlist_has_no_stale_entries() -> None:
    stale = set(ALLOWLIST) - set(scan())
    assert not stale, f"allowlist entries that no longer match anything: {stale}"


def test_P3_the_scan_sees_the_code() -> None:
    """Guards the guard: the scan reads files, and finds lifecycle's own sets when
    pointed at it (so a broken walk cannot pass by finding nothing anywhere)."""
    home = findings((ROOT / HOME).read_text(), HOME)
    assert len(home) >= 3
    assert sum(1 for pkg in PACKAGES for _ in (ROOT / pkg).rglob("*.py") if (ROOT / pkg).exists()) > 10


# What the test must catch, each as a new module would write it.
CAUGHT = [
    'def retry_lane(run):\n    return run.status in ("failed", "cancelled")\n',
    "def f(s):\n    return s in {Status.FAILED, Status.CANCELLED}\n",
    "def f(s):\n    return s.status == S.FAILED or s.status == S.FINISHED\n",
    "def f(s):\n    return s != 'queued' and s != 'running'\n",
    "ACTIVE = ['queued', 'running']\n",
    "LABELS = {Status.FAILED: 'red', Status.FINISHED: 'green'}\n",
]


def test_P3_catches_a_new_hand_written_set() -> None:
    for source in CAUGHT:
        assert findings(source, "ledger/new_module.py"), source
    assert findings(CAUGHT[0], "ledger/new_module.py") == [
        ("ledger/new_module.py", "retry_lane", ("cancelled", "failed"))
    ]
    # a single status is a question about one status, not a set
    assert not findings("def f(s):\n    return s is Status.FINISHED or s.code == 'X'\n", "x.py")
