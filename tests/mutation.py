"""`make mutation`: mutation testing of the rule modules (docs/mutation.md). Too slow for
CI (tens of minutes on 2 cores); run it when you touch a rule.

1. mutmut 3 mutates the functions of the rule modules ([tool.mutmut] in pyproject.toml)
   and runs the suites that pin the rules against each mutant.
2. mutmut does not mutate module-level tables, and the rules' tables are module level:
   the status sets and the transition table of ledger/lifecycle.py, the report types the
   fence judges (ledger/run.py), the sweep's retry bounds, rule H3's window. Here each entry of each table
   is changed on its own (one status added to or removed from a set, one event's sources
   toggled, one report type removed, a bound moved by one) by a pytest plugin at session
   start, and the same suites run against it.
3. A score per module. A survivor is either killed by a new test or argued equivalent in
   docs/mutation.md (its name in a table row there); any other survivor, or a module
   under the bar, fails the run.

    python -m tests.mutation              # both parts, then the report
    python -m tests.mutation --tables     # only part 2 (a few minutes)
    python -m tests.mutation --report     # only the report, from mutmut's last results
    python -m tests.mutation --fresh      # the seams' survivors and unrun mutants, each in a
                                          # process of its own (FRESH_SUITES), then the report
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
BAR = 0.90
# One list of suites and modules: mutmut's, in pyproject.toml.
_CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
SUITES: list[str] = _CONFIG["pytest_add_cli_args_test_selection"]
MODULES: list[str] = _CONFIG["only_mutate"]
# A module whose rules sit in a few of its functions: only those functions' mutants are run
# and scored (mutmut's own patterns, by mutant name). The tick's T5 functions: the rest of
# epochledger/tick.py (the T1-T3 driver, the report, the roles and passes glue, about 1,060
# mutants) is not measured here (docs/mutation.md, "The tick's cross-run rules").
FUNCTIONS: dict[str, list[str]] = {
    # The seams (docs/mutation.md, "The seams"): the functions that hold the guards, of the
    # modules whose other functions read, list or render (the codec is all guards: whole).
    # The SQLite write path, its log token, and how an unusable file is refused (L5, N6).
    "epochledger/ledger/store/sqlite.py": [
        f"epochledger.ledger.store.sqlite.{f}__mutmut_*"
        for f in (
            "xǁSQLiteStoreǁ_transact",
            "xǁSQLiteStoreǁ_insert",
            "xǁSQLiteStoreǁ_writer",
            "xǁSQLiteStoreǁ_existing",
            "xǁSQLiteStoreǁ_rows_at_on",
            "xǁSQLiteStoreǁ_rows_at",
            "xǁSQLiteStoreǁ_check",
            "xǁSQLiteStoreǁtoken_after_append",
            "xǁSQLiteStoreǁlog_token",
            "xǁSQLiteStoreǁ_immutable",
            "x__open_error",
            "x__require_sqlite_ledger",
            "x__writable",
            "x__read_only_connection",
        )
    ],
    # The engine's tracking (R3, T4): applying a batch under its position, parking, the
    # re-read of a poison row, the shared pass, the positions a caller is told.
    "epochledger/projections/engine.py": [
        f"epochledger.projections.engine.{f}__mutmut_*"
        for f in (
            "xǁRunnerǁload",
            "xǁRunnerǁrun",
            "xǁRunnerǁapply",
            "xǁRunnerǁ_fold_clean",
            "xǁRunnerǁ_reread",
            "x_run_together",
            "x__feed",
            "x__apply_types",
            "x__index",
            "x__latest",
            "x__retry",
            "x_status",
            "x_is_current",
            "x__is_built",
            "x_rebuild",
            "x_catch_up",
            "x_behind",
        )
    ],
    # What-if's difference kinds and the built-in policies (R4).
    "epochledger/replay/whatif.py": [
        "epochledger.replay.whatif.xǁ_Replayǁ*",
        *(
            f"epochledger.replay.whatif.x_{f}__mutmut_*"
            for f in ("epoch_rule", "flat_age", "floor", "clamp", "heartbeat")
        ),
    ],
    "epochledger/tick.py": [
        "epochledger.tick.xǁ_StepThreadsǁ*",
        "epochledger.tick.x_run_batch__mutmut_*",
        "epochledger.tick.x__too_late__mutmut_*",
        "epochledger.tick.x__stops_the_tick__mutmut_*",
        "epochledger.tick.xǁTickDriverǁ_drive__mutmut_*",
    ],
}


# A second runner for the seams (`--fresh`): each of a module's mutants that mutmut's
# runner left surviving or did not run, in a pytest process of its own, against the
# suites that pin that module's guards. mutmut's runner forks from one process that
# imported everything and ran the clean suite once, so a function whose result a module
# keeps from its first call (the codec's checkers and decoder, `@cache`) is not called
# again under the mutant there, and a mutant of it survives unseen; a fresh process calls
# it. A kill here counts as a kill in the report (mutants/fresh.json).
FRESH_SUITES: dict[str, list[str]] = {
    # (the import's hypothesis laws, tests/app/test_ndjson.py, cost 26 s a survivor: mutmut's run has them)
    "epochledger/ledger/codec.py": [
        "tests/ledger/test_codec_branches.py",
        "tests/ledger/test_hostile_input.py",
        "tests/ledger/test_labels.py",
    ],
    # (the reads' law and the CLI goldens, 30 s a survivor, are in mutmut's run)
    "epochledger/replay/whatif.py": ["tests/replay/test_whatif.py", "tests/replay/test_whatif_edges.py"],
    # The refusal of an unusable file (L4), the write path and its token (L5): 17 s a
    # survivor; the opening's tests first, which append too, so most mutants die in 3 s
    "epochledger/ledger/store/sqlite.py": [
        "tests/ledger/test_store_open.py",
        "tests/ledger/test_sqlite_write_path.py",
        "tests/ledger/test_store_ports.py",
        "tests/ledger/test_store_sqlite.py",
        "tests/app/test_damaged_log.py",
        "tests/ledger/test_races.py",
    ],
    # The engine's tracking (R3, T4): the fast suites first, so that a kill stops early.
    # (the rebuild-equals-incremental law, 20 s a survivor on a loaded machine, first in
    # its file, is left out: docs/mutation.md says which survivors were not run against it)
    "epochledger/projections/engine.py": [
        "tests/projections/test_engine_tracking.py",
        "tests/projections/test_engine_positions.py",
        "tests/app/test_damaged_log.py",
        "tests/projections/test_views_registered.py",
        "tests/projections/test_engine_read_path.py",
        "tests/projections/test_engine.py",
        "--deselect",
        "tests/projections/test_engine.py::test_R3_rebuild_equals_incremental_catch_up",
    ],
}


def mutant_patterns() -> list[str]:
    """What `mutmut run` is asked for: every mutant of a whole module, and of a module
    named in FUNCTIONS only those functions'."""
    whole = [m[: -len(".py")].replace("/", ".") + ".*" for m in MODULES if m not in FUNCTIONS]
    return whole + [p for m in MODULES for p in FUNCTIONS.get(m, [])]


