"""Each task family through verl's real ``main_ppo`` on the CPU backend: MediQ with the offline patient (trained with
GSPO), MediQ's failure handling (episodes that raise, a user server that never answers), tau2 solo and dual. One
``main_ppo`` run each, about a minute (PE's runs are tests/e2e/test_main_ppo.py's)."""

from __future__ import annotations

import socket
import threading
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest

from arew.engines.tiny_models import build_chat_tokenizer, build_scripted_model
from arew.reporting import panels
from arew.verl_plugin import smoke
from smoke_runs import run_smoke

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("e2e")


def test_gspo_trains_mediq_with_the_offline_patient(runs_dir, mediq_source):
    """GSPO (verl's gspo policy loss over arew_grpo) on MediQ, two steps: the algorithm and the task share one run,
    each checked as on its own (GRPO's run is tests/e2e/test_main_ppo.py's, PPO's tests/e2e/test_algorithms.py's)."""
    result = run_smoke(
        runs_dir / "gspo-mediq", "arew_agent.env_options.user=offline", "data.max_prompt_length=4096",
        task="mediq", algo="gspo", steps=2, source=str(mediq_source),
    )  # fmt: skip
    assert [s["step"] for s in result.steps] == [1, 2]
    assert "algo=gspo" in (result.folder / "command.txt").read_text()
    assert "'loss_mode': 'gspo'" in result.log_path.read_text()  # verl's config as the trainer printed it
    for step in result.steps:
        assert step["arew/decisions"] > 0 and step["arew/both_signs_frac"] > 0 and step["actor/grad_norm"] > 0
        assert "episode/decisions/mean" in step
        assert "episode/proxy_fact_coverage/mean" in step and step["episode/counterfactual_generations/mean"] >= 0
        assert panels.missing_keys(step, needs=("always", "choice")) == []  # a choice task backs its dashboard panels


