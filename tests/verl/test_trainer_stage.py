"""The AReW trainer's advantage stage against verl's real TransferQueue, on CPU."""

import math
import os
from pathlib import Path

import pytest
import torch
import transfer_queue as tq
from hydra import compose, initialize_config_dir
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.padding_utils import upsample_batch_to_divisible_size
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.utils import tensordict_utils as tu

from arew.configs import CONFIG_DIR
from arew.core import RECORDS_KEY, CritiqueRecordError, make_record
from arew.core.synact import KEYS_KEY, DecisionKeyError
from arew.metrics.staleness import VERSIONS_KEY
from arew.verl_plugin.episode_record import EPISODE_NAME_KEY
from arew.verl_plugin.trainer import (
    AReWColocateAsyncTrainer,
    AReWTrainer,
    check_trainer_mode,
    validate_arew_setup,
    wandb_offline_without_credentials,
)

ROOT = Path(__file__).resolve().parents[2]
LENGTHS = [7, 6, 4, 8]
MASKS = [[1, 1, 1, 0, 0, 1, 1], [1, 1, 0, 1, 1, 1], [1, 1, 1, 1], [1, 1, 0, 0, 1, 1, 1, 1]]
RECORDS = [
    make_record([(0, 3), (3, 5), (5, 7)], ["as", "bt", "as"], [1, 0, -1]),
    make_record([(0, 2), (3, 6)], ["as", "bt"], [-1, -1]),
    make_record([(0, 2), (2, 4)], ["as", "bt"], [1, -1]),
    None,  # a sample from an agent loop that records nothing
]
DELTAS = [[0.5, 0.5, 0.5, 0, 0, -0.5, -0.5], [0] * 6, [0.5, 0.5, -0.5, -0.5], [0] * 8]
SCORES = [1.0, 0.0, 1.0, 0.0]
KEYS = ["p0_0_0", "p0_1_0", "p1_0_0", "p1_1_0"]


def _compose(*overrides):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return compose(config_name="arew_trainer", overrides=["algorithm.arew.lam=0.5", *overrides])


def _nested(rows, dtype=torch.float32):
    return torch.nested.as_nested_tensor([torch.tensor(r, dtype=dtype) for r in rows], layout=torch.jagged)


def _put(partition, records=RECORDS, keys=None):
    scores = [[0.0] * (n - 1) + [s] for n, s in zip(LENGTHS, SCORES)]
    extra = [{"other": 1} if r is None else {RECORDS_KEY: r, "other": 1} for r in records]
    for fields, k in zip(extra, keys or []):
        if k is not None:
            fields[KEYS_KEY] = k
    fields = {
        "uid": [k.split("_")[0] for k in KEYS],
        "response_mask": _nested(MASKS, torch.int64),
        "rm_scores": _nested(scores),
        "values": _nested([[0.1 * j for j in range(n)] for n in LENGTHS]),
        "old_log_probs": _nested([[-1.0] * n for n in LENGTHS]),
        "extra_fields": extra,
    }
    return tq.kv_batch_put(keys=KEYS, partition_id=partition, fields=tu.get_tensordict(fields))


def _trainer(cls, config, step=3):
    trainer = cls.__new__(cls)  # the advantage stage needs only config and step, not workers
    trainer.config = config
    trainer.global_steps = step
    return trainer


def _advantages(batch):
    data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["advantages", "returns"])
    return [a for a in data["advantages"].unbind()], [r for r in data["returns"].unbind()]


def test_grpo_stage_equals_verl_sync_plus_critique_shift(transfer_queue):
    metrics = {}
    batch = _put("t_grpo")
    _trainer(AReWTrainer, _compose("algorithm.adv_estimator=arew_grpo"))._compute_advantage(batch, metrics)
    adv, ret = _advantages(batch)

    reference = _put("t_grpo_ref")
    _trainer(PPOTrainerSync, _compose("algorithm.adv_estimator=grpo", "trainer.v1.trainer_mode=sync"))._compute_advantage(
        reference, {}
    )
    ref_adv, ref_ret = _advantages(reference)
    for a, r, ra, rr, delta in zip(adv, ret, ref_adv, ref_ret, DELTAS):
        torch.testing.assert_close(a, ra + torch.tensor(delta))
        torch.testing.assert_close(r, rr)
    assert metrics["arew/both_signs_frac"] == pytest.approx(0.5)
    assert metrics["arew/samples_without_records"] == 1
    assert metrics["arew/as/pos"] == 2 and metrics["arew/bt/neg"] == 2


