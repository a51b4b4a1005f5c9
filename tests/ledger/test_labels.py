"""Labels and lineage (rule I2): run.queued carries labels (string -> string, bounded)
and a parent run; the API and import set them, `show` prints them, `runs --label`
filters on them (every one must match), and the bounds are the one definition of
ledger/codec.py `checked`."""

from __future__ import annotations

import json

import pytest

from epochledger import InvalidInput, open_ledger
from epochledger.app import Ledger
from epochledger.cli import main
from epochledger.ledger import codec
from epochledger.ledger.events import MAX_LABEL_VALUE, MAX_LABELS
from epochledger.ndjson import import_lines


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_I2_queue_keeps_labels_and_parent_on_both_stores(ledger: Ledger) -> None:
    ledger.queue("r0", labels={"team": "data"})
    state = ledger.queue("r1", workflow="nightly", labels={"team": "data", "owner": "alice", "note": ""}, parent="r0")
    assert state.labels == {"team": "data", "owner": "alice", "note": ""} and state.parent == "r0"
    again = ledger.get_run("r1")  # folded from the stored bytes
    assert again.labels == {"note": "", "owner": "alice", "team": "data"} and again.parent == "r0"
    assert [r.run for r in ledger.runs(lambda s: s.labels.get("team") == "data")] == ["r0", "r1"]  # the runs view


def test_I2_a_caller_mutating_its_dict_later_does_not_change_the_event(ledger: Ledger) -> None:
    labels = {"team": "data"}
    state = ledger.queue("r1", labels=labels)
    labels["team"] = "ops"
    assert state.labels == {"team": "data"} and ledger.get_run("r1").labels == {"team": "data"}


def test_I2_L3_a_run_without_labels_is_stored_as_before(ledger: Ledger) -> None:
    """Empty labels and no parent are omitted: the bytes of a run.queued written before
    the fields existed are unchanged (hash chain, export byte-identity)."""
    ledger.queue("r1", workflow="w")
    [rec] = list(ledger.events())
    assert b"labels" not in codec.encode(rec.event) and b"parent" not in codec.encode(rec.event)


BAD_LABELS = [
    ({"a b": "x"}, "no whitespace, control or format characters, got 'a b' - at `$.labels.key`"),
    ({"": "x"}, "length >= 1"),
    ({"k" * 201: "x"}, "length <= 200"),
    ({f"k{i}": "v" for i in range(MAX_LABELS + 1)}, f"length <= {MAX_LABELS} - at `$.labels`"),
    ({"k": "x" * (MAX_LABEL_VALUE + 1)}, f"length <= {MAX_LABEL_VALUE}"),
    ({"k": "a\nb"}, "no control or format characters, got 'a\\nb' - at `$.labels['k']`"),
    ({"k": 1}, "Expected `str`, got `int`"),
    ({"k": None}, "Expected `str`, got `null`"),
    (["k"], "Expected `object`, got `array`"),
]


# Ids without the reasons' backslashes and quotes: a node id a runner can select again.
BAD_LABEL_IDS = ["space", "empty-key", "long-key", "too-many", "long-value", "newline", "int", "null", "array"]


@pytest.mark.parametrize(("labels", "reason"), BAD_LABELS, ids=BAD_LABEL_IDS)
def test_I2_L4_labels_out_of_bounds_are_refused_naming_the_field(
    sqlite_ledger: Ledger, labels: object, reason: str
) -> None:
    with pytest.raises(InvalidInput) as e:
        sqlite_ledger.queue("r1", labels=labels)  # type: ignore[arg-type]
    assert reason in str(e.value)
    assert sqlite_ledger._store.max_position() == 0


def test_I2_labels_at_the_bounds_are_accepted(sqlite_ledger: Ledger) -> None:
    labels = {f"k{i:03}" + "x" * 196: "v" * MAX_LABEL_VALUE for i in range(MAX_LABELS)}
    assert len(sqlite_ledger.queue("r1", labels=labels).labels) == MAX_LABELS


def test_I2_L4_a_run_is_never_its_own_parent(sqlite_ledger: Ledger) -> None:
    with pytest.raises(InvalidInput, match="parent: run 'r1' cannot be its own parent"):
        sqlite_ledger.queue("r1", parent="r1")
    with pytest.raises(InvalidInput, match="at `\\$.parent`"):
        sqlite_ledger.queue("r1", parent="has space")
    assert sqlite_ledger._store.max_position() == 0


def test_I2_L4_import_checks_labels_by_the_same_rule(sqlite_ledger: Ledger) -> None:
    from epochledger import ImportRejected

    line = json.dumps({"type": "run.queued", "at": "2026-09-09T14:00:00Z", "run": "r1", "labels": {"k": "a\tb"}})
    with pytest.raises(
        ImportRejected, match="line 1: .*no control or format characters, got .* - at `\\$.labels\\['k'\\]`"
    ):
        import_lines(sqlite_ledger, [line])
    ok = json.dumps(
        {"type": "run.queued", "at": "2026-09-09T14:00:00Z", "run": "r2", "labels": {"team": "data"}, "parent": "r1"}
    )
    assert import_lines(sqlite_ledger, [ok]) == 1
    assert sqlite_ledger.get_run("r2").labels == {"team": "data"} and sqlite_ledger.get_run("r2").parent == "r1"


