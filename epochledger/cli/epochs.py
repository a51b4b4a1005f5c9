"""Commands about process slots: epochs, sweep, and the orphan listing of `runs`."""

from __future__ import annotations

import argparse

import msgspec

from epochledger.app import ORPHAN_MARGIN_S
from epochledger.cli.common import JSON, arg, command, open_ns, out, out_json, table


@command("epochs", arg("--process", help="only this process slot"), JSON)
def cmd_epochs(ns: argparse.Namespace) -> None:
    """List process slots and their boot epochs, live or not (rules O1, O2).

    An epoch is live until a later boot of its slot supersedes it or it records a
    clean stop; the running runs of an epoch that is not live are orphans.

    Example: epochledger epochs --process worker-1
    """
    with open_ns(ns) as ledger:
        epochs = ledger.epochs()
    rows = [{**msgspec.to_builtins(e), "live": e.live} for e in epochs if ns.process in (None, e.process)]
    if ns.json:
        out_json(rows)
        return
    table(rows, ["process", "epoch", "live", "booted_at", "host", "pid", "superseded_by", "stopped_at",
                 "sweep_skipped", "sweep_failed_at"])  # fmt: skip


@command(
    "sweep",
    arg("--process", required=True, help="the process slot to recover"),
    arg("--epoch", help="id of the epoch to boot (default: a fresh one)"),
    arg("--margin", type=float, default=ORPHAN_MARGIN_S, help="O3 fallback margin in seconds (default 1, no floor)"),
    arg("--actor", default="operator", help="who is recovering (recorded on the boot)"),
    arg("--dry-run", action="store_true", help="only show what would be recovered; write nothing"),
    JSON,
)
def cmd_sweep(ns: argparse.Namespace) -> None:
    """Boot a new epoch of a process slot and sweep with it: for an operator recovering
    by hand a slot whose process is gone.

    CAUTION: the new epoch supersedes the slot's current epoch, so every run it owns is
    recovered as an orphan. Use it only for a slot whose process is dead; a live
    scheduler recovers its own orphans at start (docs/operations.md).

    Example: epochledger sweep --process worker-1 --dry-run   (what would be recovered)
             epochledger sweep --process worker-1
    """
    if ns.dry_run:
        from epochledger.sweep import preview

        with open_ns(ns) as ledger:
            report = preview(ledger, ns.process, margin=ns.margin)
        if ns.json:
            out_json({"booted": None, "report": report})
            return
        out(f"dry run: booting a new epoch of {report.process} now would recover {len(report.recovered)} orphan(s)")
        for v in report.recovered:
            out(f"  {v.run}: {v.rule}: {v.explain()}")
        return
    with open_ns(ns) as ledger:
        epoch, report = ledger.startup(ns.process, epoch=ns.epoch, actor=ns.actor, margin=ns.margin)
    if ns.json:
        out_json({"booted": epoch, "report": report})
        return
    out(f"booted {report.process} epoch {report.epoch}; sweep {report.outcome}: recovered {len(report.recovered)} orphan(s)")
    if report.fallback_skipped:
        out(f"O3 fallback skipped: {report.fallback_skipped}")
    for v in report.recovered:
        out(f"  {v.run}: {v.rule}: {v.explain()}")
