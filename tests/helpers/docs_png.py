"""`python -m tests.helpers.docs_png`: draw docs/incident-timeline.png, the demo's incident as
`epochledger timeline` shows it (docs/forensics.md), in headless Chromium."""

from __future__ import annotations

import os
import sys
import tempfile

from epochledger.cli import main
from epochledger.demo import run_demo

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PNG = os.path.join(ROOT, "docs", "incident-timeline.png")
WINDOW = ["--from", "2026-09-09T13:45:00Z", "--to", "2026-09-09T17:15:00Z", "--at", "2026-09-09T14:20:00Z"]


def draw(png: str = PNG, chromium: str = os.environ.get("EPOCHLEDGER_CHROMIUM", "/usr/bin/chromium")) -> None:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as d:
        db, page_path = os.path.join(d, "demo.db"), os.path.join(d, "incident.html")
        run_demo(db, out=lambda _: None)
        assert main(["--store", db, "timeline", *WINDOW, "-o", page_path]) == 0
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1420, "height": 300})
            page.goto("file://" + page_path)
            page.screenshot(path=png, full_page=True)
            browser.close()


if __name__ == "__main__":
    draw()
    print("wrote", PNG, file=sys.stderr)