def test_gae_stage_uses_critic_values_and_channels_off_is_exactly_verl(transfer_queue):
    batch = _put("t_gae")
    _trainer(AReWTrainer, _compose("critic.enable=True", "algorithm.arew.channels=off"))._compute_advantage(batch, {})
    reference = _put("t_gae_ref")
    sync_config = _compose("algorithm.adv_estimator=gae", "trainer.v1.trainer_mode=sync", "critic.enable=True")
    _trainer(PPOTrainerSync, sync_config)._compute_advantage(reference, {})
    for a, ra in zip(_advantages(batch)[0], _advantages(reference)[0]):
        torch.testing.assert_close(a, ra)
    # and the critic values really reached GAE: recompute it from the padded batch with V_j = 0.1 j
    width = max(LENGTHS)
    mask = torch.tensor([m + [0] * (width - len(m)) for m in MASKS], dtype=torch.float32)
    rewards = torch.zeros(len(LENGTHS), width)
    for i, (n, score) in enumerate(zip(LENGTHS, SCORES)):
        rewards[i, n - 1] = score
    values = 0.1 * torch.arange(width).expand(len(LENGTHS), width) * mask
    expected, _ = core_algos.compute_gae_advantage_return(rewards, values, mask, 1.0, 1.0)
    for i, a in enumerate(_advantages(batch)[0]):
        torch.testing.assert_close(a, expected[i, : LENGTHS[i]])
    zero_values, _ = core_algos.compute_gae_advantage_return(rewards, torch.zeros_like(mask), mask, 1.0, 1.0)
    assert not torch.allclose(zero_values, expected)


FIRST_POLICY_TOKENS = [[0, None, 5], [0, 3], [0, 2]]  # each recorded decision's first policy token (MASKS, RECORDS)


def _accuracy(labels: list, estimates: list) -> float:
    """Class-balanced, with quality.min_class_share=0: the mean of each critique sign's |a|-weighted agreement;
    NaN when a critique sign has no scored decision."""
    scored = [(z, a) for z, a in zip(labels, estimates) if z != 0 and a != 0]
    masses = [sum(abs(a) for z, a in scored if z == sign) for sign in (1, -1)]
    if min(masses) == 0:
        return math.nan
    agree = [sum(abs(a) for z, a in scored if z == sign and (a > 0) == (sign > 0)) for sign in (1, -1)]
    return (agree[0] / masses[0] + agree[1] / masses[1]) / 2


