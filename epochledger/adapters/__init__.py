"""Adapters that record an orchestrator's runs live (rule E1, docs/adapters.md).

Each adapter is a module of its own, behind its orchestrator's optional extra: the
core never imports one, and an adapter imports its orchestrator only where the
orchestrator loads it (epochledger/adapters/airflow_plugin.py for Airflow).
"""