@pytest.fixture
def labelled(tmp_path) -> str:
    store = f"sqlite:///{tmp_path / 'l.db'}"
    with open_ledger(store) as lg:
        lg.queue("a", labels={"team": "data", "env": "prod"})
        lg.queue("b", labels={"team": "data", "env": "dev"}, parent="a")
        lg.queue("c", labels={"team": "ml", "env": "prod", "q": "x=y"})
        lg.queue("d")
    return store


def test_I2_runs_label_filters_every_label_must_match(capsys, labelled: str) -> None:
    def runs(*labels: str) -> list[str]:
        code, out, _ = cli(
            capsys, "--store", labelled, "runs", "--json", *(x for la in labels for x in ("--label", la))
        )
        assert code == 0
        return [r["run"] for r in json.loads(out)]

    assert runs() == ["a", "b", "c", "d"]
    assert runs("team=data") == ["a", "b"]
    assert runs("team=data", "env=prod") == ["a"]  # AND, not OR
    assert runs("env=prod") == ["a", "c"]
    assert runs("team=nobody") == []
    assert runs("q=x=y") == ["c"]  # split at the first '='
    code, out, _ = cli(capsys, "--store", labelled, "runs", "--label", "team=ml")
    assert code == 0 and "labels" in out and "env=prod,q=x=y,team=ml" in out


@pytest.mark.parametrize("bad", ["team", "=data"])
def test_I2_runs_label_needs_key_equals_value(capsys, labelled: str, bad: str) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--store", labelled, "runs", "--label", bad])
    assert e.value.code == 2 and "expected KEY=VALUE" in capsys.readouterr().err


def test_I2_show_prints_labels_and_parent(capsys, labelled: str) -> None:
    code, out, _ = cli(capsys, "--store", labelled, "show", "b")
    assert code == 0
    assert "labels: env=dev, team=data" in out and "parent: a" in out
    code, out, _ = cli(capsys, "--store", labelled, "show", "b", "--json")
    shown = json.loads(out)
    assert shown["labels"] == {"env": "dev", "team": "data"} and shown["parent"] == "a"
    code, out, _ = cli(capsys, "--store", labelled, "show", "d")
    assert "labels" not in out and "parent" not in out


# ------------------------------------------------------------------ the audit
def test_I2_A1_audit_runs_has_labels_as_a_map_and_parent(ledger: Ledger, tmp_path) -> None:
    """On both stores: the audit's runs view carries labels as a DuckDB MAP (empty, not
    NULL, for a run without any) and parent, from the run.queued payload."""
    from epochledger.projections.audit import query, sync

    ledger.queue("a", labels={"team": "data", "env": "prod"})
    ledger.queue("b", parent="a")
    path = str(tmp_path / "a.duckdb")
    sync(ledger._store, path)
    types = {r[0]: r[1] for r in query(path, "DESCRIBE runs").rows}
    assert types["labels"] == "MAP(VARCHAR, VARCHAR)" and types["parent"] == "VARCHAR"
    rows = query(
        path, "SELECT run, labels, labels['team'] AS team, cardinality(labels) AS n, parent FROM runs ORDER BY run"
    ).records()
    assert rows == [
        {"run": "a", "labels": {"env": "prod", "team": "data"}, "team": "data", "n": 2, "parent": None},
        {"run": "b", "labels": {}, "team": None, "n": 0, "parent": "a"},
    ]


def test_I2_A1_failures_by_label_report(tmp_path, capsys) -> None:
    """The golden history's labels (tests/golden/README.md): every label, or one label
    with the failures of runs that lack it as a NULL value; a --label on another report
    is refused."""
    from pathlib import Path

    from epochledger.projections import audit

    store = str(tmp_path / "g.db")
    main(["--store", store, "init"])
    assert (
        main(["--store", store, "import", str(Path(__file__).resolve().parents[1] / "golden" / "audit_history.ndjson")])
        == 0
    )
    assert main(["--store", store, "audit", "sync"]) == 0
    capsys.readouterr()
    code, out, _ = cli(capsys, "--store", store, "audit", "report", "failures_by_label", "--label", "team", "--json")
    assert code == 0
    got = [(r["value"], r["code"], r["failures"], r["runs"]) for r in json.loads(out)]
    assert got == [
        ("data", "TIMEOUT", 2, 2),
        ("ops", "PROCESS_ORPHANED", 2, 2),
        ("ops", "CANCELLED", 1, 1),
        ("ops", "DISK_QUOTA_EXCEEDED", 1, 1),
        ("ops", "TIMEOUT", 1, 1),
        (None, "TICK_DEADLINE_EXCEEDED", 1, 1),
        (None, "UNKNOWN", 1, 1),
    ]
    assert {r["label"] for r in json.loads(out)} == {"team"}
    code, _, err = cli(capsys, "--store", store, "audit", "report", "failure_codes", "--label", "team")
    assert code == 3 and "--label" in err
    with pytest.raises(InvalidInput, match="^label: "):  # the library names its parameter; the CLI, the flag
        audit.report(audit.default_path(store), "failures_by_label", label="")
