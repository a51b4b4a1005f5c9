"""What a read model is: a `ViewSpec`, one per view module (rules R1-R3).

A view has a stable `NAME` (its table is `view_<NAME>`), a `VERSION` (bump it when the
view's meaning changes: the stored view is then stale and the next catch-up rebuilds
it), and a pure fold, `initial()` and `evolve(view, rec)`: the same one the live view, a
rebuild, a replay and verify use, so they cannot disagree. `evolve` must compute before
it stores, so an event it refuses leaves the view as it was.

Each view module exports its `VIEW = ViewSpec(...)`, built from the module's own
constants and functions (the module keeps them for its readers: `runs.STATE`); the
registry (projections/registry.py) lists the specs. The optional parts have defaults,
so the engine reads attributes, never probes a module:
- `STATE` (the msgspec type of one entry, stored as JSON; default: the type of
  `initial()`), `COLUMNS` ((name, "text" | "int") pairs) and `columns(key, value)`:
  queryable columns beside the state;
- `keys(rec)`: the only keys `evolve(view, rec)` reads or changes. With it the engine
  keeps a bounded cache of entries and loads the rest from the table on demand;
- `KEY`: with TYPES, the event field whose value is the one key `keys(rec)` returns for
  every event of TYPES (`"run"` for the runs view): the engine then reads a batch's keys
  with one C-level map instead of a `keys` call per event (tests/projections/test_engine.py pins
  KEY against keys);
- `INDEXES`: {name: (column, ...)}, indexes on the view's table (columns of COLUMNS, or
  `k`), created with every rebuilt table when it is swapped in, as `view_<NAME>__<name>`
  (projections/tables.py, `swap_view`). Changing them is a VERSION bump: a stored view
  gets them by the rebuild the bump causes;
- `COUNTS`: counts of the view's rows by group (a `Counts`), kept beside its table in
  `view_<NAME>__counts`: every commit of the view's rows adds the groups of the rows it
  writes and takes away those of the rows they replace, in the same transaction, and a
  rebuild's swap counts the swapped-in table once (projections/tables.py). A reader
  then reads a few rows, not the table. Changing them is a VERSION bump;
- `TYPES`: a frozenset of the event classes `evolve` acts on; an event of any other
  class leaves the view unchanged, so the engine does not call `evolve` (nor `keys`)
  for it: a rebuild of every view in one pass hands each view only its own events
  (tests/projections/test_engine.py pins each view's set against its evolve). None: every event.

The fields keep the names the view modules have always used (upper case for the
constants, lower case for the functions), so a spec reads like its module. A spec is a
frozen msgspec Struct compared by identity, never encoded: not a dataclass, whose module
imports `inspect` into every start (rule W2).

A view whose state is not a dict is stored whole, as one row (docs/projections.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from epochledger.ledger.events import Recorded
from epochledger.projections import fold_records

S = TypeVar("S")


class Counts(msgspec.Struct, frozen=True, kw_only=True, eq=False):
    """Counts a view keeps of its rows: `key(*values)` of a row's columns `reads` is
    the row's group (None: not counted), a tuple of values of `COLUMNS` ((name, "text" |
    "int") pairs, the counts table's key); the one definition of what is counted, read
    by a commit, a swap and a read-only copy alike."""

    COLUMNS: tuple[tuple[str, str], ...]
    reads: tuple[str, ...]
    key: Callable[..., tuple[Any, ...] | None]


class ViewSpec(msgspec.Struct, Generic[S], frozen=True, kw_only=True, eq=False):
    """A read model: its identity, its fold, and how the engine stores it. Compared by
    identity (eq=False): one spec per view, registered once."""

    NAME: str
    VERSION: int
    initial: Callable[[], S]
    evolve: Callable[[S, Recorded], S]
    STATE: Any = None  # a msgspec-decodable type; None: type(initial())
    COLUMNS: tuple[tuple[str, str], ...] = ()
    columns: Callable[[str, Any], tuple[object, ...]] | None = None
    keys: Callable[[Recorded], tuple[str, ...]] | None = None
    KEY: str | None = None
    INDEXES: Mapping[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    COUNTS: Counts | None = None
    TYPES: frozenset[type] | None = None

    @property
    def whole(self) -> bool:
        """Stored whole, as one row (its state is not a dict of entries)."""
        return not isinstance(self.initial(), dict)

    @property
    def state_type(self) -> Any:
        """The type one stored entry decodes into."""
        return self.STATE if self.STATE is not None else type(self.initial())

    def fold(self, records: Iterable[Recorded], view: S | None = None) -> S:
        """The view's fold of `records` (from `view`, or a fresh initial()): the one fold."""
        return fold_records(self.initial, self.evolve, records, view)


class ViewModule(Protocol):
    """A view's module, which exports its spec (projections/runs.py and the others)."""

    @property
    def VIEW(self) -> ViewSpec[Any]: ...


View = ViewSpec[Any] | ViewModule
"""What the engine and the forensics accept: a spec, or the module that exports it (the
callers that name a view by its module keep working)."""


def spec(view: View) -> ViewSpec[Any]:
    """The spec of `view`: itself, or its module's VIEW."""
    return view if isinstance(view, ViewSpec) else view.VIEW
