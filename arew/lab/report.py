"""The lab's outputs: results table (CSV + Markdown), learning-curve PNGs, raw per-run logs.

Layout under the output folder::

    config.json                 the LabConfig, variants, seeds, versions, wall time
    results.csv, results.md     one row per variant: held-out evaluation, mean and spread over seeds
    curves_<base>.png           reward, AS proxy, BT proxy and BT evidence use over training
    runs/<variant>/seed<k>.csv  per-step training log (LOG_COLUMNS)
    runs/<variant>/seed<k>.json held-out evaluation, wall time and the per-step log
    runs/<variant>/seed<k>/     metrics.jsonl and rollouts/train.jsonl in the trainer's formats
    report.html, report_png/    ``arew report`` of every run (each seed its own run)

A study (``arew lab --study NAME``) writes the same layout under ``<out>/<NAME>/``, one row
per arm (``variants`` below: the arms' :class:`~arew.lab.config.Variant` objects, whose names
need not follow the grammar) and its table's extra columns (``STUDY_COLUMNS``).

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

from arew.lab import export
from arew.lab.config import LabConfig, Variant, parse_variant
from arew.lab.train import FINAL_COLUMNS, LOG_COLUMNS, RunResult
from arew.reporting.report import masked_moving_average
from arew.verl_plugin.algorithms import VERL_VERSION

TABLE_METRICS = ("reward", "as_proxy", "bt_proxy", "c_bt", "bt_follow", "i_as_nats", "oracle_reward")
CURVE_METRICS = {
    "reward": "outcome reward",
    "as_proxy": "AS proxy (informative queries per turn)",
    "bt_proxy": "BT proxy (cosine change per turn)",
    "bt_follow": "BT follows the evidence (sign agreement)",
}
# log columns whose per-run training mean a study's table can show (STUDY_COLUMNS)
TRAINING_MEANS = (
    "as_accuracy",
    "bt_accuracy",
    "as_positive_share",
    "as_adaptive_factor",
    "as_outcome_constant_share",
    "bt_outcome_constant_share",
    "as_rule_agreement",
    "bt_rule_agreement",
)
INTERVAL_LEVEL = 0.95
BOOTSTRAP_DRAWS = 10_000
"""The held-out reward's intervals: percentile bootstrap over seeds, this level, this many resamples."""

EARLY_UPDATES = 10
"""Updates over which the ``as_proxy_early_drift`` column measures an update rule's first-order effect (Prop. 4.1)."""
RESULT_COLUMNS = (
    "variant",
    "base",
    "method",
    "flip_prob",
    "judge_accuracy",
    "overrides",
    "seeds",
    *(f"{m}_{s}" for m in TABLE_METRICS for s in ("mean", "std")),
    "reward_low",
    "reward_high",
    "reward_vs_vanilla",
    "reward_vs_vanilla_low",
    "reward_vs_vanilla_high",
    "train_reward_final",
    "pos_neg_ratio_final",
    *(f"{c}_train_{s}" for c in TRAINING_MEANS for s in ("mean", "std")),
    "as_proxy_early_drift_mean",
    "as_proxy_early_drift_std",
    "steps_to_vanilla_final",
    "reached_vanilla_final",
    "vanilla_final_train_reward",
    "steps_to_reach_reward",
    "reached_reach_reward",
    "reach_reward",
)


# extra columns of a study's results.md: (header, summarise key, key of its spread or None)
STUDY_COLUMNS = {
    "pos_neg_ratio_final": ("pos/neg ratio (final)", "pos_neg_ratio_final", None),
    **{
        f"{column}_train": (header, f"{column}_train_mean", f"{column}_train_std")
        for column, header in (
            ("as_accuracy", "AS accuracy (training mean)"),
            ("bt_accuracy", "BT accuracy (training mean)"),
            ("as_positive_share", "AS +1 share (training mean)"),
            ("as_adaptive_factor", "AS lambda factor (training mean)"),
            ("as_outcome_constant_share", "AS outcome-constant share (training mean)"),
            ("bt_outcome_constant_share", "BT outcome-constant share (training mean)"),
            ("as_rule_agreement", "AS agreement with the rule (training mean)"),
            ("bt_rule_agreement", "BT agreement with the rule (training mean)"),
        )
    },
    "as_proxy_early_drift": (
        f"AS proxy drift (updates 1-{EARLY_UPDATES})",
        "as_proxy_early_drift_mean",
        "as_proxy_early_drift_std",
    ),
}
"""Columns a study may add: per-run means over training of a logged column (steps that logged none are
skipped), or the early drift of the AS proxy (:func:`early_drift`), then mean and spread over seeds."""


