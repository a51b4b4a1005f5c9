"""An in-memory history built through the real deciders, for pure verdict tests: the
same events the ledger would append, without a store, so hypothesis can run fast."""

from __future__ import annotations

from datetime import datetime, timedelta

from epochledger.ledger import process as process_mod
from epochledger.ledger import run as run_mod
from epochledger.ledger.events import (
    AnyEvent,
    ProcessBooted,
    ProcessStopped,
    ProcessStopping,
    Recorded,
    RunEventBase,
    RunFinished,
    RunQueued,
    RunStarted,
    process_stream,
    run_stream,
)
from epochledger.projections import orphans


class History:
    def __init__(self, t0: datetime):
        self.t0 = t0
        self.records: list[Recorded] = []
        self._runs: dict[str, run_mod.RunState | None] = {}
        self._procs: dict[str, process_mod.ProcessState | None] = {}

    def at(self, seconds: float) -> datetime:
        return self.t0 + timedelta(seconds=seconds)

    def add(self, cmd: AnyEvent) -> None:
        if isinstance(cmd, RunEventBase):
            state = self._runs.get(cmd.run)
            events = run_mod.decide(cmd, state)  # type: ignore[arg-type]
            self._runs[cmd.run] = run_mod.fold(events, state)  # type: ignore[arg-type]
            stream = run_stream(cmd.run)
        else:
            pstate = self._procs.get(cmd.process)  # type: ignore[union-attr]
            events = process_mod.decide(cmd, pstate)  # type: ignore[arg-type]
            self._procs[cmd.process] = process_mod.fold(events, pstate)  # type: ignore[arg-type, union-attr]
            stream = process_stream(cmd.process)  # type: ignore[union-attr]
        for e in events:
            version = sum(1 for r in self.records if r.stream == stream) + 1
            self.records.append(Recorded(len(self.records) + 1, stream, version, e))

    # a few verbs, times in seconds after t0
    def boot(self, process: str, epoch: str, at: float, uptime: float = 0.0) -> None:
        self.add(ProcessBooted(at=self.at(at), process=process, epoch=epoch, booted_at=self.at(at - uptime)))

    def stop(self, process: str, epoch: str, at: float) -> None:
        self.add(ProcessStopping(at=self.at(at), process=process, epoch=epoch))
        self.add(ProcessStopped(at=self.at(at), process=process, epoch=epoch))

    def begin_stop(self, process: str, epoch: str, at: float) -> None:
        self.add(ProcessStopping(at=self.at(at), process=process, epoch=epoch))

    def start(self, run: str, process: str | None, at: float, epoch: str | None = None) -> None:
        self.add(RunQueued(at=self.at(at), run=run, process=process))
        self.add(RunStarted(at=self.at(at), run=run, process=process, epoch=epoch))

    def finish(self, run: str, at: float) -> None:
        self.add(RunFinished(at=self.at(at), run=run))

    def view(self, upto: int | None = None) -> orphans.View:
        return orphans.fold(r for r in self.records if upto is None or r.position <= upto)

    def orphaned(self, **kw: object) -> dict[str, str]:
        return {v.run: v.rule for v in orphans.verdicts(self.view(), **kw)}  # type: ignore[arg-type]
