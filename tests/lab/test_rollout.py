"""Rollouts drive the real PE environment through text, and keep exactly what it said."""

import asyncio

import numpy as np
import pytest
import torch

from arew.core.records import CHANNEL_INDEX
from arew.envs import parsing
from arew.envs.registry import make_env
from arew.lab.agent import Critic, LabPolicy, QuerySpace
from arew.lab.config import LabConfig
from arew.lab.rollout import rollout
from arew_preference.generator import VARIANTS, generate_splits


def play(task: str, n: int = 4, seed: int = 0, critic: bool = True, diagnose: bool = False):
    spec = VARIANTS[task]
    config = LabConfig()
    rows = generate_splits(spec, {"train": n}, seed=11)["train"]
    space = QuerySpace(10, spec.n_attrs, spec.subset_size, spec.max_turns, belief_units=20)
    torch.manual_seed(seed)
    policy = LabPolicy(8, config.step_bins, config.bt_init_probs, config.salience_init)
    value = Critic(spec.n_attrs, 8) if critic else None
    ro = rollout(
        policy, value, space, task, rows, np.arange(n), torch.Generator().manual_seed(seed), 50, diagnose=diagnose
    )
    return ro, rows, policy, space


@pytest.mark.parametrize("task", ["pe-g-s2", "pe-f-d6"])
def test_rollout_shapes_and_every_text_is_accepted(task):
    ro, rows, _, space = play(task)
    b, h = len(rows), space.max_turns
    assert ro.labels.shape == ro.old_log_probs.shape == ro.values.shape == ro.valid.shape == (b, 2 * h)
    assert ro.pair_actions.shape == ro.subset_actions.shape == (b, h)
    assert ro.pair_features.shape[:3] == (b, h, 45)
    assert ro.subset_features.shape[:3] == (b, h, len(space.subsets))
    assert ro.bt_actions.shape == (b, h, space.n_attrs)
    assert ro.valid.all()
    assert set(ro.labels.unique().tolist()) <= {-1, 0, 1}
    for texts in ro.texts:
        assert len(texts) == 2 * h + 1
        kinds = [parsing.payload_kind(t) for t in texts]
        assert kinds == ["interact"] * (2 * h) + ["answer"]


def test_replaying_the_texts_gives_the_same_critiques_proxies_and_reward():
    ro, rows, _, _ = play("pe-g-s2")
    for b, row in enumerate(rows):
        env = make_env("pe-g-s2", row, int(row["seed"]), replay_samples=10)
        labels, as_proxy, bt_proxy = [], [], []
        texts = ro.texts[b]
        for t in range(0, len(texts) - 1, 2):
            step = asyncio.run(env.act(texts[t]))
            labels.append(step.critique)
            as_proxy.append(step.info["as_proxy"])
            step = env.update(texts[t + 1])
            labels.append(step.critique)
            bt_proxy.append(step.info["bt_proxy"])
        env.answer(texts[-1])
        assert ro.labels[b].tolist() == labels
        assert ro.as_proxy[b].tolist() == as_proxy
        assert np.allclose(ro.bt_proxy[b].numpy(), bt_proxy, atol=1e-6)
        assert float(ro.reward[b]) == env.reward()


def test_records_carry_the_environment_critiques_one_span_per_decision():
    ro, rows, _, _ = play("pe-g-s2")
    records = ro.records()
    assert len(records) == len(rows)
    for b, record in enumerate(records):
        n = ro.n_decisions
        assert record["start"] == list(range(n)) and record["end"] == list(range(1, n + 1))
        assert record["channel"] == ["as", "bt"] * (n // 2)
        assert record["label"] == ro.labels[b].tolist()
    segments = ro.segments()
    assert torch.equal(segments.label, ro.labels.flatten())
    assert torch.equal(segments.channel[0::2], torch.full((len(rows) * 10,), CHANNEL_INDEX["as"]))
    # AS critiques are +1 exactly for the informative new queries
    assert torch.equal((ro.labels[:, 0::2] == 1).float(), ro.as_proxy)


def test_recomputed_log_probs_equal_the_sampling_log_probs():
    ro, _, policy, _ = play("pe-g-s3")
    assert torch.allclose(policy.log_probs(ro), ro.old_log_probs, atol=1e-5)


def test_rollout_is_deterministic_given_the_generator_and_differs_across_seeds():
    first, _, _, _ = play("pe-g-s2", seed=1)
    again, _, _, _ = play("pe-g-s2", seed=1)
    other, _, _, _ = play("pe-g-s2", seed=2)
    assert first.texts == again.texts and torch.equal(first.labels, again.labels)
    assert first.texts != other.texts


def test_diagnostics_come_from_the_environment_replay_and_agree_with_the_lab():
    ro, _, _, _ = play("pe-g-s2", critic=False, diagnose=True)
    assert ro.values is None
    d = ro.diagnostics
    assert set(d) >= {"i_as_nats", "oracle_reward", "c_bt", "final_equals_first_guess"}
    assert d["c_bt"] == pytest.approx(float(ro.bt_proxy.clamp(min=0).sum(1).mean()), abs=1e-6)
    assert d["n_informative"] == pytest.approx(float(ro.as_proxy.sum(1).mean()))


def test_synact_keys_share_a_state_exactly_while_the_histories_agree():
    """Eight rollouts of one task: a decision's state key is shared iff the earlier actions (and so the replies) were."""
    spec = VARIANTS["pe-g-s2"]
    config = LabConfig()
    rows = generate_splits(spec, {"train": 1}, seed=11)["train"] * 8
    space = QuerySpace(10, spec.n_attrs, spec.subset_size, spec.max_turns, belief_units=20)
    torch.manual_seed(0)
    policy = LabPolicy(8, config.step_bins, config.bt_init_probs, 30.0)  # a strong prior: first queries repeat
    ro = rollout(policy, None, space, "pe-g-s2", rows, np.zeros(8, dtype=np.int64), torch.Generator().manual_seed(0), 50)
    state, action = ro.state_keys, ro.action_keys
    assert state.shape == action.shape == ro.labels.shape and bool((state >= 0).all())
    assert (state[:, 0] == state[0, 0]).all()  # every rollout starts in the task's first state
    shared = 0
    for p in range(1, ro.n_decisions):
        for i in range(8):
            for j in range(i):
                same_history = ro.texts[i][:p] == ro.texts[j][:p] and torch.equal(action[i, :p], action[j, :p])
                assert bool(state[i, p] == state[j, p]) == same_history, (p, i, j)
                shared += same_history
    assert shared > 0  # some rollouts did repeat their first query and got the same answer
    # the AS action key is the query: equal texts, equal keys
    for i in range(8):
        for j in range(i):
            assert (ro.texts[i][0] == ro.texts[j][0]) == bool(action[i, 0] == action[j, 0])
    assert ro.decision_keys().state.tolist() == state.reshape(-1).tolist()
