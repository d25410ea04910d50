"""The test suite's time per tier and its slowest tests: is the suite still inside its budget?

    python benchmarks/suite_times.py [--slowest 15] [--out runs/suite-times] [--skip-whole] [--publish] [--check]

Runs the README's test command (``python -m pytest -q tests``) once with a JUnit report, then the
fast tier's command (:data:`FAST`, in parallel on two workers). Each test's tier is the first of the
markers vllm, e2e, ray, browser that it carries, else fast (tests/conftest.py writes it into the
report). Prints the wall time of both commands, the time of each tier's tests within the whole run
(set-up and tear-down included, as pytest counts them; collection is in the whole run's wall time
only) and the slowest tests. ``--publish`` writes the table into docs/getting-started.md between its markers;
``--check`` exits non-zero when a run fails or is over its budget (:data:`BUDGET_SECONDS`).
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
from pathlib import Path

from arew.markdown_blocks import replace_block

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "getting-started.md"
MARKER = "bench:suite-tiers"
WHOLE = ["-m", "pytest", "-q", "tests"]
FAST = ["-m", "pytest", "-q", "tests", "-m", "not (e2e or ray or vllm or browser)", "-n", "2"]
TIERS = ("fast", "e2e", "ray", "vllm", "browser")
BUDGET_SECONDS = {"whole": 1800.0, "fast": 180.0}


def run(argv: list[str], report: Path) -> tuple[float, int, list[tuple[float, str, str, str]]]:
    """(wall seconds, pytest's exit code, [(seconds, test, tier, outcome)] slowest first)."""
    report.unlink(missing_ok=True)
    started = time.perf_counter()
    code = subprocess.run([sys.executable, *argv, f"--junitxml={report}"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - started
    tests = []
    if report.exists():
        for case in ET.parse(report).getroot().iter("testcase"):
            outcome = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
            tier = next((p.get("value") for p in case.iter("property") if p.get("name") == "tier"), "?")
            tests.append((float(case.get("time", 0.0)), f"{case.get('classname')}::{case.get('name')}", tier, outcome))
    return wall, code, sorted(tests, reverse=True)


def shell(argv: list[str]) -> str:
    return "python " + " ".join(f'"{a}"' if " " in a else a for a in argv)


def summary(name: str, wall: float, code: int, tests: list) -> str:
    outcomes = Counter(outcome for *_, outcome in tests)
    return f"{name}: {wall:.0f} s wall, {len(tests)} tests ({outcomes['passed']} passed, {outcomes['failure'] + outcomes['error']} failed, {outcomes['skipped']} skipped), pytest exit {code}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slowest", type=int, default=15, help="slowest tests printed")
    parser.add_argument("--out", default="runs/suite-times", help="folder for the JUnit reports")
    parser.add_argument("--skip-whole", action="store_true", help="run the fast tier only")
    parser.add_argument("--publish", action="store_true", help="write the table into docs/getting-started.md between its markers")
    parser.add_argument("--check", action="store_true", help="exit 1 when a run fails or is over its budget")
    args = parser.parse_args()
    if args.publish and args.skip_whole:
        raise SystemExit("--publish: the published table needs the whole run; leave --skip-whole out")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    machine = f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, Python {platform.python_version()}"
    print(machine, flush=True)
    problems, rows = [], []
    runs = ([] if args.skip_whole else [("whole", WHOLE)]) + [("fast", FAST)]
    results = {}
    for name, argv in runs:
        wall, code, tests = run(argv, out / f"{name}.xml")
        results[name] = (wall, tests)
        print("\n" + summary(name, wall, code, tests), flush=True)
        if code != 0:
            problems.append(f"the {name} run exited {code}")
        if wall > BUDGET_SECONDS[name]:
            problems.append(f"the {name} run took {wall:.0f} s, over its {BUDGET_SECONDS[name]:.0f} s budget")
    if "whole" in results:
        wall, tests = results["whole"]
        seconds = Counter()
        counts = Counter()
        for duration, _, tier, _ in tests:
            seconds[tier] += duration
            counts[tier] += 1
        print(f"\nper tier, within the whole run ({wall:.0f} s wall):")
        for tier in TIERS:
            print(f"  {tier:8s} {counts[tier]:5d} tests  {seconds[tier]:7.0f} s")
            rows.append(f"| {tier} | {counts[tier]} | {seconds[tier]:.0f} |")
        print(f"\nslowest {args.slowest} tests of the whole run:")
        for duration, test, tier, outcome in tests[: args.slowest]:
            print(f"  {duration:7.1f} s  [{tier}] {test}{'' if outcome == 'passed' else f'  ({outcome})'}")
    if args.publish:
        whole_wall, fast_wall = results["whole"][0], results["fast"][0]
        block = "\n".join([
            f"_{machine}; written by `python benchmarks/suite_times.py --publish`_", "",
            "| command | wall (s) |", "|---|---|",
            f"| the whole suite: `{shell(WHOLE)}` | {whole_wall:.0f} |",
            f"| the fast tier: `{shell(FAST)}` | {fast_wall:.0f} |", "",
            "| tier (within the whole run) | tests | seconds of tests |", "|---|---|---|", *rows,
        ]) + "\n"  # fmt: skip
        PAGE.write_text(replace_block(PAGE.read_text(), MARKER, block))
    for problem in problems:
        print(f"suite_times: {problem}", file=sys.stderr)
    if args.check and problems:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
