"""The fleet page's tick health by error class, in Chromium (rules H9, H11; docs/console.md):
a ledger whose tick driver dead-lettered runs of two error classes and holds streaks
open, one of them of a hostile class name, served by a real `epochledger serve`. The
page's table must be what a fold over the log gives (the tick-health view's own evolve,
as tests/console/test_fleet.py holds the counts to it), the hostile name shown as the
text it is, and a tick of another process must show within a second."""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlencode

import pytest

from epochledger import ManualClock, open_ledger
from epochledger.app import Ledger
from epochledger.projections import runs as runs_view
from epochledger.projections import tick_health
from tests.conftest import T0
from tests.console.test_console_browser import AXE, Tab
from tests.helpers.browser import browser as browser  # the fixture
from tests.helpers.browser import no_browser
from tests.helpers.server import served
from tests.helpers.tick_helpers import make_driver

# A class whose name is markup: its error class (module.Qualname) reaches the page.
Hostile = type('<img/src=x/onerror=alert("class")>', (Exception,), {})
HOSTILE_CLASS = f"{__name__}.{Hostile.__qualname__}"
DEADLINE = 100  # seconds a run may fail before the driver dead-letters it (rule T2)
TICK = 60  # seconds between ticks
# run -> (the first tick it fails at, what it raises): dead-lettered at tick 2 (120 s
# failing), or a streak opened at tick 1 (still open at tick 2, dead-lettered at tick 3).
FAILING: dict[str, tuple[int, Callable[[], Exception]]] = {
    "dl-timeout-1": (0, lambda: TimeoutError("upstream did not answer")),
    "dl-timeout-2": (0, lambda: TimeoutError("upstream did not answer")),
    "dl-refused": (0, lambda: ConnectionRefusedError("connection refused")),
    "st-timeout": (1, lambda: TimeoutError("upstream did not answer")),
    "st-hostile": (1, lambda: Hostile("<b>not bold</b>")),
}
ROWS = "#by-error-class + table tbody tr"


class Fleet:
    def __init__(self, db: str, clock: ManualClock) -> None:
        self.db, self.clock, self.ticks = db, clock, 0

    def tick(self, lg: Ledger) -> None:
        """One tick of the driver at the clock's instant, then the clock moves on."""
        n = self.ticks

        def poll(s: Any) -> None:
            first, error = FAILING.get(s.run, (None, None))
            if first is not None and error is not None and n >= first:
                raise error()

        make_driver(lg, [("poll", poll)], tick_failure_deadline=DEADLINE).tick(tick_id=f"t{n}")
        self.ticks += 1
        self.clock.advance(TICK)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    f = Fleet(str(tmp_path_factory.mktemp("fleet") / "tick.db"), ManualClock(T0, uptime=60.0))
    with open_ledger(f.db, clock=f.clock) as lg:
        with lg.batch() as b:
            for r in (*FAILING, "healthy"):
                b.queue(r)
                b.start(r)
        for _ in range(3):
            f.tick(lg)
    return f


@pytest.fixture(scope="module")
def base(fleet: Fleet) -> Iterator[str]:
    with served(fleet.db) as url:  # a ledger without tokens: loopback callers are admin
        yield url


def _folded(lg: Ledger) -> list[list[str]]:
    """The table as a fold over the log gives it: by class, the open streaks of live
    runs and the dead-letters."""
    view = tick_health.fold(lg.events())
    live = {s.run for s in runs_view.fold(lg.events()).values() if not s.deleted}
    streaks = Counter(st.error_class for run, st in view.streaks.items() if run in live)
    dead = view.by_error_class
    return [[c, str(streaks[c]), str(dead.get(c, 0))] for c in sorted(streaks.keys() | dead.keys())]


def _shown(t: Tab) -> list[list[str]]:
    return [[td.text_content() or "" for td in row.locator("td").all()] for row in t.page.locator(ROWS).all()]


def test_H9_H11_the_fleet_shows_tick_health_by_error_class_live_in_chromium(
    browser: Any, base: str, fleet: Fleet
) -> None:
    """Two classes dead-lettered (TimeoutError twice, ConnectionRefusedError once), two
    streaks open (TimeoutError, the hostile class): the page's table is the fold's, the
    hostile class its characters (no script ran); another process's tick dead-letters
    both streaks, and the table says so within a second, without a reload."""
    context = browser.new_context(viewport={"width": 1420, "height": 900})
    try:
        t = Tab(context.new_page(), base)
        t.go("/")
        t.page.wait_for_selector("body[data-live-open]")
        with open_ledger(fleet.db, create=False) as lg:
            expected = _folded(lg)
        assert expected == [
            ["ConnectionRefusedError", "0", "1"],
            ["TimeoutError", "1", "2"],
            [HOSTILE_CLASS, "1", "0"],
        ]
        assert _shown(t) == expected
        streaking = t.page.locator("h2:text('Streaking runs') + table tbody").text_content() or ""
        assert "st-hostile" in streaking and HOSTILE_CLASS in streaking
        with open_ledger(fleet.db, clock=fleet.clock, create=False) as lg:
            t0 = time.monotonic()
            fleet.tick(lg)  # the streaks of tick 1 pass the deadline: dead-lettered
            expected = _folded(lg)
        assert expected == [
            ["ConnectionRefusedError", "0", "1"],
            ["TimeoutError", "0", "3"],
            [HOSTILE_CLASS, "0", "1"],
        ]
        t.page.wait_for_function(
            "n => document.querySelectorAll('#by-error-class + table tbody tr td:nth-child(3)')[1]?.textContent === n",
            arg="3",
        )
        elapsed = time.monotonic() - t0
        assert elapsed < 1.0, f"the page showed the tick after {elapsed:.2f}s"
        assert _shown(t) == expected
        assert "Dead-letters: 5" in (t.page.locator("#fleet").text_content() or "")
        t.stayed_home()
    finally:
        context.close()


