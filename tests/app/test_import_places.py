"""A line judged at its place through its slot (rule I1): a run line that comes before a
recorded line of the slot whose epoch it names (or the slot a start is stamped with) is
judged there, not at the end of the slot's history, and appends nothing; the counts of
the lines judged there; a stated field telling a line from kept evidence."""

from __future__ import annotations

from epochledger import open_ledger
from epochledger.app import Ledger
from epochledger.ledger.events import RunFenced, Status
from epochledger.ndjson import export_lines, import_events
from tests.app.test_ndjson import lines
from tests.helpers.engine_helpers import corrupt

BOOT = {
    "type": "process.booted",
    "at": "2026-09-09T14:00:00Z",
    "process": "w-1",
    "epoch": "e1",
    "booted_at": "2026-09-09T13:59:58Z",
}
# Another slot that booted the same epoch id: only the slot a line names finds the epoch.
TWIN = {**BOOT, "at": "2026-09-09T14:00:00.5Z", "process": "w-2", "booted_at": "2026-09-09T13:59:59Z"}
Q = {"type": "run.queued", "at": "2026-09-09T14:00:01Z", "run": "r"}
S = {"type": "run.started", "at": "2026-09-09T14:00:02Z", "run": "r", "epoch": "e1"}
OUT_OF_PLACE = "out of place: line {}, after it in the file, is already recorded (position 1)"


def test_I1_a_start_before_a_recorded_boot_of_the_slot_it_names_is_judged_there(ledger: Ledger) -> None:
    """The slot is the one the start names (`process`), where two slots booted its epoch
    id; or the one its queue named, when the start names none. Either way the boot after
    the start in the file is recorded, so the start is judged at its place and appends
    nothing, in whichever way the slot is found.
    Mutations caught: `_Import._slot` without the slot hint (the epoch id is then
    ambiguous and no slot is found), without the run's queued slot, or returning none."""
    import_events(ledger, lines([BOOT, TWIN]))
    named = import_events(ledger, lines([Q, {**S, "process": "w-1"}, BOOT]), on_error="skip")
    assert (named.landed, named.duplicates, [r.line for r in named.rejected]) == (1, 1, [2])
    assert named.rejected[0].reason.startswith(OUT_OF_PLACE.format(3))
    queued = [{**Q, "run": "q", "process": "w-1"}, {"type": "run.started", "at": S["at"], "run": "q"}, BOOT]
    by_queue = import_events(ledger, lines(queued), on_error="skip")
    assert (by_queue.landed, by_queue.duplicates, [r.line for r in by_queue.rejected]) == (1, 1, [2])
    assert by_queue.rejected[0].reason.startswith(OUT_OF_PLACE.format(3))
    assert ledger.get_run("r").status is Status.QUEUED and ledger.get_run("q").status is Status.QUEUED


def test_I1_a_report_naming_its_runs_owner_epoch_is_judged_at_the_place_of_that_slot(ledger: Ledger) -> None:
    """A checkpoint written for the epoch that owns its run (which two slots booted by
    that id): the slot is the run's owner's, and the boot recorded after the checkpoint in
    the file places it. Mutations caught: `slot_hint` given no run state (or the state of
    no stream): the epoch is not found, and the checkpoint lands after the boot."""
    import_events(ledger, lines([BOOT, TWIN, Q, {**S, "process": "w-1"}]))
    before = ledger._store.max_position()
    checkpoint = {"type": "run.checkpointed", "at": "2026-09-09T14:00:03Z", "run": "r", "node": "n", "ref": "c/1"}
    result = import_events(ledger, lines([{**checkpoint, "epoch": "e1"}, BOOT]), on_error="skip")
    assert (result.landed, result.duplicates, [r.line for r in result.rejected]) == (0, 1, [1])
    assert result.rejected[0].reason.startswith(OUT_OF_PLACE.format(2))
    assert ledger._store.max_position() == before and ledger.get_run("r").checkpoint is None


