"""``python -m arew.lab.compare RUN_DIR A B [--metric reward]``: is arm A's held-out number different from B's?

The lab's tables compare every arm with the vanilla of its base; the readings in the docs compare other
pairs too (as+bt against as-only, PPO against GRPO, one study arm against another). This prints, from the
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
