"""The write model: the ledger's vocabulary and rules, with no I/O above the store.

Bottom to top: the event catalogue (`events`), failure codes (`codes`), errors
(`errors`), the clock port (`clock`) and codec (`codec`); the lifecycle rule book
(`lifecycle`: status sets, predicates, the transition table); the deciders, one file
per aggregate (`run`: a run's stream, its tick streak and the fence; `process`: a
process slot's epochs and the liveness rule); and the store adapter (`store`), the
only place that speaks eventsourcing and SQL for the log. Users import from
`epochledger`; docs/architecture.md draws the layers.
"""