def test_I1_each_line_whose_effect_held_at_its_place_is_counted_held(ledger: Ledger) -> None:
    """Two re-sent `process.stopping` lines between the recorded stopping and the
    recorded stop: the second import judges each at its place (before the stop, the
    epoch stopping), where its effect held. Mutations caught: `_Import._behind` setting
    the count instead of adding one, or adding another amount."""
    stopping = {"type": "process.stopping", "at": "2026-09-09T14:00:03Z", "process": "w-1", "epoch": "e1"}
    stopped = {"type": "process.stopped", "at": "2026-09-09T14:00:09Z", "process": "w-1", "epoch": "e1"}
    rows = [BOOT, stopping, {**stopping, "at": "2026-09-09T14:00:04Z"}, {**stopping, "at": "2026-09-09T14:00:05Z"}]
    first = import_events(ledger, lines([*rows, stopped]))
    assert (first.landed, first.held) == (3, 2)
    again = import_events(ledger, lines([*rows, stopped]))
    assert (again.lines, again.landed, again.duplicates, again.held, again.appended) == (5, 0, 3, 2, 0)


def test_I1_a_line_placed_before_the_first_event_of_its_run_has_no_previous_time(ledger: Ledger) -> None:
    """Another queue of a recorded run, listed before the recorded queue: its place is
    the start of the run's history, where no event came before it, so it is out of
    place (the whole reason, as the rejects file shows it), not "time goes backwards"
    against the run's last event. Mutations caught: `_Known.before` looking one event
    past the start of the history (it wraps to the last event), and every word of the
    reason."""
    import_events(ledger, lines([BOOT, Q, S]))
    other = {**Q, "at": "2026-09-09T14:00:00.5Z", "workflow": "other"}
    result = import_events(ledger, lines([other, Q]), on_error="skip")
    assert (result.duplicates, [r.line for r in result.rejected]) == (1, [1])
    assert result.rejected[0].reason == (
        "out of place: line 2, after it in the file, is already recorded (position 2), so this line's place in "
        "the history is taken; nothing is appended before recorded events (rule I1: a line is judged at its place)"
    )


def test_I1_a_line_at_its_place_is_timed_against_the_last_transition_before_it(ledger: Ledger) -> None:
    """The run's history: queued, a refused finish kept as evidence, cancelled. A start
    placed before the recorded cancel and earlier than the queue goes backwards against
    the queue (evidence is no transition), named with its position; a checkpoint placed
    before a recorded checkpoint at the very instant of the start before it is not
    earlier, so it is out of place. Mutations caught: `_Known.before` stepping over
    every other event (it missed the queue behind the evidence), `_behind`'s `<` as
    `<=`, and the words of the time reason."""
    queued = {"type": "run.queued", "at": "2026-09-09T14:00:00Z", "run": "x"}
    cancel = {"type": "run.cancelled", "at": "2026-09-09T14:00:05Z", "run": "x"}
    finish = {"type": "run.finished", "at": "2026-09-09T14:00:10Z", "run": "x"}
    assert import_events(ledger, lines([queued, finish, cancel]), on_error="skip").evidence == 1
    start = {"type": "run.started", "at": "2026-09-09T13:59:59Z", "run": "x"}
    result = import_events(ledger, lines([start, cancel]), on_error="skip")
    assert [r.reason for r in result.rejected] == [
        "time goes backwards in run 'x': at 2026-09-09T13:59:59+00:00 is earlier than 2026-09-09T14:00:00+00:00, "
        "the time of its previous event (position 1); the run would show a negative duration (an export of a "
        "ledger whose clock stepped back imports with --clock-steps keep)"
    ]
    checkpoint = {"type": "run.checkpointed", "at": "2026-09-09T14:00:03Z", "run": "r", "node": "n", "ref": "c/1"}
    import_events(ledger, lines([BOOT, Q, S, checkpoint]))
    same_instant = {**checkpoint, "at": S["at"], "ref": "c/0"}
    result = import_events(ledger, lines([same_instant, checkpoint]), on_error="skip")
    assert [r.reason[:13] for r in result.rejected] == ["out of place:"]


def test_I1_evidence_kept_in_a_batch_holds_only_its_own_event_for_its_run(ledger: Ledger) -> None:
    """A finish of a queued run is refused and kept as evidence in the middle of a file
    whose earlier line queued another run later; the cancel after it is timed against
    its own run's queue and lands. Mutation caught: `_Import._reject` taking every
    append of the batch for the evidence's (`appended_since(None)`): the other run's
    queue became this run's last event, and the cancel went "backwards"."""
    rows = [
        {"type": "run.queued", "at": "2026-09-09T14:00:01Z", "run": "a"},
        {"type": "run.queued", "at": "2026-09-09T14:00:09Z", "run": "b"},
        {"type": "run.finished", "at": "2026-09-09T14:00:05Z", "run": "a"},
        {"type": "run.cancelled", "at": "2026-09-09T14:00:06Z", "run": "a"},
    ]
    result = import_events(ledger, lines(rows), on_error="skip")
    assert (result.landed, result.evidence, [(r.line, r.kept) for r in result.rejected]) == (3, 1, [(3, "run.fenced")])
    assert ledger.get_run("a").status is Status.CANCELLED


