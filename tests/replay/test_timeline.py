"""The incident picture (rule V1), rendered in a real headless Chromium.

The browser is Debian's `chromium` (/usr/bin/chromium, or $EPOCHLEDGER_CHROMIUM), driven
by Playwright without a browser download of its own. Without it these tests skip and say
why; with EPOCHLEDGER_TEST_BROWSER=require (CI, .ci/run) a missing browser is a failure.
"""

from __future__ import annotations

import html
import os
import struct
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from epochledger import ManualClock, open_ledger
from epochledger.cli import main
from epochledger.demo import run_demo
from epochledger.ledger.events import Status
from epochledger.ndjson import import_lines
from epochledger.replay import timeline, whatif
from tests.helpers import fleet_ledgers
from tests.helpers import incident_histories as incidents
from tests.helpers.browser import browser as browser  # the fixture

GOLDEN = os.path.join(os.path.dirname(os.path.dirname(__file__)), "golden")


class Loaded:
    def __init__(self, page: object, requests: list[str], url: str):
        self.page, self.requests, self.url = page, requests, url

    def count(self, selector: str) -> int:
        return self.page.locator(selector).count()  # type: ignore[attr-defined]

    def attrs(self, selector: str, name: str) -> list[str]:
        return self.page.eval_on_selector_all(selector, f"els => els.map(e => e.getAttribute('{name}'))")  # type: ignore[attr-defined]


@pytest.fixture
def load(browser, tmp_path) -> Iterator[object]:
    pages = []

    def go(path: str) -> Loaded:
        page = browser.new_page(viewport={"width": 1420, "height": 900})  # type: ignore[attr-defined]
        page.set_default_timeout(10_000)
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        url = "file://" + os.path.abspath(path)
        page.goto(url)
        page.wait_for_load_state("load")
        pages.append(page)
        return Loaded(page, requests, url)

    yield go
    for p in pages:
        p.close()


def _png_size(path: str) -> tuple[int, int]:
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def _timeline(store: str, out: str, *args: str) -> None:
    assert main(["--store", store, "timeline", "-o", out, *args]) == 0


def _no_fetch(page: Loaded) -> None:
    assert page.requests == [page.url], f"the page fetched something: {page.requests}"


def test_V1_demo_incident_in_chromium(load, tmp_path, capsys) -> None:
    """The demo's page: a lane per slot with its epochs, every run a bar, the incident's
    markers (supersession, sweep, recovery, fenced report, the clock step's skipped
    fallback), the cursor, a legend naming every status and marker; nothing fetched;
    hover shows an event's details; the screenshot is the size of the page."""
    db, html_path = str(tmp_path / "demo.db"), str(tmp_path / "demo.html")
    run_demo(db, out=lambda _: None)
    _timeline(db, html_path, "--at", "2026-09-09T14:20:00Z")
    with open_ledger(db, create=False) as lg:
        n_runs = len(lg.runs())
    page = load(html_path)
    assert page.attrs("g.lane", "data-process") == ["api-1", "worker-1", "worker-2"]
    assert page.count("g.run") == n_runs
    assert page.count("g.epoch") >= 5
    for kind in ("boot", "supersede", "sweep", "recovery", "fenced", "sweep-skipped"):
        assert page.count(f"svg.timeline .marker.{kind}") >= 1, kind
    assert page.attrs("g.cursor", "data-at") == ["2026-09-09T14:20:00Z"]
    assert set(page.attrs(".legend .status", "data-status")) == {s.value for s in Status}
    assert set(page.attrs(".legend .mark", "data-kind")) == set(timeline.MARKS)
    assert set(page.attrs("g.run", "data-status")) >= {"finished", "failed_resumable", "running", "cancelled"}
    assert "TIMEOUT" in page.attrs("g.run", "data-code")
    _no_fetch(page)
    # The incident's window: hover shows the recovery's evidence, then the fenced report's.
    _timeline(
        db, html_path, "--from", "2026-09-09T14:15:00Z", "--to", "2026-09-09T14:30:00Z", "--at", "2026-09-09T14:20:00Z"
    )
    page = load(html_path)
    tip = page.page.locator("#tip")  # type: ignore[attr-defined]
    for kind, text in (("recovery", "recovered by the sweep of worker-1.e2"), ("fenced", "FENCED run.finished")):
        marker = page.page.locator(f"svg.timeline .marker.{kind}").first  # type: ignore[attr-defined]
        marker.hover()
        assert tip.is_visible() and text in tip.text_content()
        assert text in marker.locator("title").text_content()
    shot = str(tmp_path / "demo.png")
    page.page.screenshot(path=shot, full_page=True)  # type: ignore[attr-defined]
    w, h = _png_size(shot)
    box = page.page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.scrollHeight]")  # type: ignore[attr-defined]
    assert (w, h) == tuple(box) and w >= 1400 and 300 <= h <= 2000
    assert os.path.getsize(shot) > 20_000
    _no_fetch(page)


