"""verl's own vLLM rollout (vLLM's CPU build) inside real ``main_ppo``: ``arew smoke --rollout vllm``.

The engine a GPU user trains with, not a stand-in: verl's ``vLLMReplica`` and ``vLLMHttpServer``,
weights synced from the FSDP actor through verl's shared-memory buckets after every update, AReW's
advantage stage and metrics, a checkpoint and a resume. The learning rate is large (0.05) so that a
sync that silently kept old weights would show in the rollout/actor log-prob agreement.
"""

from __future__ import annotations

import shutil
import threading
import time

import psutil
import pytest

from arew.engines.tiny_models import build_chat_tokenizer, build_scripted_model
from arew.verl_plugin import smoke
from smoke_runs import TIMEOUT, run_smoke

pytestmark = pytest.mark.vllm

LARGE_LR = "actor_rollout_ref.actor.optim.lr=0.05"


def _run(folder, *overrides, **kwargs) -> smoke.SmokeRun:
    return run_smoke(folder, *overrides, rollout="vllm", **kwargs)


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("vllm_rollout")


@pytest.fixture(scope="module")
def grpo(runs_dir):
    return _run(runs_dir / "grpo", LARGE_LR, "trainer.save_freq=1")


def test_verl_vllm_rollout_trains_grpo_with_arew(grpo):
    assert [s["step"] for s in grpo.steps] == [1, 2]
    command = (grpo.folder / "command.txt").read_text()
    assert "+backend=cpu_vllm" in command
    log = grpo.log_path.read_text()
    assert "vLLMHttpServer" in log  # verl's vLLM server actor generated, not the hf sampler
    for step in grpo.steps:
        for key in ("arew/as/pos", "arew/bt/neg", "arew/abs_coef_per_token", "episode/decisions/mean", "timing_s/update_weights"):
            assert key in step, key
        assert step["arew/both_signs_frac"] > 0 and step["actor/grad_norm"] > 0
        assert step["episode/failed/count"] == 0 and step["arew/records_dropped"] == 0


def test_rollout_log_probs_follow_the_actor_on_every_step(grpo):
    """vLLM starts on dummy weights: agreement at step 1 proves the first sync, at step 2 the one after a large update."""
    for step in grpo.steps:
        assert step["training/rollout_actor_probs_pearson_corr"] > 0.99, step["step"]
        assert step["rollout_corr/log_ppl_abs_diff"] < 0.05, step["step"]
    first, second = (step["rollout_corr/rollout_ppl"] for step in grpo.steps)
    assert second < 0.9 * first  # the update moved the policy, and the rollout's perplexity moved with it


