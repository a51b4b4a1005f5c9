"""The console's pages over HTTP (rules H9, H10; docs/console.md), against a real
`epochledger serve` process on the demo's ledger with hostile runs added: every page
under the Content-Security-Policy, every value escaped, the session cookie, the
operator's acts behind the role table, a confirmation and a CSRF token."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from urllib.parse import quote, urlencode

import httpx
import pytest

from epochledger import open_ledger, reports
from epochledger.console import pages
from epochledger.demo import run_demo
from tests.helpers.server import served

# Hostile values a scheduler may write (docs/console.md, "Escaping"): ids pass the id
# rule (no whitespace), reasons and labels are free text.
HOSTILE_RUN = "<script>alert(1)<!--"  # no "/": a run's page is /runs/{run}
HOSTILE_ATTR = '"><img/src=x/onerror=alert(2)>'
HOSTILE_REASON = '</td><script src="https://evil.example/x.js"></script>'
HOSTILE_LABEL = "<svg/onload=alert(3)>"
HOSTILE = (HOSTILE_RUN, HOSTILE_ATTR, HOSTILE_REASON, HOSTILE_LABEL)

INCIDENT = "/incident?from=2026-09-09T14:15:00Z&to=2026-09-09T14:30:00Z&at=2026-09-09T14:20:00Z"
WHATIF = "/whatif?policy=flat-age:30s"
AUDIT = "/audit?report=failure_codes"
AUDIT_SQL = "/audit/query?sql=SELECT+run,+reason+FROM+events+WHERE+reason+IS+NOT+NULL"
PAGES = [
    "/",
    "/runs",
    "/runs?status=finished&limit=5",
    "/runs/nightly-long",
    "/epochs",
    INCIDENT,
    "/whatif",
    WHATIF,
    "/login",
]


class Demo:
    def __init__(self, db: str, reader: str, operator: str, auditor: str) -> None:
        self.db, self.reader, self.operator, self.auditor = db, reader, operator, auditor

    def head(self) -> int:
        with open_ledger(self.db, create=False) as lg:
            return lg.head()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    db = str(tmp_path_factory.mktemp("console") / "demo.db")
    run_demo(db, out=lambda _: None)
    with open_ledger(db, create=False) as lg:
        lg.queue(HOSTILE_RUN, reason=HOSTILE_REASON, labels={"k": HOSTILE_LABEL}, actor="api-1")
        lg.queue(HOSTILE_ATTR, reason=HOSTILE_ATTR, labels={HOSTILE_ATTR[:10].strip('"> '): HOSTILE_ATTR[:60]})
        live = next(e.epoch for e, ended in lg.liveness() if ended is None)
        lg.start(HOSTILE_RUN, epoch=live)
        lg.fail(HOSTILE_RUN, "OOM", resumable=False, reason=HOSTILE_REASON)
        reader = lg.issue_token("reader", name="reader-rita").secret
        operator = lg.issue_token("operator", name="ops-alice").secret
        auditor = lg.issue_token("auditor", name="audit-ann").secret
        lg.audit_sync(reports.audit_path(db))
    return Demo(db, reader, operator, auditor)


@pytest.fixture(scope="module")
def base(demo: Demo) -> Iterator[str]:
    with served(demo.db) as url:
        yield url


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@contextmanager
def _session(base: str, token: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base, timeout=30) as client:
        r = client.post("/login", data={"token": token, "csrf": _csrf(client.get("/login").text)})
        assert r.status_code == 303 and r.headers["location"] == "/", r.text
        yield client


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None, "the page has no CSRF field"
    return found.group(1)


def _only_own_code(html: str) -> None:
    """No inline script, no inline style, no event-handler attribute, no URL to another
    host: what the CSP forbids is not in the page to begin with."""
    assert re.search(r"<script(?![^>]*\ssrc=\"/static/)", html) is None, "a script that is not the console's own"
    assert re.search(r"<style\b|\sstyle=", html) is None, "inline style"
    assert re.search(r"<[^>]*\son[a-z]+\s*=", html) is None, "an event-handler attribute"
    for url in re.findall(r'\s(?:src|href|action)="([^"]*)"', html):
        assert url.startswith(("/", "?", "#")), f"a URL that leaves the console: {url}"


def test_H9_every_page_under_the_csp_and_loads_only_its_own_files(base: str, demo: Demo) -> None:
    with httpx.Client(base_url=base, headers=_bearer(demo.reader), timeout=30) as client:
        for path in PAGES:
            r = client.get(path)
            assert r.status_code == 200, (path, r.text[:300])
            assert r.headers["content-type"].startswith("text/html"), path
            assert r.headers["content-security-policy"] == pages.CSP, path
            assert r.headers["x-content-type-options"] == "nosniff"
            _only_own_code(r.text)
        for name in ("console.css", "console.js", "timeline.css", "timeline.js"):
            r = client.get(f"{pages.ASSETS}{name}")
            assert r.status_code == 200 and r.headers["cache-control"] == pages.STATIC_CACHE, name
            assert r.headers["content-security-policy"] == pages.CSP
        assert client.get("/static/0000/console.js").status_code == 422  # another version's URL: refused, named
        assert "/v1/stream" in client.get(f"{pages.ASSETS}console.js").text


def test_H9_hostile_ids_reasons_and_labels_render_as_text(base: str, demo: Demo) -> None:
    with httpx.Client(base_url=base, headers=_bearer(demo.reader), timeout=30) as client:
        listing = client.get("/runs", params={"limit": 1000}).text
        run = client.get(f"/runs/{quote(HOSTILE_RUN, safe='')}").text
        fleet = client.get("/").text
        incident = client.get("/incident").text
    for html in (listing, run):
        assert pages.esc(HOSTILE_RUN) in html
        for payload in HOSTILE:
            assert payload not in html, payload
        _only_own_code(html)
    assert pages.esc(HOSTILE_ATTR) in listing
    assert pages.esc(f"k={HOSTILE_LABEL}") in listing and pages.esc(f"k={HOSTILE_LABEL}") in run
    assert pages.esc(HOSTILE_REASON) in run and "evil.example" not in re.sub(r"&[a-z]+;", "", run).split("<td>")[0]
    assert run.count("<script") == 1 and fleet.count("<script") == 1
    for payload in HOSTILE:
        assert payload not in incident
    _only_own_code(incident)


def test_H9_runs_filters_and_cursor(base: str, demo: Demo) -> None:
    with httpx.Client(base_url=base, headers=_bearer(demo.reader), timeout=30) as client:
        first = client.get("/runs", params={"status": "finished", "limit": 5}).text
        assert first.count('<a class="id" href="/runs/') == 5
        nxt = re.search(r'<a rel="next" href="([^"]+)"', first)
        assert nxt is not None
        second = client.get(nxt.group(1).replace("&amp;", "&")).text
        firsts = set(re.findall(r'class="id" href="/runs/([^"]+)"', first))
        seconds = set(re.findall(r'class="id" href="/runs/([^"]+)"', second))
        assert len(seconds) == 5 and not firsts & seconds
        assert 'value="finished" selected' in second
        bad = client.get("/runs", params={"status": "done"})
        assert bad.status_code == 422 and bad.json()["fields"]["where"] == "status"
        assert client.get("/runs/no-such-run").status_code == 404


def test_H10_login_sets_a_session_cookie_the_guard_reads(base: str, demo: Demo) -> None:
    with httpx.Client(base_url=base, timeout=30) as anon:
        r = anon.get("/", headers={"Accept": "text/html,application/xhtml+xml"})  # a browser's navigation
        assert r.status_code == 303 and r.headers["location"] == "/login"
        r = anon.get("/")  # a script: the guard's 401 problem (rule H4)
        assert r.status_code == 401 and r.headers["content-type"] == "application/problem+json"
        assert anon.get("/v1/runs").status_code == 401  # the JSON routes: a problem, never a redirect
        csrf = _csrf(anon.get("/login").text)
        bad = anon.post("/login", data={"token": "not-a-token", "csrf": csrf})
        assert bad.status_code == 422 and pages.esc("not-a-token") not in bad.text
        assert "epochledger_session" not in bad.headers.get("set-cookie", "")
        r = anon.post("/login", data={"token": demo.reader, "csrf": csrf})
        cookie = [c for c in r.headers.get_list("set-cookie") if c.startswith("epochledger_session=")]
        assert len(cookie) == 1
        flags = {f.strip().lower() for f in cookie[0].split(";")[1:]}
        assert {"httponly", "samesite=strict", "path=/"} <= flags and "secure" not in flags
        csrf = _csrf(anon.get("/login").text)  # the session's new CSRF cookie
        behind = anon.post("/login", data={"token": demo.reader, "csrf": csrf}, headers={"X-Forwarded-Proto": "https"})
        assert all("Secure" in c for c in behind.headers.get_list("set-cookie"))
    with _session(base, demo.reader) as client:
        page = client.get("/")
        assert page.status_code == 200 and "reader-rita (reader)" in page.text
        assert client.get("/v1/runs").status_code == 200  # the same guard, for the JSON routes too
        client.cookies.set("epochledger_session", "bad token!")
        assert client.get("/v1/runs").status_code == 401


def test_H10_operator_corrects_a_run_after_a_confirmation_with_csrf(base: str, demo: Demo) -> None:
    run = "hourly-sync-0006"
    with _session(base, demo.operator) as client:
        view = client.get(f"/runs/{run}").text
        assert "Operator acts" in view
        token = _csrf(view)
        before = demo.head()
        form = {"act": "correct", "to": "failed", "code": "BAD_DATA", "reason": "wrong numbers <b>x</b>"}
        confirm = client.post(f"/runs/{run}/confirm", data={**form, "csrf": token})
        assert confirm.status_code == 200 and f'action="/runs/{run}/correct"' in confirm.text
        assert pages.esc("wrong numbers <b>x</b>") in confirm.text
        assert demo.head() == before  # the confirmation writes nothing
        fields = dict(re.findall(r'type="hidden" name="([a-z]+)" value="([^"]*)"', confirm.text))
        fields = {k: v.replace("&lt;", "<").replace("&gt;", ">") for k, v in fields.items()}
        forged = client.post(f"/runs/{run}/correct", data={**fields, "csrf": "forged"})
        assert forged.status_code == 403 and "CSRF" in forged.json()["detail"]
        assert demo.head() == before
        done = client.post(f"/runs/{run}/correct", data=fields)
        assert done.status_code == 303 and done.headers["location"] == f"/runs/{run}"
        after = client.get(f"/runs/{run}").text
    assert demo.head() == before + 1
    row = re.search(r'<tr class="correction">(.*?)</tr>', after)
    assert row is not None and "CORRECTION finished -&gt; failed" in row.group(1)
    assert "operator:ops-alice" in row.group(1) and "BAD_DATA" in row.group(1)


def test_H10_a_reader_is_refused_an_operator_act(base: str, demo: Demo) -> None:
    with _session(base, demo.reader) as client:
        view = client.get("/runs/nightly-long").text
        assert "Operator acts" not in view
        token = _csrf(view)
        before = demo.head()
        for act in ("correct", "cancel", "resume"):
            r = client.post(f"/runs/nightly-long/{act}", data={"csrf": token, "to": "failed", "reason": "x"})
            assert r.status_code == 403, act
            assert "operator" in r.json()["fields"]["needed"], act
        r = client.post("/runs/nightly-long/confirm", data={"csrf": token, "act": "correct", "reason": "x"})
        assert r.status_code == 403
    assert demo.head() == before


def test_H10_a_form_from_another_site_has_no_csrf_token(base: str, demo: Demo) -> None:
    """A cross-site form carries the session cookie at most (SameSite=Strict keeps even
    that away), never the CSRF cookie's value: refused, nothing appended."""
    with _session(base, demo.operator) as client:
        before = demo.head()
        r = client.post("/runs/hourly-sync-0007/correct", data={"to": "failed", "reason": "x"})
        assert r.status_code == 403
        client.cookies.delete("epochledger_csrf")
        r = client.post("/runs/hourly-sync-0007/correct", data={"to": "failed", "reason": "x", "csrf": ""})
        assert r.status_code == 403
    assert demo.head() == before


