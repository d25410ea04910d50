"""The lab's runs in the trainer's formats: verl's ``file`` logger JSONL and the rollout JSONL.

So that ``arew report`` (and anything else that reads a trainer run folder) reads a lab run
unchanged. :data:`METRIC_KEYS` is the one table from the lab's log columns to the trainer's
metric keys, used only where the quantity is the same; the ``arew/*`` critique statistics
and each decision's applied critique and coefficient are the training step's own
(:func:`arew.lab.train.advantage_stage`), as in the trainer. Per run folder::

    metrics.jsonl          {"step": n, "data": {key: value}} per training step
    rollouts/train.jsonl   ROLLOUTS_PER_STEP episodes per step, in the contract's schema
    rollouts/run.json      {"group": the variant}: the run group its seeds share
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from arew.core.records import CHANNELS
from arew.metrics.rollouts import write_run_record

METRIC_KEYS = {
    "reward": "critic/score/mean",
    "as_proxy": "episode/proxy_as_mean/mean",
    "bt_proxy": "episode/proxy_bt_mean/mean",
    "c_bt": "episode/proxy_c_bt/mean",
    "bt_follow": "episode/proxy_bt_follow/mean",
    "i_as_nats": "episode/proxy_i_as_nats/mean",
    "oracle_reward": "episode/proxy_oracle_reward/mean",
    "corr_as_reward": "selflock/corr_as_reward",
    "corr_as_oracle": "selflock/corr_as_oracle",
    "corr_gap": "selflock/corr_gap",
    "oracle_reward_gap": "selflock/oracle_reward_gap",
    "pg_loss": "actor/pg_loss",
    "vf_loss": "critic/vf_loss",
    "seconds": "timing_s/step",
}
"""Lab log column -> the trainer's key for the same quantity (columns without one keep ``lab/<column>``)."""
ROLLOUTS_PER_STEP = 4
"""Episodes kept per training step: evenly spaced over the batch, so the sample is deterministic."""


def metrics_entry(row: dict[str, float], critique_stats: dict[str, float]) -> dict:
    """One step's line of verl's file logger from a lab log row and the step's ``arew/*`` statistics."""
    # None / NaN: not measured this step (no estimate, no decision point); left out, as the trainer logs nothing then
    data = {
        METRIC_KEYS.get(key, f"lab/{key}"): float(value)
        for key, value in row.items()
        if key != "step" and value is not None and not math.isnan(value)
    }
    data["training/global_step"] = int(row["step"])
    data.update({key: float(value) for key, value in critique_stats.items() if value is not None and not math.isnan(value)})
    return {"step": int(row["step"]), "data": data}


def sampled_indices(batch: int, per_step: int = ROLLOUTS_PER_STEP) -> list[int]:
    """Evenly spaced episode indices (all of them when the batch is smaller)."""
    if batch <= per_step:
        return list(range(batch))
    return sorted({int(i) for i in np.linspace(0, batch - 1, per_step).round()})


def episode_numbers(ro, b: int) -> dict[str, float]:
    """Episode ``b``'s numbers as the trainer's episodes carry them (``proxy_*`` of :mod:`arew.episodes`);
    the Bayesian replay's ``proxy_i_as_nats`` and ``proxy_oracle_reward`` when the rollout kept its proxies."""
    numbers = {
        "decisions": float(ro.n_decisions),
        "proxy_as_mean": float(ro.as_proxy[b].mean()),
        "proxy_bt_mean": float(ro.bt_proxy[b].mean()),
        "proxy_c_bt": float(ro.bt_proxy[b].clamp(min=0).sum()),
    }
    if ro.proxies:
        numbers["proxy_i_as_nats"] = float(ro.proxies[b]["i_as_nats"])
        numbers["proxy_oracle_reward"] = float(ro.proxies[b]["oracle_reward"])
    return numbers


def episodes(ro, task: str, step: int, injection, per_step: int = ROLLOUTS_PER_STEP) -> list[dict]:
    """The sampled episodes of one training rollout in the contract's rollout schema."""
    n = ro.n_decisions
    labels = ro.labels.tolist()
    applied = coefficients = None
    if injection is not None and injection.labels.numel() == ro.labels.numel():
        applied = injection.labels.view(ro.labels.shape).tolist()
        coefficients = injection.coefficients.view(ro.labels.shape).tolist()
    out = []
    for b in sampled_indices(len(labels), per_step):
        texts, replies = ro.texts[b], (ro.replies[b] if ro.replies else [])
        turns = [
            {
                "index": p,
                "turn": p // 2 + 1,
                "channel": CHANNELS[p % 2],
                "agent": texts[p] if p < len(texts) else "",
                "feedback": replies[p] if p < len(replies) else None,
                "critique": int(labels[b][p]),
                "applied": None if applied is None else int(applied[b][p]),
                "coefficient": None if coefficients is None else float(coefficients[b][p]),
            }
            for p in range(n)
        ]
        out.append(
            {
                "split": "train",
                "step": int(step),
                "episode": f"train:{int(ro.task_index[b])}:{b}",
                "task": task,
                "data_source": task,
                "reward": float(ro.reward[b]),
                "failed": None,
                "prompt": "",  # the lab's agent reads no chat prompt
                "numbers": episode_numbers(ro, b),
                "turns": turns,
            }
        )
    return out


def write_run(
    folder: Path, log: Sequence[dict], critique_stats: Sequence[dict], rollouts: Sequence[dict], group: str
) -> Path:
    """Write one run's ``metrics.jsonl``, ``rollouts/train.jsonl`` and ``rollouts/run.json`` (``{"group": group}``,
    the lab passes the variant) under ``folder``; returns the metrics path."""
    (folder / "rollouts").mkdir(parents=True, exist_ok=True)
    stats = list(critique_stats) or [{}] * len(log)
    with open(folder / "metrics.jsonl", "w") as f:
        for row, extra in zip(log, stats):
            f.write(json.dumps(metrics_entry(row, extra)) + "\n")
    with open(folder / "rollouts" / "train.jsonl", "w") as f:
        for episode in rollouts:
            f.write(json.dumps(episode) + "\n")
    write_run_record(folder / "rollouts", group)
    return folder / "metrics.jsonl"


def write_report(out: Path, results: Sequence) -> Path:
    """``arew report`` over the lab's runs (each (variant, seed) its own run, so the seed spread shows)."""
    from arew.reporting.report import build

    folders = [out / "runs" / r.variant / f"seed{r.seed}" for r in results]
    return build(folders, out / "report.html")