@pytest.mark.parametrize(
    ("name", "kinds", "lanes"),
    [
        ("whatif_nightly_88", {"boot", "supersede", "sweep", "recovery"}, ["worker-1", "worker-2"]),
        ("whatif_redeploy_0220", {"boot", "supersede", "sweep", "recovery"}, ["api-1", "worker-1"]),
        ("whatif_clock_step", {"boot", "supersede", "sweep", "recovery", "sweep-skipped"}, ["worker-1"]),
        (
            "audit_history",
            {"boot", "supersede", "stopping", "stop", "sweep", "recovery", "fenced", "correction"},
            ["api-1", "worker-1"],
        ),
    ],
)
def test_V1_golden_histories_in_chromium(load, tmp_path, name, kinds, lanes) -> None:
    db, html_path = str(tmp_path / "g.db"), str(tmp_path / "g.html")
    with open_ledger(db) as lg, open(os.path.join(GOLDEN, name + ".ndjson"), "rb") as f:
        import_lines(lg, f, clock_steps="keep")  # recorded through the API under a stepped clock
        n_runs = len(lg.runs()) + sum(1 for r in lg._store.read_all() if type(r.event).__name__ == "RunDeleted")
    _timeline(db, html_path)
    page = load(html_path)
    assert page.attrs("g.lane", "data-process") == lanes
    assert page.count("g.run") == n_runs
    found = set(page.attrs("svg.timeline .marker", "data-kind"))
    assert found == kinds
    assert page.count("g.cursor") == 0
    _no_fetch(page)


def test_V1_readable_at_500_runs(load, tmp_path) -> None:
    """500 runs over three slots and a redeploy: every bar drawn at least 3 px wide, no
    two bars of a lane overlap, the page stays a few thousand pixels tall."""
    db, html_path = str(tmp_path / "big.db"), str(tmp_path / "big.html")
    clock = ManualClock(datetime(2026, 9, 9, 0, 0, tzinfo=UTC), uptime=5)
    with open_ledger(db, clock=clock) as lg:
        epochs = {s: lg.boot(s, epoch=f"{s}.e1").epoch for s in ("worker-1", "worker-2", "worker-3")}
        for i in range(500):
            slot = f"worker-{i % 3 + 1}"
            with lg.batch() as b:
                b.queue(f"r{i:03d}", workflow="etl", process=slot)
                b.start(f"r{i:03d}", epoch=epochs[slot], process=slot)
            clock.advance(60)
            # every other run ends a few minutes later, one in seven with a failure code
            done = f"r{i - 4:03d}"
            if i >= 4 and i % 2 == 0 and lg.get_run(done).status is Status.RUNNING:
                lg.fail(done, "TIMEOUT", resumable=True) if i % 7 == 0 else lg.finish(done)
            if i == 250:
                clock.restart(1)
                epochs["worker-1"] = lg.startup("worker-1", epoch="worker-1.e2")[0].epoch
    _timeline(db, html_path, "--at", "2026-09-09T04:10:00Z")
    page = load(html_path)
    assert page.count("g.run") == 500
    boxes = page.page.evaluate("""() => [...document.querySelectorAll('g.lane')].map(l =>  // type: ignore
        [...l.querySelectorAll('g.run')].map(g => { const b = g.getBBox(); return [b.x, b.y, b.width, b.height]; }))""")  # type: ignore[attr-defined]
    for lane in boxes:
        for _x, _y, w, h in lane:
            assert w >= 3 and h >= 8
        rows: dict[float, list[tuple[float, float]]] = {}
        for x, y, w, _ in lane:
            rows.setdefault(round(y), []).append((x, x + w))
        for spans in rows.values():
            spans.sort()
            bad = [(a, b) for a, b in zip(spans, spans[1:], strict=False) if a[1] > b[0] + 0.5]
            assert not bad, f"bars overlap in a row: {bad[:3]}"
    height = page.page.evaluate("() => document.documentElement.scrollHeight")  # type: ignore[attr-defined]
    assert height < 6000
    _no_fetch(page)


