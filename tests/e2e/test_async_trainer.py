"""AReW on verl's ``colocate_async`` trainer (``trainer.v1.trainer_mode=arew_colocate_async``) through real
``main_ppo`` on the CPU backend with the ``hf`` rollout: prompts submitted ahead, unfinished generations
aborted at the end of each step's sampling and resumed under the new weights by verl's partial-rollout
client, and the decisions that crossed a weight sync checked one by one in what the run wrote
(tests/async_checks.py; tests/vllm/test_rollout_vllm.py runs the same with verl's vLLM rollout).
"""

from __future__ import annotations

import pytest

from async_checks import STEPS, async_overrides, check_resumed_decisions, check_staleness_agrees_with_verl, check_steps
from smoke_runs import run_smoke

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("async") / "colocate"
    return run_smoke(folder, *async_overrides(folder), steps=STEPS)


def test_the_async_trainer_trains_with_arews_stage(run):
    assert "trainer.v1.trainer_mode=arew_colocate_async" in (run.folder / "command.txt").read_text()
    check_steps(run)


def test_the_hf_engine_cut_generations_and_decisions_resumed_under_the_next_weights(run):
    assert "hf rollout: aborted" in run.log_path.read_text()
    check_staleness_agrees_with_verl(run)


def test_each_decision_that_crossed_a_weight_sync_is_one_span_with_one_critique(run):
    check_resumed_decisions(run)