def test_resume_loads_the_checkpoint_into_the_vllm_engine(grpo, runs_dir):
    """Resumed at step 2 from step 1's checkpoint (base model path unchanged): the engine must generate with the
    checkpoint's weights, so its perplexity is the trained policy's, not the base model's."""
    folder = runs_dir / "resumed"
    (folder / "checkpoints").mkdir(parents=True)
    shutil.copytree(grpo.folder / "checkpoints" / "global_step_1", folder / "checkpoints" / "global_step_1")
    (folder / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("1")
    resumed = _run(folder, LARGE_LR, "trainer.resume_mode=auto", model=grpo.folder / "model")
    assert [s["step"] for s in resumed.steps] == [2]
    [step] = resumed.steps
    assert step["training/rollout_actor_probs_pearson_corr"] > 0.99
    base, trained = (s["rollout_corr/rollout_ppl"] for s in grpo.steps)
    assert abs(step["rollout_corr/rollout_ppl"] - trained) < abs(step["rollout_corr/rollout_ppl"] - base)


def _engine_processes() -> list[psutil.Process]:
    """vLLM's engine-core processes among this test's descendants (vLLM titles them VLLM::EngineCore)."""
    found = []
    for process in psutil.Process().children(recursive=True):
        try:
            if "EngineCore" in " ".join(process.cmdline()) or "EngineCore" in process.name():
                found.append(process)
        except psutil.NoSuchProcess:
            continue
    return found


def test_an_engine_that_dies_mid_run_ends_the_run_with_an_error_naming_it(runs_dir):
    """SIGKILL vLLM's engine core after step 1: step 2's generation (or a sync) meets a dead engine, and the run must
    end with an error that names it within the sync timeout plus margin, instead of waiting on its socket."""
    folder = runs_dir / "engine_killed"
    outcome = {}
    run = threading.Thread(
        target=lambda: outcome.update(result=smoke.run(out=folder, steps=3, timeout=TIMEOUT, rollout="vllm",
                                                       overrides=["actor_rollout_ref.rollout.custom.weight_sync_timeout=30"])),
        daemon=True,
    )  # fmt: skip
    run.start()
    deadline = time.monotonic() + TIMEOUT
    while run.is_alive() and time.monotonic() < deadline:
        steps, _ = smoke.read_metrics(folder / "metrics.jsonl")
        if steps:
            break
        time.sleep(0.5)
    engines = _engine_processes()
    assert steps and engines, "step 1 did not finish with a vLLM engine running"
    for engine in engines:
        engine.kill()
    killed = time.monotonic()
    run.join(timeout=TIMEOUT)
    result = outcome["result"]
    assert result.returncode != 0 and len(result.steps) < 3
    assert time.monotonic() - killed < 240  # bounded: the sync timeout (30 s) or the failed episodes end it, not a hang
    log = result.log_path.read_text()
    assert "EngineDeadError" in log or "did not take a weight bucket" in log, log[-4000:]


def _scripted(folder, reply: str):
    """A model that writes ``reply`` to every chat turn (arew.engines.tiny_models), saved as a Hugging Face folder."""
    tokenizer = build_chat_tokenizer(extra_text=[reply] * 50)
    build_scripted_model(tokenizer, reply).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_the_gpu_recipes_layout_vllm_rollout_and_a_vllm_patient_started_by_the_ray_service(runs_dir, mediq_source):
    """MediQ as the GPU recipe runs it: the policy on verl's vLLM rollout, the patient on a vLLM server that the
    Ray user service starts with its default command on the cluster's second logical GPU, stopped with the run."""
    folder = runs_dir / "layout"
    agent = _scripted(folder / "agent", "<interact>Do you have a fever?</interact>")  # asks every turn: the patient is called
    patient = _scripted(folder / "patient", "FACTS: NONE")  # a valid patient answer, whatever the facts
    result = _run(
        folder, "data.max_prompt_length=4096", "arew_agent.env_options.user=llm",
        "arew_user_service.mode=ray", f"arew_user_service.model={patient}", "ray_kwargs.ray_init.num_gpus=2",
        "arew_user_service.extra_args='--dtype float32 --enforce-eager --max-model-len 8192'",
        task="mediq", steps=1, source=str(mediq_source), model=agent,
    )  # fmt: skip
    [step] = result.steps
    assert step["user_service/replicas_up"] == 1 and step["user_service/restarts"] == 0
    assert step["episode/proxy_user_requests/mean"] > 0 and step["episode/proxy_user_fallbacks/mean"] == 0
    assert step["episode/proxy_user_parse_failures/mean"] == 0 and step["episode/failed/count"] == 0
    log = result.log_path.read_text()
    assert "vLLMHttpServer" in log  # the policy's rollout
    assert f"arew_user_service: 1 replica(s) of {patient} healthy at" in log
    assert not _processes_serving(patient)  # the service stopped its vLLM server with the run


def _processes_serving(model) -> list[psutil.Process]:
    """Processes of this machine running an OpenAI server for ``model`` (the user service's default command)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        command = " ".join(process.info["cmdline"] or ())
        if "vllm.entrypoints.openai.api_server" in command and str(model) in command:
            found.append(process)
    return found
