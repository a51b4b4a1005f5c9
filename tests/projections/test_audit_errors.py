"""The audit's errors speak of the audit (the audit file, the memory limit, the
timeout, ...), never of a command-line flag; the CLI shows its own flag when it prints
one (rule A1; epochledger/cli/__init__.py, FLAGS). The same for `whatif`'s BadPolicy
(rule R4). Mutation caught: a library error with where="--duckdb" (as before)."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pytest

from epochledger import ManualClock, open_ledger
from epochledger.cli import main, shown
from epochledger.ledger.errors import BadPolicy, InvalidInput, QueryInterrupted
from epochledger.projections import audit
from epochledger.replay import whatif

FLAG = re.compile(r"(^|\W)--[a-z]")


@pytest.fixture
def synced(tmp_path: Path, clock: ManualClock) -> tuple[str, str]:
    store = f"sqlite:///{tmp_path / 'l.db'}"
    with open_ledger(store, clock=clock, init=True) as ledger:
        ledger.boot("worker-1", epoch="w1.e1")
        ledger.queue("r1", process="worker-1")
        path = str(tmp_path / "l.duckdb")
        audit.sync(ledger._store, path)
    return store, path


def refusals(store: str, path: str, tmp_path: Path) -> list[tuple[str, InvalidInput]]:
    """(the `where` expected, the error) for each way the audit refuses its input."""
    found: list[tuple[str, InvalidInput]] = []

    def refused(where: str, call, *args, **kw) -> None:  # type: ignore[no-untyped-def]
        with pytest.raises(InvalidInput) as e:
            call(*args, **kw)
        found.append((where, e.value))

    refused("timeout", audit.query, path, "SELECT 1", timeout=0)
    refused("memory_limit", audit.query, path, "SELECT 1", memory_limit="lots")
    refused("period", audit.report, path, "failure_codes", period="fortnight")
    refused("as_of", audit.report, path, "corrections", as_of=datetime(2026, 9, 9))
    refused("label", audit.report, path, "failures_by_label", label="")
    refused("directory", audit.export_parquet, path, "")
    with open_ledger(store, create=False) as ledger:
        refused("wait", audit.sync, ledger._store, path, wait=-1)
        refused("audit file", audit.sync, ledger._store, str(tmp_path / "no-such-dir" / "a.duckdb"))
    other = f"sqlite:///{tmp_path / 'other.db'}"
    with open_ledger(other, init=True) as ledger:
        refused("audit file", audit.sync, ledger._store, path)  # the file mirrors another store
        refused("audit file", audit.status, path, ledger._store)
    refused("policy", whatif.resolve, "nope")
    return found


def test_A1_R4_library_errors_name_the_audit_never_a_flag(synced: tuple[str, str], tmp_path: Path) -> None:
    store, path = synced
    found = refusals(store, path, tmp_path)
    assert [w for w, _ in found] == [e.where for _, e in found]
    for _, e in found:
        assert not FLAG.search(str(e)), str(e)
    assert isinstance(found[-1][1], BadPolicy)


def test_A1_R4_the_cli_shows_its_own_flags_for_them(synced: tuple[str, str], tmp_path: Path) -> None:
    """What the CLI prints is unchanged: the option the user typed, then the message."""
    store, path = synced
    flags = {w: shown(e).split(":", 1)[0] for w, e in refusals(store, path, tmp_path)}
    assert flags == {
        "timeout": "--timeout",
        "memory_limit": "--memory-limit",
        "period": "--period",
        "as_of": "--as-of",
        "label": "--label",
        "directory": "export-parquet",
        "wait": "--wait",
        "audit file": "--duckdb",
        "policy": "--policy",
    }


def test_A1_a_bound_that_stops_a_query_is_named_by_its_field(synced: tuple[str, str]) -> None:
    _, path = synced
    with pytest.raises(QueryInterrupted) as e:
        audit.query(path, "SELECT count(*) FROM range(100000000) a, range(1000) b", timeout=0.2)
    assert e.value.limit == "timeout" and not FLAG.search(str(e.value))


def test_A1_the_cli_exit_code_and_flag_for_an_audit_refusal(synced: tuple[str, str], capsys) -> None:
    store, _ = synced
    assert main(["--store", store, "audit", "query", "SELECT 1", "--memory-limit", "lots"]) == 3
    assert "InvalidInput: --memory-limit: a size such as 512MB or 2GB" in capsys.readouterr().err
