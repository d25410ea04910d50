"""``python -m arew.lab.compare RUN_DIR A B [--metric reward]``: is arm A's held-out number different from B's?

The lab's tables compare every arm with the vanilla of its base; the readings in the docs compare other
pairs too (as+bt against as-only, PPO against GRPO, one study arm against another: :data:`READINGS` lists the
default run's). This prints, from the
per-seed records an ``arew lab`` run (or one study's folder) wrote under ``runs/<arm>/seed<k>.json``, each
arm's mean with its bootstrap interval over seeds and the difference A − B with its interval
(:func:`arew.lab.report.bootstrap_interval`), and says whether the difference is resolved (its interval
excludes 0). A reading that calls a difference resolved cites this command.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from arew.lab.report import INTERVAL_LEVEL, bootstrap_interval
from arew.lab.train import FINAL_COLUMNS


def arm_values(run: Path, arm: str, metric: str) -> list[float]:
    """The held-out ``metric`` of each seed of ``arm`` in ``run`` (seed order)."""
    paths = sorted((run / "runs" / arm).glob("seed*.json"), key=lambda p: int(p.stem.removeprefix("seed")))
    if not paths:
        known = sorted(p.name for p in (run / "runs").glob("*") if p.is_dir())
        raise SystemExit(f"{run}: no runs/{arm}/seed<k>.json (arms there: {', '.join(known) or 'none'})")
    return [float(json.loads(p.read_text())["final"][metric]) for p in paths]


def comparison(a: list[float], b: list[float]) -> dict:
    """Means, intervals and the difference a − b with its interval; ``resolved`` when that excludes 0."""
    low, high = bootstrap_interval(a, b)
    return {
        "a": (float(np.mean(a)), *bootstrap_interval(a), len(a)),
        "b": (float(np.mean(b)), *bootstrap_interval(b), len(b)),
        "difference": (float(np.mean(a) - np.mean(b)), low, high),
        "resolved": low > 0 or high < 0,
    }


# the pairs the default run's readings compare (docs/reference/lab-results.md): every arm against its vanilla, then
# the differences between arms the readings call resolved or not; :func:`vendor_table` holds each to both vendors
READINGS = (
    *((arm, f"{arm.split('-')[0]}-vanilla") for arm in (
        "ppo-as", "ppo-as+bt", "ppo-ir", "ppo-as+bt-flip0.3", "ppo-ir-flip0.3", "grpo-as", "grpo-as+bt")),
    ("grpo-vanilla", "ppo-vanilla"),
    ("ppo-as+bt", "ppo-as"),
    ("grpo-as+bt", "grpo-as"),
    ("grpo-as+bt", "ppo-as+bt"),
    ("ppo-as+bt-flip0.3", "ppo-as+bt"),
    ("ppo-as+bt-flip0.3", "ppo-as"),
    ("ppo-ir", "ppo-as"),
    ("ppo-ir", "ppo-as+bt"),
    ("ppo-ir-flip0.3", "ppo-as+bt-flip0.3"),
)  # fmt: skip


def verdict(low: float, high: float) -> str:
    return "higher" if low > 0 else "lower" if high < 0 else "not resolved"


def record_values(record: dict, arm: str, metric: str = "reward") -> list[float]:
    """The held-out ``metric`` of each seed of ``arm`` in a published runs record (docs/reference/lab-default-runs.json)."""
    seeds = record["runs"][arm]
    return [float(seeds[seed]["final"][metric]) for seed in sorted(seeds, key=int)]


def record_vendor(record: dict) -> str:
    """The CPU vendor every run of a record ran on (one machine's run)."""
    vendors = {run["arithmetic"].get("cpu_vendor") for seeds in record["runs"].values() for run in seeds.values()}
    if len(vendors) != 1 or None in vendors:
        raise ValueError(f"a record of one vendor's run names the vendors {sorted(map(str, vendors))}")
    return vendors.pop()


def vendor_table(first: dict, second: dict) -> str:
    """Markdown: each of :data:`READINGS` as A − B with its interval on the two records' vendors, the verdict
    on each, and whether they agree; the closing line counts the agreements."""
    names = record_vendor(first), record_vendor(second)
    lines = [f"| A − B (held-out reward) | {names[0]} | {names[1]} | same verdict |", "|---|---|---|---|"]
    agree = 0
    for a, b in READINGS:
        cells, verdicts = [], []
        for record in (first, second):
            va, vb = record_values(record, a), record_values(record, b)
            low, high = bootstrap_interval(va, vb)
            verdicts.append(verdict(low, high))
            cells.append(f"{np.mean(va) - np.mean(vb):+.3f} [{low:+.3f}, {high:+.3f}] {verdicts[-1]}")
        agree += verdicts[0] == verdicts[1]
        lines.append(f"| {a} − {b} | {cells[0]} | {cells[1]} | {'yes' if verdicts[0] == verdicts[1] else '**no**'} |")
    seeds = len(record_values(first, READINGS[0][0])), len(record_values(second, READINGS[0][0]))
    lines.append("")
    lines.append(f"{agree} of {len(READINGS)} verdicts agree ({names[0]}: {seeds[0]} seeds, {names[1]}: {seeds[1]} seeds; "
                 f"{INTERVAL_LEVEL:.0%} bootstrap intervals; higher / lower: the interval excludes 0).")  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m arew.lab.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="an `arew lab` output folder or one study's folder")
    parser.add_argument("a", help="an arm (variant) of the run")
    parser.add_argument("b", help="the arm to compare it with")
    parser.add_argument("--metric", default="reward", choices=FINAL_COLUMNS, help="held-out metric (default reward)")
    args = parser.parse_args(argv)
    result = comparison(arm_values(args.run, args.a, args.metric), arm_values(args.run, args.b, args.metric))
    level = f"{INTERVAL_LEVEL:.0%}"
    for name, (mean, low, high, seeds) in ((args.a, result["a"]), (args.b, result["b"])):
        print(f"{name}: {args.metric} {mean:.3f} [{level} CI {low:.3f}, {high:.3f}] over {seeds} seeds")
    mean, low, high = result["difference"]
    verdict = "resolved" if result["resolved"] else "not resolved (the interval contains 0)"
    print(f"{args.a} − {args.b}: {mean:+.3f} [{level} CI {low:+.3f}, {high:+.3f}]: {verdict}")


if __name__ == "__main__":
    main()
