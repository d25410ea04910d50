"""verl's real ``main_ppo`` on the CPU backend (``arew smoke``): rollout, reward, AReW advantages,
actor/critic update, weight sync, validation, checkpoint and resume, each checked in what the run
wrote (verl's file logger, the advantage dumps, the checkpoints).

Every run starts Ray and verl's workers (about a minute) and trains a tiny random Qwen2 for one or
two steps. Runs share a module-scoped fixture where several checks read the same run.
"""

from __future__ import annotations

import json
import math
import shutil
import socket
import threading
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from arew import smoke
from arew.core import collect_segments, parse_config, reweight_advantages
from arew.core.quality import adaptive_factor
from arew.metrics.rollouts import sample_indices
from arew.reporting import panels
from arew.tiny_models import build_chat_tokenizer, build_scripted_model

pytestmark = pytest.mark.e2e

DETERMINISTIC = (
    "actor_rollout_ref.rollout.full_determinism=true",  # stable request ids reach the hf server: runs replay
    "algorithm.arew.noise.seed=3",
)
TIMEOUT = 900


def _run(folder, *overrides, **kwargs) -> smoke.SmokeRun:
    result = smoke.run(out=folder, overrides=list(overrides), timeout=TIMEOUT, **kwargs)
    assert result.returncode == 0, f"main_ppo failed, log tail:\n{result.log_path.read_text()[-6000:]}"
    return result


def _dump(result: smoke.SmokeRun, step: int) -> dict:
    """One step's advantage dump, in the trainer's batch order (the critique noise is drawn in that order)."""
    return torch.load(result.folder / "dumps" / f"advantages_step{step}.pt", weights_only=False)


def _by_episode(dump: dict, order: list[str]) -> dict:
    """The dump's samples rearranged into ``order`` of episode names (verl's sample keys are random uids)."""
    where = {name: i for i, name in enumerate(dump["episodes"])}
    assert sorted(where) == sorted(order)
    return {name: [dump[name][where[e]] for e in order] for name in ("advantages", "response_mask", "records")}


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("e2e")


ROLLOUTS_PER_STEP = 6  # of the step's 8 episodes: a sample, not all of them
GRPO_GROUP = "e2e-grpo-as_bt"  # the W&B run group the grpo run records for arew report


@pytest.fixture(scope="module")
def grpo(runs_dir):
    """GRPO as+bt: validation first, a large learning rate (so a missed sync would show), checkpoints every step,
    W&B offline in the run folder (for the rollout tables)."""
    (runs_dir / "grpo" / "wandb").mkdir(parents=True)
    return _run(
        runs_dir / "grpo",
        *DETERMINISTIC,
        "actor_rollout_ref.actor.optim.lr=0.05",
        "trainer.val_before_train=true",
        "trainer.save_freq=1",
        "actor_rollout_ref.actor.checkpoint.save_contents=[model,optimizer,extra,hf_model]",
        f"algorithm.arew.dump_dir={runs_dir / 'grpo' / 'dumps'}",
        "trainer.logger=[console,file,wandb]",
        f"arew_rollouts.per_step={ROLLOUTS_PER_STEP}",
        env={"WANDB_MODE": "offline", "WANDB_DIR": str(runs_dir / "grpo" / "wandb"), "WANDB_SILENT": "true",
             "WANDB_RUN_GROUP": GRPO_GROUP},  # fmt: skip
    )


@pytest.fixture(scope="module")
def vanilla(grpo, runs_dir):
    """The grpo run's first step without critiques: same seed and model, so the same rollouts with verl's own advantages."""
    return _run(
        runs_dir / "vanilla",
        *DETERMINISTIC,
        f"algorithm.arew.dump_dir={runs_dir / 'vanilla' / 'dumps'}",
        variant="vanilla",
        steps=1,
        model=grpo.folder / "model",
    )


