"""The language-model lab's outputs, from the runs' own ``metrics.jsonl`` (verl's file logger).

Layout under the output folder::

    results.md, results.csv, results.json   per arm: each metric over the first and the last WINDOW steps,
                                            mean over seeds with a 95% t interval, and the change
    calibration.md                          the warm starts before RL (from calibration/*/calibration.json)
    timing.md                               per-step time split and start-up, mean over runs
    curves.png                              reward, AS and BT proxies, I_AS, corr(AS, reward) per arm
    report.html, report_png/                ``arew report`` of every run (seeds grouped by arm)
    runs/<algo>-<variant>/seed<k>/          each main_ppo run (metrics.jsonl, main_ppo.log, rollouts/)
"""

from __future__ import annotations

import csv
import json
import math
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from arew.lab.export import METRIC_KEYS

WINDOW = 5  # steps averaged at the start and at the end of a run
# the lab's keys, and what only a language model does: write text the task cannot read
KEYS = {**METRIC_KEYS, "invalid_turns": "episode/invalid_turns/mean"}
METRICS = {
    "reward": "reward",
    "as_proxy": "AS proxy (informative questions)",
    "bt_proxy": "BT proxy (cosine step)",
    "i_as_nats": "I_AS (nats)",
    "corr_as_reward": "corr(AS, reward)",
    "invalid_turns": "invalid turns per episode",
}
# two-sided 95% quantiles of Student's t by degrees of freedom (seeds - 1); beyond the table, the normal's
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


def t_interval(values: Sequence[float]) -> tuple[float, float]:
    """(mean, half-width of the 95% t interval over seeds; nan below two values), nan values left out."""
    x = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    if not len(x):
        return math.nan, math.nan
    if len(x) < 2:
        return float(x.mean()), math.nan
    return float(x.mean()), T95.get(len(x) - 1, 1.96) * float(x.std(ddof=1)) / math.sqrt(len(x))


def series(history: Sequence[dict[str, float]], metric: str) -> np.ndarray:
    """The metric's value at each step; nan where a step did not log it or logged null (verl's undefined values)."""
    key = KEYS[metric]
    return np.array([math.nan if step.get(key) is None else float(step[key]) for step in history], dtype=float)