# ------------------------------------------------------- part 2: table mutants
def table_mutants() -> Iterator[tuple[str, str, str, Any]]:
    """(module file, name, description, how) for every table entry. `how` is the value to
    put in place of the name (or of one key of it, for the transition table)."""
    from epochledger.ledger import lifecycle, run
    from epochledger.ledger.events import Status

    for name in sorted(
        n for n in vars(lifecycle) if n.startswith("_") and isinstance(getattr(lifecycle, n), frozenset)
    ):
        value = getattr(lifecycle, name)
        for s in Status:
            changed = value - {s} if s in value else value | {s}
            yield "epochledger/ledger/lifecycle.py", name, f"{name} {'-' if s in value else '+'}{s.value}", changed
    for tag, sources in lifecycle.TRANSITIONS.items():
        for s in [None, *Status]:
            changed = sources - {s} if s in sources else sources | {s}
            yield (
                "epochledger/ledger/lifecycle.py",
                f"TRANSITIONS[{tag}]",
                f"TRANSITIONS[{tag}] {'-' if s in sources else '+'}{s}",
                changed,
            )
    for code in sorted(lifecycle.NO_AUTO_RESUME):
        yield (
            "epochledger/ledger/lifecycle.py",
            "NO_AUTO_RESUME",
            f"NO_AUTO_RESUME -{code}",
            lifecycle.NO_AUTO_RESUME - {code},
        )
    for name in ("FENCED_REPORTS", "OUTCOME_REPORTS"):
        value = getattr(run, name)
        for cls in value:
            yield "epochledger/ledger/run.py", name, f"{name} -{cls.__name__}", tuple(c for c in value if c is not cls)
    # Rule O5's bounds, each moved on its own (tests/app/test_sweep_settings.py pins them).
    from epochledger import sweep

    rounds, attempts, (first, second) = sweep.CONFLICT_ROUNDS, sweep.ATTEMPTS, sweep.GAPS
    yield "epochledger/sweep.py", "CONFLICT_ROUNDS", f"CONFLICT_ROUNDS {rounds} -> 1", 1
    yield "epochledger/sweep.py", "CONFLICT_ROUNDS", f"CONFLICT_ROUNDS {rounds} -> {rounds + 1}", rounds + 1
    yield "epochledger/sweep.py", "ATTEMPTS", f"ATTEMPTS {attempts} -> {attempts - 1}", attempts - 1
    yield "epochledger/sweep.py", "GAPS", f"GAPS[0] {first} -> {first * 2}", (first * 2, second)
    yield "epochledger/sweep.py", "GAPS", f"GAPS[1] {second} -> {second * 2}", (first, second * 2)
    # Rule H3's window, halved and doubled (tests/ledger/test_idempotency.py pins the 24 hours).
    from epochledger.ledger import idempotency

    window = idempotency.WINDOW
    yield "epochledger/ledger/idempotency.py", "WINDOW", f"WINDOW {window} -> {window / 2}", window / 2
    yield "epochledger/ledger/idempotency.py", "WINDOW", f"WINDOW {window} -> {window * 2}", window * 2


