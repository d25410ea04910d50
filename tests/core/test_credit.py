"""The turn-level credit estimators (arew.core.credit) against the plain-Python reference (arew.core.reference)
on random batches (GiGPO and turn GRPO bit for bit, turn GAE, whose matrix of powers sums in another order than
the reference's backward recursion, to 1e-9), and the properties that define them: GiGPO's episode term is verl's GRPO, its step term is
centred in each step group; turn GAE is the Monte Carlo turn return minus V at lambda = gamma = 1; pooled turn
GRPO gives no advantage shift from the number of turns alone, per-turn statistics do."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from arew.core import collect_segments, make_record, parse_config
from arew.core import reference as ref
from arew.core.config import AReWConfigError, CreditConfig
from arew.core.credit import (
    CreditResult,
    episode_advantages,
    gigpo_advantages,
    gigpo_step_groups,
    group_normalise,
    turn_gae_advantages,
    turn_grpo_advantages,
)
from arew.core.synact import DecisionKeys, group_ids
from core_helpers import batches, flat, trajectories

SETTINGS = settings(max_examples=50, deadline=None)


def _dyadic(draw, shape, low=-16, high=16, scale=4.0) -> torch.Tensor:
    """Multiples of 1/scale: sums of a few are exact in float32, so verl's float32 means are the correctly rounded ones."""
    count = int(np.prod(shape))
    values = draw(st.lists(st.integers(low, high), min_size=count, max_size=count))
    return (torch.tensor(values, dtype=torch.float64) / scale).to(torch.float32).reshape(shape)


@st.composite
def credit_batches(draw, odd_masks: bool = True):
    """(segments, mask, groups, outcome, keys, reference keys): prompt groups of one to several samples, state and
    action keys from a few values (deliberate collisions), some samples without keys, often constant outcomes."""
    segments, mask = draw(batches(max_batch=7, max_length=24, odd_masks=odd_masks))
    size = segments.batch_size
    groups = group_ids(draw(st.lists(st.integers(0, 2), min_size=size, max_size=size)))
    if draw(st.integers(0, 4)) == 0:
        outcome = torch.full((size,), draw(st.sampled_from([0.0, 1.0, -0.5])))
    else:
        outcome = _dyadic(draw, (size,), -8, 8)
    counts = segments.count_per_sample.tolist()
    known_sample = [draw(st.integers(0, 5)) > 0 for _ in range(size)]
    state, action, known, ref_keys = [], [], [], []
    for count, has in zip(counts, known_sample):
        states = draw(st.lists(st.integers(0, 3), min_size=count, max_size=count))
        actions = draw(st.lists(st.integers(0, 2), min_size=count, max_size=count))
        state += states if has else [0] * count
        action += actions if has else [0] * count
        known += [has] * count
        ref_keys.append(list(zip(states, actions)) if has else None)
    keys = DecisionKeys(np.array(state, dtype=np.int64), np.array(action, dtype=np.int64), np.array(known, dtype=bool))
    return segments, mask, groups, outcome, keys, ref_keys


@st.composite
def configs(draw):
    return CreditConfig(
        gigpo_step_weight=draw(st.sampled_from([1.0, 0.0, 0.5, 2.5])),
        gigpo_match=draw(st.sampled_from(["exact", "similar"])),
        gigpo_similarity=draw(st.sampled_from([0.8, 1.0, 0.5, 1 / 3])),
        norm_by_std=draw(st.booleans()),
        turn_gamma=draw(st.sampled_from([1.0, 0.9, 0.5, 0.0])),
        turn_lambda=draw(st.sampled_from([1.0, 0.95, 0.5, 0.0])),
        turn_grpo_weight=draw(st.sampled_from([1.0, 0.0, 0.3])),
        turn_norm=draw(st.sampled_from(["pooled", "per_turn"])),
        turn_gae_whiten=draw(st.booleans()),
    )


