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

import pytest

from epochledger import open_ledger
from tests.console.test_console import AUDIT, AUDIT_SQL, HOSTILE_RUN, INCIDENT, WHATIF, Demo
from tests.console.test_console import demo as demo
from tests.helpers.browser import browser as browser  # the fixture
from tests.helpers.browser import no_browser
from tests.helpers.server import served

AXE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "axe", "node_modules", "axe-core", "axe.min.js")
LIVE_RUN = "live-run"


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
        page.on("request", lambda r: self.requests.append(r.url))
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


@pytest.mark.parametrize(
    "path", ["/", "/runs", "/runs/nightly-long", "/epochs", INCIDENT, "/whatif", WHATIF, AUDIT, AUDIT_SQL, "/login"]
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