@pytest.mark.parametrize("direction", ["auto", "outcome"])
def test_gae_stage_scores_critiques_against_each_decisions_increment(transfer_queue, direction):
    """PPO's accuracy is scored against the decision's own share of verl's GAE advantage (auto), or the span mean."""
    batch = _put(f"t_dir_{direction}")
    # min_class_share=0: this batch is too small for the 5% rule (its few AS increments have one sign)
    overrides = ("critic.enable=True", f"algorithm.arew.quality.direction={direction}", "algorithm.arew.quality.min_class_share=0")
    trainer = _trainer(AReWTrainer, _compose(*overrides))
    metrics = {}
    trainer._compute_advantage(batch, metrics)
    assert trainer.quality.direction == {"auto": "increment", "outcome": "outcome"}[direction]
    reference = _put(f"t_dir_ref_{direction}")
    sync_config = _compose("algorithm.adv_estimator=gae", "trainer.v1.trainer_mode=sync", "critic.enable=True")
    _trainer(PPOTrainerSync, sync_config)._compute_advantage(reference, {})
    base = _advantages(reference)[0]  # verl's own GAE advantages (whitened)
    estimates = {"increment": {"as": [], "bt": []}, "outcome": {"as": [], "bt": []}}
    labels = {"as": [], "bt": []}
    for sample, (record, firsts) in enumerate(zip(RECORDS, FIRST_POLICY_TOKENS)):
        mask = torch.tensor(MASKS[sample], dtype=torch.bool)
        placed = [f for f in firsts if f is not None]
        for (start, end), channel, label, first in zip(zip(record["start"], record["end"]), record["channel"], record["label"], firsts):
            increment = 0.0
            if first is not None:
                following = placed[placed.index(first) + 1] if first != placed[-1] else None
                increment = float(base[sample][first] - (base[sample][following] if following is not None else 0.0))
            span = base[sample][start:end][mask[start:end]]
            estimates["increment"][channel].append(increment)
            estimates["outcome"][channel].append(float(span.mean()) if len(span) else 0.0)
            labels[channel].append(label)
    expected = {name: {ch: _accuracy(labels[ch], values[ch]) for ch in labels} for name, values in estimates.items()}
    assert not math.isnan(expected["increment"]["as"]) and not math.isnan(expected["outcome"]["as"])
    assert expected["increment"]["as"] != pytest.approx(expected["outcome"]["as"])  # the data tells the two apart
    assert math.isnan(expected["increment"]["bt"])  # the BT critiques here are all -1: no estimate
    for channel in ("as", "bt"):
        assert metrics[f"arew/{channel}/accuracy"] == pytest.approx(expected[trainer.quality.direction][channel], abs=1e-6, nan_ok=True)


def test_verls_padding_samples_are_nobodys_episode(transfer_queue):
    """verl pads a batch with copies of its first sample's extra_fields; their records must not be applied or checked."""
    config = _compose("algorithm.adv_estimator=arew_grpo")
    batch = upsample_batch_to_divisible_size(_put("t_pad"), 3, eos_token_id=0)  # 4 samples -> 6
    assert sum(tag.get("is_padding", False) for tag in batch.tags) == 2
    metrics = {}
    _trainer(AReWTrainer, config)._compute_advantage(batch, metrics)  # sample 0's 7-token spans on 1-token padding
    reference = _put("t_pad_ref")
    _trainer(AReWTrainer, config)._compute_advantage(reference, {})
    padded, plain = _advantages(batch)[0], _advantages(reference)[0]
    for a, ra in zip(padded[:4], plain):
        torch.testing.assert_close(a, ra)
    assert all(torch.equal(a, torch.zeros_like(a)) for a in padded[4:])
    assert metrics["arew/as/pos"] == 2 and metrics["episode/failed/count"] == 0.0


def test_invalid_records_fail_the_stage_naming_the_key_or_are_dropped(transfer_queue):
    bad = list(RECORDS)
    bad[2] = make_record([(0, 9)], ["as"], [1])  # beyond the 4-token response
    config = _compose("algorithm.adv_estimator=arew_grpo")
    with pytest.raises(CritiqueRecordError, match="p1_0_0"):
        _trainer(AReWTrainer, config)._compute_advantage(_put("t_bad", bad), {})
    metrics = {}
    drop = _compose("algorithm.adv_estimator=arew_grpo", "algorithm.arew.on_invalid=drop")
    _trainer(AReWTrainer, drop)._compute_advantage(_put("t_drop", bad), metrics)
    assert metrics["arew/records_dropped"] == 1


