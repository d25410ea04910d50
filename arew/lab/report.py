"""The lab's outputs: results table (CSV + Markdown), learning-curve PNGs, raw per-run logs.

Layout under the output folder::

    config.json                 the LabConfig, variants, seeds, versions, wall time
    results.csv, results.md     one row per variant: held-out evaluation, mean and spread over seeds
    curves_<base>.png           reward, AS proxy, BT proxy and BT evidence use over training
    runs/<variant>/seed<k>.csv  per-step training log (LOG_COLUMNS)
    runs/<variant>/seed<k>.json held-out evaluation, wall time and the per-step log
    runs/<variant>/seed<k>/     metrics.jsonl and rollouts/train.jsonl in the trainer's formats
    report.html, report_png/    ``arew report`` of every run (each seed its own run)

"Steps to vanilla's final reward" compares training curves: the target is vanilla's
(same base estimator) moving-average training reward over its last ``smooth`` steps, mean
over seeds; a run reaches it at the first step whose moving average is at least that. When
vanilla never improves, that target is its starting level and every run reaches it at once,
so the table also gives the steps to a fixed reward, ``reach_reward``.
"""

from __future__ import annotations

import csv
import json
import platform
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch
import verl

from arew.lab import export
from arew.lab.config import LabConfig, parse_variant
from arew.lab.train import FINAL_COLUMNS, LOG_COLUMNS, RunResult

TABLE_METRICS = ("reward", "as_proxy", "bt_proxy", "c_bt", "bt_follow", "i_as_nats", "oracle_reward")
CURVE_METRICS = {
    "reward": "outcome reward",
    "as_proxy": "AS proxy (informative queries per turn)",
    "bt_proxy": "BT proxy (cosine change per turn)",
    "bt_follow": "BT follows the evidence (sign agreement)",
}
RESULT_COLUMNS = (
    "variant",
    "base",
    "method",
    "flip_prob",
    "seeds",
    *(f"{m}_{s}" for m in TABLE_METRICS for s in ("mean", "std")),
    "train_reward_final",
    "steps_to_vanilla_final",
    "reached_vanilla_final",
    "vanilla_final_train_reward",
    "steps_to_reach_reward",
    "reached_reach_reward",
    "reach_reward",
)


def moving_average(values: Sequence[float], window: int) -> np.ndarray:
    """Trailing mean over up to ``window`` steps (shorter at the start)."""
    x = np.asarray(values, dtype=float)
    sums = np.cumsum(np.insert(x, 0, 0.0))
    idx = np.arange(1, len(x) + 1)
    start = np.maximum(idx - window, 0)
    return (sums[idx] - sums[start]) / (idx - start)


def _spread(values: Sequence[float]) -> float:
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def _curve(result: RunResult, key: str, window: int) -> np.ndarray:
    return moving_average([row[key] for row in result.log], window)


def first_reach(results: Sequence[RunResult], target: float, window: int) -> tuple[float | str, int]:
    """(mean over runs of the first 1-based step whose moving-average reward >= target, runs that did);
    the mean is "" when none did."""
    reached = []
    for r in results:
        hits = np.nonzero(_curve(r, "reward", window) >= target)[0]
        if len(hits):
            reached.append(int(hits[0]) + 1)
    return (float(np.mean(reached)) if reached else "", len(reached))


def summarise(config: LabConfig, results: Sequence[RunResult]) -> list[dict]:
    """One row per variant (in ``config.variants`` order) with RESULT_COLUMNS."""
    by_variant = {name: [r for r in results if r.variant == name] for name in config.variants}
    final_train = {
        name: [float(_curve(r, "reward", config.smooth)[-1]) for r in runs] for name, runs in by_variant.items()
    }
    rows = []
    for name, runs in by_variant.items():
        if not runs:
            continue
        variant = parse_variant(name)
        row = {"variant": name, "base": variant.base, "method": variant.method, "flip_prob": variant.flip_prob}
        row["seeds"] = len(runs)
        for metric in TABLE_METRICS:
            values = [r.final[metric] for r in runs]
            row[f"{metric}_mean"] = float(np.mean(values))
            row[f"{metric}_std"] = _spread(values)
        row["train_reward_final"] = float(np.mean(final_train[name]))
        vanilla = f"{variant.base}-vanilla"
        row["steps_to_vanilla_final"] = ""
        row["reached_vanilla_final"] = ""
        row["vanilla_final_train_reward"] = ""
        if final_train.get(vanilla):
            target = float(np.mean(final_train[vanilla]))
            row["vanilla_final_train_reward"] = target
            row["steps_to_vanilla_final"], row["reached_vanilla_final"] = first_reach(runs, target, config.smooth)
        row["reach_reward"] = config.reach_reward
        row["steps_to_reach_reward"], row["reached_reach_reward"] = first_reach(
            runs, config.reach_reward, config.smooth
        )
        rows.append(row)
    return rows


