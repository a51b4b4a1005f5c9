"""Adapters: the ledger live in the orchestrators people run (rule E1, docs/adapters.md).

Each adapter maps its orchestrator's own hooks (signals, listeners, state hooks) onto
the ledger's events, and writes them through a spool (epochledger/spool.py): a local
append-only outbox replayed in order, exactly once, so a task never waits on the store
and an outage loses nothing. An adapter imports its orchestrator, an optional extra
(`pip install 'epochledger[celery]'`); importing this package imports none of them.

- `epochledger.adapters.celery`: Celery's signals (`install(app, store=..., spool=...)`).
- `epochledger.adapters.airflow`: Airflow's listeners; Airflow loads them from
  epochledger/adapters/airflow_plugin.py, the one module that imports Airflow.
"""

from __future__ import annotations

import re
from collections.abc import Mapping


def failure_code(exc: BaseException, codes: Mapping[str, str]) -> str:
    """The failure code of an exception (rule L2's code, for every adapter): the first
    class of its MRO named in `codes`, else its own class name in upper snake case
    (`QuotaExceeded` -> `QUOTA_EXCEEDED`)."""
    for cls in type(exc).__mro__:
        if cls.__name__ in codes:
            return codes[cls.__name__]
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", type(exc).__name__).upper()