def test_V1_the_page_is_a_pure_function_of_the_history(tmp_path) -> None:
    """Same history, same bytes; and no URL in the page but the SVG namespace."""
    pages = []
    for i in range(2):
        db = str(tmp_path / f"{i}.db")
        with open_ledger(db) as lg, open(incidents.path("whatif_clock_step"), "rb") as f:
            import_lines(lg, f, clock_steps="keep")  # recorded through the API under a stepped clock
            pages.append(timeline.page(lg._store, cursor=datetime(2026, 9, 9, 9, 10, 30, tzinfo=UTC)))
    assert pages[0] == pages[1]
    assert pages[0].count("://") == 1 and "http://www.w3.org/2000/svg" in pages[0]


@pytest.mark.parametrize("policy", ["flat-age:30s", "floor:1h"])
def test_R4_V1_a_whatif_flags_each_of_its_differences_on_its_run_and_leaves_the_history_as_it_was(
    tmp_path, policy: str
) -> None:
    """Rendered with a what-if's result, the page flags each difference (the what-if
    module's, not judged again) on its run's bar, of its kind, with its evidence, and
    names the verdict beside the run; the same history and result give the same bytes;
    the history is left as it was, so the page without the what-if is the page it was."""
    db = str(tmp_path / "demo.db")
    run_demo(db, out=lambda _: None)
    with open_ledger(db, create=False) as lg:
        found = whatif.whatif(lg._store, policy)
        h = timeline.history(rec for chunk in lg._store.read_batches(0) for rec in chunk)
    assert found.differences
    before = timeline.render(h)
    flagged = timeline.render(h, whatif=found)
    assert flagged == timeline.render(h, whatif=found) and timeline.render(h) == before
    svg = flagged[flagged.index("<svg xmlns") :]
    for d in found.differences:
        run = svg[svg.index(f'<g class="run" data-run="{d.run}"') :]
        label = run[: run.index("</g>")].rsplit('">', 1)[1]  # the bar's last text: its name
        assert label.startswith(d.run) and label.endswith(f" (what-if: {d.kind})</text>"), label
        flag = f'<g class="marker {timeline.WHATIF}{d.kind}" data-kind="{timeline.WHATIF}{d.kind}" data-detail="'
        assert svg.count(flag) == 1 and html.escape(d.message, quote=True) in svg.split(flag)[1].split('"')[0]
    assert 'class="marker whatif-' not in before


def test_V1_bad_arguments_are_refused_and_nothing_is_written(capsys, tmp_path) -> None:
    db = str(tmp_path / "l.db")
    with open_ledger(db) as lg, open(incidents.path("whatif_clock_step"), "rb") as f:
        import_lines(lg, f, clock_steps="keep")  # recorded through the API under a stepped clock
    out = str(tmp_path / "t.html")
    assert (
        main(["--store", db, "timeline", "-o", out, "--from", "2026-09-09T10:00:00Z", "--to", "2026-09-09T09:00:00Z"])
        == 3
    )
    assert main(["--store", db, "timeline", "-o", out, "--at", "noon"]) == 3
    assert main(["--store", db, "timeline", "-o", out, "--run", "no-such-run"]) == 4
    assert main(["--store", db, "timeline", "-o", db]) == 3  # the ledger's own file
    assert not os.path.exists(out) and os.path.getsize(db) > 0
    assert main(["--store", db, "timeline", "-o", out, "--run", "owned", "--from", "2026-09-09T09:00:00Z"]) == 0
    text = open(out).read()
    assert 'data-run="owned"' in text and 'data-run="after-step"' not in text
    capsys.readouterr()


