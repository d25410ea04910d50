"""The test suite's time per tier and its slowest tests: is the suite still inside its budget, and where does it go?

    python benchmarks/suite_times.py [--slowest 30] [--out runs/suite-times] [--skip-whole] [--report FILE]
                                     [--publish] [--check]

Runs the README's test command (:data:`WHOLE`) once with a JUnit report, then the fast tier's command
(:data:`FAST`). Each test's tier is the first of the markers vllm, e2e, ray, browser that it carries, else fast;
each run of verl's ``main_ppo`` through ``arew.verl_plugin.smoke.run`` records its start-up and shutdown seconds on the test
whose set-up or call started it (conftest.py writes both into the report as properties). Prints the wall
time of both commands, the seconds of each tier's tests within the whole run (set-up and tear-down included, as
pytest counts them; with two workers they add up to about twice the wall time) and the slowest tests with the
share of their time that was ``main_ppo`` start-up. ``--report`` reads an existing JUnit report instead of
running anything. ``--publish`` writes the tier table into docs/getting-started.md and the slowest tests into
docs/contributing.md, between their markers; ``--check`` exits non-zero when a run fails or is over its budget
(:data:`BUDGET_SECONDS`).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from arew.reporting.markdown_blocks import replace_block

ROOT = Path(__file__).resolve().parents[1]
TIERS_PAGE = ROOT / "docs" / "getting-started.md"
SLOWEST_PAGE = ROOT / "docs" / "contributing.md"
TIERS_MARKER = "bench:suite-tiers"
SLOWEST_MARKER = "bench:suite-slowest"
WHOLE = ["-m", "pytest", "-q", "tests", "envs", "-n", "2"]
FAST = ["-m", "pytest", "-q", "tests", "envs", "-m", "not (e2e or ray or vllm or browser or lab)", "-n", "2", "--dist", "load"]
TIERS = ("fast", "e2e", "ray", "vllm", "browser", "lab")
BUDGET_SECONDS = {"whole": 1800.0, "fast": 180.0}
START_UP_PROPERTY = "main_ppo_start_up_s"  # conftest.py


@dataclass
class TestTime:
    seconds: float
    name: str
    tier: str
    outcome: str
    start_ups: list[float]

    @property
    def start_up_share(self) -> float:
        return sum(self.start_ups) / self.seconds if self.seconds > 0 else 0.0


def read_report(report: Path) -> list[TestTime]:
    """The report's tests, slowest first."""
    tests = []
    for case in ET.parse(report).getroot().iter("testcase"):
        outcome = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        properties = [(p.get("name"), p.get("value")) for p in case.iter("property")]
        tier = next((value for name, value in properties if name == "tier"), "?")
        start_ups = [float(value) for name, value in properties if name == START_UP_PROPERTY]
        tests.append(TestTime(float(case.get("time", 0.0)), f"{case.get('classname')}::{case.get('name')}", tier, outcome, start_ups))
    return sorted(tests, key=lambda t: t.seconds, reverse=True)