def _rows(rows, like: torch.Tensor) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float32).reshape(like.shape)


def _well_formed(result: CreditResult, segments, mask: torch.Tensor) -> bool:
    """float32 (B, T) outputs, zero off the policy tokens, finite everywhere; one float64 value per decision."""
    off = ~(mask > 0)
    for tensor in (result.advantages, result.returns):
        assert tensor.dtype == torch.float32 and tensor.shape == mask.shape
        assert bool(torch.isfinite(tensor).all())
        assert not bool(tensor[off].any())
    assert result.decision_advantages.dtype == torch.float64
    assert result.decision_advantages.shape == segments.sample.shape
    assert bool(torch.isfinite(result.decision_advantages).all())
    assert all(math.isfinite(v) for v in result.stats.values())
    return True


def _same_stats(stats, expected, tol=1e-12) -> bool:
    assert stats.keys() == expected.keys()
    for key, value in stats.items():
        assert math.isclose(value, expected[key], rel_tol=tol, abs_tol=tol), key
    return True


# ---- against the reference --------------------------------------------------------------------------------------------


@SETTINGS
@given(data=credit_batches(), config=configs())
def test_gigpo_equals_the_reference(data, config):
    segments, mask, groups, outcome, keys, ref_keys = data
    result = gigpo_advantages(segments, outcome, mask, groups, keys, config)
    batch = trajectories(segments, mask)
    expected = ref.gigpo(batch, outcome.tolist(), groups.tolist(), ref_keys, config)
    assert _well_formed(result, segments, mask)
    assert result.decision_advantages.tolist() == flat(expected.decisions)  # the same operations in the same order
    assert torch.equal(result.advantages, _rows(expected.rows, mask))
    assert torch.equal(result.returns, result.advantages)
    assert _same_stats(result.stats, expected.stats)


@SETTINGS
@given(data=credit_batches(), config=configs())
def test_turn_grpo_equals_the_reference(data, config):
    segments, mask, groups, outcome, _, _ = data
    result = turn_grpo_advantages(segments, outcome, mask, groups, config)
    batch = trajectories(segments, mask)
    expected = ref.turn_grpo(batch, outcome.tolist(), groups.tolist(), config)
    assert _well_formed(result, segments, mask)
    assert result.decision_advantages.tolist() == flat(expected.decisions)  # the same operations in the same order
    assert torch.equal(result.advantages, _rows(expected.rows, mask))
    assert torch.equal(result.returns, result.advantages)
    assert _same_stats(result.stats, expected.stats)


@SETTINGS
@given(data=credit_batches(), config=configs(), seed=st.integers(0, 2**16), sparse=st.booleans())
def test_turn_gae_equals_the_reference(data, config, seed, sparse):
    segments, mask, _, _, _, _ = data
    generator = torch.Generator().manual_seed(seed)
    rewards = (torch.randint(-8, 9, mask.shape, generator=generator) / 4).float()
    if sparse:  # a reward here and there, also on environment tokens and after the last decision
        rewards = rewards * (torch.rand(mask.shape, generator=generator) < 0.2)
    values = (torch.randint(-8, 9, mask.shape, generator=generator) / 8).float()
    result = turn_gae_advantages(segments, rewards, mask, values, config)
    batch = trajectories(segments, mask)
    expected = ref.turn_gae(batch, rewards.tolist(), values.tolist(), config)
    assert _well_formed(result, segments, mask)
    assert np.allclose(result.decision_advantages.numpy(), flat(expected.decisions), rtol=1e-9, atol=1e-9)
    assert torch.allclose(result.advantages, _rows(expected.rows, mask), rtol=1e-6, atol=1e-6)
    assert torch.allclose(result.returns, _rows(expected.returns, mask), rtol=1e-6, atol=1e-6)
    assert _same_stats(result.stats, expected.stats, tol=1e-9)


# ---- GiGPO --------------------------------------------------------------------------------------------------------------


