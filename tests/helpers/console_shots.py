"""`python -m tests.helpers.console_shots`: the console's screenshots for docs/console.md
(`make screenshots`), one PNG a page under docs/console/, taken in headless Chromium
from a real `epochledger serve` on the demo's ledger, an operator logged in, and one
of a crowded hour's folded runs on a fleet ledger of its own."""

from __future__ import annotations

import os
import sys
import tempfile

from epochledger import open_ledger
from epochledger.demo import run_demo
from tests.helpers import fleet_ledgers
from tests.helpers.server import served

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "docs", "console")
INCIDENT = "/incident?from=2026-09-09T14:15:00Z&to=2026-09-09T14:30:00Z&at=2026-09-09T14:20:00Z"
SHOTS = [
    ("fleet.png", "/"),
    ("runs.png", "/runs?limit=15"),
    ("run.png", "/runs/nightly-long"),
    ("epochs.png", "/epochs"),
    ("incident.png", INCIDENT),
    (  # the what-if's killed-live verdict flagged on nightly-long, at the sweep that gave it
        "incident-whatif.png",
        "/incident?from=2026-09-09T14:00:00Z&to=2026-09-09T16:30:00Z&at=2026-09-09T15:51:23Z&policy=flat-age:30s",
    ),
    ("whatif.png", "/whatif?policy=flat-age:30s"),
    ("login.png", "/login"),
]
# A crowded hour (tests/helpers/fleet_ledgers.py: 1,500 running runs on 3 slots and an
# incident in it): the runs that matter as rows, the others folded into density bands.
FOLDED = (
    "incident-folded.png",
    "/incident?from=2026-09-09T11:00:00Z&to=2026-09-09T12:00:00Z&at=2026-09-09T11:30:00Z",
)


def draw(out: str = OUT, chromium: str = os.environ.get("EPOCHLEDGER_CHROMIUM", "/usr/bin/chromium")) -> list[str]:
    from playwright.sync_api import sync_playwright

    os.makedirs(out, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as d:
        db = os.path.join(d, "demo.db")
        run_demo(db, out=lambda _: None)
        with open_ledger(db, create=False) as lg:
            secret = lg.issue_token("operator", name="ops-alice").secret
        with served(db) as base, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1420, "height": 800})
            page.goto(base + "/login")
            page.fill("input[name=token]", secret)
            page.click("button[type=submit]")
            page.wait_for_url(base + "/")
            for name, path in SHOTS:
                page.goto(base + path)
                page.wait_for_load_state("load")
                target = os.path.join(out, name)
                page.screenshot(path=target, full_page=True)
                written.append(target)
            browser.close()
        dense = os.path.join(d, "dense.db")
        fleet_ledgers.dense(dense, 1500)
        with served(dense) as base, sync_playwright() as p:  # no tokens: loopback, no login
            browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1420, "height": 800})
            name, path = FOLDED
            page.goto(base + path)
            page.wait_for_load_state("load")
            target = os.path.join(out, name)
            page.screenshot(path=target, full_page=True)
            written.append(target)
            browser.close()
    return written


if __name__ == "__main__":
    for path in draw():
        print("wrote", os.path.relpath(path, ROOT), file=sys.stderr)
