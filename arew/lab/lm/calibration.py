"""Calibration before comparison: what a warm-start model does on the task before any RL.

The model plays the task's validation episodes through ``arew eval``'s runner (the episode driver, the
environment's critiques and proxies, the training recipe's stop strings) at the rollout's temperature; the
numbers are the ones the training dashboards plot, so a locked warm start and a competent one can be told apart
before an experiment spends its budget on them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

# the episode numbers of a calibration (``arew eval``'s ``info`` keys) and their names in the tables
CALIBRATION_METRICS = {
    "reward": "reward",
    "as_proxy": "proxy_as_mean",
    "bt_proxy": "proxy_bt_mean",
    "c_bt": "proxy_c_bt",
    "i_as_nats": "proxy_i_as_nats",
    "invalid_rate": "invalid_rate",
}


def calibrate(model_dir: Path, rows: list[dict[str, Any]], out: Path, *, max_tokens_per_turn: int, response_length: int,
              temperature: float = 1.0, seed: int = 0) -> dict[str, dict[str, float]]:  # fmt: skip
    """Each of :data:`CALIBRATION_METRICS` as mean, 95% half-width and count over the episodes of ``rows``."""
    from arew.eval.local import LocalModel
    from arew.eval.results import summarize
    from arew.eval.runner import EvalConfig, evaluate
    from arew.eval.transcript import TokenCounter

    model = LocalModel(model_dir, device="cpu", name=model_dir.name)
    config = EvalConfig(temperature=temperature, seed=seed, response_length=response_length,
                        max_tokens_per_turn=max_tokens_per_turn, feedback_reserve_tokens=128, concurrency=1)  # fmt: skip
    records = asyncio.run(evaluate(model, rows, config, out, TokenCounter.of_tokenizer(model.tokenizer)))
    figures = summarize(records)["rows"]
    return {name: figures[key] for name, key in CALIBRATION_METRICS.items() if key in figures}