@st.composite
def verl_batches(draw):
    """A GRPO batch as verl sees it: 0/1 response masks, dyadic token-level rewards, uid strings."""
    segments, mask, _, _, keys, ref_keys = draw(credit_batches(odd_masks=False))
    size = segments.batch_size
    uids = np.array([f"uid-{u}" for u in draw(st.lists(st.integers(0, 2), min_size=size, max_size=size))], dtype=object)
    rewards = _dyadic(draw, tuple(mask.shape), -4, 4) * (torch.rand(mask.shape, generator=torch.Generator().manual_seed(draw(st.integers(0, 99)))) < 0.3)
    return segments, mask, uids, rewards, keys


@settings(max_examples=30, deadline=None)
@given(data=verl_batches(), norm_by_std=st.booleans(), match=st.sampled_from(["exact", "similar"]))
def test_gigpo_without_step_term_is_verls_grpo_exactly(data, norm_by_std, match):
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    segments, mask, uids, rewards, keys = data
    expected, _ = compute_grpo_outcome_advantage(rewards, mask, uids, norm_adv_by_std_in_grpo=norm_by_std)
    groups = group_ids(uids)
    outcome = rewards.sum(dim=-1)
    assert torch.equal(episode_advantages(outcome, groups, norm_by_std)[:, None] * mask, expected)
    config = CreditConfig(gigpo_step_weight=0.0, gigpo_match=match, norm_by_std=norm_by_std)
    result = gigpo_advantages(segments, outcome, mask, groups, keys, config)
    assert torch.equal(result.advantages, expected)
    grpo = turn_grpo_advantages(segments, outcome, mask, groups, CreditConfig(turn_grpo_weight=0.0, norm_by_std=norm_by_std))
    assert torch.equal(grpo.advantages, expected)


def _step_terms(segments, outcome, mask, groups, keys, config):
    """A_S of each decision, read off GiGPO's values at omega = 1: A - A_E."""
    one = replace(config, gigpo_step_weight=1.0)
    result = gigpo_advantages(segments, outcome, mask, groups, keys, one)
    episode = episode_advantages(outcome, groups, config.norm_by_std).double()
    return (result.decision_advantages - episode[segments.sample]).numpy()


@SETTINGS
@given(data=credit_batches(), config=configs())
def test_step_terms_are_centred_in_each_step_group_and_zero_alone(data, config):
    segments, mask, groups, outcome, keys, _ = data
    step = gigpo_step_groups(segments, groups, keys, config)
    a_s = _step_terms(segments, outcome, mask, groups, keys, config)
    sizes = np.bincount(step) if len(step) else np.zeros(0, dtype=np.int64)
    assert np.all(np.abs(a_s[sizes[step] == 1]) < 1e-12)
    for group in np.flatnonzero(sizes > 1):
        assert abs(a_s[step == group].mean()) < 1e-9
    assert np.all(sizes[step[~keys.known]] == 1)  # keyless decisions stand alone


@SETTINGS
@given(data=credit_batches(), config=configs())
def test_exact_step_groups_are_same_prompt_group_and_same_state(data, config):
    segments, _, groups, _, keys, _ = data
    step = gigpo_step_groups(segments, groups, keys, CreditConfig(gigpo_match="exact"))
    prompt = groups[segments.sample.numpy()]
    for i in range(len(step)):
        for j in range(len(step)):
            same = bool(keys.known[i] and keys.known[j] and prompt[i] == prompt[j] and keys.state[i] == keys.state[j])
            assert (step[i] == step[j]) == (same or i == j)


