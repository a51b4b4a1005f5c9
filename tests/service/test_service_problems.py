"""The problem-document table (rule H2): every ledger error has one status and one
stable type, and the table is the only place that says which."""

from __future__ import annotations

import inspect

from epochledger.ledger import errors
from epochledger.service import problems


def test_H2_every_ledger_error_class_is_in_the_table_once_with_a_type_of_its_own() -> None:
    classes = {c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, errors.LedgerError)}
    listed = [cls for cls, *_ in problems.TABLE]
    assert len(listed) == len(set(listed)), "a class listed twice"
    assert set(listed) == classes, f"missing: {sorted(c.__name__ for c in classes - set(listed))}"
    slugs = [slug for _, _, slug, _ in problems.TABLE]
    assert len(slugs) == len(set(slugs)), f"a type used twice: {sorted(s for s in slugs if slugs.count(s) > 1)}"
    assert all(400 <= status < 600 for _, status, _, _ in problems.TABLE)
    assert {s for _, s, _, _ in problems.TABLE if s >= 500} >= {503}


def test_H2_the_most_specific_class_decides() -> None:
    stale = errors.StaleEpoch("r1", None, "run.finished", "e1", "superseded")
    assert problems.classify(stale)[:2] == (409, "stale-epoch")
    assert problems.classify(errors.ConflictError(["run:r1"]))[:2] == (409, "conflict")
    unknown = errors.CommitUnknown({"run:r1": (2, 2)}, "connection lost")
    assert problems.classify(unknown)[:2] == (503, "commit-unknown")
    assert problems.classify(errors.LockTimeout("append", "the lock", 1.0))[:2] == (503, "lock-timeout")


def test_H8_the_documented_bounds_are_the_configs_defaults() -> None:
    """docs/service.md, "Bounds and shutdown", lists every bound with its default."""
    import re
    from pathlib import Path

    from epochledger.service.config import ServiceConfig

    doc = (Path(__file__).resolve().parents[2] / "docs" / "service.md").read_text()
    section = doc.split("## Bounds and shutdown", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `(\w+)` \| `([^`]+)` \|", section, re.M))
    config = ServiceConfig()
    bounds = ("max_body_bytes", "max_batch", "request_timeout_s", "idle_timeout_s", "max_connections", "grace_s")
    assert set(bounds) <= set(rows), f"undocumented: {sorted(set(bounds) - set(rows))}"
    for name in bounds:
        assert float(rows[name]) == float(getattr(config, name)), name


def test_H2_a_missing_store_is_said_without_its_url() -> None:
    """NoSuchStore names the server's store URL (which may hold a password); its problem
    document says the store is missing and names nothing of where it is."""
    import msgspec

    secret = "postgresql://writer:s3cret@db.internal/ledger"
    response = problems.ledger_error(None, errors.NoSuchStore(secret, "no schema"))  # type: ignore[arg-type]
    body = msgspec.json.encode(response.content).decode()
    assert response.status_code == 503 and "s3cret" not in body and "db.internal" not in body
    assert msgspec.json.decode(body)["type"] == "urn:epochledger:problem:no-such-store"
