"""Library errors as plain data, for the two skins (rule H1): the command line's --json
error objects (epochledger/cli) and the service's problem documents
(epochledger/service/problems.py) carry the same fields, made here once."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from epochledger.ledger.errors import LedgerError


def plain(value: Any) -> Any:
    """`value` as JSON data (strings escaped as err() shows them), or _NOT_PLAIN: an
    error's field that is an object (a kept command, a batch) is not repeated."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, list | tuple):
        items = [plain(v) for v in value]
        return _NOT_PLAIN if any(v is _NOT_PLAIN for v in items) else items
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        pairs = {plain(k): plain(v) for k, v in value.items()}
        return _NOT_PLAIN if any(v is _NOT_PLAIN for v in pairs.values()) else pairs
    return _NOT_PLAIN


_NOT_PLAIN = object()


def error_fields(error: LedgerError) -> dict[str, Any]:
    """The structured attributes a library error carries (run, status, streams,
    position, where, ...), those that are plain data."""
    fields = {name: plain(v) for name, v in vars(error).items() if not name.startswith("_")}
    return {name: v for name, v in fields.items() if v is not _NOT_PLAIN}