@SETTINGS
@given(data=credit_batches())
def test_similar_at_one_groups_identical_earlier_action_sequences(data):
    segments, _, groups, _, keys, _ = data
    step = gigpo_step_groups(segments, groups, keys, CreditConfig(gigpo_match="similar", gigpo_similarity=1.0))
    sample, rank = segments.sample.numpy(), segments.rank.numpy()
    first = np.cumsum(segments.count_per_sample.numpy()) - segments.count_per_sample.numpy()

    def earlier(k):
        return tuple(keys.action[first[sample[k]] : first[sample[k]] + rank[k]])

    for i in range(len(step)):
        for j in range(len(step)):
            same = bool(
                keys.known[i] and keys.known[j] and groups[sample[i]] == groups[sample[j]] and rank[i] == rank[j] and earlier(i) == earlier(j)
            )
            assert (step[i] == step[j]) == (same or i == j)


def test_similar_steps_join_through_a_chain():
    """Similarity need not be transitive: a ~ b and b ~ c put a, b and c in one step group."""
    spans = [(0, 1), (1, 2), (2, 3), (3, 4)]
    records = [make_record(spans, ["as"] * 4, [0] * 4) for _ in range(3)]
    segments = collect_segments(records, [4] * 3)
    actions = [[0, 0, 0, 0], [0, 1, 0, 9], [1, 1, 0, 8]]  # at t = 3: a~b (2/3), b~c (2/3), a~c (1/3)
    keys = DecisionKeys(np.arange(12, dtype=np.int64), np.array(actions, dtype=np.int64).reshape(-1), np.ones(12, dtype=bool))
    step = gigpo_step_groups(segments, np.zeros(3, dtype=np.int64), keys, CreditConfig(gigpo_match="similar", gigpo_similarity=0.6))
    last = step.reshape(3, 4)[:, 3]
    assert last[0] == last[1] == last[2]
    strict = gigpo_step_groups(segments, np.zeros(3, dtype=np.int64), keys, CreditConfig(gigpo_match="similar", gigpo_similarity=0.7))
    assert len(set(strict.reshape(3, 4)[:, 3].tolist())) == 3


def test_step_return_is_the_discounted_outcome():
    """Two rollouts of one prompt in the same states: A_S compares gamma^(n-1-t) * outcome at each state."""
    records = [make_record([(0, 2), (2, 4)], ["as", "as"], [0, 0]), make_record([(0, 2)], ["as"], [0])]
    segments = collect_segments(records, [4, 4])
    keys = DecisionKeys(np.array([7, 8, 7]), np.array([0, 0, 0]), np.ones(3, dtype=bool))
    outcome = torch.tensor([1.0, 1.0])
    config = CreditConfig(turn_gamma=0.5, norm_by_std=False)
    result = gigpo_advantages(segments, outcome, torch.ones(2, 4), np.array([0, 0]), keys, config)
    # state 7: returns 0.5 (first of two turns) and 1.0 (the only turn); mean 0.75; state 8 alone
    assert result.decision_advantages.tolist() == [-0.25, 0.0, 0.25]


# ---- turn-level GAE ------------------------------------------------------------------------------------------------------


@SETTINGS
@given(data=credit_batches(), seed=st.integers(0, 2**16))
def test_one_turn_over_the_response_is_outcome_minus_first_value(data, seed):
    segments, mask, _, _, _, _ = data
    size, length = mask.shape
    whole = collect_segments([make_record([(0, length)], ["as"], [0])] * size, [length] * size)
    generator = torch.Generator().manual_seed(seed)
    rewards = torch.randn(mask.shape, generator=generator)
    values = torch.randn(mask.shape, generator=generator)
    result = turn_gae_advantages(whole, rewards, mask, values, CreditConfig(turn_gae_whiten=False))
    expected = (rewards.double().sum(dim=-1) - values[:, 0].double()).float()[:, None].expand(size, length)
    on = mask > 0
    assert torch.allclose(result.advantages[on], expected[on], rtol=1e-6, atol=1e-6)
    assert torch.allclose(result.returns[on], rewards.double().sum(dim=-1).float()[:, None].expand(size, length)[on], rtol=1e-6, atol=1e-6)
    # a sample without decisions is the same single turn, at its first policy token's value
    none = collect_segments([None] * size, [length] * size)
    bare = turn_gae_advantages(none, rewards, mask, values, CreditConfig(turn_gamma=0.3, turn_lambda=0.1, turn_gae_whiten=False))
    first = torch.where(on.any(dim=1), on.long().argmax(dim=1), 0)
    single = (rewards.double().sum(dim=-1) - values.double()[torch.arange(size), first]).float()[:, None].expand(size, length)
    assert torch.allclose(bare.advantages[on], single[on], rtol=1e-6, atol=1e-6)


