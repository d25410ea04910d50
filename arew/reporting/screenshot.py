"""Open an ``arew report`` page in Debian's headless Chromium (Playwright) and screenshot it.

``python -m arew.reporting.screenshot RUN_DIR [RUN_DIR...] OUT.png`` builds the report of the
runs, opens it from ``file://``, clicks the first episode with applied critiques of both signs and
saves a screenshot of the first two chart sections (the others folded) and the viewer. The browser test uses :func:`browser` too, so
the README's screenshot and the test run the same browser setup. Playwright's own browser
downloads are not used: the system's ``/usr/bin/chromium`` (Debian package ``chromium``) is.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",  # the closed network refuses Chromium's background connections
    "--disable-component-update",
    "--disable-sync",
)


@contextlib.contextmanager
def browser(chromium: Path = CHROMIUM) -> Iterator:
    """A Playwright Chromium browser on the system's Chromium; a clear error when it is missing."""
    if not chromium.exists():
        raise FileNotFoundError(
            f"{chromium} not found: install Debian's chromium (apt-get install --no-install-recommends chromium)"
        )
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=str(chromium), args=list(CHROMIUM_FLAGS), headless=True,
            viewport={"width": 1400, "height": 900},
        )  # fmt: skip
        try:
            yield context
        finally:
            context.close()


def screenshot(runs: list[str], out: Path) -> Path:
    from arew.reporting.report import build

    with tempfile.TemporaryDirectory() as folder:
        page_path = build(runs, Path(folder) / "report.html", pngs=False)
        with browser() as context:
            page = context.new_page()
            page.goto(page_path.resolve().as_uri())
            page.wait_for_function("window.arewReady !== undefined")
            page.select_option("#f-source", "applied")  # an episode the advantage stage reweighted
            page.select_option("#f-pattern", "both:")
            rows = page.locator("tr.episode")
            if rows.count():
                rows.first.click()
            # one picture of both halves: the first two chart sections stay open, the others fold
            page.evaluate("document.querySelectorAll('details.section').forEach((d, i) => { d.open = i < 2; })")
            page.evaluate("window.scrollTo(0, 0)")  # the sticky controls belong at the top of the picture
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out), full_page=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", help="run folders, then the PNG to write")
    args = parser.parse_args(argv)
    if len(args.paths) < 2:
        parser.error("give at least one run folder and the PNG to write")
    print(screenshot(args.paths[:-1], Path(args.paths[-1])))


if __name__ == "__main__":
    main()