def test_V1_html_in_run_ids_is_escaped(tmp_path) -> None:
    db = str(tmp_path / "l.db")
    clock = ManualClock(datetime(2026, 9, 9, tzinfo=UTC))
    with open_ledger(db, clock=clock) as lg:
        lg.boot("w<1>", epoch="e&1")
        lg.queue("<script>alert(1)</script>", process="w<1>")
        clock.advance(timedelta(minutes=5).total_seconds())
        text = timeline.page(lg._store)
    assert "<script>alert" not in text and "&lt;script&gt;" in text


def test_V1_the_whole_day_counts_a_takeover_names_its_run_dates_its_axis_and_says_what_the_cursor_saw(
    load, tmp_path
) -> None:
    """The demo's whole day, a pixel about 72 s: the five markers of the 14:20 takeover
    (boot, supersession, sweep, recovery, fenced report) fall on a few pixels of the
    worker-1 lane; one badge counts them (its details list each) and the epoch row's
    three are fanned out, each visible. The key run is named without hover, its label
    clear of every other bar; the axis names the date; the cursor's panel says in words
    what happened around 14:20."""
    db, html_path = str(tmp_path / "demo.db"), str(tmp_path / "demo.html")
    run_demo(db, out=lambda _: None)
    _timeline(db, html_path, "--at", "2026-09-09T14:20:00Z")
    page = load(html_path)
    lane = 'g.lane[data-process="worker-1"]'
    five = page.page.locator(f'{lane} g.cluster[data-count="5"]')  # type: ignore[attr-defined]
    assert five.count() == 1 and five.locator("text").text_content() == "5"
    detail = five.get_attribute("data-detail")
    for words in ("boot of worker-1, epoch worker-1.e2", "superseded by worker-1.e2", "recovered by", "FENCED"):
        assert words in detail, words
    xs = page.page.eval_on_selector_all(  # type: ignore[attr-defined]
        f"{lane} > .marker[data-epoch]", "els => els.map(e => { const b = e.getBBox(); return [b.x, b.x + b.width]; })"
    )
    at_1420 = sorted(x for x in xs if 850 < x[0] < 950)
    assert len(at_1420) == 3 and all(a[1] <= b[0] + 1 for a, b in zip(at_1420, at_1420[1:], strict=False))
    label = page.page.locator('g.run[data-run="backfill-redeploy"] text.run-label')  # type: ignore[attr-defined]
    assert (label.text_content() or "").startswith("backfill-redeploy")
    covered = page.page.evaluate("""() => {  // another run's bar under the key run's name
        const t = document.querySelector('g.run[data-run="backfill-redeploy"] text.run-label').getBBox();
        return [...document.querySelectorAll('g.lane[data-process="worker-1"] g.run:not([data-run="backfill-redeploy"]) rect')]
          .map(r => r.getBBox()).filter(b => b.x < t.x + t.width && t.x < b.x + b.width && b.y < t.y + t.height && t.y < b.y + b.height).length; }""")  # type: ignore[attr-defined]
    assert covered == 0
    assert page.attrs(".tick.date", "class") and "2026-09-09" in page.page.locator(".tick.date").first.text_content()  # type: ignore[attr-defined]
    panel = page.page.locator("#cursor-panel").text_content()  # type: ignore[attr-defined]
    assert "At the cursor, 2026-09-09T14:20:00Z" in panel and "rule O2-superseded" in panel and "FENCED" in panel
    _no_fetch(page)