@SETTINGS
@given(data=credit_batches(), seed=st.integers(0, 2**16))
def test_undiscounted_turn_advantage_is_the_reward_to_go_minus_value(data, seed):
    segments, mask, _, _, _, _ = data
    generator = torch.Generator().manual_seed(seed)
    rewards = torch.randn(mask.shape, generator=generator).double()
    values = torch.randn(mask.shape, generator=generator).double()
    result = turn_gae_advantages(segments, rewards, mask, values, CreditConfig(turn_gamma=1.0, turn_lambda=1.0, turn_gae_whiten=False))
    expected = []
    for b, start, rank in zip(segments.sample.tolist(), segments.start.tolist(), segments.rank.tolist()):
        # turn rewards from t on: every reward from decision t's start to the end (the first decision's: the whole row)
        expected.append(float(rewards[b, 0 if rank == 0 else start :].sum() - values[b, start]))
    assert np.allclose(result.decision_advantages.numpy(), expected, rtol=1e-9, atol=1e-9)


def test_turn_gae_discounts_by_turns_not_tokens():
    records = [make_record([(0, 3), (5, 6)], ["as", "as"], [0, 0])]
    segments = collect_segments(records, [8])
    rewards = torch.zeros(1, 8)
    rewards[0, 4] = 1.0  # the reply to the first decision
    rewards[0, 7] = 2.0  # after the last decision
    values = torch.zeros(1, 8)
    values[0, 0], values[0, 5] = 0.5, 0.25
    config = CreditConfig(turn_gamma=0.5, turn_lambda=0.5)
    result = turn_gae_advantages(segments, rewards, torch.ones(1, 8), values, config)
    delta = [1.0 + 0.5 * 0.25 - 0.5, 2.0 - 0.25]
    a = [delta[0] + 0.25 * delta[1], delta[1]]
    assert result.decision_advantages.tolist() == pytest.approx(a)
    assert result.returns[0].tolist() == pytest.approx([a[0] + 0.5] * 5 + [a[1] + 0.25] + [a[0] + 0.5] * 2)


# ---- turn-level GRPO -----------------------------------------------------------------------------------------------------


@SETTINGS
@given(data=credit_batches(), config=configs())
def test_pooled_turn_grpo_has_no_shift_from_the_number_of_turns(data, config):
    """Under pooled statistics every critique-free decision of a prompt group with the same outcome gets one value,
    however many turns its episode took."""
    segments, mask, groups, outcome, _, _ = data
    pooled = replace(config, turn_norm="pooled")
    result = turn_grpo_advantages(segments, outcome, mask, groups, pooled)
    sample = segments.sample.numpy()
    neutral = segments.label.numpy() == 0
    key = list(zip(groups[sample][neutral].tolist(), outcome.numpy()[sample][neutral].tolist()))
    seen: dict = {}
    for k, value in zip(key, result.decision_advantages.numpy()[neutral].tolist()):
        assert seen.setdefault(k, value) == value


def _stops_early_batch():
    """One prompt group: a 1-turn and a 3-turn episode with the same outcome and no critique, a third episode critiqued."""
    records = [
        make_record([(0, 4)], ["as"], [0]),
        make_record([(0, 2), (2, 4), (4, 6)], ["as", "as", "as"], [0, 0, 0]),
        make_record([(0, 2), (2, 4), (4, 6)], ["as", "as", "as"], [1, 1, -1]),
    ]
    segments = collect_segments(records, [6] * 3)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1] * 6, [1] * 6], dtype=torch.float32)
    return segments, mask, np.zeros(3, dtype=np.int64), torch.tensor([1.0, 1.0, 0.0])


