"""The host-facts port: the one module that reads what the kernel says about this host
and its processes (rule O7; docs/architecture.md, "Time and determinism").

- `name()`: the host name a boot records (`socket.gethostname()`): shown, never
  trusted to tell machines apart (cloned images, `localhost`, a fixed container
  hostname share one);
- `machine_id()`: the machine's identity, recorded beside the boot id: a host is
  known by it, not by its name (rule O10). It is derived from /etc/machine-id (else
  /var/lib/dbus/machine-id) by a keyed hash, never the id itself: systemd asks that
  the raw id stay confidential and that applications use an app-specific hash of it
  (as sd_id128_get_machine_app_specific does). None where the machine has none, and
  then no boot on it can prove a reboot;
- `boot_id()`: the host's boot id, a fresh random id per kernel boot
  (/proc/sys/kernel/random/boot_id on Linux), so a later boot on the same host that
  records another one says the host rebooted; None where the platform has none;
- `pid()`: this process's pid;
- `process(pid)`: what the kernel says about a pid now: its start time in clock ticks
  after host boot (field 22 of /proc/<pid>/stat) and whether it is a zombie, or None
  when no such process runs. A pid's start time tells a reused pid apart: the pid a
  worker had is given to a new process only after the worker is gone, and the new one
  started later.

The write side records these at boot (`Ledger.boot`), the probe compares them
(epochledger/probe.py); tests inject a `FakeHost`. No fold reads this module (the
import contracts in pyproject.toml forbid it), so verdicts stay a function of events.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import socket
from typing import Protocol

import msgspec


class PidFacts(msgspec.Struct, frozen=True, kw_only=True):
    start: int  # clock ticks after host boot (field 22 of /proc/<pid>/stat)
    zombie: bool = False  # it has exited and its parent has not reaped it yet


class Host(Protocol):
    def name(self) -> str: ...

    def boot_id(self) -> str | None: ...

    def machine_id(self) -> str | None: ...

    def pid(self) -> int: ...

    def process(self, pid: int) -> PidFacts | None: ...


BOOT_ID = "/proc/sys/kernel/random/boot_id"
MACHINE_ID = ("/etc/machine-id", "/var/lib/dbus/machine-id")  # systemd's, then D-Bus's copy
MACHINE_ID_APP = b"epochledger host identity (rule O10)"  # the key's message: changing it changes every host


def read_stat(text: str) -> PidFacts:
    """/proc/<pid>/stat parsed: the command name (field 2) is in parentheses and may hold
    spaces and parentheses itself, so fields are counted after the LAST ')'."""
    fields = text[text.rindex(")") + 2 :].split()
    # fields[0] is field 3 (state); field 22 (starttime) is fields[19]
    return PidFacts(start=int(fields[19]), zombie=fields[0] in ("Z", "X"))


class SystemHost:
    """This host, as Linux's /proc tells it. Elsewhere `boot_id()` is None and
    `process()` cannot judge a pid (it raises OSError), so boot() records no liveness
    facts and the probe refuses to run (docs/operations.md, residual risks).

    The boot id and the machine id are read once per instance and kept: no process
    outlives its kernel's boot, and a forked child runs on its parent's host, so a
    SystemHost made before a fork hands its children the ids it read (an Airflow task
    runner, forked per try, boots without reading them again: docs/benchmarks.md). A
    machine id not yet there (none, or systemd's `uninitialized`) is read again."""

    def __init__(self) -> None:
        self._boot_id: tuple[str | None] | None = None
        self._machine_id: str | None = None

    def name(self) -> str:
        return socket.gethostname()

    def boot_id(self) -> str | None:
        if self._boot_id is None:
            self._boot_id = (_read_id(BOOT_ID),)
        return self._boot_id[0]

    def machine_id(self) -> str | None:
        if self._machine_id is None:
            for path in MACHINE_ID:
                if (found := _read_id(path)) is not None and found != "uninitialized":  # systemd's first-boot marker
                    self._machine_id = hmac.new(found.encode("ascii"), MACHINE_ID_APP, hashlib.sha256).hexdigest()[:32]
                    break
        return self._machine_id

    def pid(self) -> int:
        return os.getpid()

    def process(self, pid: int) -> PidFacts | None:
        if pid <= 0:
            return None
        try:
            text = read_small(f"/proc/{pid}/stat").decode("utf-8", "replace")
        except (FileNotFoundError, ProcessLookupError):
            if not os.path.isdir("/proc/self"):
                raise OSError("no /proc on this host: a pid cannot be judged") from None
            return None  # no such process
        try:
            return read_stat(text)
        except (ValueError, IndexError):
            return None  # it vanished while we read it


def read_small(path: str) -> bytes:
    """A small file's bytes (/proc's, an id), by `os.open` and `os.read`: no file object.
    A process forked per try (an Airflow task runner) reads /proc/self/stat at its boot,
    and in a fresh fork the objects of `open()` (a buffered reader over a FileIO) cost
    it more than the read: every page they touch is copied from the parent's
    (docs/benchmarks.md, "Airflow, a process per try")."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def _read_id(path: str) -> str | None:
    # Read as bytes, then decoded: a process's first text-mode open costs it far more CPU
    # than a binary one.
    try:
        found = read_small(path).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return found or None


def _machine_of(name: str) -> str:
    """A FakeHost's default machine id: one per name, 32 hex digits like systemd's."""
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class FakeHost:
    """A host that says what a test tells it: a name, a machine id, a boot id, and the
    pids that run (pid -> start time). `reboot()` gives it a new boot id and no
    processes. The machine id defaults to one made from the name (one machine per
    name); two machines that share a name are two FakeHosts with other machine ids."""

    def __init__(
        self,
        name: str = "host-a",
        boot_id: str | None = "boot-1",
        pid: int = 4242,
        processes: dict[int, int] | None = None,
        machine_id: str | None = "",
    ) -> None:
        self._name = name
        self._machine_id = _machine_of(name) if machine_id == "" else machine_id
        self._boot_id = boot_id
        self._pid = pid
        self.processes: dict[int, int] = dict(processes) if processes is not None else {pid: 1000}
        self.zombies: set[int] = set()

    def name(self) -> str:
        return self._name

    def boot_id(self) -> str | None:
        return self._boot_id

    def machine_id(self) -> str | None:
        return self._machine_id

    def pid(self) -> int:
        return self._pid

    def process(self, pid: int) -> PidFacts | None:
        start = self.processes.get(pid)
        return PidFacts(start=start, zombie=pid in self.zombies) if start is not None else None

    def spawn(self, pid: int, start: int) -> None:
        self.processes[pid] = start

    def kill(self, pid: int) -> None:
        self.processes.pop(pid, None)

    def reboot(self, boot_id: str) -> None:
        self._boot_id = boot_id
        self.processes = {self._pid: 1}