def resolve_variants(config: LabConfig, variants: Sequence[Variant] | None = None) -> list[Variant]:
    """The runs' variants: ``variants`` as given, else those named by ``config.variants``."""
    return list(variants) if variants is not None else [parse_variant(name) for name in config.variants]


def final_ratio(result: RunResult, window: int) -> float | None:
    """Mean of the positive/negative critique ratio over the run's last ``window`` steps that logged one."""
    values = [row.get("pos_neg_token_ratio") for row in result.log[-window:]]
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def training_mean(result: RunResult, column: str) -> float | None:
    """Mean of a logged column over the run's steps that measured it (None / NaN: not measured that step)."""
    values = [row.get(column) for row in result.log]
    values = [v for v in values if v is not None and not np.isnan(v)]
    return float(np.mean(values)) if values else None


def early_drift(result: RunResult, column: str, updates: int = EARLY_UPDATES) -> float | None:
    """Mean of a logged column over the rollouts after each of the first ``updates`` updates (log steps
    2 to updates + 1) minus its value before any (step 1): the early, first-order change an update rule
    makes, which Prop. 4.1 ties to the critiques' accuracy. None for a one-step run or a step without it."""
    values = [row.get(column) for row in result.log[: updates + 1]]
    if len(values) < 2 or None in values:
        return None
    return float(np.mean(values[1:]) - values[0])


def _spread(values: Sequence[float]) -> float:
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def bootstrap_interval(values: Sequence[float], other: Sequence[float] | None = None) -> tuple[float, float]:
    """The ``INTERVAL_LEVEL`` percentile-bootstrap interval of the mean of ``values`` over seeds or, with
    ``other``, of ``mean(values) - mean(other)`` (the two arms resampled independently: their seeds are
    separate runs).

    Why a bootstrap and not mean ± std: a lab run's numbers differ between processor vendors (the
    arithmetic, :mod:`arew.lab.reproducibility`), so a conclusion is only as good as its interval over
    seeds; a difference whose interval excludes 0 is resolved. The resampling generator is fixed, so a
    published interval is regenerated digit for digit from the same runs."""
    rng = np.random.default_rng(0)

    def resampled_means(sample: Sequence[float]) -> np.ndarray:
        sample = np.asarray(sample, dtype=np.float64)
        return sample[rng.integers(0, len(sample), (BOOTSTRAP_DRAWS, len(sample)))].mean(1)

    means = resampled_means(values) - (resampled_means(other) if other is not None else 0.0)
    tail = (1.0 - INTERVAL_LEVEL) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def _curve(result: RunResult, key: str, window: int) -> np.ndarray:
    """Moving average of a logged column; steps that logged None (e.g. no -1 critique) are skipped, nan if all are."""
    return masked_moving_average([np.nan if row[key] is None else row[key] for row in result.log], window)


def first_reach(results: Sequence[RunResult], target: float, window: int) -> tuple[float | str, int]:
    """(mean over runs of the first 1-based step whose moving-average reward >= target, runs that did);
    the mean is "" when none did."""
    reached = []
    for r in results:
        hits = np.nonzero(_curve(r, "reward", window) >= target)[0]
        if len(hits):
            reached.append(int(hits[0]) + 1)
    return (float(np.mean(reached)) if reached else "", len(reached))