def test_grpo_steps_log_arew_and_episode_metrics(grpo):
    assert [s["step"] for s in grpo.steps] == [1, 2]
    for step in grpo.steps:
        for key in ("arew/as/pos", "arew/bt/neg", "arew/both_signs_frac", "arew/abs_coef_per_token",
                    "episode/decisions/mean", "episode/proxy_i_as_nats/mean", "episode/response_tokens/mean"):  # fmt: skip
            assert key in step, key
        assert step["arew/both_signs_frac"] > 0 and step["actor/grad_norm"] > 0
        assert step["arew/records_dropped"] == 0 and step["arew/samples_without_records"] == 0
        # SynAct's monitor is on by default: the n=2 rollouts of each of the 4 prompts share their first state
        assert step["arew/synact/as/decision_points"] >= 4 and step["arew/synact/keys_dropped"] == 0
        assert 0 <= step["arew/synact/as/outcome_constant_share"] <= 1 and step["arew/synact/as/mi"] >= 0
        assert 0 <= step["arew/synact/as/turn1/outcome_constant_share"] <= 1
        assert "arew/synact/as/critique_pos" not in step  # MI critiques are off by default
        # the crash this backend found: weight versions reach verl's _compute_metrics as ints
        assert step["training/off_policy/trajectory_staleness/max"] == 0
        for ch in ("as", "bt"):  # critique accuracy: only decisions with a critique and a non-zero base advantage count
            decisions = step[f"arew/{ch}/accuracy_decisions"]
            assert 0 <= decisions <= step[f"arew/{ch}/pos"] + step[f"arew/{ch}/neg"]
            assert step[f"arew/{ch}/near_chance_steps"] >= 0 and step[f"arew/{ch}/below_chance_steps"] >= 0
            if step["critic/score/max"] == step["critic/score/min"]:  # one reward for all: GRPO's advantages are 0
                assert decisions == 0
            assert (step[f"arew/{ch}/accuracy"] is None) == (decisions == 0)  # NaN (null in the file): nothing scored
            if decisions > 0:
                assert 0 <= step[f"arew/{ch}/accuracy"] <= 1 and 0 <= step[f"arew/{ch}/accuracy_ema"] <= 1
            assert f"arew/{ch}/adaptive_factor" not in step  # adaptive is off by default


def test_validation_logs_per_data_source(grpo):
    assert grpo.validation["step"] == 0
    assert "val-core/arew/pe-g-s2/reward/mean@1" in grpo.validation
    assert any(key.startswith("val-aux/arew/pe-g-s2/proxy_i_as_nats") for key in grpo.validation)


def test_rollout_follows_the_actor_weights(grpo):
    """After a large update the rollout's log-probs still match the actor's: the weights were synced."""
    step2 = grpo.steps[1]
    assert step2["training/rollout_actor_probs_pearson_corr"] > 0.99
    assert step2["rollout_corr/log_ppl_abs_diff"] < 0.05


def test_actor_weights_change(grpo):
    before = load_file(grpo.folder / "model" / "model.safetensors")
    after = load_file(grpo.folder / "checkpoints" / "global_step_2" / "actor" / "huggingface" / "model.safetensors")
    assert before.keys() == after.keys()
    changed = [name for name in before if not torch.equal(before[name].float(), after[name].float())]
    assert len(changed) > len(before) // 2


def test_advantages_differ_from_vanilla_exactly_where_the_records_say(grpo, vanilla):
    """Same seed, same rollouts: AReW's step-1 advantages are verl's plus the critique coefficients."""
    ours = _dump(grpo, 1)
    theirs = _by_episode(_dump(vanilla, 1), ours["episodes"])
    assert ours["records"] == theirs["records"]  # same seed: the same episodes, turn for turn
    lengths = torch.tensor([len(m) for m in ours["response_mask"]])
    width = int(lengths.max())
    pad = lambda rows: torch.stack([torch.nn.functional.pad(r.float(), (0, width - len(r))) for r in rows])  # noqa: E731
    mask, base, reweighted = pad(ours["response_mask"]), pad(theirs["advantages"]), pad(ours["advantages"])
    config = parse_config({"channels": "as+bt", "weighting": "minority_fixed", "lam": 0.2, "noise": {"neg_to_pos_prob": 0.5, "seed": 3}})
    segments = collect_segments(ours["records"], lengths, noise_keys=ours["episodes"])
    expected, _ = reweight_advantages(base, mask, segments, config, step=1)
    assert torch.allclose(reweighted, expected, atol=1e-6)
    changed = (reweighted - base).abs() > 1e-9
    assert changed.any()
    inside = torch.zeros_like(changed)
    for row, record in enumerate(ours["records"]):
        for start, end in zip(record["start"], record["end"]):
            inside[row, start:end] = True
    assert not (changed & ~inside).any()  # nothing moves outside a recorded decision


