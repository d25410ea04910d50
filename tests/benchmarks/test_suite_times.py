"""benchmarks/suite_times.py's reading of a JUnit report: each test's tier and main_ppo start-ups as conftest.py
writes them, the tier totals and the slowest tests with their start-up share."""

from __future__ import annotations

import importlib
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="3">
<testcase classname="tests.e2e.test_tasks" name="test_mediq" time="80.0">
  <properties><property name="tier" value="e2e"/><property name="main_ppo_start_up_s" value="50.0"/></properties>
</testcase>
<testcase classname="tests.e2e.test_main_ppo" name="test_resume" time="120.0">
  <properties><property name="tier" value="e2e"/><property name="main_ppo_start_up_s" value="40.0"/>
  <property name="main_ppo_start_up_s" value="44.0"/></properties>
  <failure message="boom"/>
</testcase>
<testcase classname="tests.core.test_config" name="test_parse" time="0.5">
  <properties><property name="tier" value="fast"/></properties>
</testcase>
</testsuite></testsuites>
"""


def test_the_report_gives_each_tests_tier_start_ups_and_share(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    suite_times = importlib.import_module("suite_times")
    path = tmp_path / "whole.xml"
    path.write_text(REPORT)
    tests = suite_times.read_report(path)
    assert [t.name for t in tests] == ["tests.e2e.test_main_ppo::test_resume", "tests.e2e.test_tasks::test_mediq", "tests.core.test_config::test_parse"]
    assert tests[0].outcome == "failure" and tests[0].start_ups == [40.0, 44.0] and tests[0].start_up_share == 0.7
    assert tests[2].start_ups == [] and tests[2].start_up_share == 0.0
    rows = suite_times.tier_rows(tests)
    assert "| e2e | 2 | 200 | 3 | 134 |" in rows and "| fast | 1 | 0 | 0 | 0 |" in rows
    assert suite_times.slowest_rows(tests, 1) == ["| 120 | e2e | `tests.e2e.test_main_ppo::test_resume` | 2 | 84 | 70% |"]
