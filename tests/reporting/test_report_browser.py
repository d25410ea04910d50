"""arew report in a real browser: Debian's headless Chromium driven by Playwright, from ``file://``.

Needs the system package ``chromium`` (``apt-get install --no-install-recommends chromium``; CI installs
it): without it this test fails, it does not skip, since the viewer would otherwise go untested. The lab's
report is checked here, a real trainer run's in tests/e2e/test_main_ppo.py; both keep a screenshot in
test-artifacts/ (or $AREW_TEST_ARTIFACTS).
"""

from __future__ import annotations

import pytest
from report_checks import PAGE_LIMIT_BYTES, artifact, assert_one_colour_per_group, open_report

from arew.cli import build_parser
from arew.reporting import report
from arew.reporting.screenshot import CHROMIUM, browser

pytestmark = pytest.mark.browser
LAB_VARIANTS = ("ppo-vanilla", "grpo-as+bt")


@pytest.fixture(scope="module")
def lab_report(tmp_path_factory):
    """A small ``arew lab``: two variants, two seeds each, and the report.html it wrote."""
    out = tmp_path_factory.mktemp("lab")
    argv = ["lab", "--quick", "--steps", "10", "--seeds", "2", "--variants", ",".join(LAB_VARIANTS), "--out", str(out), "--workers", "1"]
    args = build_parser().parse_args(argv)
    args.func(args)
    return out / "report.html"


def test_the_chromium_the_tests_drive_is_installed():
    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: install Debian's chromium (apt-get install --no-install-recommends chromium)"


def test_lab_report_draws_each_variant_once_per_chart_in_one_colour(lab_report):
    assert lab_report.stat().st_size < PAGE_LIMIT_BYTES
    with browser() as context:
        page, problems = open_report(context, lab_report)
        toggles = page.locator(".group-toggle")
        assert [toggles.nth(i).inner_text() for i in range(toggles.count())] == [f"{v} (2)" for v in LAB_VARIANTS]
        charts = page.locator("svg.chart")
        for i in range(charts.count()):  # one mean line per variant that logged the key, never one per seed
            groups = charts.nth(i).locator("path.mean").evaluate_all("ps => ps.map(p => p.dataset.group)")
            assert len(groups) == len(set(groups)) >= 1
            assert charts.nth(i).locator("path.band").count() <= len(groups)  # a band where two seeds logged the key
        reward = page.locator(".panel[data-title='Training reward'] svg.chart")
        assert reward.locator("path.mean").count() == reward.locator("path.band").count() == 2
        assert_one_colour_per_group(page, list(LAB_VARIANTS))

        critiques = page.locator(".panel[data-title='AS critiques']")
        assert critiques.locator(".chart-title").all_inner_texts() == ["+1 share", "0 share", "-1 share"]
        assert critiques.locator("svg.chart").count() == 3
        # only AReW's variant logs critique counts: the vanilla run has no line there
        assert critiques.locator("path.mean").evaluate_all("ps => [...new Set(ps.map(p => p.dataset.group))]") == ["grpo-as+bt"]
        assert page.locator(".panel[data-title='I_AS (nats)'] path.mean").count() == 2
        assert "I_AS" not in page.inner_text("#charts").split("Not logged by any of these runs")[-1]
        assert page.locator(".panel p.reading").count() == page.locator(".panel").count()

        # a group switched off leaves every chart, and comes back
        page.locator(".group-toggle[data-group='ppo-vanilla']").click()
        assert page.locator("path.mean[data-group='ppo-vanilla']").count() == 0
        assert reward.locator("path.mean").count() == 1
        page.locator(".group-toggle[data-group='ppo-vanilla']").click()
        assert reward.locator("path.mean").count() == 2
        # each seed one click away
        assert page.locator("path.run").count() == 0
        page.locator("#show-runs").check()
        assert reward.locator("path.run").count() == 4
        page.locator("#show-runs").uncheck()
        # smoothing redraws the means
        before = reward.locator("path.mean").first.get_attribute("d")
        page.locator("#smoothing").fill("5")
        assert "5 steps" in page.inner_text("#smoothing-value")
        assert reward.locator("path.mean").first.get_attribute("d") != before
        # hover: the values of both groups at one step
        box = reward.bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] / 2)
        tip = page.locator("#tooltip")
        assert tip.is_visible()
        assert tip.locator(".tip-row").evaluate_all("rs => rs.map(r => r.dataset.group)") == list(LAB_VARIANTS)
        assert "(" in tip.inner_text() and "2 runs" in tip.inner_text()

        # the viewer: filter by group, read one episode as a timeline of decisions
        page.select_option("#f-group", "grpo-as+bt")
        rows = page.locator("tr.episode")
        assert rows.count() > 0
        assert set(rows.locator(".swatch").evaluate_all("ss => ss.map(s => s.dataset.group)")) == {"grpo-as+bt"}
        page.select_option("#f-source", "applied")
        page.select_option("#f-pattern", "both:")
        rows.first.click()
        turns = page.locator("#episode-detail .turn")
        cells = page.locator("#episode-detail svg.timeline rect.cell")
        assert cells.count() == turns.count() > 0
        assert page.locator("#episode-detail svg.timeline rect.coefficient-bar").count() > 0  # a reweighted episode
        cells.nth(1).click()
        assert "focus" in turns.nth(1).get_attribute("class")
        page.evaluate("window.scrollTo(0, 0)")  # the sticky controls at the top of the picture
        page.screenshot(path=str(artifact("report-lab.png")), full_page=True)
    assert problems == []


