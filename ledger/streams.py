"""The state each kind of stream folds to, named once for the reads that return one
(`Ledger.read_state`, `Ledger.read_states`, `Batch.state`; epochledger/writes.py folds
them, `_fold_stream`). A stream id's kind is its NewType in ledger/events.py
(`run_stream(r)` is a `RunStream`); a read of an id of no known kind returns a
`StreamState`, for the caller to tell apart.

Light on purpose: the deciders are imported for the type checker alone, so naming the
union in a signature costs a start nothing (rule W2).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from epochledger.ledger.idempotency import KeptOutcome
    from epochledger.ledger.passes import PassState
    from epochledger.ledger.process import ProcessState
    from epochledger.ledger.role import RoleState
    from epochledger.ledger.run import RunState
    from epochledger.ledger.settings import Settings
    from epochledger.ledger.tokens import TokenRegistry

# Stream kind (ledger/events.py) -> its state: run -> RunState, process slot ->
# ProcessState (its epochs; a host's boots are folded from the slots' boots,
# ledger/process.py `evolve_host`, not a stream of their own), the ledger's settings ->
# Settings, role -> RoleState, pass -> PassState, idempotency key -> KeptOutcome, the
# tokens -> TokenRegistry. A new stream kind joins here and in `_fold_stream`.
StreamState: TypeAlias = "RunState | ProcessState | Settings | RoleState | PassState | KeptOutcome | TokenRegistry"

__all__ = ["StreamState"]