def test_R4_H9_whatif_page_shows_every_differing_verdict_of_the_facade(base: str, demo: Demo) -> None:
    """The what-if page is `/v1/whatif`'s call: each difference the facade finds is a row
    naming its kind, its run (linked to the run and to the incident picture at the
    sweep) and its evidence; a bad policy or instant is the 422 problem naming it."""
    with open_ledger(demo.db, create=False) as lg:
        whole = lg.whatif(reports.check_policy("flat-age:30s"), name="flat-age:30s")
        cut = min(d.at for d in whole.differences) - timedelta(seconds=1)
        early = lg.whatif(reports.check_policy("flat-age:30s"), at=cut, name="flat-age:30s")
    assert whole.differences and len(early.differences) < len(whole.differences)
    with httpx.Client(base_url=base, headers=_bearer(demo.reader), timeout=30) as client:
        empty = client.get("/whatif")
        assert empty.status_code == 200 and "<tbody>" not in empty.text and 'name="policy"' in empty.text
        html = client.get("/whatif", params={"policy": "flat-age:30s"}).text
        assert f"{len(whole.differences)} verdicts differ" in html
        rows = re.findall(r"<tr><td>([a-z-]+)</td><td><a class=\"id\" href=\"/runs/([^\"]+)\"", html)
        assert rows == [(d.kind, quote(d.run, safe="")) for d in whole.differences]
        for d in whole.differences:
            assert pages.esc(d.message) in html
            picture = pages.esc(
                "/incident?" + urlencode({"at": pages._when(d.at), "run": d.run, "policy": "flat-age:30s"})
            )
            assert f'href="{picture}"' in html
            assert client.get(picture.replace("&amp;", "&")).status_code == 200
        part = client.get("/whatif", params={"policy": "flat-age:30s", "at": cut.isoformat()}).text
        assert f"{len(early.differences)} verdicts differ" in part
        upto = pages.esc(urlencode({"policy": "flat-age:30s", "upto": cut.isoformat()}))
        assert part.count(upto) == len(early.differences)  # the picture replays the same cut
        bad = client.get("/whatif", params={"policy": "flat-age:soon"})
        assert bad.status_code == 422 and bad.json()["fields"]["where"] == "policy"
        bad = client.get("/whatif", params={"policy": "clamp", "at": "yesterday"})
        assert bad.status_code == 422 and bad.json()["fields"]["where"] == "at"


