"""The test suite's time per tier, and its slowest tests: is the suite still inside its budget?

    python benchmarks/suite_times.py [--tiers fast,e2e,ray,vllm,browser] [--slowest 10] [--out runs/suite-times] [--readme] [--check]

Runs pytest once per tier (the markers in pyproject.toml; each test in exactly one tier, the
first of vllm, e2e, ray, browser that it carries, else fast), each with a JUnit report, and
prints per tier: wall time (pytest's start-up included), tests, failures, and the slowest tests
with their durations (set-up and tear-down included, as pytest's ``--durations`` counts them).
``--readme`` writes the table into README.md between its markers; ``--check`` exits non-zero
when a tier fails or the fast tier or the whole suite is over its budget (:data:`BUDGET_SECONDS`).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from arew.lab.publish import replace_between

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MARKER = "bench:suite-tiers"
# tier -> pytest -m expression; together they select every test once
TIERS = {
    "fast": "not (e2e or ray or vllm or browser)",
    "e2e": "e2e and not vllm",
    "ray": "ray and not (e2e or vllm)",
    "vllm": "vllm",
    "browser": "browser and not (e2e or ray or vllm)",
}
BUDGET_SECONDS = {"fast": 180.0, "all": 1800.0}


def run_tier(name: str, out: Path) -> dict:
    report = out / f"{name}.xml"
    report.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "pytest", "-q", "tests", "-m", TIERS[name], f"--junitxml={report}"]
    started = time.perf_counter()
    code = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - started
    tests = []
    if report.exists():
        for case in ET.parse(report).getroot().iter("testcase"):
            outcome = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
            tests.append((float(case.get("time", 0.0)), f"{case.get('classname')}::{case.get('name')}", outcome))
    return {"name": name, "wall": wall, "exit": code, "tests": sorted(tests, reverse=True)}


def count(tier: dict, outcome: str) -> int:
    return sum(1 for _, _, result in tier["tests"] if result == outcome)


def table(tiers: list[dict], machine: str) -> str:
    lines = [f"_{machine}_", "", "| tier | command | tests | wall (s) |", "|---|---|---|---|"]
    for tier in tiers:
        command = f'`python -m pytest -q tests -m "{TIERS[tier["name"]]}"`'
        lines.append(f"| {tier['name']} | {command} | {len(tier['tests'])} | {tier['wall']:.0f} |")
    lines.append(f"| all, one tier after another | | {sum(len(t['tests']) for t in tiers)} | {sum(t['wall'] for t in tiers):.0f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiers", default=",".join(TIERS), help=f"comma-separated, of {', '.join(TIERS)}")
    parser.add_argument("--slowest", type=int, default=10, help="slowest tests printed per tier")
    parser.add_argument("--out", default="runs/suite-times", help="folder for the tiers' JUnit reports")
    parser.add_argument("--readme", action="store_true", help="write the table into README.md between its markers (all tiers only)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a tier fails or a budget is exceeded")
    args = parser.parse_args()
    names = args.tiers.split(",")
    if not set(names) <= set(TIERS):
        raise SystemExit(f"--tiers: choose from {', '.join(TIERS)}; got {args.tiers}")
    if args.readme and names != list(TIERS):
        raise SystemExit("--readme: the README's table needs every tier; leave --tiers out")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    machine = f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, Python {platform.python_version()}"
    print(machine, flush=True)
    tiers, problems = [], []
    for name in names:
        tier = run_tier(name, out)
        tiers.append(tier)
        failed = count(tier, "failure") + count(tier, "error")
        print(f"\n{name}: {tier['wall']:.0f} s wall, {len(tier['tests'])} tests ({count(tier, 'passed')} passed, {failed} failed, {count(tier, 'skipped')} skipped), pytest exit {tier['exit']}")
        for seconds, test, outcome in tier["tests"][: args.slowest]:
            print(f"  {seconds:7.1f} s  {test}{'' if outcome == 'passed' else f'  [{outcome}]'}")
        if tier["exit"] not in (0, 5):  # 5: no test in this tier
            problems.append(f"tier {name} exited {tier['exit']}")
    total = sum(t["wall"] for t in tiers)
    print(f"\nall {len(tiers)} tiers: {total:.0f} s")
    if "fast" in names and next(t for t in tiers if t["name"] == "fast")["wall"] > BUDGET_SECONDS["fast"]:
        problems.append(f"the fast tier is over its {BUDGET_SECONDS['fast']:.0f} s budget")
    if names == list(TIERS) and total > BUDGET_SECONDS["all"]:
        problems.append(f"the whole suite is over its {BUDGET_SECONDS['all']:.0f} s budget")
    block = table(tiers, machine)
    print("\n" + block)
    if args.readme:
        README.write_text(replace_between(README.read_text(), f"<!-- {MARKER}:start -->", f"<!-- {MARKER}:end -->", block))
    for problem in problems:
        print(f"suite_times: {problem}", file=sys.stderr)
    if args.check and problems:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