def test_V1_a_window_of_more_runs_than_it_can_show_draws_those_that_matter_and_folds_the_rest(tmp_path) -> None:
    """An hour of 1,500 running runs: the runs the incident is about (a marker in the
    window, an event at the cursor, a transition in the window) are rows, named; each
    slot's other runs are one density band per status, whose cells count them (the
    whole hour: every one of them), whose label counts them and opens them through
    `fold_link`; the summary and each lane say how many are folded. At 500 runs or
    fewer nothing is folded (test_V1_readable_at_500_runs)."""
    db = str(tmp_path / "dense.db")
    t, matter = fleet_ledgers.dense(db, 1500)
    window = {
        "start": t + timedelta(hours=1),
        "end": t + timedelta(hours=2),
        "cursor": t + timedelta(hours=1, minutes=30),
    }
    with open_ledger(db, create=False) as lg:
        text = timeline.page(
            lg._store, **window, fold_link=lambda lane, status: f"/runs?process={lane}&status={status}"
        )
    svg = text[text.index("<svg xmlns") :]
    drawn = sorted(chunk.split('"', 1)[0] for chunk in svg.split('<g class="run" data-run="')[1:])
    assert drawn == sorted(matter)
    for run in matter:  # a run that matters is named without hover
        assert f">{run}" in svg.split(f'<g class="run" data-run="{run}"', 1)[1].split("</g>", 1)[0], run
    for k in range(3):
        lane = svg.split(f'<g class="lane" data-process="w{k}"', 1)[1].split('<g class="lane"', 1)[0]
        mine = {r for r in matter if (r == "late" and k == 2) or (r != "late" and int(r[-5:]) % 3 == k)}
        rest = 500 - len(mine - {"late"})
        assert f"1 epochs, {500 + (k == 2)} runs</text>" in lane
        band = lane.split('<g class="fold" data-status="running"', 1)[1].split("</g>", 1)[0]
        assert band.startswith(f' data-count="{rest}">')
        cells = [int(c.split('"', 1)[0]) for c in band.split('<rect class="cell" data-count="')[1:]]
        assert cells == [rest]  # one cell run over the whole hour: every folded run is running throughout
        assert f'<a href="/runs?process=w{k}&amp;status=running">' in band and f">{rest:,} running</text>" in band
        assert 'data-status="failed_resumable"' not in lane.split('<g class="fold"', 1)[1]
    assert f"{len(matter)} runs as rows" in text and "1,495 more folded into each slot" in text
    assert "At the cursor, 2026-09-09T11:30:00Z" in text and text.count("<a href=") == 3
    assert len(text) < 200_000


def test_V1_a_folded_window_in_chromium_its_bands_under_the_rows_and_no_serious_axe_violation(load, tmp_path) -> None:
    """The folded hour of 1,500 runs in Chromium: each slot's rows, then its bands under
    them, none over another nor over the lane's words; each band's label a link with
    its count as text; nothing fetched; and axe-core finds no serious or critical
    violation (as on the console's pages, tests/console/test_console_browser.py)."""
    from tests.console.test_console_browser import AXE
    from tests.helpers.browser import no_browser

    db, html_path = str(tmp_path / "dense.db"), str(tmp_path / "dense.html")
    t, _ = fleet_ledgers.dense(db, 1500)
    with open_ledger(db, create=False) as lg:  # with links, as the console draws it
        text = lg.timeline_page(
            start=t + timedelta(hours=1),
            end=t + timedelta(hours=2),
            cursor=t + timedelta(hours=1, minutes=30),
            fold_link=lambda lane, status: f"runs.html?process={lane}&status={status}",
        )
    with open(html_path, "w") as f:
        f.write(text)
    page = load(html_path)
    boxes = page.page.evaluate("""() => [...document.querySelectorAll('g.lane')].map(l => ({
        words: [...l.querySelectorAll(':scope > text')].map(e => e.getBBox()).map(b => [b.y, b.y + b.height]),
        rows: [...l.querySelectorAll('g.run rect.seg')].map(e => e.getBBox()).map(b => [b.y, b.y + b.height]),
        bands: [...l.querySelectorAll('g.fold')].map(g => [g.getBBox().y, g.getBBox().y + g.getBBox().height]),
        labels: [...l.querySelectorAll('g.fold a')].map(a => [a.getBBox().y, a.getBBox().y + a.getBBox().height,
                                                              a.textContent]) }))""")  # type: ignore[attr-defined]
    assert len(boxes) == 3
    for lane in boxes:
        assert len(lane["bands"]) == 1 and len(lane["labels"]) == 1
        top = max(b for _, b in lane["rows"])
        assert lane["bands"][0][0] >= top  # the band under the rows
        assert all(b <= lane["labels"][0][0] for _, b in lane["words"])  # and its label under the lane's words
        assert lane["labels"][0][2].endswith(" running")
    _no_fetch(page)
    if not os.path.exists(AXE):
        no_browser(f"axe-core is not installed at {AXE} (make axe)")
    page.page.add_script_tag(path=AXE)  # type: ignore[attr-defined]
    found = page.page.evaluate(  # type: ignore[attr-defined]
        """() => axe.run().then(r => r.violations
             .filter(v => v.impact === 'serious' || v.impact === 'critical')
             .map(v => v.id + ' (' + v.impact + '): ' + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join('; ')))"""
    )
    assert found == []


