"""msgspec encoding of events: the bytes the store keeps and NDJSON carries.

One encoder for everything: struct fields in declaration order, dict keys sorted
("deterministic"), so the same event is always the same bytes (BRIEF R1, S1).
"""

from __future__ import annotations

import msgspec

from ledger.errors import InvalidInput
from ledger.events import AnyEvent, Event

_encoder = msgspec.json.Encoder(order="deterministic")
_decoder = msgspec.json.Decoder(AnyEvent)

encode = _encoder.encode
decode = _decoder.decode


def checked(event: Event, where: str | None = None) -> bytes:
    """Encode, and prove the bytes decode under the catalogue's constraints (lengths,
    patterns, aware times). One definition of "oversized" or "malformed" for the API and
    for import alike (BRIEF L4)."""
    data = _encoder.encode(event)
    try:
        _decoder.decode(data)
    except msgspec.ValidationError as e:
        raise InvalidInput(str(e), where=where) from None
    return data