def test_I1_a_start_listed_before_its_epochs_boot_stays_rejected_on_a_second_import(ledger: Ledger) -> None:
    """The start of an epoch not yet booted is refused; the same start after the boot
    lands. On the second import both lines state the recorded start, but the boot
    between them in the file is the slot's, so the start recorded is the later line's
    and the first is judged at its place again: rejected, not a duplicate.
    Mutation caught: `_Import._stated_slot` not asking the stored start for its slot
    (only the run's own stream counted): the first line became a duplicate."""
    rows = [Q, S, BOOT, S]
    first = import_events(ledger, lines(rows), on_error="skip")
    assert (first.landed, [r.line for r in first.rejected]) == (3, [2])
    assert "no process slot ever booted epoch 'e1'" in first.rejected[0].reason
    assert (first.rejected[0].kept, first.rejected[0].position) == (None, None)  # refused, not kept as evidence
    again = import_events(ledger, lines(rows), on_error="skip")
    assert (again.landed, again.duplicates, [r.line for r in again.rejected]) == (0, 3, [2])
    assert again.rejected[0].reason.startswith("out of place: line 4, after it in the file, is already recorded")


def test_I1_a_line_stating_a_stamped_field_is_not_the_evidence_kept_for_a_report_without_it(ledger: Ledger) -> None:
    """A stale epoch's start kept as run.fenced evidence; the same start stating its slot
    (a field the ledger stamps when left out) is another report: its own evidence is
    kept, the first is not claimed. Mutations caught: `_kept` comparing only the fields
    that are stated and not stamped (or leaving out the stated stamped ones)."""
    superseded = {**BOOT, "at": "2026-09-09T14:00:00.5Z", "epoch": "e2"}
    first = import_events(ledger, lines([BOOT, superseded, Q, S]), on_error="skip")
    assert (first.landed, first.evidence) == (3, 1)
    named = import_events(ledger, lines([{**S, "process": "w-1"}]), on_error="skip")
    assert (named.duplicates, named.evidence, named.appended) == (0, 1, 1)
    assert [r.kept for r in named.rejected] == ["run.fenced"]
    kept = [r.event for r in ledger.history("r") if isinstance(r.event, RunFenced)]
    assert [k.report.get("process") for k in kept] == [None, "w-1"]


def test_I1_a_re_sent_start_holds_after_its_run_moved_on_only_in_the_slot_of_the_original(ledger: Ledger) -> None:
    """A start re-sent by another actor, alone in a later file, after the run was
    checkpointed and cancelled: decide would call it the recorded start again had it come
    right after it (rule L1), so it holds. Stating another slot makes it another start,
    judged as a new line: refused, earlier than the cancel. Mutations caught: `_holds_again` never holding for a
    run that exists, and giving a start that states its slot the original's slot."""
    other_slot = {**BOOT, "process": "w-2", "epoch": "e2"}
    started = {"type": "run.started", "at": "2026-09-09T14:00:02Z", "run": "r", "process": "w-1"}
    import_events(ledger, lines([BOOT, other_slot, Q, started]))
    checkpoint = {"type": "run.checkpointed", "at": "2026-09-09T14:00:03Z", "run": "r", "node": "n", "ref": "c/1"}
    import_events(ledger, lines([checkpoint, {"type": "run.cancelled", "at": "2026-09-09T14:00:04Z", "run": "r"}]))
    resent = {"type": "run.started", "at": "2026-09-09T14:00:02.5Z", "run": "r", "actor": "someone"}
    again = import_events(ledger, lines([resent]), on_error="skip")
    assert (again.held, again.appended, again.rejected) == (1, 0, [])
    elsewhere = import_events(ledger, lines([{**resent, "process": "w-2"}]), on_error="skip")
    assert (elsewhere.held, elsewhere.appended, len(elsewhere.rejected)) == (0, 0, 1)
    assert elsewhere.rejected[0].reason.startswith("time goes backwards in run 'r'")


