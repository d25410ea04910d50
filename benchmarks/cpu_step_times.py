"""Per-step time split of verl's real trainer on the CPU backend, for each algorithm (``arew smoke``).

    python benchmarks/cpu_step_times.py [--steps 3] [--out runs/bench-cpu]

Runs ``arew smoke`` (PE-G S=2, as+bt, the tiny random Qwen2) once per algorithm and prints a
markdown table of the last step's timings in seconds (the first step includes warm-up), with
the start-up overhead (wall time minus the steps).
"""

from __future__ import annotations

import argparse
import os
import platform

import torch

from arew import smoke

COLUMNS = ("generation", "old log-prob", "values", "advantage", "critic update", "actor update", "weight sync", "step")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--out", default="runs/bench-cpu")
    args = parser.parse_args()
    rows = []
    for algo in smoke.ALGOS:
        result = smoke.run(algo=algo, steps=args.steps, out=os.path.join(args.out, algo))
        if result.returncode != 0 or len(result.steps) < args.steps:
            raise SystemExit(f"{algo}: run failed, see {result.log_path}")
        last = result.steps[-1]
        steps_total = sum(step["timing_s/step"] for step in result.steps)
        cells = [f"{last[smoke.TIMING_KEYS[name]]:.2f}" if smoke.TIMING_KEYS[name] in last else "-" for name in COLUMNS]
        rows.append(f"| {algo} | " + " | ".join(cells) + f" | {result.wall_seconds - steps_total:.0f} |")
    print(f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, torch {torch.__version__}; step {args.steps} of {args.steps}")
    print("| algorithm | " + " | ".join(COLUMNS) + " | start-up and shutdown |")
    print("|---" * (len(COLUMNS) + 2) + "|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