def _serious_violations(t: Tab) -> list[str]:
    """What axe-core, run in the page, finds serious or critical (rule H11)."""
    t.page.add_script_tag(path=AXE)
    found: list[str] = t.page.evaluate(
        """() => axe.run().then(r => r.violations
             .filter(v => v.impact === 'serious' || v.impact === 'critical')
             .map(v => v.id + ' (' + v.impact + '): ' + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join('; ')))"""
    )
    return found


def test_H11_axe_finds_no_serious_violation_on_the_fleet_with_tick_health(browser: Any, base: str) -> None:
    if not os.path.exists(AXE):
        no_browser(f"axe-core is not installed at {AXE} (make axe)")
    context = browser.new_context(bypass_csp=True)
    try:
        t = Tab(context.new_page(), base)
        t.go("/")
        assert t.page.locator(ROWS).count() == 3
        assert _serious_violations(t) == []
    finally:
        context.close()


def _of_class(lg: Ledger, error_class: str) -> tuple[set[str], list[str]]:
    """One class's open streaks (their live runs) and dead-letters (runs, in log order),
    as a fold over the log gives them."""
    view = tick_health.fold(lg.events())
    live = {s.run for s in runs_view.fold(lg.events()).values() if not s.deleted}
    streaks = {run for run, st in view.streaks.items() if run in live and st.error_class == error_class}
    return streaks, [d.run for d in view.dead_letters if d.error_class == error_class]


def _listed(t: Tab, heading: str) -> list[str]:
    rows = t.page.locator(f"h2:text-matches('^{heading}') + table tbody tr td:first-child").all()
    return [r.text_content() or "" for r in rows]


def test_H9_H11_each_error_class_links_to_its_streaks_and_dead_letters_in_chromium(
    browser: Any, base: str, fleet: Fleet
) -> None:
    """A click on a class of the fleet's table opens the class's page, which lists the
    runs that row counts: its open streaks and its dead-letters, as the fold gives them;
    the hostile class's page names it as the text it is, and no script ran."""
    context = browser.new_context(viewport={"width": 1420, "height": 900})
    try:
        t = Tab(context.new_page(), base)
        for error_class in ("TimeoutError", HOSTILE_CLASS):
            t.go("/")
            t.page.locator("#by-error-class + table tbody a").filter(has_text=error_class).click()
            t.page.wait_for_load_state("load")
            assert t.page.locator("h1").text_content() == f"Error class \u2068{error_class}\u2069"
            with open_ledger(fleet.db, create=False) as lg:
                streaks, dead = _of_class(lg, error_class)
            assert streaks or dead, f"the fixture's ticks fail runs with {error_class}"  # before or after the live tick
            assert set(_listed(t, "Open streaks")) == streaks
            assert _listed(t, "Dead-letters") == dead
        t.stayed_home()
    finally:
        context.close()


def test_H2_an_error_class_over_http_is_the_facades(base: str, fleet: Fleet) -> None:
    """`GET /v1/tick-health/error-class?name=`: the facade's ErrorClassHealth as JSON; a
    class the log never named has no streak and no dead-letter; no name is a 422 problem
    naming the parameter."""
    import httpx
    import msgspec

    with open_ledger(fleet.db, create=False) as lg:
        want = {c: msgspec.to_builtins(lg.error_class_health(c)) for c in ("TimeoutError", "NeverRaised")}
    with httpx.Client(base_url=base) as http:
        for error_class, health in want.items():
            got = http.get("/v1/tick-health/error-class", params={"name": error_class})
            assert got.status_code == 200 and got.json() == health
        assert want["NeverRaised"] == {"error_class": "NeverRaised", "streaking": [], "dead_letters": [], "lag": 0}
        missing = http.get("/v1/tick-health/error-class")
        assert missing.status_code == 422 and missing.headers["content-type"].startswith("application/problem+json")
        assert "name" in missing.text, missing.text


def test_H11_axe_finds_no_serious_violation_on_an_error_class_page(browser: Any, base: str) -> None:
    if not os.path.exists(AXE):
        no_browser(f"axe-core is not installed at {AXE} (make axe)")
    context = browser.new_context(bypass_csp=True)
    try:
        t = Tab(context.new_page(), base)
        t.go("/tick-health?" + urlencode({"error_class": HOSTILE_CLASS}))
        assert _listed(t, "Dead-letters") or _listed(t, "Open streaks")
        assert _serious_violations(t) == []
    finally:
        context.close()
