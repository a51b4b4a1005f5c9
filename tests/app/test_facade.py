"""One facade, two skins (rule H1): every operation the CLI has is one call on the
facade (`Ledger`, with the reports of epochledger/reports.py) that returns a typed
value, so the HTTP service can make the same call. The CLI's own part is parsing and
rendering: what it prints is what the facade returned. The import contract that keeps
the CLI off the store is pinned in tests/docs/test_layers.py."""

from __future__ import annotations

import inspect
import json
import typing
from pathlib import Path

import pytest

from epochledger import Ledger, ManualClock, open_ledger, reports
from epochledger.cli import main
from epochledger.ledger.events import Status

# Every public report: the mixin's methods and the module's functions.
REPORTS = [f for name, f in inspect.getmembers(reports.Reports, inspect.isfunction) if not name.startswith("_")]
REPORTS += [
    f
    for name, f in vars(reports).items()
    if inspect.isfunction(f) and not name.startswith("_") and f.__module__ == reports.__name__
]


def _returns(f: typing.Any) -> typing.Any:
    from epochledger import import_dagster, ndjson  # the names reports.py imports for the type checker only

    return typing.get_type_hints(f, globalns={**vars(import_dagster), **vars(ndjson), **vars(reports)})["return"]


@pytest.mark.parametrize("f", REPORTS, ids=lambda f: f.__qualname__)
def test_H1_every_report_names_its_result_type(f: typing.Any) -> None:
    """A skin renders or encodes what a report returns: a named type, never Any."""
    returned = _returns(f)
    assert returned is not typing.Any and "Any" not in repr(returned), f"{f.__qualname__} -> {returned}"


def test_H1_the_reports_cover_what_the_cli_did_past_the_facade() -> None:
    """The operations the CLI used to reach the store, the engine, verify, replay or the
    audit for, each one facade call now."""
    wanted = {
        "rebuild",
        "follow",
        "verify",
        "chain",
        "upgrade_chain",
        "take_digest",
        "write_digest",
        "replay",
        "whatif",
        "timeline",
        "audit_sync",
        "audit_status",
        "parked",
        "run_view",
        "history_of",
        "list_runs",
        "streaking",
        "orphaned",
        "tick_health_summary",
        "error_class_health",
        "import_ndjson",
        "export_ndjson",
        "export_ndjson_file",
        "import_dagster",
        "preview_sweep",
        "head",
        "sealed_at_open",
    }
    assert wanted <= {f.__name__ for f in REPORTS}


def _cli_json(store: str, *args: str, capsys: pytest.CaptureFixture[str]) -> typing.Any:
    assert main(["--store", store, *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_H1_the_cli_prints_what_the_facade_returns(
    tmp_path: Path, clock: ManualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    """A history's from_status and its correction label, a listing's code and label
    filters and a rebuild's counts come from the facade (they lived in the CLI); the
    CLI's JSON is the facade's answer, encoded."""
    store = f"sqlite:///{tmp_path / 'l.db'}"
    with open_ledger(store, clock=clock, init=True) as ledger:
        e = ledger.boot("worker-1", epoch="w1.e1")
        for run, team in (("r1", "data"), ("r2", "web"), ("r3", "data")):
            ledger.queue(run, process="worker-1", labels={"team": team})
            ledger.start(run, epoch=e.epoch, process="worker-1")
            ledger.fail(run, "", resumable=run != "r1")
        ledger.correct("r1", Status.FINISHED, actor="alice", reason="the output was complete")
        history = ledger.history_of("r1")
        listed = ledger.list_runs(codes=["UNKNOWN"], labels=[("team", "web")])
        rebuilt = ledger.rebuild("runs")
        head = ledger.head()
    assert [h.label for h in history][-1] == "CORRECTION failed -> finished"
    assert [h.from_status for h in history] == [None, "queued", "running", "failed"]
    printed = _cli_json(store, "history", "r1", "--json", capsys=capsys)
    assert [r["from_status"] for r in printed] == [h.from_status for h in history]
    assert [r.run for r in listed.runs] == ["r2"]
    printed = _cli_json(store, "runs", "--code", "UNKNOWN", "--label", "team=web", "--json", capsys=capsys)
    assert [r["run"] for r in printed] == ["r2"]
    [r] = rebuilt
    assert (r.view, r.events, r.position) == ("runs", head, head)
    [printed] = _cli_json(store, "rebuild", "runs", "--json", "--quiet", capsys=capsys)
    assert (printed["view"], printed["events"], printed["position"]) == ("runs", head, head)


def test_H1_no_command_reaches_the_store_through_the_ledger() -> None:
    """The import contract sees imports; a reach through the facade's store or cache
    (private: `_store`, `_cache`, `_opened`), or through a server's opened ledger
    (`service.ledger`), needs no import, so it is caught here: the only `.store` a
    command reads is its parsed `--store` (ns.store), and `serve` asks the service
    (rule H1: a skin)."""
    import ast

    cli = Path(reports.__file__).parent / "cli"
    reaches = [
        f"{path.name}:{node.lineno}"
        for path in sorted(cli.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and node.attr in ("store", "cache", "ledger", "_store", "_cache", "_opened")
        and not (isinstance(node.value, ast.Name) and node.value.id == "ns")
    ]
    assert reaches == []


def test_H1_the_store_and_the_cache_are_private_to_the_facade() -> None:
    """`Ledger` shows no store and no cache: the skins (the CLI, the service, the
    console) and the adapters reach neither, so every rule a facade call applies is
    applied to every caller."""
    import ast

    import epochledger

    assert not hasattr(Ledger, "store") and not hasattr(Ledger, "cache")
    package = Path(epochledger.__file__).parent
    skins = [package / "cli", package / "service", package / "console", package / "adapters"]
    reaches = [
        f"{path.relative_to(package)}:{node.lineno}"
        for folder in skins
        for path in sorted(folder.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr in ("_store", "_cache", "_opened")
    ]
    assert reaches == []