def summarise(config: LabConfig, results: Sequence[RunResult], variants: Sequence[Variant] | None = None) -> list[dict]:
    """One row per variant (in ``config.variants`` order, or that of ``variants``) with RESULT_COLUMNS."""
    lookup = {v.name: v for v in resolve_variants(config, variants)}
    by_variant = {name: [r for r in results if r.variant == name] for name in lookup}
    final_train = {
        name: [float(_curve(r, "reward", config.smooth)[-1]) for r in runs] for name, runs in by_variant.items()
    }
    rows = []
    for name, runs in by_variant.items():
        if not runs:
            continue
        variant = lookup[name]
        row = {"variant": name, "base": variant.base, "method": variant.method, "flip_prob": variant.flip_prob}
        row["judge_accuracy"] = "" if variant.judge_accuracy is None else variant.judge_accuracy
        row["overrides"] = json.dumps(dict(variant.overrides)) if variant.overrides else ""
        row["seeds"] = len(runs)
        for metric in TABLE_METRICS:
            values = [r.final[metric] for r in runs]
            row[f"{metric}_mean"] = float(np.mean(values))
            row[f"{metric}_std"] = _spread(values)
        rewards = [r.final["reward"] for r in runs]
        row["reward_low"], row["reward_high"] = bootstrap_interval(rewards)
        vanilla = f"{variant.base}-vanilla"
        vanilla_rewards = [r.final["reward"] for r in by_variant.get(vanilla, [])]
        row["reward_vs_vanilla"] = row["reward_vs_vanilla_low"] = row["reward_vs_vanilla_high"] = ""
        if vanilla_rewards and name != vanilla:
            row["reward_vs_vanilla"] = float(np.mean(rewards) - np.mean(vanilla_rewards))
            row["reward_vs_vanilla_low"], row["reward_vs_vanilla_high"] = bootstrap_interval(rewards, vanilla_rewards)
        row["train_reward_final"] = float(np.mean(final_train[name]))
        ratios = [x for x in (final_ratio(r, config.smooth) for r in runs) if x is not None]
        row["pos_neg_ratio_final"] = float(np.mean(ratios)) if ratios else ""
        for column in TRAINING_MEANS:
            means = [m for m in (training_mean(r, column) for r in runs) if m is not None]
            row[f"{column}_train_mean"] = float(np.mean(means)) if means else ""
            row[f"{column}_train_std"] = _spread(means) if means else ""
        drifts = [d for d in (early_drift(r, "as_proxy") for r in runs) if d is not None]
        row["as_proxy_early_drift_mean"] = float(np.mean(drifts)) if drifts else ""
        row["as_proxy_early_drift_std"] = _spread(drifts) if drifts else ""
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


def _interval(value: float, low: float, high: float, signed: bool = False) -> str:
    number = "{:+.3f}" if signed else "{:.3f}"
    return f"{number.format(value)} [{number.format(low)}, {number.format(high)}]"


def _difference(row: dict) -> str:
    """The reward difference to vanilla with its interval, in bold where the interval excludes 0."""
    if row["reward_vs_vanilla"] == "":
        return "-"
    cell = _interval(row["reward_vs_vanilla"], row["reward_vs_vanilla_low"], row["reward_vs_vanilla_high"], signed=True)
    resolved = row["reward_vs_vanilla_low"] > 0 or row["reward_vs_vanilla_high"] < 0
    return f"**{cell}**" if resolved else cell


def _reach(steps: float | str, reached: int | str, seeds: int) -> str:
    if reached == "":
        return "n/a"
    return f"never (0/{seeds})" if steps == "" else f"{steps:.0f} ({reached}/{seeds})"