def _fmt(value: float, spread: float | None = None) -> str:
    return f"{value:.3f}" if spread is None else f"{value:.3f} ± {spread:.3f}"


def _reach(steps: float | str, reached: int | str, seeds: int) -> str:
    if reached == "":
        return "n/a"
    return f"never (0/{seeds})" if steps == "" else f"{steps:.0f} ({reached}/{seeds})"


def markdown_table(rows: Sequence[dict]) -> str:
    """The results as a Markdown table (mean ± std over seeds; reach steps: mean over the seeds that reached)."""
    target = rows[0]["reach_reward"] if rows else 0.0
    header = (
        "| variant | reward | AS proxy | BT proxy | C_BT | BT follow | I_AS (nats) | oracle reward | train reward (final) "
        f"| steps to vanilla's final | steps to reward {target:g} |"
    )
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for row in rows:
        cells = [
            row["variant"],
            *(_fmt(row[f"{m}_mean"], row[f"{m}_std"]) for m in TABLE_METRICS),
            _fmt(row["train_reward_final"]),
            _reach(row["steps_to_vanilla_final"], row["reached_vanilla_final"], row["seeds"]),
            _reach(row["steps_to_reach_reward"], row["reached_reach_reward"], row["seeds"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot_curves(path: Path, config: LabConfig, results: Sequence[RunResult], base: str) -> None:
    """Mean over seeds of each variant's moving-average curves, with the seeds' range shaded."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), sharex=True)
    for name in config.variants:
        runs = [r for r in results if r.variant == name]
        if not runs or parse_variant(name).base != base:
            continue
        for ax, key in zip(axes.flat, CURVE_METRICS):
            curves = np.stack([_curve(r, key, config.smooth) for r in runs])
            steps = np.arange(1, curves.shape[1] + 1)
            (line,) = ax.plot(steps, curves.mean(0), label=name)
            ax.fill_between(steps, curves.min(0), curves.max(0), color=line.get_color(), alpha=0.15)
    for ax, title in zip(axes.flat, CURVE_METRICS.values()):
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("training step")
    axes[0, 0].legend(fontsize=8)
    fig.suptitle(
        f"{config.task}, {base.upper()}: mean of {len(config.seeds)} seed(s), "
        f"{config.smooth}-step moving average, band = seed range",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(out: Path, config: LabConfig, results: Sequence[RunResult], wall_seconds: float) -> dict[str, Path]:
    """Write every output file; returns name -> path of the main ones."""
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for result in results:
        folder = out / "runs" / result.variant
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / f"seed{result.seed}.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=LOG_COLUMNS)
            writer.writeheader()
            writer.writerows(result.log)
        payload = {
            "variant": result.variant,
            "seed": result.seed,
            "seconds": result.seconds,
            "final": {k: result.final[k] for k in FINAL_COLUMNS},
            "log": result.log,
        }
        (folder / f"seed{result.seed}.json").write_text(json.dumps(payload, indent=1))
        export.write_run(folder / f"seed{result.seed}", result.log, result.critique_stats, result.rollouts)
    paths["runs"] = out / "runs"

    rows = summarise(config, results)
    paths["results_csv"] = out / "results.csv"
    with open(paths["results_csv"], "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=RESULT_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    paths["results_md"] = out / "results.md"
    paths["results_md"].write_text(markdown_table(rows))

    for base in sorted({parse_variant(r.variant).base for r in results}):
        paths[f"curves_{base}"] = out / f"curves_{base}.png"
        plot_curves(paths[f"curves_{base}"], config, results, base)

    paths["config"] = out / "config.json"
    meta = {
        "config": config.to_dict(),
        "wall_seconds": wall_seconds,
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "verl": verl.__version__},
    }
    paths["config"].write_text(json.dumps(meta, indent=1))
    paths["report"] = export.write_report(out, results)
    return paths