def test_A1_H9_audit_page_shows_the_canned_reports_and_sql_to_the_auditor_only(base: str, demo: Demo) -> None:
    """The audit page is `/v1/audit/reports`'s and `/v1/audit/query`'s calls: a report's
    rows are the facade's, escaped; the SQL form is the auditor's, bounded, read-only;
    a reader's browser gets a 403 page, a script the 403 problem."""
    expected = reports.audit_report(demo.db, "failure_codes")
    assert expected.rows
    with httpx.Client(base_url=base, headers=_bearer(demo.auditor), timeout=30) as client:
        home = client.get("/audit").text
        assert 'href="/audit"' in home and 'href="/audit"' not in client.get("/", headers=_bearer(demo.reader)).text
        for name in reports.audit_report_names():
            assert f'<option value="{name}">' in home
        assert 'action="/audit/query"' in home
        html = client.get(AUDIT).text
        assert f"{len(expected.rows)} rows" in html
        for row in expected.rows:
            assert "".join(f"<td>{pages.esc(v)}</td>" for v in row) in html
        _only_own_code(html)
        sql = client.get(AUDIT_SQL.split("?")[0], params={"sql": "SELECT run, reason FROM events"}).text
        assert pages.esc(HOSTILE_REASON) in sql and HOSTILE_REASON not in sql
        _only_own_code(sql)
        r = client.get("/audit/query", params={"sql": "DROP TABLE events"})
        assert r.status_code == 422
        assert client.get("/audit", params={"report": "no_such_report"}).status_code == 422
    with httpx.Client(base_url=base, headers=_bearer(demo.reader), timeout=30) as client:
        r = client.get("/audit", headers={"Accept": "text/html"})
        assert r.status_code == 403 and r.headers["content-type"].startswith("text/html")
        assert "auditor" in r.text and r.headers["content-security-policy"] == pages.CSP
        r = client.get("/audit/query", params={"sql": "SELECT 1"})
        assert r.status_code == 403 and r.headers["content-type"] == "application/problem+json"
    with httpx.Client(base_url=base, headers=_bearer(demo.operator), timeout=30) as client:
        assert client.get("/audit/query", params={"sql": "SELECT 1"}).status_code == 403


