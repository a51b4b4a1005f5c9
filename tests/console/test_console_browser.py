"""The console in a real browser (rules H9, H10, H11; docs/console.md): Debian's Chromium
(/usr/bin/chromium, or $EPOCHLEDGER_CHROMIUM) driven by Playwright against a real
`epochledger serve` process on the demo's ledger with hostile runs added. Without the
browser these tests skip and say why; EPOCHLEDGER_TEST_BROWSER=require (.ci/run) fails.

The accessibility check runs axe-core (`make axe` installs it into tests/axe from the
npm registry; never downloaded at test time) in the page; its script is injected into a
context that bypasses the CSP, since the console's CSP rightly refuses it."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlencode

import pytest

from epochledger import open_ledger, reports
from epochledger.console import pages
from tests.console.test_console import AUDIT, AUDIT_SQL, HOSTILE_RUN, INCIDENT, WHATIF, Demo
from tests.console.test_console import demo as demo
from tests.helpers.browser import browser as browser  # the fixture
from tests.helpers.browser import no_browser
from tests.helpers.server import served

AXE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "axe", "node_modules", "axe-core", "axe.min.js")
LIVE_RUN = "live-run"
INCIDENT_LIVE_RUN = "incident-live-run"
INCIDENT_WHATIF = "/incident?policy=floor:1h&at=2026-09-09T14:20:00Z"  # a late verdict flagged, the panel open
DAY = "/incident?from=2026-09-09T00:00:00Z&to=2026-09-10T00:00:00Z"  # the demo's day (the hostile runs are later)
# The instant under the SVG x of an ISO instant, in the page's CSS pixels (the picture is
# drawn 1:1), and the window the picture shows, as milliseconds.
X_OF = """iso => { const s = document.querySelector('svg.timeline'), r = s.getBoundingClientRect();
  const lo = Date.parse(s.dataset.lo), hi = Date.parse(s.dataset.hi);
  return r.left + +s.dataset.left + (Date.parse(iso) - lo) / (hi - lo) * +s.dataset.width; }"""
WINDOW = "() => { const s = document.querySelector('svg.timeline'); return [Date.parse(s.dataset.lo), Date.parse(s.dataset.hi)]; }"


@pytest.fixture(scope="module")
def base(demo: Demo) -> Iterator[str]:
    with open_ledger(demo.db, create=False) as lg:
        lg.queue(LIVE_RUN, workflow="nightly-etl", actor="api-1")
    with served(demo.db) as url:
        yield url


class Tab:
    """A page with what it asked for, the dialogs it opened and its console errors."""

    def __init__(self, page: Any, base: str) -> None:
        self.page, self.base = page, base
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        self.errors: list[str] = []  # the scripts' exceptions and the CSP's refusals
        page.on("request", lambda r: self.requests.append(r.url))
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("console", lambda m: self.errors.append(m.text) if "Content Security Policy" in m.text else None)
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        page.set_default_timeout(10_000)

    def go(self, path: str) -> Any:
        response = self.page.goto(self.base + path)
        self.page.wait_for_load_state("load")
        return response

    def login(self, token: str) -> None:
        self.go("/login")
        self.page.fill("input[name=token]", token)
        self.page.click("button[type=submit]")
        self.page.wait_for_url(self.base + "/")

    def stayed_home(self) -> None:
        strangers = [u for u in self.requests if not u.startswith(self.base + "/")]
        assert not strangers, f"requests to another origin: {strangers}"
        assert not self.dialogs, f"a script ran: {self.dialogs}"


@pytest.fixture
def tab(browser: Any, base: str) -> Iterator[Callable[..., Tab]]:
    contexts: list[Any] = []

    def open_tab(**options: Any) -> Tab:
        context = browser.new_context(viewport={"width": 1420, "height": 900}, **options)
        contexts.append(context)
        return Tab(context.new_page(), base)

    yield open_tab
    for c in contexts:
        c.close()


def test_H9_a_responder_opens_the_incident_and_the_run_in_chromium(tab: Callable[..., Tab], demo: Demo) -> None:
    t = tab()
    t.login(demo.reader)
    t.page.click("nav >> text=Incident")
    t.page.wait_for_selector("svg.timeline")
    # The window of the 14:20 takeover, through the page's own form (no JavaScript needed).
    t.page.fill("input[name=from]", "2026-09-09T14:15:00Z")
    t.page.fill("input[name=to]", "2026-09-09T14:30:00Z")
    t.page.fill("input[name=at]", "2026-09-09T14:20:00Z")
    t.page.click("text=Show")
    t.page.wait_for_selector('g.cursor[data-at="2026-09-09T14:20:00Z"]')
    assert "2026-09-09T14:15:00Z to 2026-09-09T14:30:00Z" in t.page.locator("p.sub").text_content()
    assert t.page.locator("svg.timeline .marker.recovery").count() >= 1
    assert t.page.locator("svg.timeline .marker.fenced").count() >= 1
    # Its style is linked, not inline, and applies under the CSP: the legend's swatches have colour.
    swatch = t.page.eval_on_selector(".legend .status i", "e => getComputedStyle(e).backgroundColor")
    assert swatch not in ("", "rgba(0, 0, 0, 0)")
    t.go("/runs")
    t.page.click("a.id >> text=nightly-long")
    t.page.wait_for_url(t.base + "/runs/nightly-long")
    rows = t.page.locator("#run table:last-of-type tbody tr")
    assert rows.count() >= 4
    assert "run.finished" in rows.last.text_content()
    assert t.page.locator("text=is_final_success").count() == 1
    t.stayed_home()


def test_H10_an_operator_corrects_a_run_and_sees_it_in_chromium(tab: Callable[..., Tab], demo: Demo) -> None:
    t = tab()
    t.login(demo.operator)
    t.go("/runs/hourly-sync-0008")
    t.page.select_option("select[name=act]", "correct")
    t.page.select_option("select[name=to]", "failed")
    t.page.fill("input[name=reason]", "the numbers were wrong")
    t.page.click("text=Review")
    t.page.click("button.danger")
    t.page.wait_for_url(t.base + "/runs/hourly-sync-0008")
    row = t.page.locator("tr.correction")
    assert row.count() == 1
    assert "CORRECTION finished -> failed" in row.text_content()
    assert "operator:ops-alice" in row.text_content()
    t.stayed_home()


def test_H10_a_reader_is_refused_an_operator_act_in_chromium(tab: Callable[..., Tab], demo: Demo) -> None:
    t = tab()
    t.login(demo.reader)
    t.go("/runs/report-0003")
    assert t.page.locator("text=Operator acts").count() == 0
    csrf = t.page.get_attribute("input[name=csrf]", "value")
    status = t.page.evaluate(
        """csrf => fetch('/runs/report-0003/cancel', {method: 'POST',
             body: new URLSearchParams({csrf: csrf, reason: 'x'})}).then(r => r.status)""",
        csrf,
    )
    assert status == 403
    t.stayed_home()


def test_H11_a_live_page_shows_another_process_commit_within_a_second(
    tab: Callable[..., Tab],
    demo: Demo,
) -> None:
    t = tab()
    t.login(demo.reader)
    t.go(f"/runs/{LIVE_RUN}")
    t.page.wait_for_selector("body[data-live-open]")
    status = t.page.locator("#run > table:first-of-type > tbody > tr:first-child > td")
    assert status.text_content() == "queued"
    with open_ledger(demo.db, create=False) as lg:
        live = next(e.epoch for e, ended in lg.liveness() if ended is None)
        t0 = time.monotonic()
        lg.start(LIVE_RUN, epoch=live)
    t.page.wait_for_function("() => document.querySelector('#run > table > tbody > tr > td').textContent === 'running'")
    elapsed = time.monotonic() - t0
    assert elapsed < 1.0, f"the page showed the commit after {elapsed:.2f}s"
    assert t.page.locator("#run table:last-of-type tbody tr").last.text_content().find("run.started") >= 0
    t.stayed_home()


def test_R4_H9_a_responder_asks_what_if_and_follows_a_run_in_chromium(tab: Callable[..., Tab], demo: Demo) -> None:
    t = tab()
    t.login(demo.reader)
    t.go("/whatif")
    t.page.fill("input[name=policy]", "flat-age:30s")
    t.page.click("form.filters button[type=submit]")
    t.page.wait_for_url("**/whatif?policy=flat-age*")
    assert "verdicts differ" in (t.page.locator("#whatif-summary").text_content() or "")
    row = t.page.locator("tbody tr").first
    assert row.locator("td").first.text_content() == "killed-live"
    run = row.locator("a.id").text_content()
    row.locator("a.id").click()
    t.page.wait_for_load_state("load")
    assert t.page.locator("h1").text_content() == f"Run \u2068{run}\u2069"
    t.stayed_home()


def test_R4_H9_a_responder_follows_a_whatif_difference_to_its_run_flagged_on_the_incident_in_chromium(
    tab: Callable[..., Tab], demo: Demo
) -> None:
    """From the what-if page's difference, "on the timeline" opens the incident picture
    with the what-if's policy: the run is flagged with the verdict's kind and named with
    it beside its bar, the legend says what the flag means, and the cursor's panel (at
    the sweep) gives the verdict in words with the what-if's own evidence. A zoom keeps
    the policy; without JavaScript the same link shows the same flag and panel."""
    with open_ledger(demo.db, create=False) as lg:
        found = lg.whatif(reports.check_policy("flat-age:30s"), name="flat-age:30s")
    t = tab()
    t.login(demo.reader)
    t.go("/whatif?policy=flat-age:30s")
    row = t.page.locator("tbody tr").first
    run = row.locator("a.id").text_content() or ""
    d = next(d for d in found.differences if d.run == run)
    row.locator("text=on the timeline").click()
    t.page.wait_for_url("**/incident?*policy=flat-age*")
    t.page.wait_for_selector("body[data-live-open]")
    flag = f'svg.timeline .marker.whatif-{d.kind}[data-run="{run}"]'
    assert t.page.locator(flag).count() == 1
    label = t.page.locator(f'svg.timeline g.run[data-run="{run}"] .run-label').text_content()
    assert label == f"{run} (what-if: {d.kind})"
    legend = t.page.locator("#legend").text_content() or ""
    assert "what-if flat-age:30s:" in legend and f"({d.kind})" in legend
    panel = t.page.locator("#cursor-panel").text_content() or ""
    assert f"({d.kind}): what-if flat-age:30s: {run} {d.kind}" in panel and d.message in panel
    t.page.click(".toolbar >> text=Zoom in")
    t.page.wait_for_url("**/incident?*from=*")
    assert "policy=flat-age" in t.page.url
    t.page.wait_for_function(f"() => document.querySelectorAll('{flag}').length === 1")
    assert not t.errors, t.errors
    t.stayed_home()
    href = t.base + "/incident?" + urlencode({"at": pages._when(d.at), "run": run, "policy": "flat-age:30s"})
    plain = tab(java_script_enabled=False)
    plain.login(demo.reader)
    plain.page.goto(href)
    assert plain.page.locator(flag).count() == 1 and plain.page.locator(".toolbar").count() == 0
    assert d.message in (plain.page.locator("#cursor-panel").text_content() or "")
    plain.stayed_home()


def test_A1_H9_an_auditor_runs_a_report_and_sql_a_reader_is_refused_in_chromium(
    tab: Callable[..., Tab], demo: Demo
) -> None:
    t = tab()
    t.login(demo.auditor)
    t.go("/audit")
    t.page.select_option("select[name=report]", "failure_codes")
    t.page.click("form.filters button[type=submit]")
    t.page.wait_for_url("**/audit?report=failure_codes*")
    assert t.page.locator("main h2").first.text_content() == "failure_codes"
    assert t.page.locator("tbody tr").count() >= 1
    t.page.fill("textarea[name=sql]", "SELECT run, reason FROM events WHERE run = '" + HOSTILE_RUN + "'")
    t.page.click("textarea[name=sql] ~ button, form[action='/audit/query'] button")
    t.page.wait_for_url("**/audit/query?sql=*")
    assert HOSTILE_RUN in (t.page.locator("tbody").text_content() or "")  # shown as the text it is
    t.stayed_home()
    r = tab()
    r.login(demo.reader)
    response = r.go("/audit")
    assert response.status == 403 and r.page.locator("h1").text_content() == "Refused"
    r.stayed_home()


def test_H9_hostile_values_run_no_script_in_chromium(tab: Callable[..., Tab], demo: Demo) -> None:
    t = tab()
    t.login(demo.reader)
    for path in ("/", "/runs?limit=1000", "/incident", "/runs/" + HOSTILE_RUN.replace("<", "%3C").replace(">", "%3E")):
        response = t.go(path)
        assert response.status == 200, path
    assert t.page.locator("h1").text_content() == f"Run \u2068{HOSTILE_RUN}\u2069"  # the text it is, isolated
    t.stayed_home()


def _incident(t: Tab, path: str = "/incident") -> None:
    t.go(path)
    t.page.wait_for_selector("body[data-live-open]")  # both scripts ran: the live stream is open
    assert t.page.locator(".toolbar button").count() == 5


def _window(t: Tab) -> tuple[float, float]:
    lo, hi = t.page.evaluate(WINDOW)
    return float(lo), float(hi)


def _redrawn(t: Tab, before: tuple[float, float]) -> tuple[float, float]:
    """Wait for the picture of another window than `before`, and return its window."""
    t.page.wait_for_function(f"() => ({WINDOW})().join() !== '{before[0]:.0f},{before[1]:.0f}'")
    return _window(t)


def test_H9_the_incident_picture_zooms_pans_and_brushes_with_mouse_and_keys_in_chromium(
    tab: Callable[..., Tab], demo: Demo
) -> None:
    """The whole day, then: Zoom in halves the window (its URL says from and to), Earlier
    pans it back by half, Whole history restores it; a drag from 14:15 to 14:30 zooms to
    that interval, the takeover's markers in it; the wheel zooms in around the pointer;
    on the focused picture + zooms, B, Shift+Right twice and Enter brush a fifth of the
    window, and the picture keeps the focus. Every picture is the server's; no CSP error."""
    t = tab()
    t.login(demo.reader)
    _incident(t, DAY)
    whole = _window(t)
    span = whole[1] - whole[0]
    t.page.click(".toolbar >> text=Zoom in")
    lo, hi = _redrawn(t, whole)
    assert "from=" in t.page.url and "to=" in t.page.url
    assert abs((hi - lo) / span - 0.5) < 0.01
    t.page.click(".toolbar >> text=Earlier")
    lo2, hi2 = _redrawn(t, (lo, hi))
    assert abs((lo - lo2) / (hi - lo) - 0.5) < 0.01 and abs((hi2 - lo2) - (hi - lo)) < 2000
    t.page.click(".toolbar >> text=Whole history")
    everything = _redrawn(t, (lo2, hi2))
    assert everything[0] < whole[0] and everything[1] > whole[1] and "from=" not in t.page.url
    t.page.go_back()  # each window is a URL of its own: Back shows the one before
    assert _redrawn(t, everything) == (lo2, hi2)
    t.go(DAY)
    # A brush with the mouse: 14:15 to 14:30 (a pixel of the whole day is about 72 s).
    x0 = t.page.evaluate(X_OF, "2026-09-09T14:15:00Z")
    x1 = t.page.evaluate(X_OF, "2026-09-09T14:30:00Z")
    y = t.page.locator('g.lane[data-process="worker-1"]').bounding_box()["y"] + 40
    t.page.mouse.move(x0, y)
    t.page.mouse.down()
    t.page.mouse.move((x0 + x1) / 2, y, steps=3)
    assert t.page.locator("svg.timeline rect.brush").count() == 1  # the interval shows as it is drawn
    t.page.mouse.move(x1, y, steps=3)
    t.page.mouse.up()
    lo, hi = _redrawn(t, whole)
    nine = 9 * 60_000
    assert abs(lo - t.page.evaluate("Date.parse('2026-09-09T14:15:00Z')")) < nine / 6
    assert abs(hi - t.page.evaluate("Date.parse('2026-09-09T14:30:00Z')")) < nine / 6
    for kind in ("recovery", "fenced", "boot", "supersede", "sweep"):
        assert t.page.locator(f'g.lane[data-process="worker-1"] .marker.{kind}').count() >= 1, kind
    # The wheel zooms in around the pointer.
    t.page.mouse.move((x0 + x1) / 2, y)
    t.page.mouse.wheel(0, -300)
    lo2, hi2 = _redrawn(t, (lo, hi))
    assert hi2 - lo2 < (hi - lo) * 0.8 and lo <= lo2 and hi2 <= hi
    stacked = t.page.evaluate("() => history.length")
    t.page.mouse.wheel(0, 200)  # the wheel again: its URL replaces the one the wheel made
    lo2, hi2 = _redrawn(t, (lo2, hi2))
    assert t.page.evaluate("() => history.length") == stacked
    # The keyboard: 0 the whole history, + zooms in, B ... Enter brushes.
    t.page.focus("svg.timeline")
    t.page.keyboard.press("0")
    assert _redrawn(t, (lo2, hi2)) == everything
    t.page.keyboard.press("+")
    lo, hi = _redrawn(t, everything)
    assert abs((hi - lo) / (everything[1] - everything[0]) - 0.5) < 0.01
    t.page.keyboard.press("b")
    assert "Brushing from" in (t.page.locator("#incident-keys").text_content() or "")
    t.page.keyboard.press("Shift+ArrowRight")
    t.page.wait_for_selector("svg.timeline g.cursor")
    t.page.keyboard.press("Shift+ArrowRight")
    t.page.keyboard.press("Enter")
    lo2, hi2 = _redrawn(t, (lo, hi))
    assert abs((hi2 - lo2) / (hi - lo) - 0.2) < 0.02, (hi2 - lo2) / (hi - lo)
    assert t.page.evaluate("() => document.activeElement === document.querySelector('svg.timeline')")
    assert not t.errors, t.errors
    t.stayed_home()