def _apply(mutant: str) -> None:
    """Called by the plugin at session start: put the mutant's value in place."""
    from epochledger.ledger import lifecycle

    index = int(mutant)
    module, name, _, value = list(table_mutants())[index]
    target = {
        "epochledger/ledger/lifecycle.py": "epochledger.ledger.lifecycle",
        "epochledger/ledger/run.py": "epochledger.ledger.run",
        "epochledger/sweep.py": "epochledger.sweep",
        "epochledger/ledger/idempotency.py": "epochledger.ledger.idempotency",
    }[module]
    mod = sys.modules.get(target) or __import__(target, fromlist=["_"])
    if name.startswith("TRANSITIONS["):
        lifecycle.TRANSITIONS[name[len("TRANSITIONS[") : -1]] = value
    elif target == "epochledger.ledger.lifecycle" and name.startswith("_"):
        _rerun_with(lifecycle, name, value)
    else:
        old = getattr(mod, name)
        setattr(mod, name, value)
        # A default bound at def time (`attempts: int = ATTEMPTS`) keeps the old value
        # object: move it too, or the mutant is seen only by callers that read the name.
        for f in vars(mod).values():
            defaults = getattr(f, "__kwdefaults__", None)
            if callable(f) and defaults:
                f.__kwdefaults__ = {k: value if v is old else v for k, v in defaults.items()}


def _rerun_with(module: Any, name: str, value: Any) -> None:
    """Run the module's body again, in its own namespace, with `name` bound to the
    mutant: the sets and the transition table derived from it at import (`_TERMINAL =
    _TERMINAL_RESUMABLE | _FINAL`, `_ALL` in TRANSITIONS) are derived from the mutant
    too. A plain setattr would change the one name and none of what was built from it."""
    tree = ast.parse(Path(module.__file__).read_text())
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            node.value = ast.copy_location(ast.Name(id="__mutant__", ctx=ast.Load()), node.value)  # type: ignore[union-attr]
    vars(module)["__mutant__"] = value
    exec(compile(tree, module.__file__, "exec"), vars(module))


