"""The view protocol: what a read model is (rules R1-R3).

A view is a module with a stable `NAME` (its table is `view_<NAME>`), a `VERSION` (bump
it when the view's meaning changes: the stored view is then stale and the next catch-up
rebuilds it), and a pure fold, `initial()` and `evolve(view, rec)`: the same one the
live view, a rebuild, a replay and verify use, so they cannot disagree. `evolve` must
compute before it stores, so an event it refuses leaves the view as it was.

Optional, read by projections/engine.py when present:
- `STATE` (the msgspec type of one entry, stored as JSON), `COLUMNS` ((name, "text" |
  "int") pairs) and `columns(key, value)`: queryable columns beside the state;
- `keys(rec)`: the only keys `evolve(view, rec)` reads or changes. With it the engine
  keeps a bounded cache of entries and loads the rest from the table on demand;
- `KEY`: with TYPES, the event field whose value is the one key `keys(rec)` returns for
  every event of TYPES (`"run"` for the runs view): the engine then reads a batch's keys
  with one C-level map instead of a `keys` call per event (tests/test_engine.py pins
  KEY against keys);
- `INDEXES`: {name: (column, ...)}, indexes on the view's table (columns of COLUMNS, or
  `k`), created with every rebuilt table when it is swapped in, as `view_<NAME>__<name>`
  (projections/tables.py, `swap_view`). Changing them is a VERSION bump: a stored view
  gets them by the rebuild the bump causes;
- `TYPES`: a frozenset of the event classes `evolve` acts on; an event of any other
  class leaves the view unchanged, so the engine does not call `evolve` (nor `keys`)
  for it: a rebuild of every view in one pass hands each view only its own events
  (tests/test_engine.py pins each view's set against its evolve).

A view whose state is not a dict is stored whole, as one row (docs/projections.md).
"""

from __future__ import annotations

from typing import Any, Protocol

from ledger.events import Recorded


class View(Protocol):
    """A read model, as a module: registered in projections/registry.py."""

    NAME: str
    VERSION: int

    def initial(self) -> Any: ...

    def evolve(self, view: Any, rec: Recorded, /) -> Any: ...
