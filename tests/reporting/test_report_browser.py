"""arew report in a real browser: Debian's headless Chromium driven by Playwright, from ``file://``.

Needs the system package ``chromium`` (``apt-get install --no-install-recommends chromium``; CI installs
it): without it this test fails, it does not skip, since the viewer would otherwise go untested.
"""

from __future__ import annotations

import pytest

from arew.reporting import report
from arew.reporting.screenshot import CHROMIUM, browser

pytestmark = pytest.mark.browser


def test_report_page_draws_the_charts_and_the_viewer_filters_and_shows_an_episode(two_runs, tmp_path):
    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: install Debian's chromium (apt-get install --no-install-recommends chromium)"
    out = report.build(two_runs, tmp_path / "report.html", pngs=False)
    drawn = sum(len(s["panels"]) for s in report.chart_data(report.load_runs(two_runs)))
    problems = []
    with browser() as context:
        page = context.new_page()
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.on("request", lambda r: problems.append(f"request: {r.url}") if not r.url.startswith("file://") else None)
        page.goto(out.resolve().as_uri())

        assert page.title() == "AReW report"
        assert page.locator("svg.chart").count() == drawn == 4
        assert page.locator("svg.chart path").count() == 2 + 1 + 3 + 1  # reward a+b, AS proxy a, BT critiques a (3 keys), BT proxy b
        assert "Not logged by these runs" in page.inner_text("#charts")
        assert page.locator("#input-problems").count() == 0
        rows = page.locator("tr.episode")
        assert rows.count() == 6

        page.select_option("#f-pattern", "neg:bt")  # has a -1 on BT
        assert rows.count() == 2
        page.select_option("#f-pattern", "both:as")
        assert rows.count() == 1
        page.select_option("#f-pattern", "both:")
        assert rows.count() == 3  # a's step 1 (AS + and BT -), a's step 2, b's val episode
        page.select_option("#f-split", "val")
        assert rows.count() == 1
        page.select_option("#f-split", "")
        page.select_option("#f-pattern", "")
        page.fill("#f-reward-min", "0.5")
        assert rows.count() == 3
        page.fill("#f-reward-min", "")
        page.fill("#f-step-min", "3")
        page.select_option("#f-run", "a")
        assert rows.count() == 2
        assert page.inner_text("#episode-count") == "2 of 6 episodes"

        rows.nth(1).click()  # a's step-3 episode whose agent text tries to inject HTML
        turns = page.locator("#episode-detail .turn")
        assert turns.count() == 4
        assert page.locator("tr.episode.selected").count() == 1
        second = turns.nth(1)
        assert "BT" in second.locator(".channel").inner_text()
        assert second.locator(".critique").get_attribute("class") == "mark neg critique"
        assert second.locator(".critique").inner_text() == "\u2716 -1"
        assert second.locator(".applied").inner_text() == "\u2716 -1"
        assert "coefficient -0.25" in second.locator(".coefficient").inner_text()
        assert turns.nth(0).locator(".critique").inner_text() == "\u00b7 0"
        assert second.locator("pre.reply").inner_text() == "reply 1"
        # the injection attempt is shown as text: no element, no script ran
        assert second.locator("pre.agent").inner_text().startswith('</script><script>alert("x")')
        assert page.locator("#episode-detail img").count() == 0
        assert page.title() == "AReW report"
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    assert (tmp_path / "report.png").read_bytes()[:4] == b"\x89PNG"
    assert problems == []


def test_input_problems_show_in_the_page(tmp_path, make_run):
    run = make_run(tmp_path / "r", [{"step": 1, "data": {"critic/score/mean": 1.0}}], [])
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 2, "data": {"critic/score/mean": "x"}}\n{"step": 3, "da')
    out = report.build([run], tmp_path / "report.html", pngs=False)
    with browser() as context:
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(out.resolve().as_uri())
        text = page.inner_text("#input-problems")
        assert "Input problems (2)" in text and "metrics.jsonl: invalid JSON line (x1)" in text
        assert page.locator("tr.episode").count() == 0 and page.locator("svg.chart").count() == 1
    assert errors == []
