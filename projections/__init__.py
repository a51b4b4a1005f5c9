"""Pure folds of the ledger's events into read models (rules P*, O*, R*)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

V = TypeVar("V")


def fold_records(
    initial: Callable[[], V], evolve: Callable[[V, Any], V], records: Iterable[Any], view: V | None = None
) -> V:
    """The one fold every view uses: `view` (or a fresh `initial()`) through `evolve`."""
    out = initial() if view is None else view
    for rec in records:
        out = evolve(out, rec)
    return out
