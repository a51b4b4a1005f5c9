"""Verify: the log matches its hash chain and the digests kept of it (rule S1), and
every live view equals a replay of the log from zero (rule R2).

`epochledger verify` first walks the log against its chain (ledger/store/chain.py):
the first event altered, removed, inserted or reordered is named, and so is a log
truncated or rewritten after a digest given to it. Then it folds the log in memory
with each view's own evolve, under the engine's rules for poison events, and compares
the result with the live view row by row, up to the view's own position. The first
difference is named (a bug in catch-up, a hand edit of a view's table). Both are
checked and reported; a broken chain (ChainBroken) wins over a view difference
(ViewMismatch): a view may well differ from a log that was rewritten under it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from epochledger.ledger.errors import ChainBroken, LedgerError, ViewMismatch
from epochledger.ledger.store import Poison, Store
from epochledger.ledger.store.chain import ChainReport, Digest
from epochledger.projections import tables
from epochledger.projections.engine import _retry, column_spec, entries, row_of, table_of
from epochledger.projections.registry import VIEWS
from epochledger.projections.view import Counts, View, spec


class Difference(msgspec.Struct, frozen=True, kw_only=True):
    """The first place a live view and a replay from zero disagree (rule R2)."""

    view: str
    key: str | None = None  # row key; None for a difference of the whole view
    column: str | None = None
    live: Any = None
    replay: Any = None
    message: str


class Verified(msgspec.Struct, kw_only=True):
    view: str
    position: int
    rows: int
    parked: int
    built: bool = True  # False: never materialized, so there was nothing to compare
    difference: Difference | None = None


def replay_rows(store: Store, module: View, upto: int) -> tuple[list[tuple[Any, ...]], list[int]]:
    """Fold the log up to `upto` in memory with the view's own evolve, under the
    engine's rules for poison, and materialize it: (rows sorted by key, parked positions)."""
    module = spec(module)
    view = module.initial()
    parked: list[int] = []
    for chunk in store.read_batches(0, upto):
        for rec in chunk:
            if isinstance(rec, Poison):
                parked.append(rec.position)
                continue
            try:
                view = module.evolve(view, rec)
            except Exception as first:  # noqa: BLE001 - the engine's rule, exactly
                view, error = _retry(module.evolve, view, rec, first)
                if error is not None:
                    parked.append(rec.position)
    rows = sorted(row_of(module, k, v) for k, v in entries(module, view).items())
    return rows, parked


def verify_view(store: Store, module: View) -> Verified:
    module = spec(module)
    tables.ensure(store)
    columns = [c for c, _ in column_spec(module)]
    kept: list[tuple[Any, ...]] = []
    if module.COUNTS is not None:  # its kept counts too, in the same snapshot as its rows
        tracking, live, kept = tables.rows_and_counts(store, module.NAME, table_of(module.NAME), columns, module.COUNTS)
    else:
        tracking, live = tables.view_rows(store, module.NAME, table_of(module.NAME), columns)
    if tracking is None:  # nothing live to compare; not a difference
        return Verified(view=module.NAME, position=0, rows=0, parked=0, built=False)
    if tracking[0] != module.VERSION:
        return Verified(
            view=module.NAME,
            position=tracking[1],
            rows=len(live),
            parked=0,
            difference=Difference(
                view=module.NAME,
                live=tracking[0],
                replay=module.VERSION,
                message=f"view {module.NAME} was built by version {tracking[0]}, the code is version {module.VERSION}",
            ),
        )
    position = tracking[1]
    live_parked = [r[1] for r in tables.parked(store, module.NAME) if r[1] <= position]
    expected, parked = replay_rows(store, module, position)
    if module.whole and not live:
        # A view stored whole reads as its initial state until its first event lands
        # (the engine writes its one row then), so an empty table is that state: `init`
        # builds the table of an empty log with no row in it.
        live = [row_of(module, k, v) for k, v in entries(module, module.initial()).items()]
    live.sort(key=lambda r: r[0])
    result = Verified(view=module.NAME, position=position, rows=len(live), parked=len(live_parked))
    result.difference = _first_difference(module.NAME, ["k", *columns, "state"], live, expected)
    if result.difference is None and module.COUNTS is not None:
        result.difference = _counts_difference(module.NAME, columns, module.COUNTS, kept, expected)
    if result.difference is None and live_parked != parked:
        result.difference = Difference(
            view=module.NAME,
            column="parked",
            live=live_parked,
            replay=parked,
            message=f"parked events differ: live {live_parked}, replay {parked}",
        )
    return result