def run(argv: list[str], report: Path) -> tuple[float, int, list[TestTime]]:
    """(wall seconds, pytest's exit code, the tests slowest first)."""
    report.unlink(missing_ok=True)
    started = time.perf_counter()
    code = subprocess.run([sys.executable, *argv, f"--junitxml={report}"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - started
    return wall, code, read_report(report) if report.exists() else []


def shell(argv: list[str]) -> str:
    return "python " + " ".join(f'"{a}"' if " " in a else a for a in argv)


def summary(name: str, wall: float, code: int, tests: list[TestTime]) -> str:
    outcomes = Counter(test.outcome for test in tests)
    return f"{name}: {wall:.0f} s wall, {len(tests)} tests ({outcomes['passed']} passed, {outcomes['failure'] + outcomes['error']} failed, {outcomes['skipped']} skipped), pytest exit {code}"


def tier_rows(tests: list[TestTime]) -> list[str]:
    seconds, counts, start_ups, runs = Counter(), Counter(), Counter(), Counter()
    for test in tests:
        seconds[test.tier] += test.seconds
        counts[test.tier] += 1
        start_ups[test.tier] += sum(test.start_ups)
        runs[test.tier] += len(test.start_ups)
    return [f"| {tier} | {counts[tier]} | {seconds[tier]:.0f} | {runs[tier]} | {start_ups[tier]:.0f} |" for tier in TIERS]


def slowest_rows(tests: list[TestTime], count: int) -> list[str]:
    return [
        f"| {test.seconds:.0f} | {test.tier} | `{test.name}` | {len(test.start_ups)} | {sum(test.start_ups):.0f} | {test.start_up_share:.0%} |"
        for test in tests[:count]
    ]


TIER_HEADER = ["| tier | tests | seconds of tests | main_ppo runs | their start-up and shutdown (s) |", "|---|---|---|---|---|"]
SLOWEST_HEADER = ["| seconds | tier | test | main_ppo runs | start-up and shutdown (s) | share |", "|---|---|---|---|---|---|"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slowest", type=int, default=30, help="slowest tests printed and published (default 30)")
    parser.add_argument("--out", default="runs/suite-times", help="folder for the JUnit reports")
    parser.add_argument("--skip-whole", action="store_true", help="run the fast tier only")
    parser.add_argument("--report", default=None, help="read this JUnit report of a whole run instead of running the suite")
    parser.add_argument("--publish", action="store_true", help="write the tables into docs/getting-started.md and docs/contributing.md")
    parser.add_argument("--check", action="store_true", help="exit 1 when a run fails or is over its budget")
    args = parser.parse_args()
    if args.publish and (args.skip_whole or args.report):
        raise SystemExit("--publish: the published tables need both runs of this invocation; leave --skip-whole and --report out")
    if args.slowest < 1:
        raise SystemExit("--slowest must be at least 1")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    machine = f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, Python {platform.python_version()}"
    print(machine, flush=True)
    problems, results = [], {}
    if args.report:
        results["whole"] = (float("nan"), read_report(Path(args.report)))
    else:
        for name, argv in ([] if args.skip_whole else [("whole", WHOLE)]) + [("fast", FAST)]:
            wall, code, tests = run(argv, out / f"{name}.xml")
            results[name] = (wall, tests)
            print("\n" + summary(name, wall, code, tests), flush=True)
            if code != 0:
                problems.append(f"the {name} run exited {code}")
            if wall > BUDGET_SECONDS[name]:
                problems.append(f"the {name} run took {wall:.0f} s, over its {BUDGET_SECONDS[name]:.0f} s budget")
    if "whole" in results:
        wall, tests = results["whole"]
        print(f"\nper tier, within the whole run ({wall:.0f} s wall):", *TIER_HEADER, *tier_rows(tests), sep="\n")
        print(f"\nslowest {args.slowest} tests of the whole run:", *SLOWEST_HEADER, *slowest_rows(tests, args.slowest), sep="\n")
    if args.publish:
        (whole_wall, tests), fast_wall = results["whole"], results["fast"][0]
        stamp = f"_{machine}; written by `python benchmarks/suite_times.py --publish`_"
        tiers = [stamp, "", "| command | wall (s) |", "|---|---|", f"| the whole suite: `{shell(WHOLE)}` | {whole_wall:.0f} |",
                 f"| the fast tier: `{shell(FAST)}` | {fast_wall:.0f} |", "", *TIER_HEADER, *tier_rows(tests)]  # fmt: skip
        TIERS_PAGE.write_text(replace_block(TIERS_PAGE.read_text(), TIERS_MARKER, "\n".join(tiers) + "\n"))
        slowest = [stamp, "", *SLOWEST_HEADER, *slowest_rows(tests, args.slowest)]
        SLOWEST_PAGE.write_text(replace_block(SLOWEST_PAGE.read_text(), SLOWEST_MARKER, "\n".join(slowest) + "\n"))
    for problem in problems:
        print(f"suite_times: {problem}", file=sys.stderr)
    if args.check and problems:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