def test_start_up_validation_names_keys():
    with pytest.raises(ValueError, match="critic.enable"):
        validate_arew_setup(_compose())
    with pytest.raises(ValueError, match="algorithm.adv_estimator"):
        validate_arew_setup(_compose("algorithm.adv_estimator=grpo"))
    with pytest.raises(ValueError, match="algorithm.arew.lam"):
        validate_arew_setup(_compose("algorithm.adv_estimator=arew_grpo", "algorithm.arew.lam=-2"))
    with pytest.raises(ValueError, match="arew_agent.overflow"):
        validate_arew_setup(_compose("algorithm.adv_estimator=arew_grpo", "arew_agent.overflow=cut"))
    with pytest.raises(ValueError, match="rollout.response_length=512 cannot hold one round"):
        validate_arew_setup(
            _compose("algorithm.adv_estimator=arew_grpo", "actor_rollout_ref.rollout.agent.default_agent_loop=arew_agent")
        )
    with pytest.raises(ValueError, match="algorithm.use_pf_ppo"):
        validate_arew_setup(_compose("algorithm.adv_estimator=arew_grpo", "algorithm.use_pf_ppo=true"))
    with pytest.raises(ValueError, match="tensor_model_parallel_size: 2 GPUs per rollout replica .* = 1; set it to 1"):
        validate_arew_setup(_compose("algorithm.adv_estimator=arew_grpo", "trainer.n_gpus_per_node=1"))
    with pytest.raises(ValueError, match="rollout.name: the hf rollout is part of the CPU backend"):
        validate_arew_setup(_compose("algorithm.adv_estimator=arew_grpo", "actor_rollout_ref.rollout.name=hf"))
    with pytest.raises(ValueError, match="arew_rollouts.per_step"):
        validate_arew_setup(_compose("algorithm.adv_estimator=arew_grpo", "arew_rollouts.per_step=-1"))
    with pytest.raises(ValueError, match="algorithm.arew.quality.direction: 'increment' .* 'grpo' has no per-step baseline"):
        validate_arew_setup(_compose("algorithm.adv_estimator=arew_grpo", "algorithm.arew.quality.direction=increment"))
    with pytest.raises(ValueError, match="algorithm.arew.quality.direction: 'increment' .* got 0.95"):
        validate_arew_setup(_compose("critic.enable=True", "algorithm.lam=0.95", "algorithm.arew.quality.direction=increment"))
    with pytest.raises(ValueError, match="trainer.v1.sampler.poll_interval: .* got 0"):
        validate_arew_setup(_compose("algorithm.adv_estimator=arew_grpo", "trainer.v1.sampler.poll_interval=0"))
    validate_arew_setup(_compose("algorithm.adv_estimator=arew_rloo"))  # registers the wrapper
    assert "arew_rloo" in core_algos.ADV_ESTIMATOR_REGISTRY


def test_replay_buffer_polls_at_the_configured_interval():
    trainer = _trainer(AReWTrainer, _compose("algorithm.adv_estimator=arew_grpo", "trainer.v1.sampler.poll_interval=0.25"))
    trainer._add_prompts_to_generate = lambda count: None
    buffer = trainer._build_replay_buffer()  # verl's own construction, which passes no interval
    assert buffer.poll_interval == 0.25  # what verl's _wait_for_next_poll sleeps


