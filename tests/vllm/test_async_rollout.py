"""AReW on verl's ``colocate_async`` trainer with verl's own vLLM rollout (vLLM's CPU build) in real ``main_ppo``:
vLLM's pause aborts the unfinished generations at the end of each step's sampling, verl's partial-rollout client
resumes them under the synced weights, and the decisions that crossed a sync are checked one by one
(tests/async_checks.py; tests/e2e/test_async_trainer.py runs the same with the hf rollout).
"""

from __future__ import annotations

import pytest

from async_checks import STEPS, async_overrides, check_resumed_decisions, check_staleness_agrees_with_verl, check_steps
from smoke_runs import run_smoke

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("vllm_async") / "colocate"
    return run_smoke(folder, *async_overrides(folder), steps=STEPS, rollout="vllm")


def test_verls_vllm_rollout_trains_under_the_async_trainer(run):
    assert "vLLMHttpServer" in run.log_path.read_text()  # verl's vLLM server generated, not the hf sampler
    check_steps(run)
    # vLLM starts on dummy weights: step 1's episodes all ran under the first sync's (later steps mix in stale tokens)
    assert run.steps[0]["training/rollout_actor_probs_pearson_corr"] > 0.99


def test_vllm_cut_generations_and_decisions_resumed_under_the_next_weights(run):
    check_staleness_agrees_with_verl(run)


def test_each_decision_that_crossed_a_weight_sync_is_one_span_with_one_critique(run):
    check_resumed_decisions(run)
