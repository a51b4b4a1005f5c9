"""The epoch lookup of the write side: which epoch a report names, wherever it booted
(rule F1), and its host's boots, so `end_of` (ledger.process.end_of, rule O7) can
tell a host reboot (rule O10).

`EpochLookup` is the batch's half (epochledger/writes.py, `Batch`): it sees the
batch's own boots before they land. `HostStates` is the Ledger's half: every host's
boots, kept between reports and brought forward from the log's tail.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import msgspec

from epochledger.ledger import process as process_stream_mod
from epochledger.ledger.errors import UnknownEpoch
from epochledger.ledger.events import ProcessBooted, ProcessStream, process_stream
from epochledger.ledger.process import EpochState, HostState, ProcessState
from epochledger.ledger.store import Append, Store

if TYPE_CHECKING:
    from epochledger.app import Ledger


class HostStates:
    """Every host's boots, folded up to a log position (Ledger.host_state)."""

    def __init__(self) -> None:
        self._hosts: dict[str, HostState] | None = None  # every host's boots, folded up to _hosts_at
        self._hosts_at = 0
        self._lock = threading.Lock()

    def get(self, store: Store, machine: str) -> HostState | None:
        """The boots of the host with this machine id across every slot, as of the
        log's head (Ledger.host_state says why it is kept, rules O7, O10)."""
        from epochledger.projections import engine, hosts

        with self._lock:
            if self._hosts is None:
                before = store.max_position()
                found, lag = engine.read_view(store, hosts)
                # The view's position is at least before - lag: fold from there (again).
                self._hosts, self._hosts_at = dict(found), max(0, before - lag)
            known = self._hosts
            for rows in store.read_raw(self._hosts_at):
                for position, stream, _version, state in rows:
                    self._hosts_at = position
                    if not (stream.startswith("process:") and b"process.booted" in state):
                        continue
                    try:
                        e = msgspec.json.decode(state, type=ProcessBooted)
                    except msgspec.DecodeError:
                        continue  # not a boot after all, or a bad row: the views park it (T4)
                    if e.machine is not None and (h := process_stream_mod.evolve_host(known.get(e.machine), e)):
                        known[e.machine] = h
            return known.get(machine)


class EpochLookup:
    """The epoch lookup of a `Batch` (epochledger/writes.py), which supplies these."""

    ledger: Ledger
    _epochs: dict[str, str]  # epoch id -> slot, learned in this batch
    _hosts: dict[str, HostState | None]  # machine id -> its boots (rules O7, O10), read once a batch
    _pending: list[Append]

    def state(self, stream: ProcessStream) -> ProcessState | None:
        """A slot's state as the batch sees it (Batch.state, which reads every kind)."""
        raise NotImplementedError

    def find_epoch(
        self, epoch: str, hint: str | None = None, *, must_be_in: str | None = None
    ) -> process_stream_mod.EpochState:
        """The epoch with this id, wherever it booted: in slot `hint` if it is there,
        else in the slot this batch or the epoch index (projections/epoch_index.py)
        knows for it. `must_be_in`: the report names that slot, so the epoch must be
        one of its epochs. Raises UnknownEpoch if no slot booted it (its liveness
        cannot be judged), or if two slots booted the same id."""
        for slot in (must_be_in or hint, self._epochs.get(epoch)):
            if slot is not None:
                known: ProcessState | None = self.state(process_stream(slot))
                found = known.epoch(epoch) if known is not None else None
                if found is not None:
                    return found
            if must_be_in is not None:
                break
        slots = self.ledger.epoch_slots(epoch)
        if must_be_in is not None:
            elsewhere = f"it was booted by slot {', '.join(slots)}" if slots else "no slot booted it (boot() first)"
            raise UnknownEpoch(epoch, f"epoch {epoch!r} is not an epoch of slot {must_be_in!r}: {elsewhere}")
        if not slots:
            raise UnknownEpoch(
                epoch,
                f"no process slot ever booted epoch {epoch!r}, so its liveness cannot be "
                "judged (boot() the process first and name the epoch it returns)",
            )
        if len(slots) > 1:
            raise UnknownEpoch(
                epoch,
                f"epoch id {epoch!r} was booted by several slots ({', '.join(slots)}); name the slot with process=",
            )
        known = self.state(process_stream(slots[0]))
        found = known.epoch(epoch) if known is not None else None
        if found is None:  # the index and the slot's stream disagree: an index of another ledger?
            raise UnknownEpoch(
                epoch,
                f"the epoch index says slot {slots[0]!r} booted {epoch!r}, but its stream "
                "does not hold that boot; rebuild the views (epochledger rebuild)",
            )
        self._epochs[epoch] = slots[0]
        return found

    def host_state(self, machine: str) -> HostState | None:
        """The boots of the host with this machine id (the hosts view,
        projections/hosts.py), with the boots this batch has decided so far: what
        `end_of` needs to know whether the host rebooted (rule O10)."""
        if machine not in self._hosts:
            found = self.ledger.host_state(machine)
            for a in self._pending:
                if type(a.event) is ProcessBooted and a.event.machine == machine:
                    found = process_stream_mod.evolve_host(found, a.event)
            self._hosts[machine] = found
        return self._hosts[machine]

    def host_of(self, epoch: EpochState) -> HostState | None:
        """The boots of `epoch`'s machine, or None when it recorded no machine id or no
        host boot id: such an epoch can never be told rebooted (rule O10), so no host is
        read for it."""
        if epoch.machine is None or epoch.host_boot is None:
            return None
        return self.host_state(epoch.machine)

    def end_of(self, epoch: EpochState) -> tuple[str, str] | None:
        """Why `epoch` is no longer live, or None: THE liveness definition
        (ledger.process.end_of, rule O7), with its host's facts (host_of)."""
        return process_stream_mod.end_of(epoch, self.host_of(epoch))
