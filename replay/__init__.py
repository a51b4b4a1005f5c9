"""Replay of recorded history to a position or an instant (rules R1, R4)."""

from epochledger.replay.pointintime import FleetState, canonical_bytes, state_at, state_hash

__all__ = ["FleetState", "canonical_bytes", "state_at", "state_hash"]
