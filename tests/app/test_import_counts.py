"""The import's counts (rule I1) for a line whose effect already held: an operator reads
`held` ("nothing appended: decide found it done") apart from `duplicates` ("this very
event is recorded"), so a count that moves from one to the other misreports the file."""

from __future__ import annotations

from epochledger.app import Ledger
from epochledger.ndjson import import_events

BOOT = b'{"type":"process.booted","at":"2026-09-09T14:00:00Z","process":"w","epoch":"e1","booted_at":"2026-09-09T13:59:00Z"}\n'
STOP = b'{"type":"process.stopped","at":"2026-09-09T14:00:05Z","process":"w","epoch":"e1"}\n'
STOP_LATER = b'{"type":"process.stopped","at":"2026-09-09T14:00:09Z","process":"w","epoch":"e1"}\n'


def test_I1_a_process_event_whose_effect_already_held_is_counted_held_not_duplicate(ledger: Ledger) -> None:
    """A second clean stop of the same epoch, four seconds later: decide appends nothing
    (the epoch is stopped), and the line is not the recorded stop. Mutation caught: that
    line counted as a duplicate instead of held."""
    result = import_events(ledger, [BOOT, STOP, STOP_LATER])
    assert (result.lines, result.landed, result.duplicates, result.held, result.appended) == (3, 2, 0, 1, 2)
    again = import_events(ledger, [BOOT, STOP, STOP_LATER])  # the same file again: two recorded, one held
    assert (again.landed, again.duplicates, again.held, again.appended) == (0, 2, 1, 0)
    assert ledger._store.max_position() == 2