def test_I1_T4_a_re_sent_start_of_a_run_whose_queue_row_is_damaged_is_refused_not_held(
    ledger: Ledger, store_url: str
) -> None:
    """The run's queue no longer decodes (a disk fault): its stream folds to no run
    (rule T4 skips the row, and a start alone is no run). A start re-sent after the
    recorded one is then no re-send of a run's start: it is refused as a start of no
    run, as decide refuses it. Mutation caught: `_holds_again` holding for a run with no
    state."""
    started = {"type": "run.started", "at": "2026-09-09T14:00:02Z", "run": "r"}
    import_events(ledger, lines([Q, started]))
    corrupt(store_url, 1, b"\x00 no longer decodes")
    with open_ledger(store_url) as damaged:
        result = import_events(
            damaged, lines([{**started, "at": "2026-09-09T14:00:03Z", "actor": "x"}]), on_error="skip"
        )
    assert (result.held, result.appended) == (0, 0)
    assert [r.reason for r in result.rejected] == [
        "run 'r' is (no such run): run.started refused (a run begins with run.queued)"
    ]


START = {"type": "run.started", "at": "2026-09-09T14:00:02Z", "run": "r", "process": "w-1"}
CHECKPOINT = {"type": "run.checkpointed", "at": "2026-09-09T14:00:03Z", "run": "r", "node": "n", "ref": "c/1"}
CANCEL = {"type": "run.cancelled", "at": "2026-09-09T14:00:04Z", "run": "r"}


def _resend(ledger: Ledger, later: list[dict], at: str, **fields: str) -> tuple[int, int, list[str]]:
    """The run queued and started, then `later` imported; then the start re-sent by
    another actor at `at`, alone: (held, appended, reasons rejected)."""
    import_events(ledger, lines([BOOT, Q, START]))
    if later:
        import_events(ledger, lines(later))
    line = {"type": "run.started", "at": at, "run": "r", "actor": "someone", **fields}
    result = import_events(ledger, lines([line]), on_error="skip")
    return result.held, result.appended, [r.reason for r in result.rejected]


def test_I1_L1_a_re_sent_start_after_a_checkpoint_holds(ledger: Ledger) -> None:
    """Mutation caught: `_Known.resent` stepping over every other event (the start behind
    the checkpoint was never reached)."""
    assert _resend(ledger, [CHECKPOINT], "2026-09-09T14:00:02.5Z") == (1, 0, [])


def test_I1_L1_a_re_sent_start_at_the_instant_of_its_original_holds(ledger: Ledger) -> None:
    """Mutation caught: `_Known.resent` asking the original to be strictly earlier."""
    assert _resend(ledger, [CHECKPOINT, CANCEL], START["at"]) == (1, 0, [])


def test_I1_L1_a_re_sent_start_at_the_instant_of_a_later_event_without_a_status_change_holds(
    ledger: Ledger,
) -> None:
    """The checkpoint after the start, at the re-send's instant, changes no status: it is
    no later transition, so the re-send holds. Mutations caught: `_Known.resent`
    stopping at any event as early as the re-send, or reading the status of no event
    (or of the wrong one) for the change."""
    assert _resend(ledger, [CHECKPOINT], CHECKPOINT["at"]) == (1, 0, [])


def test_I1_L1_a_start_re_sent_for_a_superseded_epoch_holds_on_the_start_it_repeats(ledger: Ledger) -> None:
    """The run's last event is its start by epoch e1, since superseded: a re-send of
    that start by another actor is that start again (rule L1), not a stale epoch's new
    report to keep as evidence. Mutation caught: `_Known.resent` skipping the last event
    of the stream."""
    started = {**START, "epoch": "e1"}
    import_events(ledger, lines([BOOT, Q, started, {**BOOT, "at": "2026-09-09T14:00:02.2Z", "epoch": "e2"}]))
    result = import_events(ledger, lines([{**started, "at": "2026-09-09T14:00:02.5Z", "actor": "someone"}]))
    assert (result.held, result.appended, result.evidence) == (1, 0, 0)


