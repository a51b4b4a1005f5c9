"""Fuzz of the public Python API (issue 10 item 15: 331 of 4,000 fuzz calls raised raw
Python errors). Law: whatever the arguments, every Commands method, the reads, the
sweep and its preview, open_ledger and a hostile clock either work or raise a
LedgerError subclass; an InvalidInput appends nothing (L4)."""

from __future__ import annotations

import inspect
import math
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochledger import ManualClock, open_ledger
from epochledger.app import Commands, Ledger
from epochledger.ledger.errors import IllegalTransition, InvalidInput, LedgerError, RunNotFound, StaleEpoch, StoreError
from epochledger.ledger.events import Cause, Status
from epochledger.sweep import preview
from tests.conftest import T0

_any_text = st.text(alphabet=st.characters(blacklist_categories=()), max_size=12)  # lone surrogates too
_instants = st.one_of(
    st.datetimes(timezones=st.none() | st.timezones()),
    st.sampled_from(
        [
            datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
            datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-14))),
            T0,
            T0 + timedelta(seconds=5),
        ]
    ),
)
HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e15, -1.0]),
    _any_text,
    st.binary(max_size=6),
    _instants,
    st.sampled_from(["2026-09-09T14:00:00Z", "bogus", "", " ", "a b", "x" * 300]),
    st.lists(_any_text, max_size=3),
    st.tuples(_any_text),
    st.dictionaries(_any_text, _any_text | st.binary(max_size=3), max_size=2),
    st.just(object()),
    st.just({"code": "X"}),
    st.builds(Cause, code=_any_text, message=_any_text | st.none()),
    st.sampled_from([timedelta(seconds=-1), timedelta(days=400), timedelta(seconds=1)]),
)
VALID: dict[str, Any] = {
    "run": st.sampled_from(["r1", "r2"]),
    "process": st.sampled_from(["w", "v"]),
    "epoch": st.sampled_from(["w.e1", "w.e2", "v.e1"]),
    "kind": st.sampled_from(["operator", "waiting_human"]),
    "by": st.sampled_from(["operator", "auto"]),
    "to": st.sampled_from([s.value for s in Status]),
    "code": st.sampled_from(["", "TIMEOUT", "NODE_NOT_FOUND"]),
    "resumable": st.booleans(),
    "at": st.just(None) | st.sampled_from([T0, T0 + timedelta(seconds=1)]),
    "node": st.just("extract"),
    "ref": st.just("s3://b/1"),
    "questions": st.just(["ship?"]),
    "answers": st.just({"ship?": "yes"}),
    "margin": st.sampled_from([0, 1, 1.5, timedelta(seconds=2)]),
    "after": st.integers(0, 10),
    "upto": st.none() | st.integers(0, 10),
    "observed_by": st.sampled_from(["probe@h", "supervisor:s"]),
    "exit_code": st.none() | st.integers(0, 255),
    "signal": st.none() | st.sampled_from([9, 15]),
    "host_boot": st.none() | st.just("b-1"),
    "pid_start": st.none() | st.integers(0, 10**6),
    "role": st.sampled_from(["admission", "teardown"]),
}

COMMANDS = [
    "queue",
    "start",
    "checkpoint",
    "pause",
    "resume",
    "fail",
    "correct",
    "cancel",
    "finish",
    "rewind",
    "delete",
    "begin_stop",
    "stop",
    "exited",
]
READS = ["get_run", "history", "process", "events", "orphans", "unjudged", "settings", "role"]
OTHER = ["boot", "startup", "sweep", "preview", "set_default_slot", "acquire_role"]
assert {n for n, f in vars(Commands).items() if callable(f) and not n.startswith("_")} - {"submit"} == set(COMMANDS)