def pytest_configure(config: pytest.Config) -> None:  # the plugin: `-p tests.mutation`
    mutant = os.environ.get("EPOCHLEDGER_TABLE_MUTANT")
    if mutant is not None:
        _apply(mutant)


def run_tables(workers: int = 2) -> dict[str, str]:
    """Each table mutant against the suites, `workers` at a time: 'killed' or 'survived'."""
    from concurrent.futures import ThreadPoolExecutor

    mutants = list(table_mutants())

    def one(i: int) -> str:
        env = {**os.environ, "EPOCHLEDGER_TABLE_MUTANT": str(i)}
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-x",
                "-n",
                "0",
                "-p",
                "tests.mutation",
                "-k",
                "not postgresql",
                "--no-header",
                "-p",
                "no:cacheprovider",
                *SUITES,
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        # pytest's exit codes: 1 = a test failed (killed), 0 = all passed (survived);
        # anything else (a usage or internal error) is the harness's fault, not a kill.
        return {0: "survived", 1: "killed"}.get(done.returncode, f"error (pytest exit {done.returncode})")

    results: dict[str, str] = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for n, (outcome, (module, _name, description, _value)) in enumerate(
            zip(pool.map(one, range(len(mutants))), mutants, strict=True), start=1
        ):
            results[f"{module}: {description}"] = outcome
            print(f"[{n}/{len(mutants)}] {outcome:8} {module}: {description}", flush=True)
    (ROOT / "mutants").mkdir(exist_ok=True)
    (ROOT / "mutants" / "tables.json").write_text(json.dumps(results, indent=1))
    return results


def run_fresh(workers: int = 2) -> dict[str, str]:
    """Each mutant of FRESH_SUITES' modules that mutmut left surviving or never ran, in a
    fresh pytest process in mutants/ (mutmut's trampoline picks it by MUTANT_UNDER_TEST),
    `workers` at a time: 'killed', 'survived', or a harness error."""
    from concurrent.futures import ThreadPoolExecutor

    results = mutmut_results()
    todo = [
        (name, module)
        for module in FRESH_SUITES
        for name, code in sorted(results.get(module, {}).items())
        if code is None or code in SURVIVED
    ]
    path = ROOT / "mutants" / "fresh.json"
    done: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}

    def one(item: tuple[str, str]) -> str:
        name, module = item
        env = {**os.environ, "MUTANT_UNDER_TEST": name}
        args = ["-x", "-q", "-n", "0", "-p", "no:randomly", "-p", "no:cacheprovider", "-k", "not postgresql"]
        try:
            ran = subprocess.run(
                [sys.executable, "-m", "pytest", *args, *FRESH_SUITES[module]],
                cwd=ROOT / "mutants",
                env=env,
                capture_output=True,
                timeout=900,
            )
        except subprocess.TimeoutExpired:
            return "killed"  # a hang, as mutmut counts it
        return {0: "survived", 1: "killed", 5: "survived"}.get(ran.returncode, f"error (pytest exit {ran.returncode})")

    pending = [t for t in todo if done.get(t[0]) not in ("killed", "survived")]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for n, ((name, _), outcome) in enumerate(zip(pending, pool.map(one, pending), strict=True), start=1):
            done[name] = outcome
            path.write_text(json.dumps(done, indent=1))
            print(f"[{n}/{len(pending)}] {outcome:8} {name}", flush=True)
    return done


# ------------------------------------------------------------- the report
def mutmut_results() -> dict[str, dict[str, int | None]]:
    """mutant name -> exit code, per module file, from mutmut's own result files."""
    out: dict[str, dict[str, int | None]] = {}
    for module in MODULES:
        meta = ROOT / "mutants" / (module + ".meta")
        if meta.exists():
            found = json.loads(meta.read_text())["exit_code_by_key"]
            if module in FUNCTIONS:
                found = {k: v for k, v in found.items() if any(fnmatchcase(k, p) for p in FUNCTIONS[module])}
            out[module] = found
    return out


