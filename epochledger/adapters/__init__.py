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