@st.composite
def calls(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    name = draw(st.sampled_from(COMMANDS + READS + OTHER))
    fn = preview if name == "preview" else getattr(Ledger, name)
    kwargs: dict[str, Any] = {}
    for p in list(inspect.signature(fn).parameters.values())[1:]:
        if p.kind is p.VAR_KEYWORD:
            continue
        valid = VALID.get(p.name, st.just(None) | st.sampled_from(["alice", "because"]))
        hostile = draw(st.integers(0, 5)) == 0
        if p.default is not p.empty and not hostile and draw(st.booleans()):
            continue
        kwargs[p.name] = draw(HOSTILE if hostile else valid)
    if name == "sweep":
        kwargs = {
            "epoch": draw(st.sampled_from(["booted", "hostile"])),
            **{k: kwargs[k] for k in ("margin",) if k in kwargs},
        }
        kwargs["attempts"], kwargs["gaps"] = draw(st.sampled_from([(1, ()), (3, (0, 0))]) | st.tuples(HOSTILE, HOSTILE))
        kwargs["sleep"] = lambda s: None
    return name, kwargs


def _call(lg: Ledger, name: str, kwargs: dict[str, Any], booted: Any) -> None:
    if name == "preview":
        preview(lg, **kwargs)
    elif name == "sweep":
        epoch = booted if kwargs.pop("epoch") == "booted" else kwargs.pop("hostile_epoch", object())
        lg.sweep(epoch, **kwargs)
    elif name == "events":
        list(lg.events(**kwargs))
    else:
        getattr(lg, name)(**kwargs)


class SwitchClock(ManualClock):
    """A manual clock whose readings can be replaced by hostile ones mid-example."""

    hostile_now: Any = None
    hostile_uptime: Any = None

    def now(self) -> Any:
        return self.hostile_now if self.hostile_now is not None else super().now()

    def uptime(self) -> Any:
        return self.hostile_uptime if self.hostile_uptime is not None else super().uptime()


_hostile_now = st.none() | _instants | st.sampled_from(["2026-09-09T14:00:00Z", 0, math.nan])
_hostile_uptime = st.none() | st.sampled_from([math.nan, math.inf, -1.0, 1e12, 1e300, "60", 2**80])


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(calls(), min_size=1, max_size=6), now=_hostile_now, uptime=_hostile_uptime)
def test_L4_fuzzed_api_calls_raise_only_ledger_errors(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, dict[str, Any]]], now: Any, uptime: Any
) -> None:
    """Repro (before the fix): lone surrogates (UnicodeEncodeError), `at` as a string
    (AttributeError), bytes in names (TypeError), correct(to="bogus") (ValueError), NaN
    or 1e15 margins (ValueError, OverflowError), get_run(None) (TypeError), a clock
    with a NaN uptime or a naive now (ValueError, TypeError) all escaped as raw Python
    errors. After the set-up, the clock may turn hostile (None: it stays sane)."""
    clock = SwitchClock(T0, uptime=60.0)
    with open_ledger(str(tmp_path_factory.mktemp("api") / "l.db"), clock=clock) as lg:
        booted = lg.boot("w", epoch="w.e1")
        lg.queue("r1", process="w")
        lg.start("r1", epoch="w.e1", process="w")
        clock.hostile_now, clock.hostile_uptime = now, uptime
        for name, kwargs in steps:
            before = lg._store.max_position()
            try:
                _call(lg, name, dict(kwargs), booted)
            except InvalidInput:
                assert lg._store.max_position() == before, (name, kwargs)
            except (RunNotFound, IllegalTransition) as e:  # a refusal appends nothing, but a fenced report's evidence
                assert isinstance(e, StaleEpoch) or lg._store.max_position() == before, (name, kwargs, e)
            except LedgerError:
                pass  # a store error, or a sweep that gave up (it records process.sweep_failed)
            clock.advance(1)


# ------------------------------------------------------------------ hostile clocks
class HostileClock:
    def __init__(self, now: Any, uptime: Any):
        self._now, self._uptime = now, uptime

    def now(self) -> Any:
        return self._now

    def uptime(self) -> Any:
        return self._uptime


CLOCKS = [
    ("NaN uptime", T0, math.nan),
    ("infinite uptime", T0, math.inf),
    ("negative uptime", T0, -1.0),
    ("uptime as text", T0, "60"),
    ("uptime None", T0, None),
    ("uptime before 1970", T0, 1e10),
    ("uptime 1e300", T0, 1e300),
    ("naive now", datetime(2026, 9, 9, 14), 60.0),
    ("now as text", "2026-09-09T14:00:00Z", 60.0),
    ("now None", None, 60.0),
    ("now in year 1", datetime(1, 1, 1, tzinfo=UTC), 0.0),
    ("now +14:00 in year 1", datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))), 0.0),
]