def argued_equivalent() -> list[str]:
    """The survivors docs/mutation.md argues are equivalent: the names (or patterns, as
    `ledger.lifecycle.x_is_*__mutmut_1`, for one argument that covers a family) in the
    first column of its tables."""
    doc = (ROOT / "docs" / "mutation.md").read_text()
    return re.findall(r"^\| `([^`]+)` \|", doc, flags=re.M)


def is_argued(name: str, patterns: list[str]) -> bool:
    return any(fnmatchcase(name, p) for p in patterns)


# mutmut's exit codes (mutmut/stats.py): a failing suite or a hang is a kill; a passing
# suite, or no test reaching the mutant, is a survivor.
KILLED = {1, 3, 36, 24, -24, 152, 255, -9, -11, 37}
SURVIVED = {0, 5, 33, 35}


def report() -> int:
    """Score = killed / mutants, per module; the bar is BAR and no survivor unargued."""
    equivalent = argued_equivalent()
    tables = (
        json.loads((ROOT / "mutants" / "tables.json").read_text())
        if (ROOT / "mutants" / "tables.json").exists()
        else {}
    )
    fresh_path = ROOT / "mutants" / "fresh.json"
    fresh: dict[str, str] = json.loads(fresh_path.read_text()) if fresh_path.exists() else {}
    failures = 0
    print(f"{'module':24} {'mutants':>8} {'killed':>7} {'equivalent':>11} {'score':>6}")
    for module, found in mutmut_results().items():
        table_rows = {k: v for k, v in tables.items() if k.startswith(module + ":")}
        # A fresh run's verdict (`--fresh`) stands for a mutant mutmut left surviving or unrun.
        results = {k: {"killed": 1, "survived": 0}.get(fresh.get(k, ""), v) for k, v in found.items()}
        names = {k: v for k, v in results.items() if v is not None}
        killed = sum(1 for v in names.values() if v in KILLED) + sum(v == "killed" for v in table_rows.values())
        survivors = [k for k, v in names.items() if v in SURVIVED] + [
            k for k, v in table_rows.items() if v == "survived"
        ]
        argued = [s for s in survivors if is_argued(s, equivalent)]
        total = len(names) + len(table_rows)
        if not names:  # generated but never run (a run cut short): no score, and not a pass
            print(f"{module:24} {total:8} {'-':>7} {'-':>11} {'not run':>6}")
            failures += 1
            continue
        score = killed / total
        print(f"{module:24} {total:8} {killed:7} {len(argued):11} {score:6.1%}")
        unargued = [s for s in survivors if not is_argued(s, equivalent)]
        for s in unargued:
            print(f"    survivor, not argued: {s}")
        broken = [f"{k}: {v}" for k, v in table_rows.items() if v.startswith("error")]
        for b in broken:
            print(f"    harness error, neither killed nor survived: {b}")
        if score < BAR or unargued or broken:
            failures += 1
    print(f"bar: {BAR:.0%} of each module's mutants killed, every survivor argued equivalent in docs/mutation.md")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutation")
    parser.add_argument("--tables", action="store_true", help="only the module-level table mutants")
    parser.add_argument("--report", action="store_true", help="only the report")
    parser.add_argument(
        "--fresh", action="store_true", help="only the seams' survivors and unrun mutants, each in its own process"
    )
    parser.add_argument(
        "--children", type=int, default=2, help="mutants run at once (default 2; 1 on a shared machine)"
    )
    ns = parser.parse_args()
    if ns.fresh:
        run_fresh(ns.children)
    elif not ns.report:
        if not ns.tables:
            subprocess.run(
                [sys.executable, "-m", "mutmut", "run", "--max-children", str(ns.children), *mutant_patterns()],
                cwd=ROOT,
                check=False,
            )
        run_tables(ns.children)
    return report()


if __name__ == "__main__":
    sys.exit(main())