def test_I1_L1_a_queue_re_sent_after_a_start_at_the_same_instant_is_refused(ledger: Ledger) -> None:
    """A start at the queue's very instant changed the run's status: a queue re-sent at
    that instant comes after it, so it is no re-send of the queue (it would queue a
    running run). Mutation caught: `_Known.resent` not asking about a status change
    at the second event of a stream."""
    same = "2026-09-09T14:00:01Z"
    import_events(ledger, lines([BOOT, Q, {**START, "at": same}]))
    result = import_events(ledger, lines([{**Q, "actor": "someone"}]), on_error="skip")
    assert (result.held, result.appended) == (0, 0)
    assert [r.reason for r in result.rejected] == ["run 'r' is running: run.queued refused"]


def test_I1_a_line_that_leaves_out_a_field_the_recorded_event_has_is_not_that_event(ledger: Ledger) -> None:
    """The start recorded by actor "x"; a line stating the same start without an actor is
    another event (its effect holds: `held`), not a duplicate. Mutation caught: `_same`
    comparing only the fields a line states."""
    import_events(ledger, lines([BOOT, Q, {**START, "actor": "x"}]))
    result = import_events(ledger, lines([START]))
    assert (result.duplicates, result.held, result.appended) == (0, 1, 0)


def test_I1_L1_re_sent_starts_held_in_a_file_are_held_again_at_their_place(ledger: Ledger) -> None:
    """Two re-sends of the start, listed after the checkpoint (earlier than it, but the
    start they repeat is earlier still: they hold, rule L1), then the cancel. Imported
    again, each is judged at its place (before the recorded cancel, the run last
    checkpointed), where it is a re-send of the start: both held again, nothing refused.
    Mutations caught: `_Import._line` asking `resent` about no state at the place, or
    setting the held count instead of adding to it."""
    rows = [
        BOOT,
        Q,
        START,
        CHECKPOINT,
        {**START, "at": "2026-09-09T14:00:02.5Z", "actor": "someone"},
        {**START, "at": "2026-09-09T14:00:02.6Z", "actor": "another"},
        CANCEL,
    ]
    first = import_events(ledger, lines(rows))
    assert (first.landed, first.held) == (5, 2)
    again = import_events(ledger, lines(rows), on_error="skip")
    assert (again.duplicates, again.held, again.appended, again.rejected) == (5, 2, 0, [])


def test_I1_an_export_holding_kept_evidence_imports_again_as_duplicates(ledger: Ledger) -> None:
    """A run.fenced line is a line like any: the evidence recorded is its duplicate, not
    a refused report to list again. Mutation caught: `_Import._line` treating a
    run.fenced line that matches kept evidence as the report it keeps (rejected)."""
    finish = {"type": "run.finished", "at": "2026-09-09T14:00:05Z", "run": "r"}
    assert import_events(ledger, lines([Q, finish]), on_error="skip").evidence == 1
    export = list(export_lines(ledger))
    again = import_events(ledger, export, on_error="skip")
    assert (again.lines, again.duplicates, again.appended, again.rejected) == (2, 2, 0, [])


def test_I1_a_start_after_a_recorded_boot_of_its_slot_lands(ledger: Ledger) -> None:
    """The boot is recorded and listed first: the run's lines after it in the file have
    no recorded line of the slot after them, so they land. Mutation caught:
    `_Import._line` taking any line with a slot for one with a place in it (a crash)."""
    import_events(ledger, lines([BOOT]))
    result = import_events(ledger, lines([BOOT, Q, {**S, "process": "w-1"}]))
    assert (result.duplicates, result.landed, result.appended) == (1, 2, 2)
    assert ledger.get_run("r").status is Status.RUNNING


def test_I1_lines_before_the_recorded_ones_in_a_chunk_do_not_hide_them(ledger: Ledger) -> None:
    """The file of the test above led by a line that is no JSON, a line of a run the
    ledger has not seen, and a line of the recorded run at an instant out of range (it
    cannot even be looked up: hashing it overflows): the recorded lines after them are
    still found recorded, so the start listed before its epoch's boot is rejected again,
    not a duplicate. Mutations caught: `_Import._read` stopping at a refused line or at
    an instant out of range instead of going on to the next."""
    rows = [Q, S, BOOT, S]
    import_events(ledger, lines(rows), on_error="skip")
    led = [b"{oops\n", *lines([{**Q, "run": "new"}, {**Q, "at": "0001-01-01T00:00:00+14:00"}, *rows])]
    again = import_events(ledger, led, on_error="skip")
    assert (again.landed, again.duplicates, [r.line for r in again.rejected]) == (1, 3, [1, 3, 5])
    assert "from 1970 to before 9000 UTC" in again.rejected[1].reason
    assert again.rejected[2].reason.startswith("out of place: line 7, after it in the file, is already recorded")