@pytest.mark.parametrize("turn_norm", ["pooled", "per_turn"])
def test_an_episode_that_stops_early_matches_a_longer_one_only_under_pooled(turn_norm):
    segments, mask, groups, outcome = _stops_early_batch()
    result = turn_grpo_advantages(segments, outcome, mask, groups, CreditConfig(turn_norm=turn_norm))
    short, long = result.advantages[0][mask[0] > 0], result.advantages[1]
    equal = bool(torch.all(long == short[0])) and bool(torch.all(short == short[0]))
    assert equal == (turn_norm == "pooled")


def test_turn_grpo_constant_labels_and_single_samples_give_the_episode_advantage():
    records = [make_record([(0, 2), (2, 3)], ["as", "bt"], [0, 0]), make_record([(1, 3)], ["as"], [1]), None]
    segments = collect_segments(records, [4] * 3)
    mask = torch.ones(3, 4)
    outcome = torch.tensor([1.0, 1.0, 0.0])
    for groups in (np.array([0, 0, 1]), np.array([0, 1, 2])):
        result = turn_grpo_advantages(segments, outcome, mask, groups, CreditConfig(turn_norm="per_turn"))
        episode = episode_advantages(outcome, groups).float()
        assert _well_formed(result, segments, mask)
        if len(set(groups.tolist())) == 3:  # every sample its own group: A_E = outcome / (1 + eps), A_T = 0
            assert torch.equal(result.advantages, episode[:, None].expand(3, 4).contiguous())


# ---- degenerate batches and the configuration -------------------------------------------------------------------------------


@SETTINGS
@given(data=credit_batches(), config=configs(), constant=st.sampled_from([0.0, 1.0, -2.0]))
def test_groups_of_one_constant_rewards_and_zero_labels_stay_finite(data, config, constant):
    segments, mask, _, _, keys, _ = data
    size = segments.batch_size
    outcome = torch.full((size,), constant)
    quiet = replace(segments, label=torch.zeros_like(segments.label))
    for groups in (np.arange(size), np.zeros(size, dtype=np.int64)):
        assert _well_formed(gigpo_advantages(quiet, outcome, mask, groups, keys, config), quiet, mask)
        assert _well_formed(turn_grpo_advantages(quiet, outcome, mask, groups, config), quiet, mask)
    rewards = torch.full(mask.shape, constant)
    assert _well_formed(turn_gae_advantages(quiet, rewards, mask, torch.zeros(mask.shape), config), quiet, mask)


def test_group_normalise_is_zero_alone_and_for_constant_values():
    out = group_normalise(np.array([1.0, 2.0, 3.0, 5.0, 5.0]), np.array([0, 1, 1, 2, 2]), True)
    assert out[0] == 0.0 and out[1] == -out[2] and out[3] == out[4] == 0.0


def test_an_arew_config_passes_its_credit_section():
    config = parse_config({"credit": {"turn_norm": "per_turn", "turn_grpo_weight": 0.5}})
    segments, mask, groups, outcome = _stops_early_batch()
    direct = turn_grpo_advantages(segments, outcome, mask, groups, config.credit)
    assert torch.equal(turn_grpo_advantages(segments, outcome, mask, groups, config).advantages, direct.advantages)


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"gigpo_step_weight": -1}, "gigpo_step_weight"),
        ({"gigpo_match": "fuzzy"}, "gigpo_match"),
        ({"gigpo_similarity": 0}, "gigpo_similarity"),
        ({"gigpo_similarity": 1.5}, "gigpo_similarity"),
        ({"norm_by_std": "yes"}, "norm_by_std"),
        ({"turn_gamma": 1.1}, "turn_gamma"),
        ({"turn_lambda": -0.1}, "turn_lambda"),
        ({"turn_grpo_weight": -0.5}, "turn_grpo_weight"),
        ({"turn_norm": "per_step"}, "turn_norm"),
        ({"unknown": 1}, "unknown"),
    ],
)
def test_invalid_credit_settings_fail_naming_the_key(raw, key):
    with pytest.raises(AReWConfigError, match=f"algorithm.arew.credit.{key}"):
        parse_config({"credit": raw})