def test_V1_a_crowded_window_keeps_a_late_failure_as_a_row_before_earlier_quiet_runs(tmp_path) -> None:
    """600 runs that finished, a minute apart, and the last one failed: the whole
    history folds 100 of them, and the failure (rule P1's `is_failure`) is a row, with
    its code, ahead of the earlier runs that only finished."""
    from epochledger.ledger.events import RunFailed, RunFinished, RunQueued, RunStarted, run_stream
    from epochledger.ledger.store import Append, open_store

    db = str(tmp_path / "l.db")
    t = datetime(2026, 9, 9, tzinfo=UTC)
    store = open_store(db)
    try:
        appends = []
        for i in range(600):
            run, at = f"r{i:03d}", t + timedelta(minutes=i)
            appends.append(Append(run_stream(run), 1, RunQueued(at=at, run=run, status=Status.QUEUED, process="w")))
            appends.append(Append(run_stream(run), 2, RunStarted(at=at, run=run, status=Status.RUNNING, process="w")))
            end = at + timedelta(minutes=5)
            last = (
                RunFailed(at=end, run=run, status=Status.FAILED, code="OOM", resumable=False)
                if i == 599
                else RunFinished(at=end, run=run, status=Status.FINISHED)
            )
            appends.append(Append(run_stream(run), 3, last))
        store.append(appends)
        text = timeline.page(store)
    finally:
        store.close()
    rows = [chunk.split('"', 1)[0] for chunk in text.split('<g class="run" data-run="')[1:]]
    assert len(rows) == 500 and "r599" in rows and "r499" not in rows and "r498" in rows
    assert '<g class="run" data-run="r599" data-status="failed" data-code="OOM">' in text
    assert "100 more folded" in text


def test_V1_a_folded_run_whose_clock_stepped_back_counts_once_from_its_start(tmp_path) -> None:
    """A folded run whose end was stamped before its start (its writer's clock stepped
    back, as recorded) counts in its band's cells from its start on, as its bar would be
    drawn: no cell counts below zero, none counts a run twice."""
    from epochledger.ledger.events import RunFinished, RunQueued, RunStarted, run_stream
    from epochledger.ledger.store import Append, open_store

    db = str(tmp_path / "l.db")
    t = datetime(2026, 9, 9, tzinfo=UTC)
    store = open_store(db)
    try:
        appends = []
        for i in range(600):
            run, at = f"r{i:03d}", t + timedelta(minutes=i)
            back = i == 599  # the last run, folded: finished before any run started
            appends.append(Append(run_stream(run), 1, RunQueued(at=at, run=run, status=Status.QUEUED, process="w")))
            appends.append(Append(run_stream(run), 2, RunStarted(at=at, run=run, status=Status.RUNNING, process="w")))
            end = t - timedelta(hours=1) if back else at + timedelta(minutes=5)
            appends.append(Append(run_stream(run), 3, RunFinished(at=end, run=run, status=Status.FINISHED)))
        store.append(appends)
        text = timeline.page(store)
    finally:
        store.close()
    assert 'data-run="r599"' not in text.split("<svg xmlns", 1)[1].split('<g class="fold"', 1)[0]
    cells = [int(c.split('"', 1)[0]) for c in text.split('<rect class="cell" data-count="')[1:]]
    assert cells and min(cells) > 0
    running = text.split('<g class="fold" data-status="running" data-count="', 1)[1]
    total = int(running.split('"', 1)[0])
    assert (
        total == 100
        and max(int(c.split('"', 1)[0]) for c in running.split("</g>", 1)[0].split('data-count="')[1:]) <= total
    )
