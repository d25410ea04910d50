"""Weight versions per decision, and how stale the decisions a step trains on are.

Under verl's asynchronous trainers an episode runs while the policy is updated: a generation cut
by a weight sync is resumed under the new weights, so one decision can span two versions, and an
episode's decisions can come from several. verl logs each trajectory's staleness
(``training/off_policy/trajectory_staleness``: the training step's policy version minus the newest
version the trajectory used). The agent loop records each decision's oldest and newest version under
:data:`VERSIONS_KEY` (``{"min": [...], "max": [...]}``, one entry per decision of the critique
record), and :func:`decision_staleness_metrics` logs the same measure per decision beside verl's.
Versions are trainer global steps: the weights after step ``g`` carry version ``g``, so step ``g``
trains a policy of version ``g - 1`` and a decision's staleness is ``g - 1 - newest version``.
"""

from __future__ import annotations

import numpy as np

VERSIONS_KEY = "arew_decision_versions"
PREFIX = "arew/off_policy"


def decision_versions(lows: list[int | None], highs: list[int | None]) -> dict[str, list[int | None]]:
    """The agent loop's entry: each decision's oldest and newest weight version (``None``: the engine gave none)."""
    if len(lows) != len(highs):
        raise ValueError(f"{len(lows)} oldest versions for {len(highs)} decisions")
    return {"min": list(lows), "max": list(highs)}


def _versions(entry, decisions: int | None) -> tuple[np.ndarray, np.ndarray] | None:
    """The entry's (min, max) arrays, or None when it is not one version pair per decision."""
    if not isinstance(entry, dict):
        return None
    lows, highs = entry.get("min"), entry.get("max")
    if not isinstance(lows, list) or not isinstance(highs, list) or len(lows) != len(highs):
        return None
    if decisions is not None and len(lows) != decisions:
        return None
    if not all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in lows + highs):
        return None
    as_float = lambda values: np.array([np.nan if v is None else float(v) for v in values], dtype=float)  # noqa: E731
    return as_float(lows), as_float(highs)


def decision_staleness_metrics(entries: list, decisions: list[int | None], step: int) -> dict[str, float]:
    """``arew/off_policy/*`` over the kept samples' decisions at training step ``step``.

    ``entries`` holds each kept sample's :data:`VERSIONS_KEY` entry and ``decisions`` its number of
    decisions in the critique record (``None``: not checked). An entry that is not one version pair
    per decision counts under ``malformed_samples`` and adds nothing else; a decision without a
    version counts under ``decisions_without_version``.
    """
    lows, highs, malformed = [], [], 0
    for entry, count in zip(entries, decisions):
        versions = _versions(entry, count)
        if versions is None:
            malformed += entry is not None
            continue
        lows.append(versions[0])
        highs.append(versions[1])
    low = np.concatenate(lows) if lows else np.zeros(0)
    high = np.concatenate(highs) if highs else np.zeros(0)
    known = ~(np.isnan(low) | np.isnan(high))
    low, high = low[known], high[known]
    policy = step - 1
    metrics = {
        f"{PREFIX}/decisions": float(known.sum()),
        f"{PREFIX}/decisions_without_version": float((~known).sum()),
        f"{PREFIX}/malformed_samples": float(malformed),
        f"{PREFIX}/spanning_decisions": float((high > low).sum()),
    }
    if known.any():
        staleness, worst = policy - high, policy - low
        metrics.update({
            f"{PREFIX}/spanning_decision_share": float((high > low).mean()),
            f"{PREFIX}/decision_staleness/mean": float(staleness.mean()),
            f"{PREFIX}/decision_staleness/max": float(staleness.max()),
            f"{PREFIX}/decision_staleness/min": float(staleness.min()),
            f"{PREFIX}/decision_staleness_worst/mean": float(worst.mean()),
            f"{PREFIX}/decision_staleness_worst/max": float(worst.max()),
        })  # fmt: skip
    return metrics
