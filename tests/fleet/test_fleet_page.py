"""`fleet --html`: one self-contained page, checked in headless Chromium (Debian's `chromium`): it
loads with no console error and no request leaving the file, the chart is drawn, the clusters that
could not be read and those whose next upgrade would be held come first, undated pools are listed,
URLs are links, and at 1280 and 1920 px nothing is wider than the window (issue 33 item 5). The
screenshots at both widths are kept in build/test-artifacts/."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from harness.tools import tool

from .fleetgen import write_fleet

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("BOOTIMAGE_TEST_ARTIFACTS", REPO / "build" / "test-artifacts"))

pytestmark = pytest.mark.heavy  # headless Chromium: scheduled first (tests/conftest.py)


def chromium() -> str:
    return tool("install-chromium.sh", timeout=600)


def browse(page: Path, *extra: str) -> tuple[str, list[str]]:
    """The DOM Chromium built from `page`, and the console messages it logged."""
    argv = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
            *extra, f"file://{page}"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "HOME": str(page.parent)})
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return done.stdout, console


class Dom(HTMLParser):
    """Element ids, classes and text, enough to ask what the page shows."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, dict[str, str | None]]] = []
        self.held: list[str] = []
        self.errors: list[str] = []
        self.undated = 0
        self.svg_texts: list[str] = []
        self.bars = 0
        self.rows: list[str] = []
        self.external: list[str] = []  # what the page would fetch: src, and href of anything but a link
        self.links: list[str] = []  # <a href> to the outside: followed only when clicked
        self.measured: dict[str, object] | None = None
        self._in_measure = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.stack.append((tag, a))
        if tag == "li" and "held-cluster" in (a.get("class") or ""):
            self.held.append(a.get("data-cluster") or "")
        if tag == "li" and "error-cluster" in (a.get("class") or ""):
            self.errors.append(a.get("data-cluster") or "")
        if tag == "li" and "undated-pool" in (a.get("class") or ""):
            self.undated += 1
        self._in_measure = tag == "pre" and a.get("id") == "measured"
        if tag == "tr" and "cluster-row" in (a.get("class") or ""):
            self.rows.append(a.get("data-status") or "")
        if tag == "g" and (a.get("id") or "").startswith("age-bar-") and self._in_chart():
            self.bars += 1
        for key in ("src", "href"):
            value = a.get(key) or ""
            if re.match(r"^(https?:)?//", value):
                (self.links if (tag, key) == ("a", "href") else self.external).append(value)

    def handle_endtag(self, tag: str) -> None:
        while self.stack and self.stack.pop()[0] != tag:
            pass

    def handle_data(self, data: str) -> None:
        if self._in_measure and data.strip():
            self.measured = json.loads(data)
            self._in_measure = False
        if self.stack and self.stack[-1][0] == "text" and self._in_chart() and data.strip():
            self.svg_texts.append(data.strip())

    def _in_chart(self) -> bool:
        return any(attrs.get("id") == "age-chart" for _, attrs in self.stack)


def test_the_console_check_can_fail(tmp_path: Path) -> None:
    """The check below would see a console error (so its silence means something)."""
    broken = tmp_path / "broken.html"
    broken.write_text("<html><body><script>console.error('deliberate'); missing();</script></body></html>")
    _, console = browse(broken, "--dump-dom")
    assert any("deliberate" in line for line in console) and any("missing" in line for line in console)


