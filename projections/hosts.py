"""The hosts view: each host's boots across every slot (rule O7), keyed by machine id.

A host is known by its machine identity, not its name (rule O10): machines that share
a name (cloned images, `localhost`, a fixed container hostname) are separate rows, and
a boot that recorded no machine id is in none. A host reboot is a fact about every
epoch that booted on the host before it, whatever its slot: a later boot on the same
machine that carries another host boot id ends them all. That fact is not in any one slot's stream, so it is folded here
(`ledger.process.evolve_host`) and handed to the one liveness definition,
`ledger.process.end_of(epoch, host)`, by the orphan rule (projections/orphans.py),
the fence (epochledger/writes.py) and the sweep alike. Materialized by
projections/engine.py as table `view_hosts`, one row per machine.
"""

from __future__ import annotations

from collections.abc import Iterable

from epochledger.ledger import process as process_mod
from epochledger.ledger.events import ProcessBooted, Recorded
from epochledger.projections import fold_records
from epochledger.projections.view import ViewSpec

NAME = "hosts"
VERSION = 2  # 2: keyed by machine id, not host name (rule O10)

TYPES = frozenset({ProcessBooted})  # what evolve acts on
View = dict[str, process_mod.HostState]
STATE = process_mod.HostState
COLUMNS: tuple[tuple[str, str], ...] = (("host_boot", "text"), ("reboots", "int"))


def initial() -> View:
    return {}


def evolve(view: View, rec: Recorded) -> View:
    e = rec.event
    if type(e) is ProcessBooted and e.machine is not None and e.host_boot is not None:
        new = process_mod.evolve_host(view.get(e.machine), e)
        assert new is not None
        view[e.machine] = new
    return view


def keys(rec: Recorded) -> tuple[str, ...]:
    e = rec.event
    if type(e) is ProcessBooted and e.machine is not None and e.host_boot is not None:
        return (e.machine,)
    return ()


def columns(key: str, h: process_mod.HostState) -> tuple[object, ...]:
    return (h.host_boot, len(h.ended))


def fold(records: Iterable[Recorded], view: View | None = None) -> View:
    return fold_records(initial, evolve, records, view)


# The view, as the engine and the registry see it (projections/view.py).
VIEW: ViewSpec[View] = ViewSpec(
    NAME=NAME,
    VERSION=VERSION,
    initial=initial,
    evolve=evolve,
    STATE=STATE,
    COLUMNS=COLUMNS,
    columns=columns,
    keys=keys,
    TYPES=TYPES,
)
