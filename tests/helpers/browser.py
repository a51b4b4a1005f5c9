"""Debian's Chromium driven by Playwright, for the tests that look at pages as a person
does (rules V1, H9-H11): one module-scoped `browser` fixture, imported by those tests.

A missing browser skips them with the reason, or fails them under
EPOCHLEDGER_TEST_BROWSER=require (CI: `make test` installs Debian's chromium as root)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM = os.environ.get("EPOCHLEDGER_CHROMIUM", "/usr/bin/chromium")


def no_browser(reason: str) -> None:
    if os.environ.get("EPOCHLEDGER_TEST_BROWSER") == "require":
        pytest.fail(f"EPOCHLEDGER_TEST_BROWSER=require but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        no_browser("the python package playwright is not installed (pip install -e '.[dev]')")
    if not os.access(CHROMIUM, os.X_OK):
        no_browser(f"no Chromium at {CHROMIUM} (apt-get install -y chromium, or `make test` as root)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield b
        b.close()
