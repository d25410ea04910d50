"""The results table of ``arew eval``: means with 95% confidence intervals, mean@n and pass@n, and the
feedback-ablation drop (Observation 3).

Intervals are normal approximations over episodes (1.96 standard errors; the sample standard
deviation), so read them as indicative below about 30 episodes. mean@n averages each prompt's mean
reward over its n episodes; pass@n is the share of prompts with at least one episode whose reward
reaches ``success`` (1.0: the task's full reward). pass^k (tau-bench's reliability, for every k up
to n) is the chance that k episodes drawn without replacement from a prompt's n all succeed,
C(c, k) / C(n, k) for c successes, averaged over prompts. Failed episodes count with reward 0 in
every figure and are also counted by reason.
"""

from __future__ import annotations

import csv
import json
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from arew.episodes.failures import FAILURE_REASONS

Z95 = 1.96
# episode numbers shown first, in this order; every other number the episodes carry follows, sorted
LEADING = ("decisions", "invalid_rate", "response_tokens", "answered", "forced_answer", "truncated")


def mean_ci(values: Sequence[float]) -> tuple[float, float]:
    """(mean, half-width of the 95% interval); the half-width is nan below two values."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan
    mean = sum(values) / n
    if n < 2:
        return mean, math.nan
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, Z95 * math.sqrt(variance / n)


def pass_hat_k(successes: int, n: int, k: int) -> float:
    """C(successes, k) / C(n, k): the chance that k of the n episodes, drawn without replacement, all succeed."""
    return math.comb(successes, k) / math.comb(n, k)


def _numbers(record: dict[str, Any]) -> dict[str, float]:
    info = dict(record.get("info") or {})
    decisions = info.get("decisions", 0.0)
    info["invalid_rate"] = info.get("invalid_turns", 0.0) / decisions if decisions else 0.0
    return {key: float(value) for key, value in info.items() if isinstance(value, (int, float)) and not isinstance(value, bool)}


def summarize(records: Sequence[dict[str, Any]], success: float = 1.0) -> dict[str, Any]:
    """Figures of one evaluation: ``rows`` (metric -> mean, ci95, n) plus counts, mean@n and pass@n."""
    by_prompt: dict[Any, list[float]] = defaultdict(list)
    for record in records:
        by_prompt[(record.get("data_source"), record.get("row"))].append(float(record.get("reward", 0.0)))
    n_per_prompt = max((len(r) for r in by_prompt.values()), default=0)
    failures = Counter((record.get("failed") or {}).get("reason") for record in records if record.get("failed"))
    rows: dict[str, dict[str, float]] = {}

    def add(name: str, values: Sequence[float]) -> None:
        mean, ci = mean_ci(values)
        rows[name] = {"mean": mean, "ci95": ci, "n": len(values)}

    add("reward", [float(r.get("reward", 0.0)) for r in records])
    add(f"mean@{n_per_prompt}", [sum(r) / len(r) for r in by_prompt.values()])
    add(f"pass@{n_per_prompt}", [float(max(r) >= success) for r in by_prompt.values()])
    for k in range(1, n_per_prompt + 1):
        add(f"pass^{k}", [pass_hat_k(sum(v >= success for v in r), len(r), k) for r in by_prompt.values() if len(r) >= k])
    numbers = [_numbers(r) for r in records]
    keys = set().union(*numbers) if numbers else set()
    for channel in ("as", "bt"):  # a critique source's agreement with the rules, pooled over the decisions it labelled
        labelled = sum(n.get(f"critique_labelled_{channel}", 0.0) for n in numbers)
        if labelled:
            share = sum(n.get(f"critique_agree_{channel}", 0.0) for n in numbers) / labelled
            rows[f"source_agreement_{channel}"] = {"mean": share, "ci95": Z95 * math.sqrt(share * (1 - share) / labelled), "n": int(labelled)}
    for key in [k for k in LEADING if k in keys] + sorted(keys - set(LEADING)):
        add(key, [n[key] for n in numbers if key in n])
    return {
        "episodes": len(records),
        "prompts": len(by_prompt),
        "failed": {reason: failures.get(reason, 0) for reason in FAILURE_REASONS},
        "rows": rows,
    }


def ablation_drop(normal: dict[str, Any], ablated: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per metric in both: normal mean, ablated mean, drop (normal - ablated) and its 95% half-width."""
    out = {}
    for key, a in normal["rows"].items():
        b = ablated["rows"].get(key)
        if b is None:
            continue
        se = math.hypot(a["ci95"] / Z95, b["ci95"] / Z95)
        out[key] = {"normal": a["mean"], "ablated": b["mean"], "drop": a["mean"] - b["mean"], "ci95": Z95 * se}
    return out


def _cell(value: float) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4g}"


def markdown(summary: dict[str, Any], title: str) -> str:
    failed = ", ".join(f"{k} {v}" for k, v in summary["failed"].items() if v) or "none"
    lines = [f"## {title}", "", f"{summary['episodes']} episodes of {summary['prompts']} prompts; failed: {failed}", "",
             "| metric | mean | ±95% | n |", "|---|---|---|---|"]  # fmt: skip
    lines += [f"| {k} | {_cell(r['mean'])} | {_cell(r['ci95'])} | {r['n']} |" for k, r in summary["rows"].items()]
    if "endpoint" in summary:
        lines += ["", "endpoint: " + ", ".join(f"{k} {v:g}" for k, v in summary["endpoint"].items())]
    return "\n".join(lines) + "\n"


def drop_markdown(drop: dict[str, dict[str, float]]) -> str:
    lines = ["## Feedback ablation (Observation 3)", "", "| metric | normal | ablated | drop | ±95% |", "|---|---|---|---|---|"]
    lines += [f"| {k} | {_cell(d['normal'])} | {_cell(d['ablated'])} | {_cell(d['drop'])} | {_cell(d['ci95'])} |" for k, d in drop.items()]
    return "\n".join(lines) + "\n"


def write_tables(summary: dict[str, Any], folder: Path, title: str) -> dict[str, Path]:
    """``results.md``, ``results.csv`` and ``results.json`` in ``folder``."""
    folder = Path(folder)
    paths = {"md": folder / "results.md", "csv": folder / "results.csv", "json": folder / "results.json"}
    paths["md"].write_text(markdown(summary, title))
    paths["json"].write_text(json.dumps(summary, indent=1, allow_nan=True) + "\n")
    with open(paths["csv"], "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["metric", "mean", "ci95", "n"])
        writer.writerows([k, r["mean"], r["ci95"], r["n"]] for k, r in summary["rows"].items())
    return paths
