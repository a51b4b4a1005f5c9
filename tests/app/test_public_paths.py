"""Two public paths that docs/mutation.md once argued no test could observe (rules O7,
P2): the boot instant a dry-run sweep on a rebooted host prints, and the default path of
`python -m epochledger.ledger.lifecycle --write`. Each is reached here the way its user reaches it.
(The third, the "?" of a verdict's explanation, is pinned in tests/projections/test_orphans.py.)"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from epochledger import ManualClock, open_ledger
from epochledger.ledger import lifecycle
from epochledger.ledger.host import FakeHost
from epochledger.sweep import PREVIEW_EPOCH, preview
from tests.conftest import T0

ROOT = Path(__file__).resolve().parents[2]


def test_O7_the_dry_run_on_a_rebooted_host_names_the_instant_of_the_boot_it_would_record(tmp_path: Path) -> None:
    """`sweep --dry-run` on a host that rebooted: the preview folds the boot startup()
    would record, and end_of's sentence for the old epoch names that boot, its host boot
    id and its instant (the clock's now). Mutations caught: the folded boot's `at`, or
    the `now` it comes from, left out (the sentence then cannot be written)."""
    clock, host = ManualClock(T0), FakeHost()
    with open_ledger(str(tmp_path / "l.db"), clock=clock, host=host) as lg:
        w2 = lg.boot("w2")
        lg.queue("r1", workflow="wf")
        lg.start("r1", epoch=w2)
        host.reboot("boot-2")
        clock.advance(90)
        report = preview(lg, "w9")
        assert (report.process, report.epoch, report.outcome) == ("w9", PREVIEW_EPOCH, "preview")
        [v] = report.recovered
        assert (v.run, v.rule, v.host_boot, v.rebooted_to) == ("r1", "O2-host-rebooted", "boot-1", "boot-2")
        assert v.evidence == (
            f"host host-a (machine {host.machine_id()}) of epoch {w2.epoch} of w2 rebooted: it "
            f"booted with host boot boot-1, and epoch {PREVIEW_EPOCH} of w9 booted on that machine at "
            f"{clock.now().isoformat()} with host boot boot-2"
        )
        assert lg._store.max_position() == 3  # a preview writes nothing


def test_P2_python_m_ledger_lifecycle_write_regenerates_docs_lifecycle_md_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documented regeneration is `python -m epochledger.ledger.lifecycle --write` from the
    repository root, which calls write_doc() with no path. Mutation caught: the default
    path changed (the command then fails with FileNotFoundError)."""
    (tmp_path / "docs").mkdir()
    doc = tmp_path / "docs" / "lifecycle.md"
    shutil.copy(ROOT / "docs" / "lifecycle.md", doc)
    text = doc.read_text()
    stale = text.replace(lifecycle.render_markdown(), "stale\n")
    assert stale != text
    doc.write_text(stale)
    monkeypatch.chdir(tmp_path)
    lifecycle.write_doc()
    assert doc.read_text() == text