def test_report_page_draws_the_charts_and_the_viewer_filters_and_shows_an_episode(two_runs, tmp_path):
    out = report.build(two_runs, tmp_path / "report.html", pngs=False)
    with browser() as context:
        page, problems = open_report(context, out)
        assert page.title() == "AReW report"
        # runs a and b have no seed part: each is its own group
        assert page.locator(".group-toggle").all_inner_texts() == ["a (1)", "b (1)"]
        assert page.locator("svg.chart").count() == 1 + 1 + 1 + 3  # reward, AS proxy (a), BT proxy (b), BT critiques (3 shares)
        assert page.locator("path.mean").count() == 2 + 1 + 1 + 3
        assert page.locator("path.band").count() == 0  # one run per group: no spread to draw
        assert "Not logged by any of these runs" in page.inner_text("#charts")
        assert page.locator("#input-problems").count() == 0
        assert_one_colour_per_group(page, ["a", "b"])
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
        page.select_option("#f-group", "b")
        assert rows.count() == 2
        page.select_option("#f-group", "")
        page.fill("#f-step-min", "3")
        page.select_option("#f-run", "a")
        assert rows.count() == 2
        assert page.inner_text("#episode-count") == "2 of 6 episodes"

        rows.nth(1).click()  # a's step-3 episode whose agent text tries to inject HTML
        turns = page.locator("#episode-detail .turn")
        assert turns.count() == 4
        assert page.locator("#episode-detail svg.timeline rect.cell").count() == 4
        assert page.locator("#episode-detail svg.timeline rect.coefficient-bar").count() == 1  # the one -1 got -0.25
        assert page.locator("tr.episode.selected").count() == 1
        second = turns.nth(1)
        assert "BT" in second.locator(".channel").inner_text()
        assert second.locator(".critique").get_attribute("class") == "mark neg critique"
        assert second.locator(".critique").inner_text() == "\u2716 -1"
        assert second.locator(".applied").inner_text() == "\u2716 -1"
        assert "coefficient \u03bbu -0.25" in second.locator(".coefficient").inner_text()
        assert turns.nth(0).locator(".critique").inner_text() == "\u00b7 0"
        assert second.locator("pre.reply").inner_text() == "reply 1"
        # the injection attempt is shown as text: no element, no script ran
        assert second.locator("pre.agent").inner_text().startswith('</script><script>alert("x")')
        assert page.locator("#episode-detail img").count() == 0
        assert page.title() == "AReW report"
    assert problems == []


def test_input_problems_show_in_the_page(tmp_path, make_run):
    run = make_run(tmp_path / "r", [{"step": 1, "data": {"critic/score/mean": 1.0}}], [])
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 2, "data": {"critic/score/mean": "x"}}\n{"step": 3, "da')
    out = report.build([run], tmp_path / "report.html", pngs=False)
    with browser() as context:
        page, problems = open_report(context, out)
        text = page.inner_text("#input-problems")
        assert "Input problems (2)" in text and "metrics.jsonl: invalid JSON line (x1)" in text
        assert page.locator("tr.episode").count() == 0 and page.locator("svg.chart").count() == 1
        assert page.locator("circle.mean-point").count() == 1  # one step: a point, not an invisible line
    assert problems == []