def test_H10_login_and_logout_check_their_csrf_token(base: str, demo: Demo) -> None:
    """A login form posted from another site (login CSRF: the attacker's token in the
    victim's browser) and a logout posted from one are refused: each form carries the
    CSRF cookie's token."""
    with httpx.Client(base_url=base, timeout=30) as anon:
        r = anon.post("/login", data={"token": demo.reader})  # no CSRF cookie, no field
        assert r.status_code == 403 and "epochledger_session" not in r.headers.get("set-cookie", "")
        form = anon.get("/login").text
        r = anon.post("/login", data={"token": demo.reader, "csrf": "forged"})
        assert r.status_code == 403 and "epochledger_session" not in r.headers.get("set-cookie", "")
        assert anon.post("/login", data={"token": demo.reader, "csrf": _csrf(form)}).status_code == 303
    with _session(base, demo.reader) as client:
        r = client.post("/logout", data={"csrf": "forged"})
        assert r.status_code == 403 and "epochledger_session" not in r.headers.get("set-cookie", "")
        assert client.get("/").status_code == 200  # still logged in
        r = client.post("/logout", data={"csrf": _csrf(client.get("/").text)})
        assert r.status_code == 303 and r.headers["location"] == "/login"
        assert 'epochledger_session=""' in r.headers["set-cookie"] or "Max-Age=0" in r.headers["set-cookie"]
        assert client.get("/").status_code == 401


