"""Slot retirement (rule O8): a slot whose last epoch is over and that has no run left
running retires, so the live reads follow the live fleet, not every worker ever booted.

A worker per run (O8) is a slot per worker: a pool that recycles its children, or a
launcher that starts a process per run, books a new slot for every one, forever. Once
such a slot's last epoch is over (stopped, exited, its host rebooted: end_of, rule O7)
and the sweep has recovered what it left, nothing about it can change a verdict again,
so `process.retired` marks it and the epochs view's `retired` column lets the orphan
view, `epochs` and the sweep skip it (Ledger.orphan_view). The event keeps the one
home of the rule: which slots retire is asked of the orphan view
(projections/orphans.py, `retirable`), the fold only records the fact
(ledger/process.py), and a later boot of the slot brings it back. History, replay and
the audit keep every retired slot.

`Ledger.startup` retires after its sweep, with its own epoch as the actor. It is
housekeeping: a race lost every round, or a store error, is logged and left to the
next startup, never raised into the caller's start-up.

It takes a RetireTarget, never the application facade: the application imports this
module, not the other way round (the import-linter contract in pyproject.toml).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from epochledger.ledger.clock import Clock
from epochledger.ledger.errors import ConflictError, StoreError
from epochledger.ledger.events import ProcessEventBase, ProcessRetired
from epochledger.ledger.process import EpochRef, ProcessState
from epochledger.projections import orphans


class RetireBatch(Protocol):
    """What retiring needs of a group commit (epochledger.app.Batch): submit a slot's
    event, append on a clean exit."""

    def submit(self, command: ProcessEventBase) -> ProcessState: ...

    def __enter__(self) -> RetireBatch: ...

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None: ...


class RetireTarget(Protocol):
    """What retiring needs of a ledger (epochledger.app.Ledger is one): the orphan
    rule's view of the slots, the clock port and one write path."""

    @property
    def clock(self) -> Clock: ...

    def orphan_view(self, *, candidates_only: bool = False, slots: Sequence[str] = ()) -> orphans.View: ...

    def batch(self) -> RetireBatch: ...


log = logging.getLogger("epochledger.retire")

CONFLICT_ROUNDS = 4


def retire(ledger: RetireTarget, by: EpochRef) -> list[str]:
    """Retire every slot `orphans.retirable` names now, in one batch; returns their
    names (sorted). `by`: the epoch that retires them (the actor)."""
    for _round in range(CONFLICT_ROUNDS):
        try:
            view = ledger.orphan_view(candidates_only=True, slots=(by.process,))
            found = orphans.retirable(view)
            if not found:
                return []
            now = ledger.clock.now()
            with ledger.batch() as b:
                for last in found:
                    b.submit(
                        ProcessRetired(
                            at=now,
                            process=last.process,
                            epoch=last.epoch,
                            actor=by.epoch,
                            reason="its last epoch is over and no run of it is left running",
                        )
                    )
            return [last.process for last in found]
        except ConflictError:
            continue  # a slot booted or a run moved meanwhile: judge again
        except StoreError as e:
            log.warning("retiring slots after the sweep of %s epoch %s failed: %s", by.process, by.epoch, e)
            return []
    log.warning(
        "retiring slots after the sweep of %s epoch %s kept losing races; the next startup retires them",
        by.process,
        by.epoch,
    )
    return []