@pytest.mark.parametrize(("name", "now", "uptime"), CLOCKS, ids=[c[0] for c in CLOCKS])
def test_L8_a_hostile_clock_gives_invalid_input_and_appends_nothing(
    tmp_path: Path, name: str, now: Any, uptime: Any
) -> None:
    """Repro (before the fix): boot() with a NaN uptime raised ValueError; a naive now()
    crashed the sweep's step-back comparison (TypeError). Every reading of an injected
    clock is checked (ledger/clock.py CheckedClock)."""
    with open_ledger(str(tmp_path / "l.db"), clock=ManualClock(T0, 60.0)) as good:
        booted = good.boot("w", epoch="w.e1")
        good.queue("r1", process="w")
        good.start("r1", epoch="w.e1", process="w")
    bad_now = "now" in name
    with open_ledger(str(tmp_path / "l.db"), clock=HostileClock(now, uptime)) as lg:
        before = lg._store.max_position()
        refused = []
        for what, call in [
            ("boot", lambda: lg.boot("w")),
            ("startup", lambda: lg.startup("w")),
            ("preview", lambda: preview(lg, "w")),
            ("sweep", lambda: lg.sweep(booted)),
            ("queue", lambda: lg.queue("r2")),
            ("finish", lambda: lg.finish("r1")),
            ("stop", lambda: lg.stop("w.e1")),
        ]:
            try:
                call()
            except InvalidInput as e:
                assert "clock" in str(e)
                refused.append(what)
        # A bad uptime concerns boots alone (the boot instant); a bad now() every write.
        assert refused == (
            ["boot", "startup", "preview", "sweep", "queue", "finish", "stop"]
            if bad_now
            else ["boot", "startup", "preview"]
        )
        if bad_now:
            assert lg._store.max_position() == before


def test_L8_a_clock_without_now_or_uptime_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="a clock needs now"):
        open_ledger(str(tmp_path / "l.db"), clock=object())  # type: ignore[arg-type]


# ---------------------------------------------------------------------- store URLs
_url_parts = st.tuples(
    st.sampled_from(["", "sqlite://", "sqlite:///", "postgresql://", "postgres://", "mysql://", "SQLITE:///", "://"]),
    st.sampled_from(["", "u@", "postgres@", "u:p@", "@"]),
    st.sampled_from(
        ["127.0.0.1", "localhost", "[::1]", "[::1", "h:abc", "h:99999", "h:-1", "127.0.0.1:1", "127.0.0.1:abc", ""]
    ),
    _any_text.filter(lambda s: "/" not in s) | st.sampled_from(["db", "x\x00y", "", "db?schema=a b"]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=_url_parts)
def test_L4_fuzzed_store_urls_open_or_raise_ledger_errors(tmp_path: Path, parts: tuple[str, str, str, str]) -> None:
    """Repro (before the fix): `postgresql://u@h:abc/db` raised ValueError from urllib
    (a traceback in the CLI). A PostgreSQL URL that parses would connect (and wait for
    its connect timeout): those are left out; what is fuzzed is the parsing."""
    from urllib.parse import urlsplit

    from hypothesis import assume

    scheme, user, host, path = parts
    if scheme.lower().startswith("sqlite") or not scheme:
        url = f"{scheme}{tmp_path}/{path}" if scheme else f"{tmp_path}/{path}"
    else:
        url = f"{scheme}{user}{host}/{path}"
        if scheme.startswith("postgres") and "\x00" not in url:
            try:
                urlsplit(url).port  # noqa: B018
                assume(False)
            except ValueError:
                pass
    try:
        lg = open_ledger(url)
    except (InvalidInput, StoreError) as e:  # a bad URL (named) or a store that cannot be opened
        assert str(e), url
        return
    with lg:  # it opened: a new, empty SQLite ledger where the URL points, not some other store
        assert lg._store.max_position() == 0 and lg._store.url.startswith("sqlite:"), url


@pytest.mark.parametrize(
    "url", ["postgresql://u@h:abc/db", "postgresql://u@[::1/db", "postgresql://u@h:99999/db", "sqlite:///a\x00b.db"]
)
def test_L4_a_malformed_store_url_is_invalid_input(url: str) -> None:
    with pytest.raises(InvalidInput, match="store URL"):
        open_ledger(url)
