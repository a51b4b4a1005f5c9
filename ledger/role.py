"""An exclusive role's stream as a Decider (rule T7): state -> fold (evolve) -> decide.

A role ("admission" for a fleet) is held by one live epoch at a time. Each grant is a
`role.granted` event on the role's own stream (`role:<name>`), so two acquirers racing
for it are one optimistic version check: one grant lands, the other re-reads and is
refused. A grant passes the role on only when the facts of O7 end its holder's epoch
(superseded, stopped, exited, host rebooted): `decide` is told that end by the
application, which asks THE liveness definition (ledger.process.end_of, through
`Batch.end_of`); this module never judges liveness itself, and never reads a clock.

Each grant carries a fencing token, the previous grant's + 1 (1 for the first): a
number that only grows, which the scheduler hands to the systems it drives so they can
refuse a stale holder's late calls. A holder that is alive but stuck keeps the role:
silence is not a fact of O7 (docs/operations.md, "Exclusive roles").
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import assert_never

import msgspec

from epochledger.ledger.errors import RoleHeld, StaleEpoch
from epochledger.ledger.events import RoleEvent, RoleGranted, tag_of

End = tuple[str, str] | None  # ledger.process.end_of's answer: (rule, sentence), None while live


class RoleState(msgspec.Struct, frozen=True, kw_only=True):
    """Who holds the role as of its stream's `version`, and with which token."""

    role: str
    epoch: str
    process: str
    token: int
    granted_at: datetime
    version: int = 0


def evolve(state: RoleState | None, e: RoleEvent) -> RoleState:
    match e:
        case RoleGranted():
            version = state.version + 1 if state is not None else 1
            return RoleState(
                role=e.role, epoch=e.epoch, process=e.process, token=e.token, granted_at=e.at, version=version
            )
        case _:
            assert_never(e)


def fold(events: Iterable[RoleEvent], state: RoleState | None = None) -> RoleState | None:
    for e in events:
        state = evolve(state, e)
    return state


def decide(cmd: RoleEvent, state: RoleState | None, *, asker_end: End, holder_end: End) -> list[RoleEvent]:
    """Grant `cmd.role` to `cmd.epoch` of `cmd.process`, or refuse. `asker_end` and
    `holder_end` are end_of's answers for the asking epoch and for the current holder's
    (None: live; `holder_end` is ignored when nobody holds the role). Pure.

    - The asker must be live: a dead epoch takes nothing (StaleEpoch, rule F1).
    - The asker holds it already: [] (a retried call; the grant stands, token unchanged).
    - Another epoch holds it and is live: RoleHeld, nothing appended.
    - Nobody holds it, or its holder's epoch ended: granted with the next token, the
      previous holder and the fact that ended it stamped on the event."""
    cmd = msgspec.structs.replace(cmd, at=cmd.at.astimezone(UTC))
    match cmd:
        case RoleGranted():
            if asker_end is not None:
                raise StaleEpoch(
                    "",
                    None,
                    tag_of(cmd),
                    cmd.epoch,
                    f"{asker_end[1]} ({asker_end[0]}): it cannot take role {cmd.role!r} (rule T7)",
                )
            if state is None:
                return [
                    msgspec.structs.replace(
                        cmd,
                        token=1,
                        previous_epoch=None,
                        previous_process=None,
                        previous_token=None,
                        previous_rule=None,
                        previous_evidence=None,
                    )
                ]
            if (state.epoch, state.process) == (cmd.epoch, cmd.process):
                return []
            if holder_end is None:
                raise RoleHeld(cmd.role, cmd.epoch, state.epoch, state.process, state.token)
            return [
                msgspec.structs.replace(
                    cmd,
                    token=state.token + 1,
                    previous_epoch=state.epoch,
                    previous_process=state.process,
                    previous_token=state.token,
                    previous_rule=holder_end[0],
                    previous_evidence=holder_end[1],
                )
            ]
        case _:
            assert_never(cmd)