def test_H9_a_run_id_in_a_title_is_bidi_isolated(base: str, demo: Demo) -> None:
    run = "\u05e2\u05d1\u05d5\u05d3\u05d4-7"  # right-to-left letters (the id rule refuses format characters)
    with open_ledger(demo.db, create=False) as lg:
        lg.queue(run, actor="api-1")
    with httpx.Client(base_url=base, headers=_bearer(demo.reader), timeout=30) as client:
        html = client.get(f"/runs/{quote(run, safe='')}").text
    assert f"<title>Run \u2068{run}\u2069 - epochledger</title>" in html
    assert f"<h1>Run \u2068{run}\u2069</h1>" in html


def test_H9_the_incident_page_links_its_scripts_and_its_cursor_panel_shows_hostile_ids_as_text(
    base: str, demo: Demo
) -> None:
    """The incident page: its three scripts linked from /static (the picture's hover,
    the live parts, the zoom and cursor), the picture one live part, and the cursor's
    panel (what happened around the hostile run's failure, just now) escaped like the
    rest; a cursor that is not an instant is the 422 problem naming `at`."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    with httpx.Client(base_url=base, headers=_bearer(demo.reader), timeout=30) as client:
        r = client.get("/incident", params={"at": now})
        bad = client.get("/incident", params={"at": "noon"})
    assert r.status_code == 200 and r.headers["content-security-policy"] == pages.CSP
    html = r.text
    _only_own_code(html)
    scripts = re.findall(r'<script src="([^"]+)"', html)
    assert sorted(s.rsplit("/", 1)[1] for s in scripts) == ["console.js", "incident.js", "timeline.js"]
    assert all(s.startswith(pages.ASSETS) for s in scripts)
    assert '<div id="picture" data-live>' in html
    panel = html[html.index('<section id="cursor-panel"') :]
    panel = panel[: panel.index("</section>")]
    assert f"At the cursor, {now}" in panel and pages.esc(HOSTILE_RUN) in panel
    for payload in HOSTILE:
        assert payload not in html, payload
    assert bad.status_code == 422 and bad.json()["fields"]["where"] == "at", bad.text


def test_H9_fleet_page_shows_the_facades_counts_and_each_slots_running_runs(base: str, demo: Demo) -> None:
    """The fleet page's counts are `Reports.fleet`'s (counted in the runs view's SQL):
    each status a link to its runs, each slot's count of running runs a link to the runs
    page of that slot and predicate, which lists exactly that many runs, each running."""
    with open_ledger(demo.db, create=False) as lg:
        now = lg.fleet()
    assert now.running_by_slot and sum(now.by_status.values()) > 10
    with httpx.Client(base_url=base, headers=_bearer(demo.reader), timeout=30) as client:
        html = client.get("/").text
        for status, n in now.by_status.items():
            href = pages.esc("/runs?" + urlencode({"status": status}))
            assert f'<td><a href="{href}">{pages.esc(status)}</a></td><td>{n}</td>' in html, status
        for slot, n in now.running_by_slot.items():
            href = "/runs?" + urlencode({"predicate": reports.RUNNING_PREDICATE, "process": slot})
            assert f'<td>{pages.esc(slot)}</td><td><a href="{pages.esc(href)}">{n}</a></td>' in html, slot
            listing = client.get(href).text
            runs = re.findall(r'<td><a class="id" href="/runs/[^"]+">[^<]*</a></td><td>([a-z_]+)</td>', listing)
            assert runs == ["running"] * n, (slot, runs)


@pytest.mark.parametrize("policy", ["flat-age:30s", "floor:1h", "clamp"])
def test_R4_H9_the_incident_picture_flags_each_differing_verdict_of_the_whatif_on_its_run(
    base: str, demo: Demo, policy: str
) -> None:
    """The incident page given the what-if's policy (`policy`, and its cut `upto`) flags
    exactly the differences the facade's what-if gives, each on its run, of its kind,
    with the what-if's own evidence, in the legend and the summary; without a policy
    nothing is flagged; a bad policy or cut is the 422 problem naming it."""
    with open_ledger(demo.db, create=False) as lg:
        whole = lg.whatif(reports.check_policy(policy), name=policy)
        assert whole.differences, policy
        cut = min(d.at for d in whole.differences) - timedelta(seconds=1)
        before = lg.whatif(reports.check_policy(policy), at=cut, name=policy)
    with httpx.Client(base_url=base, headers=_bearer(demo.reader), timeout=30) as client:
        html = client.get("/incident", params={"policy": policy}).text
        plain = client.get("/incident").text
        svg = html[html.index("<svg xmlns") :]
        flags = re.findall(r'<g class="marker whatif-([a-z-]+)" [^>]*data-detail="([^"]*)" data-run="([^"]*)"', svg)
        assert sorted((kind, run) for kind, _, run in flags) == sorted(
            (d.kind, pages.esc(d.run)) for d in whole.differences
        )
        for d in whole.differences:
            assert any(pages.esc(d.message) in detail for _, detail, _ in flags), d.message
        assert f"what-if <strong>{pages.esc(policy)}</strong>:" in html
        assert f"{len(whole.differences)} verdicts differ from the recorded sweeps" in html
        assert f'name="policy" value="{pages.esc(policy)}"' in html
        assert 'class="marker whatif-' not in plain[plain.index("<svg xmlns") :] and "what-if <strong>" not in plain
        _only_own_code(html)
        early = client.get("/incident", params={"policy": policy, "upto": cut.isoformat()}).text
        assert early[early.index("<svg xmlns") :].count('<g class="marker whatif-') == len(before.differences)
        assert 'name="upto"' in early
        bad = client.get("/incident", params={"policy": "flat-age:soon"})
        assert bad.status_code == 422 and bad.json()["fields"]["where"] == "policy"
        bad = client.get("/incident", params={"policy": policy, "upto": "yesterday"})
        assert bad.status_code == 422 and bad.json()["fields"]["where"] == "upto"