# Injected into a copy of the page only (the page itself has no script): opens every cluster's details
# and writes what the layout measured where --dump-dom shows it.
MEASURE = """<script>
document.querySelectorAll("details").forEach(d => d.open = true);
const labels = [...document.querySelectorAll("#age-chart svg g text:first-child")];
const out = {scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,
  smallestLabel: Math.min(...labels.map(t => t.getBoundingClientRect().height)),
  widest: [...document.querySelectorAll("table")].map(t => t.getBoundingClientRect().right)
    .reduce((a, b) => Math.max(a, b), 0),
  // Every section's tables, the details included (issue 47, item 4): a cell whose text is wider
  // than the cell (a word that could not wrap), and a header more than three lines tall (a header
  // printed one letter a line in a column squeezed to nothing).
  overflowing: [...document.querySelectorAll("th, td")].filter(c => c.scrollWidth > c.clientWidth + 1)
    .map(c => c.textContent.slice(0, 60)),
  tallHeaders: [...document.querySelectorAll("th")].filter(th =>
    th.getBoundingClientRect().height > 3 * 1.4 * parseFloat(getComputedStyle(th).fontSize) + 12)
    .map(th => th.textContent),
  wrapping: getComputedStyle(document.querySelector("td")).overflowWrap};
const pre = document.createElement("pre"); pre.id = "measured"; pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""


def measured(page: Path, width: int) -> dict[str, object]:
    probe = page.with_name(f"measure-{width}.html")
    probe.write_text(page.read_text().replace("</body>", MEASURE + "</body>"))
    dom = Dom()
    dom.feed(browse(probe, "--dump-dom", f"--window-size={width},1200")[0])
    assert dom.measured is not None
    return dom.measured


def test_the_fleet_page_loads_clean_and_shows_the_chart_and_the_held_clusters(tmp_path: Path) -> None:
    trees = write_fleet(tmp_path / "trees", 30)
    page = tmp_path / "fleet.html"
    missing = tmp_path / "no-such-must-gather"
    done = subprocess.run([sys.executable, "-m", "bootimage_controller", "fleet", *map(str, trees), str(missing),
                           "-o", "json", "--html", str(page)],
                          capture_output=True, text=True, timeout=120, cwd=REPO, check=False)
    assert done.returncode == 1, done.stderr  # the missing path is a row in error
    clusters = json.loads(done.stdout)["clusters"]
    held = [c["name"] for c in clusters if c["status"] == "held"]
    assert held, "the generated fleet must hold some upgrades, or this test shows nothing"

    dom_text, console = browse(page, "--dump-dom")
    assert console == [], console
    dom = Dom()
    dom.feed(dom_text)
    assert dom.errors == [c["name"] for c in clusters if c["error"]] == [missing.name]
    assert dom.held == held
    assert dom.rows == [c["status"] for c in clusters]  # every cluster, worst first
    aged = [c for c in clusters if any(p["bootImageAge"] is not None for p in c["pools"])]
    assert dom.bars == sum(1 for c in aged for p in c["pools"] if p["bootImageAge"] is not None)
    assert dom.undated == sum(1 for c in clusters for p in c["pools"] if p["bootImageAge"] is None)
    assert any(held[0] in text for text in dom.svg_texts)  # the chart's labels name the pools
    assert dom.external == []  # self-contained: nothing is fetched when the page is opened
    docs = {u for c in clusters if c["skew"] for u in re.findall(r"https://\S+", c["skew"]["message"] or "")}
    assert docs and {u.rstrip(".;") for u in docs} <= set(dom.links)  # the skew docs are links

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for width in (1280, 1920):
        size = measured(page, width)
        assert size["innerWidth"] == width and float(str(size["scrollWidth"])) <= width, size  # no sideways scroll
        assert float(str(size["widest"])) <= width, size
        assert float(str(size["smallestLabel"])) >= 12, size  # chart labels readable
        # Words are never split inside (no `overflow-wrap: anywhere`), so none may be wider than its cell.
        assert size["wrapping"] == "normal" and size["overflowing"] == [] and size["tallHeaders"] == [], json.dumps(size)
        shot = ARTIFACTS / f"fleet-page-{width}.png"
        shot.unlink(missing_ok=True)
        browse(page, f"--screenshot={shot}", f"--window-size={width},2400", "--hide-scrollbars")
        data = shot.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 30_000
        assert (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")) == (width, 2400)
    shutil.copy(page, ARTIFACTS / "fleet-page.html")