def test_wandb_goes_offline_without_credentials(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    config = _compose("trainer.logger=[console,wandb]")
    assert wandb_offline_without_credentials(config) and os.environ["WANDB_MODE"] == "offline"
    monkeypatch.delenv("WANDB_MODE")
    (tmp_path / ".netrc").write_text("machine api.wandb.ai login user password secret\n")
    (tmp_path / ".netrc").chmod(0o600)
    assert not wandb_offline_without_credentials(config) and "WANDB_MODE" not in os.environ
    assert not wandb_offline_without_credentials(_compose("trainer.logger=[console]"))


def test_env_options_are_checked_for_the_tasks_in_the_data(tmp_path):
    from arew.cli import main as arew_main
    from arew.verl_plugin.trainer import dataset_tasks

    arew_main(["prepare", "pe-g-s2", "--out", str(tmp_path), "--n-train", "4", "--n-val", "2", "--n-test", "2"])
    data = [f"data.train_files={tmp_path / 'train.parquet'}", f"data.val_files={tmp_path / 'validation.parquet'}"]
    base = ["algorithm.adv_estimator=arew_grpo", *data]
    assert dataset_tasks(_compose(*base)) == {"pe-g-s2"}
    validate_arew_setup(_compose(*base, "+arew_agent.env_options.reward_rule=reference"))
    with pytest.raises(ValueError, match="arew_agent.env_options.user_timeout: not an option of PreferenceEnv"):
        validate_arew_setup(_compose(*base, "+arew_agent.env_options.user_timeout=5"))


def test_validation_rows_come_from_the_batches_verls_validate_samples(transfer_queue, tmp_path, monkeypatch):
    """The hook around verl's _validate sees each validation batch its replay buffer samples, writes the
    val_per_step episodes the whole set would give, and leaves the buffer as it was."""
    import json

    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    from arew.metrics.rollouts import TRANSCRIPT_KEY, sample_indices, transcript

    names = [f"validation:{row}:0" for row in range(6)]
    turns = [{"agent": "ask", "channel": "as", "critique": 1, "feedback": "yes"}, {"agent": "<answer>", "channel": "bt", "critique": 0, "feedback": None}]
    batches = []
    for b in range(2):  # two validation batches of three episodes, cleared from TransferQueue in between (as verl does)
        keys = [f"v{b}{i}_0_0" for i in range(3)]
        extra = [
            {"arew_episode": names[3 * b + i], "reward_extra_info": {"proxy_as_mean": 0.1 * i}, TRANSCRIPT_KEY: transcript(turns, "q", "pe-g-s2", "arew/pe-g-s2", 100)}
            for i in range(3)
        ]
        fields = {"rm_scores": _nested([[0.0, float(i)] for i in range(3)]), "extra_fields": extra}
        batches.append((keys, fields))

    class Buffer:
        def sample(self, global_steps, partition_id, batch_size):
            keys, fields = batches.pop(0)
            return tq.kv_batch_put(keys=keys, partition_id=partition_id, fields=tu.get_tensordict(fields)), {}

    def verls_validate(self):
        for _ in range(2):
            batch, _ = self.replay_buffer.sample(global_steps=self.global_steps, partition_id="val", batch_size=3)
            tq.kv_clear(keys=batch.keys, partition_id=batch.partition_id)
        return {"val-core/x": 1.0}

    monkeypatch.setattr(PPOTrainer, "_validate", verls_validate)
    config = _compose("algorithm.adv_estimator=arew_grpo", "arew_rollouts.val_per_step=4", f"arew_rollouts.dir={tmp_path}")
    trainer = _trainer(AReWTrainer, config, step=0)
    trainer.replay_buffer = Buffer()
    assert trainer._validate() == {"val-core/x": 1.0}
    assert "sample" not in vars(trainer.replay_buffer)  # the wrapper is gone
    rows = [json.loads(line) for line in (tmp_path / "val.jsonl").read_text().splitlines()]
    assert [r["episode"] for r in rows] == [names[i] for i in sample_indices(names, 0, 4)]
    for row in rows:
        i = int(row["episode"].split(":")[1]) % 3
        assert row["split"] == "val" and row["step"] == 0 and row["reward"] == float(i)
        assert row["numbers"] == {"proxy_as_mean": pytest.approx(0.1 * i)} and row["task"] == "pe-g-s2"
        assert [(t["critique"], t["applied"], t["coefficient"]) for t in row["turns"]] == [(1, None, None), (0, None, None)]


# prompt p0: both rollouts start in state 7 and act differently (10 wins, 20 loses), then part ways;
# prompt p1: sample 3 has no records, so sample 2 is alone at every state
DECISION_KEYS = [
    {"state": [7, 8, 9], "action": [10, 11, 12]},
    {"state": [7, 5], "action": [20, 11]},
    {"state": [7, 6], "action": [10, 11]},
    None,
]


def test_synact_only_replaces_the_rule_critiques_with_the_mi_ones(transfer_queue):
    metrics = {}
    batch = _put("t_mi", keys=DECISION_KEYS)
    config = _compose("algorithm.adv_estimator=arew_grpo", "algorithm.arew.synact.critiques=only")
    _trainer(AReWTrainer, config)._compute_advantage(batch, metrics)
    # the same stage with the MI critiques written into the records as rule critiques
    as_rule = [
        make_record([(0, 3), (3, 5), (5, 7)], ["as", "bt", "as"], [1, 0, 0]),
        make_record([(0, 2), (3, 6)], ["as", "bt"], [-1, 0]),
        make_record([(0, 2), (2, 4)], ["as", "bt"], [0, 0]),
        None,
    ]
    reference = _put("t_mi_ref", as_rule)
    _trainer(AReWTrainer, _compose("algorithm.adv_estimator=arew_grpo"))._compute_advantage(reference, {})
    for a, ra in zip(_advantages(batch)[0], _advantages(reference)[0]):
        torch.testing.assert_close(a, ra)
    assert metrics["arew/synact/as/decision_points"] == 1 and metrics["arew/synact/bt/decision_points"] == 0
    assert metrics["arew/synact/as/mi"] == pytest.approx(math.log(2))
    assert metrics["arew/synact/as/turn1/outcome_constant_share"] == 0.0
    assert (metrics["arew/synact/as/critique_pos"], metrics["arew/synact/as/critique_neg"]) == (1, 1)


def test_synact_monitor_is_default_and_gae_logs_nothing(transfer_queue):
    metrics = {}
    _trainer(AReWTrainer, _compose("algorithm.adv_estimator=arew_grpo"))._compute_advantage(
        _put("t_mon", keys=DECISION_KEYS), metrics
    )
    assert metrics["arew/synact/as/outcome_constant_share"] == 0.0
    assert "arew/synact/as/critique_pos" not in metrics  # critiques off: the rule critiques stay
    gae = {}
    _trainer(AReWTrainer, _compose("critic.enable=True"))._compute_advantage(_put("t_mon_gae", keys=DECISION_KEYS), gae)
    assert not [key for key in gae if key.startswith("arew/synact")]


def test_garbage_decision_keys_fail_naming_the_sample_or_are_dropped(transfer_queue):
    bad = list(DECISION_KEYS)
    bad[1] = {"state": [7], "action": [20]}  # one entry for two decisions
    with pytest.raises(DecisionKeyError, match="p0_1_0.*1 entries but the sample has 2"):
        _trainer(AReWTrainer, _compose("algorithm.adv_estimator=arew_grpo"))._compute_advantage(_put("t_kbad", keys=bad), {})
    metrics = {}
    drop = _compose("algorithm.adv_estimator=arew_grpo", "algorithm.arew.on_invalid=drop")
    _trainer(AReWTrainer, drop)._compute_advantage(_put("t_kdrop", keys=bad), metrics)
    assert metrics["arew/synact/keys_dropped"] == 1 and metrics["arew/synact/as/decision_points"] == 0


def test_synact_critiques_need_several_rollouts_per_prompt():
    grpo = ("algorithm.adv_estimator=arew_grpo", "algorithm.arew.synact.critiques=fill")
    with pytest.raises(ValueError, match=r"algorithm\.arew\.synact\.critiques: 'fill' .*actor_rollout_ref\.rollout\.n=1"):
        validate_arew_setup(_compose(*grpo, "actor_rollout_ref.rollout.n=1"))
    validate_arew_setup(_compose(*grpo, "actor_rollout_ref.rollout.n=2"))


@pytest.mark.parametrize(
    ("cls", "mode", "verl_mode", "buffer_cls"),
    [(AReWTrainer, "arew", "sync", ReplayBuffer), (AReWColocateAsyncTrainer, "arew_colocate_async", "colocate_async", ReplayBufferAsync)],
)
def test_each_mode_runs_verls_mode_under_verls_name(cls, mode, verl_mode, buffer_cls):
    """verl keys its buffer, refill and checkpoint code on its mode names and reads parameter_sync_step from its section."""
    config = _compose("algorithm.adv_estimator=arew_grpo", f"trainer.v1.trainer_mode={mode}", f"+trainer.v1.{verl_mode}.parameter_sync_step=2")
    validate_arew_setup(config)
    trainer = _trainer(cls, config)
    trainer.trainer_mode, trainer.parameter_sync_step = mode, 1  # what verl's __init__ reads under our name
    trainer._add_prompts_to_generate = lambda count: None
    buffer = trainer._build_replay_buffer()
    assert type(buffer) is buffer_cls and buffer.trainer_mode == trainer.trainer_mode == verl_mode
    assert trainer.parameter_sync_step == 2


def test_mode_settings_and_impossible_combinations_fail_at_start_up_naming_the_key(monkeypatch):
    grpo = ("algorithm.adv_estimator=arew_grpo", "data.train_batch_size=8", "actor_rollout_ref.actor.ppo_mini_batch_size=2")
    with pytest.raises(ValueError, match=r"trainer.v1.trainer_mode: AReW's modes are .* got 'sync'"):
        validate_arew_setup(_compose(*grpo, "trainer.v1.trainer_mode=sync"))
    with pytest.raises(ValueError, match="trainer.v1.colocate_async.parameter_sync_step: .* data.train_batch_size=8; got 3"):
        validate_arew_setup(_compose(*grpo, "trainer.v1.trainer_mode=arew_colocate_async", "+trainer.v1.colocate_async.parameter_sync_step=3"))
    with pytest.raises(ValueError, match="trainer.v1.colocate_async.num_warmup_batches: .* got -1"):
        validate_arew_setup(_compose(*grpo, "trainer.v1.trainer_mode=arew_colocate_async", "trainer.v1.colocate_async.num_warmup_batches=-1"))
    separate = (*grpo, "trainer.v1.trainer_mode=arew_separate_async", "actor_rollout_ref.rollout.name=vllm")
    monkeypatch.setenv("VERL_PLATFORM", "cpu")
    with pytest.raises(ValueError, match="trainer.v1.trainer_mode: arew_separate_async .* the CPU backend has neither"):
        check_trainer_mode(_compose(*separate))
    monkeypatch.delenv("VERL_PLATFORM")
    with pytest.raises(ValueError, match="actor_rollout_ref.rollout.checkpoint_engine.backend: .* use nccl"):
        check_trainer_mode(_compose(*separate))
    nccl = (*separate, "actor_rollout_ref.rollout.checkpoint_engine.backend=nccl")
    with pytest.raises(ValueError, match="actor_rollout_ref.rollout.nnodes: .* standalone rollout pool"):
        check_trainer_mode(_compose(*nccl))
    pool = (*nccl, "actor_rollout_ref.rollout.nnodes=1", "actor_rollout_ref.rollout.n_gpus_per_node=4")
    with pytest.raises(ValueError, match=r"trainer.v1.separate_async.parameter_sync_step: .* \(8\) must equal parameter_sync_step \(2\) x"):
        check_trainer_mode(_compose(*pool, "trainer.v1.separate_async.parameter_sync_step=2"))
    check_trainer_mode(_compose(*pool))  # verl's default 4 updates per sync x mini-batches of 2


def test_the_stage_logs_each_decisions_staleness_beside_verls(transfer_queue):
    """Versions per decision travel in extra_fields; a malformed entry is counted, a failed episode's are not read."""
    versions = [
        {"min": [1, 1, 2], "max": [1, 2, 2]},  # the second decision was cut by the step-2 sync and resumed
        {"min": [2, 2], "max": [2, 2]},
        {"min": [0], "max": [0]},  # one version for two decisions: malformed
        None,
    ]
    batch = _put("t_versions")
    data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"])
    extra = [dict(getattr(item, "data", item)) for item in data["extra_fields"]]
    for i, (fields, entry) in enumerate(zip(extra, versions)):
        fields[EPISODE_NAME_KEY] = f"train:{i}:0"  # an episode of the agent loop (padding has no name)
        if entry is not None:
            fields[VERSIONS_KEY] = entry
    tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=tu.get_tensordict({"extra_fields": extra}))
    metrics = {}
    config = _compose("algorithm.adv_estimator=arew_grpo", "arew_rollouts.per_step=0")  # named episodes: no rollout rows here
    _trainer(AReWColocateAsyncTrainer, config, step=3)._compute_advantage(batch, metrics)
    # step 3 trains the policy of version 2: staleness 2 - newest version
    assert metrics["arew/off_policy/decisions"] == 5 and metrics["arew/off_policy/malformed_samples"] == 1
    assert metrics["arew/off_policy/spanning_decisions"] == 1 and metrics["arew/off_policy/spanning_decision_share"] == 0.2
    assert metrics["arew/off_policy/decision_staleness/max"] == 1 and metrics["arew/off_policy/decision_staleness/min"] == 0
    assert metrics["arew/off_policy/decision_staleness/mean"] == pytest.approx(1 / 5)
    assert metrics["arew/off_policy/decision_staleness_worst/max"] == 1
    assert metrics["arew/off_policy/decision_staleness_worst/mean"] == pytest.approx(2 / 5)