@contextmanager
def _hung_server():
    """A loopback server that accepts every connection and never replies (the worst user server)."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stop.set()
        thread.join()
        for connection in held:
            connection.close()
        listener.close()


def _corrupt(parquet: Path, every: int) -> int:
    """Give every ``every``-th row a gold index MediQ rejects when the episode is built; returns how many."""
    frame = pd.read_parquet(parquet)
    rows = list(range(0, len(frame), every))
    infos = list(frame["extra_info"])
    for row in rows:
        infos[row] = {**infos[row], "answer_idx": 7}
    frame["extra_info"] = infos
    frame.to_parquet(parquet)
    return len(rows)


def test_failing_episodes_and_a_hung_user_server_cost_no_step(runs_dir, mediq_source):
    """Episodes that raise become masked samples counted by reason; a user server that never replies
    opens the circuit after two timeouts, and the rest of the run falls back without trying it.
    The agent asks one question in every turn (a scripted model), so the user is called."""
    folder = runs_dir / "faults"
    question = "<interact>Do you have a fever?</interact>"
    tokenizer = build_chat_tokenizer(extra_text=[question] * 50)
    build_scripted_model(tokenizer, question).save_pretrained(folder / "scripted")
    tokenizer.save_pretrained(folder / "scripted")
    source = mediq_source
    smoke.prepare_data("mediq", folder / "data", str(source))
    assert _corrupt(folder / "data" / "mediq" / "train.parquet", every=4) == 8
    assert _corrupt(folder / "data" / "mediq" / "validation.parquet", every=2) == 2
    with _hung_server() as url:
        options = ["arew_agent.env_options.user=llm", f"arew_agent.env_options.user_url={url}"] + [
            f"+arew_agent.env_options.{key}={value}"  # not in the task's config: appended
            for key, value in {"user_timeout": 1, "user_max_retries": 0, "user_breaker_failures": 2, "user_breaker_cooldown": 600}.items()
        ]  # fmt: skip
        result = run_smoke(
            folder, *options, "arew_agent.max_failed_share=0.9", "data.max_prompt_length=4096",
            "trainer.val_before_train=true", task="mediq", source=str(source), model=folder / "scripted",
        )  # fmt: skip
    log = result.log_path.read_text()
    assert [s["step"] for s in result.steps] == [1, 2]
    failed = sum(step["episode/failed/setup"] for step in result.steps)
    assert failed > 0 and failed == sum(step["episode/failed/count"] for step in result.steps)
    for step in result.steps:
        assert step["episode/failed/count"] < 8 and step["arew/decisions"] > 0  # the survivors carry critiques
        for reason in ("generation", "environment", "result", "deadline"):
            assert step[f"episode/failed/{reason}"] == 0
        assert step["episode/failed/mean"] == pytest.approx(step["episode/failed/count"] / 8)
        # validation's timeouts opened the circuit: every answer falls back to the offline patient, no request is made
        assert step["episode/proxy_user_calls/mean"] > 0 and step["episode/proxy_user_requests/mean"] == 0, step
        assert step["episode/proxy_user_fallbacks/mean"] == step["episode/proxy_user_calls/mean"]
        assert step["episode/proxy_user_short_circuits/mean"] > 0
    validation = result.validation
    assert validation["val-aux/arew/mediq/failed/mean@1"] == 0.5
    assert validation["val-aux/arew/mediq/proxy_user_timeouts/mean@1"] > 0
    assert log.count("failed in setup (ValueError: MediQ needs four options") == 1  # logged once, counted always
    assert "Traceback" in log


def _scripted_for(task: str, folder: Path, reply: str) -> Path:
    """A model that writes ``reply`` every turn, its tokenizer trained on the task's prompt (as arew smoke's tiny model is)."""
    smoke.prepare_data(task, folder / "data", None)
    corpus = [*smoke.prompt_text(task, folder / "data"), *[reply] * 50]
    tokenizer = build_chat_tokenizer(extra_text=corpus, vocab_size=smoke.PROMPT_TRAINED_TOKENIZER[task])
    build_scripted_model(tokenizer, reply).save_pretrained(folder / "scripted")
    tokenizer.save_pretrained(folder / "scripted")
    return folder / "scripted"


TAU2_SIZES = ("arew_agent.max_tokens_per_turn=48", "data.max_response_length=1024", "algorithm.arew.noise.neg_to_pos_prob=0.0")


def test_tau2_solo_trains_on_the_telecom_environment(runs_dir):
    """tau2-solo through the real trainer: every turn toggles roaming (an expected action of 14 of the 32
    training tasks: +1 there), toggles it back (0 here: ``critique_undone_repair`` is switched off so that the
    rules leave 0s) and then repeats a call from a state seen before (-1), so the critiques have both signs
    without noise; tau2's tools run and the reward comes from the environment. The mined interface contracts
    (critique source ``contracts``, ``combine=fill``) give -1 where the rules gave 0.
    (A bigram model can only write a reply without a token repeated before its end: one underscore, no arguments.)"""
    folder = runs_dir / "tau2-solo"
    model = _scripted_for("tau2-solo", folder, '<interact> {"name": "toggle_roaming"}</interact>')
    contracts = ("arew_agent.critiques.source=contracts", "arew_agent.critiques.combine=fill",  # the mined contracts fill the rules' 0s
                 "+arew_agent.env_options.critique_undone_repair=false")  # fmt: skip
    result = run_smoke(folder, *TAU2_SIZES, *contracts, task="tau2-solo", model=model)
    assert [s["step"] for s in result.steps] == [1, 2]
    for step in result.steps:
        assert step["episode/proxy_tool_calls/mean"] > 2 and step["episode/proxy_tool_errors/mean"] == 0
        # the budget runs out first: asked for its final answer, the model calls the tool again (invalid as an answer)
        assert step["episode/forced_answer/mean"] == 1 and step["episode/proxy_invalid/mean"] == 1
        assert step["episode/proxy_repeats/mean"] > 0
        assert step["arew/as/neg"] > 0 and step["arew/bt/pos"] + step["arew/bt/neg"] == 0
        # no episode stops, so every reward is 0 and the advantages are AReW's alone (step_abs_sum's neutral
        # stand-ins reweight all-negative trajectories too); the scripted model's saturated logits give no gradient
        assert step["critic/score/mean"] == 0 and step["critic/advantages/max"] > 0 > step["critic/advantages/min"]
        assert step["episode/proxy_ended_max_turns/mean"] + step["episode/proxy_ended_agent_stop/mean"] == 1.0
    assert sum(step["episode/proxy_expected_actions_matched/mean"] for step in result.steps) > 0
    assert sum(step["arew/both_signs_frac"] for step in result.steps) > 0
    for step in result.steps:  # every toggle_roaming skips its diagnosis (check_network_status): a broken precondition
        as_decisions = sum(step[f"arew/source/rules/as/{word}"] for word in ("pos", "zero", "neg"))
        assert step["arew/source/contracts/as/neg"] == as_decisions > 0 and step["arew/source/contracts/as/pos"] == 0
        assert step["arew/as/zero"] == 0 < step["arew/source/rules/as/zero"]  # fill: each rule 0 became the contract's -1
        assert step["arew/as/pos"] == step["arew/source/rules/as/pos"] and step["episode/critique_changed/mean"] > 0


def test_tau2_dual_trains_with_the_offline_customer(runs_dir):
    """tau2-dual through the real trainer: every turn asks the offline customer to switch roaming; the first
    request brings the customer's news (+1), the repeats bring none (-1); the customer runs phone tools.
    The recipe's KL loss brings in the reference policy (on the CPU: FSDP2 offload without pinned memory)."""
    folder = runs_dir / "tau2-dual"
    model = _scripted_for("tau2-dual", folder, "<interact> Please switch roaming.</interact>")
    result = run_smoke(folder, *TAU2_SIZES, "arew_agent.env_options.customer=offline", task="tau2-dual", model=model, steps=1)
    step = result.steps[0]
    assert step["episode/proxy_messages/mean"] > 2 and step["episode/proxy_customer_calls/mean"] == step["episode/proxy_messages/mean"]
    assert step["episode/proxy_customer_fallbacks/mean"] == 0 and step["episode/proxy_tool_calls/mean"] == 0
    assert step["episode/proxy_info_reveals/mean"] > 0 and step["episode/proxy_repeats/mean"] > 0
    assert step["arew/as/pos"] > 0 and step["arew/as/neg"] > 0 and step["arew/both_signs_frac"] > 0
    assert step["critic/advantages/max"] > 0 > step["critic/advantages/min"] and "actor/kl_loss" in step  # the recipe's KL loss