def test_H9_the_incident_cursor_and_its_panel_say_what_happened_in_chromium(
    tab: Callable[..., Tab], demo: Demo
) -> None:
    """A click at 14:20 of the whole day places the cursor there (the URL's `at`) and the
    panel beside it says in words what happened around it: the takeover's boot, the
    supersession's verdict, the sweep's recovery with its rule and evidence, the fenced
    late report; the right arrow moves the cursor on, and the panel with it."""
    t = tab()
    t.login(demo.reader)
    _incident(t, DAY)
    assert t.page.locator("#cursor-panel").count() == 0
    x = t.page.evaluate(X_OF, "2026-09-09T14:20:00Z")
    y = t.page.locator('g.lane[data-process="api-1"]').bounding_box()["y"] + 10
    t.page.mouse.click(x, y)
    t.page.wait_for_selector("#cursor-panel")
    assert "at=2026-09-09T14%3A" in t.page.url or "at=2026-09-09T14:" in t.page.url
    panel = t.page.locator("#cursor-panel").text_content() or ""
    for words in (
        "boot of worker-1, epoch worker-1.e2",
        "superseded by worker-1.e2",
        "backfill-redeploy: recovered by the sweep of worker-1.e2",
        "rule O2-superseded",
        "FENCED run.finished, claiming finished from stale epoch worker-1.e1",
        "epoch worker-1.e2 of worker-1",  # live at the cursor
    ):
        assert words in panel, words
    at = t.page.get_attribute("g.cursor", "data-at")
    t.page.focus("svg.timeline")
    t.page.keyboard.press("ArrowRight")
    t.page.wait_for_function(f"() => document.querySelector('g.cursor').dataset.at !== '{at}'")
    moved = t.page.get_attribute("g.cursor", "data-at") or ""
    assert moved > (at or "") and moved in (t.page.locator("#cursor-panel h2").text_content() or "")
    assert not t.errors, t.errors
    t.stayed_home()