def window(steps: int) -> int:
    """Steps averaged at each end of a run: :data:`WINDOW`, or half the run when it is shorter (the ends never overlap)."""
    return max(1, min(WINDOW, steps // 2))


def window_mean(values: np.ndarray, end: bool) -> float:
    width = window(len(values))
    part = values[-width:] if end else values[:width]
    part = part[~np.isnan(part)]
    return float(part.mean()) if len(part) else math.nan


def summarise(runs: dict[tuple[str, str, int], object]) -> list[dict]:
    """One row per arm: for each metric its start, end and change, mean and 95% half-width over seeds."""
    arms = list(dict.fromkeys((algo, variant) for algo, variant, _ in runs))  # in the order the runs came
    rows = []
    for algo, variant in arms:
        histories = [run.history() for (a, v, _), run in runs.items() if (a, v) == (algo, variant)]
        steps = min(len(h) for h in histories)
        histories = [h[:steps] for h in histories]
        row: dict = {"arm": f"{algo} {variant}", "seeds": len(histories), "steps": steps, "window": window(steps)}
        for metric in METRICS:
            start = [window_mean(series(h, metric), end=False) for h in histories]
            end = [window_mean(series(h, metric), end=True) for h in histories]
            for name, values in (("start", start), ("end", end), ("change", [b - a for a, b in zip(start, end)])):
                row[f"{metric}_{name}"], row[f"{metric}_{name}_ci95"] = t_interval(values)
        rows.append(row)
    return rows


def _cell(mean: float, ci: float) -> str:
    if math.isnan(mean):
        return "n/a"
    return f"{mean:+.3f} ± {ci:.3f}" if not math.isnan(ci) else f"{mean:+.3f}"


def _value(mean: float) -> str:
    return "n/a" if math.isnan(mean) else f"{mean:.3f}"


def results_markdown(rows: Sequence[dict]) -> str:
    lines = [
        f"| arm | seeds | steps | steps averaged at each end | {' | '.join(f'{label}: first → last (change)' for label in METRICS.values())} |",
        "|" + "---|" * (4 + len(METRICS)),
    ]
    for row in rows:
        cells = [
            f"{_value(row[f'{m}_start'])} → {_value(row[f'{m}_end'])} ({_cell(row[f'{m}_change'], row[f'{m}_change_ci95'])})"
            for m in METRICS
        ]  # fmt: skip
        lines.append(f"| {row['arm']} | {row['seeds']} | {row['steps']} | {row['window']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\nMeans over seeds; ± is the 95% t interval of the change over seeds (n/a: not logged or undefined).\n"


def calibration_markdown(calibration: dict[str, dict], records: dict[str, dict]) -> str:
    names = list(calibration)
    metrics = sorted({key for figures in calibration.values() for key in figures["figures"]}, key=["reward", "as_proxy", "bt_proxy", "c_bt", "i_as_nats", "invalid_rate"].index)
    lines = ["| warm start | scripted players' reward | " + " | ".join(metrics) + " |", "|" + "---|" * (2 + len(metrics))]
    for name in names:
        figures = calibration[name]["figures"]
        scripted = records.get(name, {}).get("scripted", {}).get("reward", math.nan)
        lines.append(f"| {name} | {scripted:.3f} | " + " | ".join(
            f"{figures[m]['mean']:.3f} ± {figures[m]['ci95']:.3f}" if m in figures else "n/a" for m in metrics) + " |")  # fmt: skip
    first = next(iter(calibration.values()), {})
    episodes = first.get("figures", {}).get("reward", {}).get("n", 0)
    temperature = f" at temperature {first['temperature']:g}" if "temperature" in first else ""
    return "\n".join(lines) + f"\n\nEach warm start on {episodes:.0f} validation episodes{temperature} (± 95% normal interval over episodes).\n"


def timing_markdown(runs: dict[tuple[str, str, int], object]) -> str:
    steps = [step for run in runs.values() for step in run.history()]
    lines = ["| part of a step | seconds (mean over steps) |", "|---|---|"]
    from arew.verl_plugin.smoke import TIMING_KEYS  # the plugin imports verl: only when a report is written

    for name, key in TIMING_KEYS.items():
        values = [step[key] for step in steps if key in step]
        if values:
            lines.append(f"| {name} | {np.mean(values):.2f} |")
    walls = [json.loads((run.folder / "run.json").read_text()) for run in runs.values() if (run.folder / "run.json").is_file()]
    if walls:
        lines.append(f"| start-up and shutdown of one run | {np.mean([w['start_up_seconds'] for w in walls]):.1f} |")
        lines.append(f"| one run, all of it | {np.mean([w['wall_seconds'] for w in walls]):.1f} |")
    return "\n".join(lines) + "\n"


def plot(runs: dict[tuple[str, str, int], object], path: Path, smooth: int = 3) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from arew.reporting.report import masked_moving_average

    figure, axes = plt.subplots(1, len(METRICS), figsize=(4.2 * len(METRICS), 3.4))
    histories = {}  # each arm's runs' histories, read once
    for (algo, variant, _), run in runs.items():
        histories.setdefault((algo, variant), []).append(run.history())
    for metric, axis in zip(METRICS, axes):
        for arm, arm_histories in histories.items():
            curves = [series(history, metric) for history in arm_histories]
            length = min(len(c) for c in curves)
            # steps that logged no value (null) stay gaps, not zeros
            stacked = np.stack([masked_moving_average(c[:length], smooth) for c in curves])
            steps = np.arange(1, length + 1)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # an all-gap step: nan, drawn as a gap
                mean, low, high = np.nanmean(stacked, axis=0), np.nanmin(stacked, axis=0), np.nanmax(stacked, axis=0)
            (line,) = axis.plot(steps, mean, label=" ".join(arm))
            if len(curves) > 1:
                axis.fill_between(steps, low, high, color=line.get_color(), alpha=0.15)
        axis.set_title(METRICS[metric], fontsize=10)
        axis.set_xlabel("training step")
    axes[0].legend(fontsize=8)
    figure.suptitle(f"mean over seeds (band: min to max), moving average over {smooth} steps", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


PUBLISHED_BLOCKS = ("lm-lab-command", "lm-lab-calibration", "lm-lab-results", "lm-lab-timing")
PUBLISHED_CURVES = "lm-lab-curves.png"


def publish(out: Path, page: Path, command: str) -> None:
    """Write the outputs' tables into ``page``'s blocks (:data:`PUBLISHED_BLOCKS`, see :mod:`arew.reporting.markdown_blocks`) and
    the curves next to it (:data:`PUBLISHED_CURVES`); ``command`` is the one that made them."""
    import shutil

    from arew.reporting.markdown_blocks import replace_block

    contents = {
        "lm-lab-command": f"```bash\n{command}\n```\n",
        "lm-lab-calibration": (out / "calibration.md").read_text() if (out / "calibration.md").is_file() else "No calibration (--model).\n",
        "lm-lab-results": (out / "results.md").read_text(),
        "lm-lab-timing": (out / "timing.md").read_text(),
    }
    text = page.read_text()
    for name in PUBLISHED_BLOCKS:
        text = replace_block(text, name, contents[name])
    page.write_text(text)
    shutil.copyfile(out / "curves.png", page.parent / PUBLISHED_CURVES)


def write(out: Path, runs: dict, calibration: dict[str, dict], settings: dict) -> Path:
    """Every output of the layout above; returns results.md's path."""
    from arew.lab.lm.warm_start import RECORD
    from arew.reporting.report import build as build_report

    rows = summarise(runs)
    (out / "results.md").write_text(results_markdown(rows))
    (out / "results.json").write_text(json.dumps({"settings": settings, "rows": rows}, indent=2, default=str) + "\n")
    with open(out / "results.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    if calibration:
        records = {name: json.loads((out / "models" / figures["model"] / RECORD).read_text()) for name, figures in calibration.items()}
        (out / "calibration.md").write_text(calibration_markdown(calibration, records))
    (out / "timing.md").write_text(timing_markdown(runs))
    plot(runs, out / "curves.png")
    build_report([str(run.folder) for run in runs.values()], str(out / "report.html"))
    return out / "results.md"
