"""Debian's Chromium, headless, for the page test: render a URL after its JS ran.

``chromium --headless --dump-dom`` prints the DOM as the page's scripts left it (not the
HTML the server sent); ``--virtual-time-budget`` lets the page's timers and fetches run
first. Each call gets its own profile directory, so no cookie travels between users.
Where Chromium is missing the test skips with a plain message, except under ``.ci/run``
(``LYRA_CI`` set), where a missing browser fails it: ``make test`` installs it
(``scripts/ensure_deb.sh chromium``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

INSTALL_HINT = (
    "Chromium is not installed: run `make test` as root (scripts/ensure_deb.sh chromium installs "
    "Debian's `chromium`) or `sudo apt-get install chromium`"
)
VOID = {"br", "input", "meta", "link", "img", "hr", "wbr", "source", "area", "col", "base"}
"""HTML's void elements; --dump-dom writes every SVG element with its end tag."""


def chromium_or_skip() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("LYRA_CI"):
        pytest.fail(f"under CI the page test must run: {INSTALL_HINT}")
    pytest.skip(INSTALL_HINT)


def _run(browser: str, url: str, extra: list[str], budget_ms: int) -> str:
    with tempfile.TemporaryDirectory(prefix="lyra-chromium-") as profile:
        args = [
            browser,
            "--headless",
            "--no-sandbox",  # root in a container has no user namespace for the sandbox
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            f"--user-data-dir={profile}",
            f"--virtual-time-budget={budget_ms}",
            *extra,
            url,
        ]
        done = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=profile)
    if done.returncode != 0:
        raise AssertionError(f"chromium failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def dump_dom(browser: str, url: str, budget_ms: int = 8000) -> str:
    """The DOM after the page's JS ran, as HTML."""
    return _run(browser, url, ["--dump-dom"], budget_ms)


def screenshot(browser: str, url: str, out: Path, size: str = "1280,1100") -> Path:
    _run(browser, url, [f"--screenshot={out}", f"--window-size={size}", "--hide-scrollbars"], 8000)
    assert out.exists() and out.stat().st_size > 0, f"no screenshot at {out}"
    return out


class Elements(HTMLParser):
    """Every element with one of the ``data-*`` attributes the page marks, with its text."""

    def __init__(self, marks: tuple[str, ...]) -> None:
        super().__init__()
        self.marks = marks
        self.found: list[dict[str, Any]] = []
        self._open: list[tuple[str, dict[str, Any] | None]] = []
        self.ids: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: (v or "") for k, v in attrs}
        if "id" in a:
            self.ids.add(a["id"])
        rec = None
        if any(m in a for m in self.marks):
            rec = {"tag": tag, **a, "text": ""}
            self.found.append(rec)
        if tag not in VOID:
            self._open.append((tag, rec))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID and self._open:
            self._open.pop()

    def handle_endtag(self, tag: str) -> None:
        if all(t != tag for t, _ in self._open):
            return
        while self._open:
            t, _ = self._open.pop()
            if t == tag:
                break

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        for _, rec in self._open:
            if rec is not None:
                rec["text"] += data


def parse(html: str, marks: tuple[str, ...] = ("data-job", "data-server", "data-kind")) -> Elements:
    p = Elements(marks)
    p.feed(html)
    return p