def test_I1_a_file_longer_than_a_chunk_is_judged_whole(ledger: Ledger) -> None:
    """2,001 runs queued and started (4,002 lines: more than two chunks of CHUNK lines),
    after a line that is no JSON, imported tolerantly twice: the first time every good
    line lands and the bad one is listed; the second time every good line is a
    duplicate and the bad one is listed again. Mutations caught: `_Import.run` reading no
    chunk, keeping only the last chunk's lines, dropping the refusals of a chunk read
    (they were parsed again, outside the tolerant catch), or not starting a new chunk."""
    rows = [
        {"type": t, "at": f"2026-09-09T{14 + n // 3600}:{n // 60 % 60:02d}:{n % 60:02d}Z", "run": f"r{n}"}
        for n in range(2001)
        for t in ("run.queued", "run.started")
    ]
    content = [b"{oops\n", *lines(rows)]
    first = import_events(ledger, content, on_error="skip")
    assert (first.lines, first.landed, [r.line for r in first.rejected]) == (4003, 4002, [1])
    again = import_events(ledger, content, on_error="skip")
    assert (again.lines, again.duplicates, again.appended, [r.line for r in again.rejected]) == (4003, 4002, 0, [1])


def test_I1_the_first_line_of_a_file_has_no_frontier(ledger: Ledger) -> None:
    """The start recorded at position 3 is stated by the file's first and third lines,
    and the boot between them is recorded at position 1: nothing before the first line
    states an event (its frontier is 0), so the boot, stated between the two, puts the
    recorded start after it in the file's order: the start is the third line's, and the
    first is judged at its place (rule I1). Mutation caught: `_Import._take` starting
    the frontier at position 1 (the boot then proved nothing, and both were duplicates)."""
    import_events(ledger, lines([BOOT, Q, S]))
    result = import_events(ledger, lines([S, BOOT, S]), on_error="skip")
    assert (result.duplicates, [r.line for r in result.rejected]) == (2, [1])
    assert result.rejected[0].reason.startswith("out of place: line 3, after it in the file, is already recorded")


def test_I1_events_recorded_before_the_files_own_prove_nothing_about_its_order(ledger: Ledger) -> None:
    """The boot is recorded at position 1, before the queue and the start the file's
    first lines state: a boot listed after them tells nothing of where the start stands,
    so both lines stating the start are its duplicates; and a file stating the start
    twice with no line of its slot finds it recorded twice. Mutations caught:
    `_Import._take` moving the frontier with taken lines only (the boot then took the
    start from its first line), or looking up a slot no line states without a default
    (a crash)."""
    import_events(ledger, lines([BOOT, Q, S]))
    result = import_events(ledger, lines([Q, S, BOOT, S]), on_error="skip")
    assert (result.duplicates, result.rejected) == (4, [])
    twice = import_events(ledger, lines([Q, S, S]), on_error="skip")
    assert (twice.duplicates, twice.rejected) == (3, [])


def test_I1_a_taken_line_says_nothing_of_the_order_of_the_lines_after_it(ledger: Ledger) -> None:
    """As in the test above, the file's first line gives its start to the third; the
    checkpoint recorded after that start is stated by the file's third and fifth lines.
    The only event stated first before the checkpoint's line and recorded before it is
    that start, and its first line is taken (the start is a later line's), so it places
    nothing: the checkpoint is its first line's, a duplicate. (The first line, judged at
    its place before the checkpoint, repeats the start there: held.) Mutations caught:
    `_Import._take` counting the first statements before the line too, and `_settle`
    counting every statement of an event as its first."""
    checkpoint = {"type": "run.checkpointed", "at": "2026-09-09T14:00:03Z", "run": "r", "node": "n", "ref": "c/1"}
    import_events(ledger, lines([BOOT, Q, S, checkpoint]))
    result = import_events(ledger, lines([S, BOOT, checkpoint, S, checkpoint]), on_error="skip")
    assert (result.duplicates, result.held, result.rejected) == (4, 1, [])
