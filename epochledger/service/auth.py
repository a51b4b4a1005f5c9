"""Who may do what (rule H4): the guard every route passes.

Every route names its operation (`opt={"op": ...}`); `guard` decides from the caller's
token. Until tokens exist (issue H4's work lands here), the service serves loopback only
(serve.py refuses another address) and every caller is local.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

if TYPE_CHECKING:
    from epochledger.app import Ledger

ROUTES: list[Any] = []


def guard(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    """Refuse a caller whose role does not allow the route's operation (401, 403)."""


def check_slot(connection: ASGIConnection[Any, Any, Any, Any], slot: str) -> None:
    """Refuse a writer token bound to other slots acting for `slot` (403)."""


def check_epoch(connection: ASGIConnection[Any, Any, Any, Any], ledger: Ledger, epoch: str) -> None:
    """Refuse a writer token bound to other slots acting for `epoch` (its slot's, 403)."""
