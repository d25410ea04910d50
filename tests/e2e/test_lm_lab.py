"""``arew lm-lab``'s whole chain at toy size, through verl's real ``main_ppo``: two warm starts built (the competent one
3 SFT steps from random weights, the locked one 2 more from it), calibrated (2 validation episodes each), one GRPO
as+bt run of 2 steps from the locked one with W&B offline, the outputs, and a rerun that resumes instead of training
again. About 2 minutes on 2 cores."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from arew.lab.export import METRIC_KEYS
from arew.lab.lm.experiment import LMLab, run, run_folder
from arew.lab.lm.warm_start import WarmStart
from arew.verl_plugin.smoke import SmokeRun

pytestmark = pytest.mark.e2e

TOY_COMPETENT = WarmStart(inform=1.0, update=1.0, episodes=4, sft_steps=3, batch_size=2, hidden_size=64, layers=1, heads=1, kv_heads=1, vocab_size=400)
TOY = LMLab(
    warm_start=replace(TOY_COMPETENT, inform=0.2, update=0.2, sft_steps=2, base=TOY_COMPETENT),
    variants=("as_bt",), seeds=(0,), steps=2, prompts_per_step=2, rollouts_per_prompt=2,
    max_tokens_per_turn=16, response_length=512, calibration_episodes=2, rollout="hf",
)  # fmt: skip


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    out = tmp_path_factory.mktemp("lm-lab")
    return out, run(TOY, out, wandb=True)


def test_the_run_trains_the_locked_warm_start_and_logs_what_the_dashboards_plot(chain):
    out, _ = chain
    folder = run_folder(out, "grpo", "as_bt", 0)
    command = (folder / "command.txt").read_text()
    assert f"actor_rollout_ref.model.path={out / 'models'}/{TOY.warm_start.name}-" in command
    history = SmokeRun(folder, 0).history()
    assert [step["training/global_step"] for step in history] == [1, 2]
    for metric in ("reward", "as_proxy", "bt_proxy", "i_as_nats"):
        assert all(METRIC_KEYS[metric] in step for step in history), metric
    assert all(key in history[0] for key in ("timing_s/gen", "timing_s/update_actor", "arew/as/pos", "arew/bt/neg"))
    assert list(folder.glob("wandb/offline-run-*")), "no W&B offline run"


def test_the_outputs(chain):
    out, results = chain
    table = results.read_text()
    assert "| grpo as_bt | 1 | 2 | 1 |" in table
    calibration = (out / "calibration.md").read_text()
    assert "| locked |" in calibration and "| competent |" in calibration
    figures = json.loads((out / "calibration" / "locked" / "calibration.json").read_text())["figures"]
    assert figures["reward"]["n"] == 2 and "as_proxy" in figures and "i_as_nats" in figures
    assert "| generation |" in (out / "timing.md").read_text()
    assert (out / "curves.png").stat().st_size > 10_000 and (out / "report.html").is_file()
    settings = json.loads((out / "results.json").read_text())["settings"]
    assert settings["lab"]["steps"] == 2


def test_a_rerun_reads_the_finished_runs_instead_of_training_again(chain):
    out, _ = chain
    log = run_folder(out, "grpo", "as_bt", 0) / "main_ppo.log"
    before = log.stat().st_mtime_ns
    messages = []
    run(TOY, out, log=messages.append)
    assert log.stat().st_mtime_ns == before
    assert not any("SFT" in message for message in messages)  # the warm starts came from the cache