def markdown_table(rows: Sequence[dict], extra: Sequence[str] = ()) -> str:
    """The results as a Markdown table: the held-out reward's mean over seeds with its bootstrap interval
    (:func:`bootstrap_interval`), its difference to the same base's vanilla with that difference's interval
    (bold where it excludes 0: resolved), the other metrics as mean ± std over seeds; reach steps: mean over
    the seeds that reached.

    ``extra`` names ``STUDY_COLUMNS`` added after "train reward (final)" (a study's table); "-"
    where a row has no value (e.g. no critiques).
    """
    target = rows[0]["reach_reward"] if rows else 0.0
    added = "".join(f" | {STUDY_COLUMNS[name][0]}" for name in extra)
    header = (
        f"| variant | reward [{INTERVAL_LEVEL:.0%} CI] | reward − vanilla [{INTERVAL_LEVEL:.0%} CI] | AS proxy | BT proxy "
        "| C_BT | BT follow | I_AS (nats) | oracle reward | train reward (final)"
        f"{added} | steps to vanilla's final | steps to reward {target:g} |"
    )
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for row in rows:
        cells = [
            row["variant"],
            _interval(row["reward_mean"], row["reward_low"], row["reward_high"]),
            _difference(row),
            *(_fmt(row[f"{m}_mean"], row[f"{m}_std"]) for m in TABLE_METRICS if m != "reward"),
            _fmt(row["train_reward_final"]),
            *(_extra_cell(row, name) for name in extra),
            _reach(row["steps_to_vanilla_final"], row["reached_vanilla_final"], row["seeds"]),
            _reach(row["steps_to_reach_reward"], row["reached_reach_reward"], row["seeds"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _extra_cell(row: dict, name: str) -> str:
    _, key, spread = STUDY_COLUMNS[name]
    if row.get(key, "") == "":
        return "-"
    return _fmt(row[key], row[spread] if spread else None)


def plot_curves(
    path: Path,
    config: LabConfig,
    results: Sequence[RunResult],
    base: str,
    variants: Sequence[Variant] | None = None,
    metrics: dict[str, str] = CURVE_METRICS,
) -> None:
    """Mean over seeds of each variant's moving-average curves (four ``metrics``), with the seeds' range shaded."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), sharex=True)
    for variant in resolve_variants(config, variants):
        runs = [r for r in results if r.variant == variant.name]
        if not runs or variant.base != base:
            continue
        for ax, key in zip(axes.flat, metrics):
            curves = np.stack([_curve(r, key, config.smooth) for r in runs])
            steps = np.arange(1, curves.shape[1] + 1)
            (line,) = ax.plot(steps, curves.mean(0), label=variant.name)
            ax.fill_between(steps, curves.min(0), curves.max(0), color=line.get_color(), alpha=0.15)
    for ax, title in zip(axes.flat, metrics.values()):
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


def write_outputs(
    out: Path,
    config: LabConfig,
    results: Sequence[RunResult],
    wall_seconds: float,
    variants: Sequence[Variant] | None = None,
    extra_columns: Sequence[str] = (),
    metrics: dict[str, str] = CURVE_METRICS,
    meta: dict | None = None,
) -> dict[str, Path]:
    """Write every output file; returns name -> path of the main ones.

    ``variants``, ``extra_columns`` and ``metrics`` are a study's arms, table columns and curve
    panels; ``meta`` adds keys to config.json (a study's definition).
    """
    variants = resolve_variants(config, variants)
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
            "arithmetic": result.arithmetic,
            "log": result.log,
        }
        (folder / f"seed{result.seed}.json").write_text(json.dumps(payload, indent=1))
        export.write_run(
            folder / f"seed{result.seed}", result.log, result.critique_stats, result.rollouts, result.variant
        )
    paths["runs"] = out / "runs"

    rows = summarise(config, results, variants)
    paths["results_csv"] = out / "results.csv"
    with open(paths["results_csv"], "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=RESULT_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    paths["results_md"] = out / "results.md"
    paths["results_md"].write_text(markdown_table(rows, extra_columns))

    bases = {v.name: v.base for v in variants}
    for base in sorted({bases[r.variant] for r in results}):
        paths[f"curves_{base}"] = out / f"curves_{base}.png"
        plot_curves(paths[f"curves_{base}"], config, results, base, variants, metrics)

    paths["config"] = out / "config.json"
    meta = {
        **(meta or {}),
        "config": config.to_dict(),
        "wall_seconds": wall_seconds,
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "verl": VERL_VERSION},
    }
    paths["config"].write_text(json.dumps(meta, indent=1))
    paths["report"] = export.write_report(out, results)
    return paths