def _counts_difference(
    view: str, columns: list[str], counts: Counts, kept: list[tuple[Any, ...]], expected: list[tuple[Any, ...]]
) -> Difference | None:
    """The view's kept counts against a count of the replayed rows by its own key."""
    at = [1 + columns.index(c) for c in counts.reads]  # a row is (k, *columns, state)
    counted: dict[tuple[Any, ...], int] = {}
    for row in expected:
        if (group := counts.key(*(row[i] for i in at))) is not None:
            counted[group] = counted.get(group, 0) + 1
    live = {tuple(r[:-1]): r[-1] for r in kept}
    for group in sorted(set(live) | set(counted)):
        if live.get(group, 0) != counted.get(group, 0):
            return Difference(
                view=view,
                column="counts",
                key=repr(group),
                live=live.get(group, 0),
                replay=counted.get(group, 0),
                message=f"{view}: kept count of {group!r}: live {live.get(group, 0)}, replay {counted.get(group, 0)}",
            )
    return None


def _first_difference(
    view: str, names: list[str], live: list[tuple[Any, ...]], expected: list[tuple[Any, ...]]
) -> Difference | None:
    i = j = 0
    while i < len(live) or j < len(expected):
        a = live[i] if i < len(live) else None
        b = expected[j] if j < len(expected) else None
        if b is None or (a is not None and a[0] < b[0]):
            assert a is not None
            return Difference(view=view, key=a[0], message=f"{view}: row {a[0]!r} is live but not in the replay")
        if a is None or b[0] < a[0]:
            return Difference(view=view, key=b[0], message=f"{view}: row {b[0]!r} is in the replay but not live")
        for name, x, y in zip(names, a, b, strict=True):
            if x != y:
                shown_x = x.decode() if isinstance(x, bytes) else x
                shown_y = y.decode() if isinstance(y, bytes) else y
                return Difference(
                    view=view,
                    key=a[0],
                    column=name,
                    live=shown_x,
                    replay=shown_y,
                    message=f"{view}: row {a[0]!r} column {name}: live {shown_x!r}, replay {shown_y!r}",
                )
        i += 1
        j += 1
    return None


def verify(store: Store, views: Iterable[View] = VIEWS) -> list[Verified]:
    """Replay from zero in memory, compare with every live view row by row (rule R2)."""
    return [verify_view(store, v) for v in views]


class Verification(msgspec.Struct, kw_only=True):
    """What `epochledger verify` found: the chain (rule S1) and every view (rule R2)."""

    chain: ChainReport
    views: list[Verified]

    def error(self) -> LedgerError | None:
        """The error this verification ends in, if any: the chain's first (exit 12)
        wins over the first view's difference (exit 10)."""
        failure = self.chain.failure
        if failure is not None:
            return ChainBroken(
                failure.kind, failure.position, failure.message, stream=failure.stream, version=failure.version
            )
        for r in self.views:
            if r.difference is not None:
                return ViewMismatch(r.view, r.difference.message)
        return None


def verify_all(store: Store, digests: Iterable[Digest] = (), views: Iterable[View] = VIEWS) -> Verification:
    """The chain against the log and the digests (older first), then every view
    against a replay from zero: both, whatever the first found (rules S1, R2)."""
    return Verification(chain=store.check_chain(list(digests)), views=verify(store, views))