def test_synact_fill_changes_the_advantages_only_where_it_placed_critiques(grpo, runs_dir):
    """The grpo run's step 1 again (same model and seed: the same episodes) with the MI critiques filling the rule's zeros.

    What this run can show: the keys travel from the agent loop to the estimator, the monitor and the
    critique counts are logged, and the advantages change exactly where MI critiques went. What it cannot:
    the tiny random model never writes a valid answer, so every reward is 0, every decision point is
    outcome-constant and fill places nothing (tests/verl/test_trainer_stage.py checks separating points
    through the same stage, tests/core/test_synact.py the numbers).
    """
    folder = runs_dir / "synact"
    result = _run(
        folder, *DETERMINISTIC, "algorithm.arew.synact.critiques=fill", f"algorithm.arew.dump_dir={folder / 'dumps'}",
        steps=1, model=grpo.folder / "model",
    )  # fmt: skip
    step = result.steps[0]
    assert panels.missing_keys(step, needs=("synact_critiques",)) == []  # the dashboard's MI-critique panel
    placed = sum(step[f"arew/synact/{ch}/critique_{sign}"] for ch in ("as", "bt") for sign in ("pos", "neg"))
    assert step["arew/synact/as/decision_points"] >= 4
    ours = _dump(result, 1)
    theirs = _by_episode(_dump(grpo, 1), ours["episodes"])
    assert ours["records"] == theirs["records"]  # the same episodes, turn for turn
    keys = ours["decision_keys"]
    assert all(len(k["state"]) == len(r["start"]) for k, r in zip(keys, ours["records"]))
    changed_rows = [not torch.equal(a, b) for a, b in zip(ours["advantages"], theirs["advantages"])]
    if step["critic/score/max"] == step["critic/score/min"]:  # the random model: no outcome varies in any group
        assert placed == 0 and step["arew/synact/as/outcome_constant_share"] == 1.0
        assert not any(changed_rows)  # fill placed nothing, so nothing moved
    else:  # outcomes varied: where MI critiques went the advantages moved, and only inside decisions
        assert placed == 0 or any(changed_rows)
        for advantage, other, record in zip(ours["advantages"], theirs["advantages"], ours["records"]):
            inside = torch.zeros(len(advantage), dtype=torch.bool)
            for start, end in zip(record["start"], record["end"]):
                inside[start:end] = True
            assert torch.equal(advantage[~inside], other[~inside])


