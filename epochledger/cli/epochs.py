"""Commands about process slots: epochs, sweep, probe, and the orphan listing of `runs`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

import msgspec

from epochledger.cli.common import JSON, arg, command, open_ns, out, out_json, table
from epochledger.ledger.errors import InvalidInput

if TYPE_CHECKING:  # imported where used: the registry and `--help` load neither (rule W2)
    from epochledger.ledger.process import EpochState
    from epochledger.reports import SweepReport


def _margin(ns: argparse.Namespace) -> float:
    """`--margin`, else the facade's (the O3 margin's one home is projections/orphans.py):
    read when the command runs, so `--help` imports nothing for it (rule W2)."""
    from epochledger.app import ORPHAN_MARGIN_S

    return ORPHAN_MARGIN_S if ns.margin is None else float(ns.margin)


@command(
    "epochs",
    arg("--process", help="only this process slot"),
    arg("--live", action="store_true", help="only the epochs that are live"),
    arg("--retired", action="store_true", help="also the slots that retired (rule O8)"),
    JSON,
)
def cmd_epochs(ns: argparse.Namespace) -> None:
    """List process slots and their boot epochs, live or not (rules O1, O2, O7).

    An epoch is live until a later boot of its slot supersedes it, it records a clean
    stop, someone records that it exited, or a later boot on its host carries another
    host boot id; `ended` names the rule and `why` the evidence. The running runs of an
    epoch that is not live are orphans. A slot whose last epoch is over and that has
    no run left running retires at the next startup's sweep and is listed only with
    --retired (its history stays).

    Example: epochledger epochs --process worker-1
             epochledger epochs --live   (what the ledger holds as running now)
    """
    with open_ns(ns) as ledger:
        epochs = ledger.epoch_liveness(process=ns.process, live_only=ns.live, retired=ns.retired)
    rows = [{**msgspec.to_builtins(e.epoch), "live": e.live, "ended": e.ended, "why": e.why} for e in epochs]
    if ns.json:
        out_json(rows)
        return
    table(
        rows,
        [
            "process",
            "epoch",
            "live",
            "ended",
            "booted_at",
            "host",
            "pid",
            "superseded_by",
            "stopped_at",
            "exited_at",
            "sweep_skipped",
            "sweep_failed_at",
        ],
    )


@command("probe", arg("--no-sweep", action="store_true", help="record the exits only; sweep nothing"), JSON)
def cmd_probe(ns: argparse.Namespace) -> None:
    """Check this host's live epochs against the kernel, record the dead ones' exits,
    then sweep their runs (rules O7, O8).

    Every epoch the ledger holds live on this host and its current boot is checked:
    a pid that is gone, a zombie, or runs with another start time than its boot
    recorded (a reused pid) gets `process.exited` by `probe@<host>` with the evidence.
    Epochs of an earlier boot of this host are ended by the probe's own boot. Then an
    epoch of slot `probe@<host>` sweeps (booted only when there is something to
    recover, stopped after). Only this host is judged: run it on each host.

    Example: epochledger probe
             epochledger probe --json --no-sweep
    """
    with open_ns(ns) as ledger:
        report = ledger.probe(sweep=not ns.no_sweep)
    if ns.json:
        out_json(report)
        return
    counts: dict[str, int] = {}
    for f in report.findings:
        counts[f.verdict] = counts.get(f.verdict, 0) + 1
    found = ", ".join(f"{n} {v}" for v, n in sorted(counts.items())) or "none"
    out(f"probe of {report.host} (host boot {report.host_boot}): {len(report.findings)} live epoch(s) checked: {found}")
    for f in report.findings:
        if f.verdict != "alive":
            out(f"  {f.process} epoch {f.epoch} pid {f.pid}: {f.verdict}: {f.evidence}")
    out(f"recorded {report.exited} exit(s) as {report.observed_by}")
    if report.sweep is None:
        out("no sweep: nothing to recover" if not ns.no_sweep else "no sweep (--no-sweep)")
        return
    out(
        f"sweep by {report.sweep.process} epoch {report.swept_by}: {report.sweep.outcome}, "
        f"recovered {len(report.sweep.recovered)} orphan(s)"
    )
    for v in report.sweep.recovered:
        out(f"  {v.run}: {v.rule}: {v.explain()}")


@command(
    "sweep",
    arg("--process", help="the process slot to recover (booted anew; with --as-epoch: the epoch's slot)"),
    arg(
        "--as-epoch",
        metavar="EPOCH",
        help="sweep with this live epoch, booted earlier by the process that sweeps, "
        "with its recorded boot instant: boot nothing",
    ),
    arg("--new-slot", action="store_true", help="allow --process to name a slot the ledger has never seen"),
    arg("--epoch", help="id of the epoch to boot (default: a fresh one)"),
    # No default here: the facade's is the O3 margin's one home (projections/orphans.py)
    arg("--margin", type=float, default=None, help="O3 fallback margin in seconds (default 1, no floor)"),
    arg("--actor", default="operator", help="who is recovering (recorded on the boot)"),
    arg("--dry-run", action="store_true", help="only show what would be recovered; write nothing"),
    JSON,
)
def cmd_sweep(ns: argparse.Namespace) -> None:
    """Boot a new epoch of a process slot and sweep with it: for an operator recovering
    by hand a slot whose process is gone; or sweep with an epoch booted earlier.

    CAUTION: the new epoch supersedes the slot's current epoch, so every run it owns is
    recovered as an orphan. Use it only for a slot whose process is dead; a live
    scheduler recovers its own orphans at start (docs/operations.md).

    A slot the ledger has never seen is refused (exit 3, a mistyped name would boot a
    new slot for good) unless --new-slot asks for one; --dry-run refuses it alike.
    --as-epoch EPOCH boots nothing: a process that booted EPOCH itself (and wired no
    sweep at its start) sweeps with it, judged by that epoch's recorded boot instant;
    an unknown epoch or one that is no longer live is refused, naming it (exit 3).
    A run whose stream is damaged is not judged: the report names it with the bad
    row's position, the other orphans are recovered, and the command exits 8 (a dry
    run alike). Running runs no slot can judge are listed too (rule O9).

    Example: epochledger sweep --process worker-1 --dry-run   (what would be recovered)
             epochledger sweep --process worker-1
             epochledger sweep --as-epoch 3f2a9c   (an epoch this process booted)
    """
    if ns.process is None and ns.as_epoch is None:
        raise InvalidInput(
            "name the slot to boot and sweep (--process) or the epoch to sweep with (--as-epoch)", where="sweep"
        )
    if ns.as_epoch is not None and (ns.epoch is not None or ns.new_slot):
        raise InvalidInput("--as-epoch boots nothing: it takes neither --epoch nor --new-slot", where="sweep")
    if ns.dry_run:
        with open_ns(ns) as ledger:
            report = ledger.preview_sweep(ns.process, new_slot=ns.new_slot, as_epoch=ns.as_epoch, margin=_margin(ns))
        if ns.json:
            out_json({"booted": None, "report": report})
        else:
            _show_preview(ns, report)
        if (damage := report.damage()) is not None:
            raise damage  # as the sweep itself would: a damaged log exits 8
        return
    booted: EpochState | None
    with open_ns(ns) as ledger:
        if ns.as_epoch is not None:
            target = ns.as_epoch if ns.process is None else Slot(process=ns.process, epoch=ns.as_epoch)
            booted, report = None, ledger.sweep(target, require_live=True, margin=_margin(ns))
        else:
            booted, report = ledger.startup(
                ns.process, epoch=ns.epoch, actor=ns.actor, margin=_margin(ns), new_slot=ns.new_slot
            )
    if ns.json:
        out_json({"booted": booted, "report": report})
    else:
        done = "booted" if booted is not None else "swept with"
        out(
            f"{done} {report.process} epoch {report.epoch}; sweep {report.outcome}: recovered {len(report.recovered)} orphan(s)"
        )
        if report.fallback_skipped:
            out(f"O3 fallback skipped: {report.fallback_skipped}")
        _show_runs(report)
    if (damage := report.damage()) is not None:
        raise damage  # the report is out; a damaged log exits 8 (EXIT_CODES)


def _show_preview(ns: argparse.Namespace, report: SweepReport) -> None:
    what = (
        f"sweeping with epoch {report.epoch} of {report.process}"
        if ns.as_epoch
        else f"booting a new epoch of {report.process}"
    )
    out(f"dry run: {what} now would recover {len(report.recovered)} orphan(s)")
    _show_runs(report)


def _show_runs(report: SweepReport) -> None:
    """A sweep report's runs: recovered, left unjudged on a damaged stream (T4), and
    those no slot can judge (O9)."""
    for v in report.recovered:
        out(f"  {v.run}: {v.rule}: {v.explain()}")
    for d in report.damaged:
        out(f"  {d.run}: {d.explain()}")
    for u in report.unjudged:
        out(f"  {u.run}: {u.rule}: {u.explain()}")


class Slot(msgspec.Struct, frozen=True, kw_only=True):
    """An epoch named with its slot (an EpochRef), for `sweep --process P --as-epoch E`."""

    process: str
    epoch: str