def test_H11_the_incident_picture_shows_another_process_commit_within_a_second(
    tab: Callable[..., Tab], demo: Demo
) -> None:
    t = tab()
    t.login(demo.reader)
    _incident(t)
    assert t.page.locator(f'g.run[data-run="{INCIDENT_LIVE_RUN}"]').count() == 0
    with open_ledger(demo.db, create=False) as lg:
        live = next(e for e, ended in lg.liveness() if ended is None)
        t0 = time.monotonic()
        with lg.batch() as b:
            b.queue(INCIDENT_LIVE_RUN, workflow="nightly-etl", process=live.process, actor="api-1")
            b.start(INCIDENT_LIVE_RUN, epoch=live.epoch, process=live.process)
    t.page.wait_for_selector(f'g.lane[data-process="{live.process}"] g.run[data-run="{INCIDENT_LIVE_RUN}"]')
    elapsed = time.monotonic() - t0
    assert elapsed < 1.0, f"the picture showed the commit after {elapsed:.2f}s"
    assert t.page.get_attribute(f'g.run[data-run="{INCIDENT_LIVE_RUN}"]', "data-status") == "running"
    assert t.page.locator(".toolbar button").count() == 5  # enhanced once, not again per swap
    t.stayed_home()


def test_H11_the_incident_page_without_javascript_is_the_static_picture(tab: Callable[..., Tab], demo: Demo) -> None:
    """No script: the same picture, the cursor's panel from the server, the GET form; no
    toolbar, nothing live."""
    t = tab(java_script_enabled=False)
    t.login(demo.reader)
    t.go(INCIDENT)
    assert t.page.locator("svg.timeline g.run").count() >= 3
    assert t.page.locator(".toolbar").count() == 0 and t.page.get_attribute("svg.timeline", "tabindex") is None
    assert "recovered by the sweep of worker-1.e2" in (t.page.locator("#cursor-panel").text_content() or "")
    assert t.page.locator('g.lane[data-process="worker-1"] g.cluster').count() >= 1
    t.page.fill("input[name=at]", "2026-09-09T14:21:00Z")
    t.page.click("text=Show")
    t.page.wait_for_selector('g.cursor[data-at="2026-09-09T14:21:00Z"]')
    assert "FENCED run.finished" in (t.page.locator("#cursor-panel").text_content() or "")
    t.stayed_home()


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/runs",
        "/runs/nightly-long",
        "/epochs",
        "/incident",
        INCIDENT,
        INCIDENT_WHATIF,
        "/whatif",
        WHATIF,
        AUDIT,
        AUDIT_SQL,
        "/login",
    ],
)
def test_H11_axe_finds_no_serious_violation(tab: Callable[..., Tab], demo: Demo, path: str) -> None:
    if not os.path.exists(AXE):
        no_browser(f"axe-core is not installed at {AXE} (make axe)")
    token = demo.auditor if path.startswith("/audit") else demo.reader  # the audit pages are the auditor's
    t = tab(bypass_csp=True, extra_http_headers={"Authorization": f"Bearer {token}"})
    t.go(path)
    t.page.add_script_tag(path=AXE)
    found = t.page.evaluate(
        """() => axe.run().then(r => r.violations
             .filter(v => v.impact === 'serious' || v.impact === 'critical')
             .map(v => v.id + ' (' + v.impact + '): ' + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join('; ')))"""
    )
    assert found == [], f"{path}: {found}"