def test_resume_continues_with_the_same_schedule_and_noise(grpo, runs_dir):
    folder = runs_dir / "resumed"
    (folder / "checkpoints").mkdir(parents=True)
    shutil.copytree(grpo.folder / "checkpoints" / "global_step_1", folder / "checkpoints" / "global_step_1")
    (folder / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("1")
    resumed = _run(
        folder,
        *DETERMINISTIC,
        "actor_rollout_ref.actor.optim.lr=0.05",
        "trainer.resume_mode=auto",
        f"algorithm.arew.dump_dir={folder / 'dumps'}",
        model=grpo.folder / "model",
    )
    assert [s["step"] for s in resumed.steps] == [2]
    assert not (folder / "dumps" / "advantages_step1.pt").exists()
    ours = _dump(resumed, 2)
    theirs = _by_episode(_dump(grpo, 2), ours["episodes"])
    assert ours["records"] == theirs["records"]
    for a, b in zip(ours["advantages"], theirs["advantages"]):
        assert torch.allclose(a, b, atol=1e-6)
    for key in ("arew/as/pos", "arew/as/neg", "arew/bt/pos", "arew/bt/neg", "arew/strength_factor", "arew/abs_coef_per_token"):
        assert resumed.steps[0][key] == pytest.approx(grpo.steps[1][key]), key


def test_gspo_trains_two_steps(runs_dir):
    """GSPO (verl's gspo policy loss over arew_grpo); PPO's two steps are the adaptive-strength test's run below."""
    result = _run(runs_dir / "gspo", algo="gspo")
    assert [s["step"] for s in result.steps] == [1, 2]
    for step in result.steps:
        assert step["arew/both_signs_frac"] > 0 and step["actor/grad_norm"] > 0 and "episode/decisions/mean" in step
    assert "algo=gspo" in (result.folder / "command.txt").read_text()


@pytest.mark.parametrize("algo", ["gigpo", "turn_gae", "turn_grpo"])
def test_credit_baselines_train_under_arew_through_main_ppo(algo, runs_dir):
    """Each turn-level baseline of arew.core.credit as AReW's base in a real step: its statistics logged, the actor
    (and for turn-level GAE the critic) trained, the critiques reweighted on top."""
    result = _run(runs_dir / algo, algo=algo, steps=1)
    (step,) = result.steps
    assert step["actor/grad_norm"] > 0 and step["arew/both_signs_frac"] > 0
    prefix = f"arew/credit/{algo}/"
    assert [key for key in step if key.startswith(prefix)]
    if algo == "gigpo":  # a prompt's rollouts start from one state: their first decisions form a step group
        assert step[prefix + "step_group_share"] > 0
    if algo == "turn_gae":
        assert "critic/vf_loss" in step and step[prefix + "samples_without_decisions"] == 0
    if algo == "turn_grpo":  # the tiny model's turns all earn -1 (the flips that give AReW both signs come later,
        # in its transforms): every decision is labelled and a constant label normalises to a zero turn term
        assert step[prefix + "labelled_share"] == 1.0 and step[prefix + "abs_turn_term"] == 0.0


def _increment_accuracy(dump: dict, rows: list[dict]) -> dict[str, tuple[float, bool]]:
    """Each channel's class-balanced accuracy recomputed from a step's dump and rollout rows: the base GAE advantages
    are the dumped ones minus each decision's coefficient, and each decision is scored against its own increment;
    NaN for a channel with under 5% (the default quality.min_class_share) of one critique sign or of one increment
    sign. The flag says whether increments within rounding of 0 could move the channel across that 5% line (the
    recomputation rounds differently from the trainer), where either reading is right."""
    sums = {ch: {1: [0.0, 0.0, 0, 0], -1: [0.0, 0.0, 0, 0]} for ch in ("as", "bt")}  # agreeing |a|, |a|, decisions, a > 0
    tiny = {"as": 0, "bt": 0}
    for row in rows:
        i = dump["episodes"].index(row["episode"])
        record, mask = dump["records"][i], dump["response_mask"][i].bool()
        base = dump["advantages"][i].double().clone()
        firsts = []
        for turn, start, end in zip(row["turns"], record["start"], record["end"]):
            base[start:end][mask[start:end]] -= turn["coefficient"]
            model = torch.nonzero(mask[start:end]).flatten()
            firsts.append(start + int(model[0]) if len(model) else None)
        placed = [f for f in firsts if f is not None]
        for turn, first in zip(row["turns"], firsts):
            if first is None or turn["applied"] == 0:
                continue
            later = placed[placed.index(first) + 1 :]
            increment = float(base[first] - (base[later[0]] if later else 0.0))
            tiny[turn["channel"]] += abs(increment) < 1e-5
            if increment != 0:
                sign = sums[turn["channel"]][1 if turn["applied"] > 0 else -1]
                sign[0] += abs(increment) * ((increment > 0) == (turn["applied"] > 0))
                sign[1] += abs(increment)
                sign[2] += 1
                sign[3] += increment > 0
    accuracy = {}
    for ch, signs in sums.items():
        (agree_pos, total_pos, n_pos, up_pos), (agree_neg, total_neg, n_neg, up_neg) = signs[1], signs[-1]
        n, up = n_pos + n_neg, up_pos + up_neg
        margin = min(n_pos, n_neg, up, n - up) - 0.05 * n
        one_sided = total_pos == 0 or total_neg == 0 or margin < 0
        value = math.nan if one_sided else 0.5 * (agree_pos / total_pos + agree_neg / total_neg)
        accuracy[ch] = (value, abs(margin) <= tiny[ch])
    return accuracy


def _nan_for_none(value):
    """The metrics file writes a NaN metric (no estimate that step) as null."""
    return math.nan if value is None else value


def test_adaptive_strength_follows_the_logged_accuracy_after_its_warm_up(runs_dir):
    """PPO, two steps with the adaptive strength on and a one-step warm-up (the suite's PPO end-to-end run: the critic
    trains beside the actor). Step 1 keeps the full strength; its logged
    accuracy is each critique scored against its decision's own share of verl's GAE advantage (direction auto),
    recomputed here from what the trainer dumped; step 2 takes the rule's factor."""
    folder = runs_dir / "adaptive"
    result = _run(
        folder, *DETERMINISTIC, "algorithm.arew.adaptive.enabled=true", "algorithm.arew.adaptive.full_at=0.9",
        "algorithm.arew.adaptive.warmup_steps=1", f"algorithm.arew.dump_dir={folder / 'dumps'}", "arew_rollouts.per_step=64",
        algo="ppo", steps=2,
    )  # fmt: skip
    first, second = result.steps
    for step in result.steps:  # PPO's two steps: the critic trains beside the actor, the critiques reweight
        assert step["arew/both_signs_frac"] > 0 and step["actor/grad_norm"] > 0 and "episode/decisions/mean" in step
        assert "critic/vf_loss" in step and "timing_s/update_critic" in step
    rows = [row for row in _rollouts(result, "train") if row["step"] == 1]
    assert len(rows) == len(_dump(result, 1)["episodes"])  # every episode of the step has its row
    recomputed = _increment_accuracy(_dump(result, 1), rows)
    for ch in ("as", "bt"):
        assert first[f"arew/{ch}/accuracy_decisions"] > 0
        accuracy, smoothed = (_nan_for_none(first[f"arew/{ch}/{key}"]) for key in ("accuracy", "accuracy_ema"))
        value, at_the_line = recomputed[ch]
        if not (at_the_line and math.isnan(accuracy) != math.isnan(value)):
            assert accuracy == pytest.approx(value, abs=1e-4, nan_ok=True)
        assert smoothed == pytest.approx(accuracy, nan_ok=True)  # first step: no history
        assert first[f"arew/{ch}/adaptive_factor"] == 1.0  # the warm-up
        # pooled grouping (the default): both channels take the factor of the pooled accuracy, this step's batch included
        pooled = _nan_for_none(second["arew/accuracy_ema"])
        assert second[f"arew/{ch}/adaptive_factor"] == pytest.approx(adaptive_factor(None if math.isnan(pooled) else pooled, 0.9))
    assert panels.missing_keys(second, needs=("adaptive",)) == []


def test_mediq_with_the_offline_patient(runs_dir, mediq_source):
    source = mediq_source
    result = _run(
        runs_dir / "mediq", "arew_agent.env_options.user=offline", "data.max_prompt_length=4096",
        task="mediq", steps=1, source=str(source),
    )  # fmt: skip
    step = result.steps[0]
    assert step["arew/decisions"] > 0 and step["arew/both_signs_frac"] > 0 and step["actor/grad_norm"] > 0
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
        result = _run(
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
    training tasks: +1 there), toggles it back (0) and then repeats a call from a state seen before (-1), so
    the critiques have both signs without noise; tau2's tools run and the reward comes from the environment.
    The mined interface contracts (critique source ``contracts``, ``combine=fill``) give -1 where the rules gave 0.
    (A bigram model can only write a reply without a token repeated before its end: one underscore, no arguments.)"""
    folder = runs_dir / "tau2-solo"
    model = _scripted_for("tau2-solo", folder, '<interact> {"name": "toggle_roaming"}</interact>')
    contracts = ("arew_agent.critiques.source=contracts", "arew_agent.critiques.combine=fill")  # the mined contracts fill the rules' 0s
    result = _run(folder, *TAU2_SIZES, *contracts, task="tau2-solo", model=model)
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
    result = _run(folder, *TAU2_SIZES, "arew_agent.env_options.customer=offline", task="tau2-dual", model=model, steps=1)
    step = result.steps[0]
    assert step["episode/proxy_messages/mean"] > 2 and step["episode/proxy_customer_calls/mean"] == step["episode/proxy_messages/mean"]
    assert step["episode/proxy_customer_fallbacks/mean"] == 0 and step["episode/proxy_tool_calls/mean"] == 0
    assert step["episode/proxy_info_reveals/mean"] > 0 and step["episode/proxy_repeats/mean"] > 0
    assert step["arew/as/pos"] > 0 and step["arew/as/neg"] > 0 and step["arew/both_signs_frac"] > 0
    assert step["critic/advantages/max"] > 0 > step["critic/advantages/min"] and "actor/kl_loss" in step  # the recipe's KL loss


def test_smoke_summary_reports_each_step(grpo):
    text = smoke.summary(grpo)
    assert text.startswith("arew smoke: 2 training steps")
    for needle in ("step 1:", "step 2:", "generation", "weight sync", "critiques as{+", "actor/grad_norm", str(grpo.metrics_path)):
        assert needle in text, needle


def test_dashboard_panels_are_logged_by_a_real_run(grpo):
    """Every key the dashboard plots for this kind of run (PE, GRPO, with validation) is in its metrics file:
    a renamed or dropped metric breaks this test, not an empty chart. Choice-task, lab, adaptive, MI-critique
    and ablation panels are out of scope: this run does none of those."""
    logged = {key for line in grpo.metrics_path.read_text().splitlines() for key in json.loads(line)["data"]}
    missing = panels.missing_keys(logged, needs=("always", "pe", "grpo", "validation"))
    assert missing == [], f"dashboard panel keys this run never logged: {missing}"


def _rollouts(result: smoke.SmokeRun, split: str) -> list[dict]:
    return [json.loads(line) for line in (result.folder / "rollouts" / f"{split}.jsonl").read_text().splitlines()]


ROW_KEYS = {"split", "step", "episode", "task", "data_source", "reward", "failed", "prompt", "numbers", "turns"}
TURN_KEYS = {"index", "turn", "channel", "agent", "feedback", "critique", "applied", "coefficient", "sources", "reason"}


def _check_schema(row: dict, split: str) -> None:
    assert set(row) == ROW_KEYS and row["split"] == split and row["task"] == "pe-g-s2"
    assert row["data_source"] == "arew/pe-g-s2" and row["failed"] is None and 0 < len(row["prompt"]) <= 4000
    assert isinstance(row["reward"], float) and all(isinstance(v, float) for v in row["numbers"].values())
    assert row["numbers"]["decisions"] == len(row["turns"]) > 0 and "proxy_as_mean" in row["numbers"]
    for i, turn in enumerate(row["turns"]):
        assert set(turn) == TURN_KEYS and turn["index"] == i and turn["channel"] in ("as", "bt") and turn["turn"] >= 1
        assert isinstance(turn["agent"], str) and turn["critique"] in (-1, 0, 1)
        assert turn["sources"] is None and turn["reason"] is None  # no critique source in this run
    assert row["turns"][0]["turn"] == 1 and row["turns"][-1]["feedback"] is None  # the final answer gets no reply


def test_train_rollouts_carry_each_decisions_coefficient(grpo, vanilla):
    """Rows of the sampled episodes, each decision with the value AReW added to its tokens: the grpo dump's
    advantages minus the vanilla run's (same rollouts) on that decision's model tokens."""
    rows = _rollouts(grpo, "train")
    assert [row["step"] for row in rows] == [1] * ROLLOUTS_PER_STEP + [2] * ROLLOUTS_PER_STEP
    ours = _dump(grpo, 1)
    theirs = _by_episode(_dump(vanilla, 1), ours["episodes"])
    first = [row for row in rows if row["step"] == 1]
    assert [row["episode"] for row in first] == [ours["episodes"][i] for i in sample_indices(ours["episodes"], 1, ROLLOUTS_PER_STEP)]
    nonzero = 0
    for row in rows:
        _check_schema(row, "train")
    for row in first:
        i = ours["episodes"].index(row["episode"])
        record, mask = ours["records"][i], ours["response_mask"][i].bool()
        added = ours["advantages"][i] - theirs["advantages"][i]
        assert [t["channel"] for t in row["turns"]] == record["channel"] and [t["critique"] for t in row["turns"]] == record["label"]
        for turn, start, end in zip(row["turns"], record["start"], record["end"]):
            model = mask[start:end]
            expected = torch.full((int(model.sum()),), turn["coefficient"])
            torch.testing.assert_close(added[start:end][model], expected, atol=1e-6, rtol=0)
            assert turn["applied"] in (-1, 0, 1) and (turn["coefficient"] == 0 or (turn["coefficient"] > 0) == (turn["applied"] > 0))
            nonzero += turn["coefficient"] != 0
    assert nonzero > 0


def test_validation_rollouts_and_selflock_metrics(grpo):
    rows = _rollouts(grpo, "val")
    assert len(rows) == 4 and {row["step"] for row in rows} == {0}  # data.val_max_samples=4, one rollout each
    for row in rows:
        _check_schema(row, "val")
        assert all(t["applied"] is None and t["coefficient"] is None for t in row["turns"])
    assert sum(row["reward"] for row in rows) / 4 == pytest.approx(grpo.validation["val-core/arew/pe-g-s2/reward/mean@1"])
    for step in grpo.steps:
        for key in ("selflock/corr_as_reward", "selflock/corr_as_oracle", "selflock/corr_gap"):
            assert key in step and (step[key] is None or -2 <= step[key] <= 2), key  # null: undefined (NaN)
        gap = step["episode/proxy_oracle_reward/mean"] - step["critic/score/mean"]
        assert step["selflock/oracle_reward_gap"] == pytest.approx(gap)
        assert 0 <= step["timing_s/arew_rollouts"] < step["timing_s/step"]


def test_wandb_offline_run_holds_the_rollout_tables(grpo):
    runs = list((grpo.folder / "wandb" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    tables = runs[0] / "files" / "media" / "table" / "rollouts"
    train, val = sorted(tables.glob("train_*.table.json")), sorted(tables.glob("val_*.table.json"))
    assert len(train) == 2 and len(val) == 1
    content = json.loads(train[0].read_text())
    assert "transcript" in content["columns"] and "critiques" in content["columns"]
    assert len(content["data"]) == ROLLOUTS_PER_STEP


def test_the_offline_report_reads_the_runs_metrics_and_rollouts(grpo, tmp_path):
    """``arew report`` on a real run folder: every sampled episode (train and validation) and the logged
    panels arrive, and nothing in the trainer's files is reported as broken input."""
    from arew.reporting import report

    (run,) = report.load_runs([grpo.folder])
    assert run.problems == {}
    splits = sorted(episode["split"] for episode in run.episodes)
    assert splits == ["train"] * (2 * ROLLOUTS_PER_STEP) + ["val"] * 4
    drawn = {p["title"] for s in report.chart_data([run]) for p in s["panels"]}
    assert {"Training reward", "Validation reward", "AS proxy", "I_AS (nats)", "Both-signs share"} <= drawn
    assert run.recorded_group == GRPO_GROUP  # rollouts/run.json: W&B's run group
    page = report.build([grpo.folder], tmp_path / "report.html", pngs=False)
    assert page.stat().st_size > 0


@pytest.mark.browser
def test_the_trainer_runs_report_in_a_browser_draws_its_group_and_reads_an_episode(grpo, tmp_path):
    """The page of a real trainer run in Chromium: the run drawn as its W&B group in one colour on every chart and
    in the viewer, and a reweighted episode read decision by decision (timeline cells = turns, λu bars drawn)."""
    from report_checks import PAGE_LIMIT_BYTES, artifact, assert_one_colour_per_group, open_report

    from arew.reporting import report
    from arew.reporting.screenshot import browser

    out = report.build([grpo.folder], tmp_path / "report.html", pngs=False)
    assert out.stat().st_size < PAGE_LIMIT_BYTES
    with browser() as context:
        page, problems = open_report(context, out)
        assert page.locator(".group-toggle").all_inner_texts() == [f"{GRPO_GROUP} (1)"]
        assert page.locator("svg.chart").count() == page.locator("path.mean").count() > 10  # one line per chart
        assert_one_colour_per_group(page, [GRPO_GROUP])
        assert page.locator("tr.episode").count() == 2 * ROLLOUTS_PER_STEP + 4
        page.select_option("#f-split", "train")
        page.select_option("#f-source", "applied")
        page.select_option("#f-pattern", "both:")
        rows = page.locator("tr.episode")
        assert rows.count() > 0
        rows.first.click()
        turns = page.locator("#episode-detail .turn")
        assert page.locator("#episode-detail svg.timeline rect.cell").count() == turns.count() > 0
        assert page.locator("#episode-detail svg.timeline rect.coefficient-bar").count() > 0
        page.evaluate("window.scrollTo(0, 0)")  # the sticky controls at the top of the picture
        page.screenshot(path=str(artifact("report-trainer-run.png")), full_page=True)
    assert problems == []
