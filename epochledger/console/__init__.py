"""The console (docs/console.md): the web pages `epochledger serve` serves at `/`."""

from __future__ import annotations

from epochledger.console.pages import ROUTES

__all__ = ["ROUTES"]
