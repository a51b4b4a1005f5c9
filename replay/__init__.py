"""Replay of recorded history to a position or an instant (BRIEF R1, R4)."""