def test_credit_defaults():
    assert parse_config({}).credit == CreditConfig()
    assert CreditConfig() == CreditConfig(1.0, "exact", 0.8, True, 1.0, 1.0, 1.0, "pooled")


def test_whitened_turn_gae_is_standardised_over_the_policy_tokens_and_returns_stay_raw():
    records = [make_record([(0, 3), (5, 6)], ["as", "bt"], [0, 0]), make_record([(0, 2)], ["as"], [0])]
    segments = collect_segments(records, [8, 8])
    mask = torch.tensor([[1, 1, 1, 0, 0, 1, 0, 0], [1, 1, 0, 0, 0, 0, 0, 0]], dtype=torch.float32)
    rewards = torch.zeros(2, 8)
    rewards[0, 7], rewards[1, 1] = 1.0, -1.0
    values = torch.linspace(-0.5, 0.5, 16).view(2, 8)
    raw = turn_gae_advantages(segments, rewards, mask, values, CreditConfig(turn_gae_whiten=False))
    white = turn_gae_advantages(segments, rewards, mask, values, CreditConfig())
    policy = mask > 0
    chosen = white.advantages[policy].double()
    assert abs(float(chosen.mean())) < 1e-6 and abs(float(chosen.std()) - 1.0) < 1e-4  # verl's unbiased variance
    assert torch.equal(white.advantages[~policy], torch.zeros(int((~policy).sum())))
    from verl.utils.torch_functional import masked_whiten

    torch.testing.assert_close(white.advantages[policy], masked_whiten(raw.advantages, mask)[policy])
    assert torch.equal(white.returns, raw.returns)


@SETTINGS
@given(data=credit_batches(), config=configs(), weighting=st.sampled_from(["per_step", "minority_fixed"]))
def test_arew_on_each_baseline_adds_the_same_zero_sum_critique_term(data, config, weighting):
    """AReW's reweighting does not depend on the base it sits on: on GiGPO, turn GAE and turn GRPO it adds the term
    it adds to a zero advantage, and that term sums to zero in each trajectory (per_step: over its critiqued decisions;
    otherwise over their model tokens)."""
    from arew.core import reweight

    segments, mask, groups, outcome, keys, _ = data
    arew = parse_config({"lam": 0.7, "weighting": weighting})
    values = torch.linspace(-1, 1, mask.numel()).reshape(mask.shape)
    rewards = torch.zeros(mask.shape)
    rewards[:, -1] = outcome
    bases = (
        gigpo_advantages(segments, outcome, mask, groups, keys, config).advantages,
        turn_gae_advantages(segments, rewards, mask, values, config).advantages,
        turn_grpo_advantages(segments, outcome, mask, groups, config).advantages,
    )
    term = reweight(torch.zeros(mask.shape), mask, segments, arew, step=1)
    policy = (mask > 0).float()
    for base in bases:
        added = reweight(base, mask, segments, arew, step=1).tensor - base
        torch.testing.assert_close(added, term.tensor, atol=1e-5, rtol=0)
    coefficients = term.coefficients.double()
    for sample in range(segments.batch_size):
        members = segments.sample == sample
        if weighting == "per_step":
            assert abs(float(coefficients[members].sum())) < 1e-9
        else:
            tokens = torch.tensor([float(policy[sample, s:e].sum()) for s, e in zip(segments.start[members].tolist(), segments.end[members].tolist())], dtype=torch.float64)
            assert abs(float((coefficients[members] * tokens).sum())) < 1e-5
