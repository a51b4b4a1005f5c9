"""stream routes (being written)"""

from __future__ import annotations

from typing import Any

ROUTES: list[Any] = []
