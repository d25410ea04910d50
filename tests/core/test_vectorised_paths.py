"""The vectorised paths against the plain-Python reference (arew.core.reference) on random batches, bit for bit
where both compute the same floating-point operations in the same order."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from arew.core import (
    QualityTracker,
    collect_segments,
    make_record,
    parse_config,
    reweight,
    reweight_advantages,
    shape_rewards,
)
from arew.core import reference as ref
from arew.core.coefficients import decision_coefficients
from arew.core.config import WEIGHTINGS
from arew.core.records import CHANNELS
from arew.core.reweight import _model_mask, _run_bounds, _span_model_tokens
from arew.core.schedule import schedule_factor
from arew.core.stats import critique_stats
from arew.core.synact import (
    apply_synact,
    collect_decision_keys,
    outcome_classes,
    synact,
)
from arew.core.transforms import transform_labels
from core_helpers import (
    batches,
    draw_order,
    dyadic_advantages,
    flat,
    per_decision,
    token_counts,
    trajectories,
)

SETTINGS = settings(max_examples=150, deadline=None)


@st.composite
def configs(draw):
    """A valid ``arew`` section exercising every option that changes the advantage."""
    grouping = draw(st.sampled_from(["pooled", "separate"]))
    weighting = draw(st.sampled_from(WEIGHTINGS))
    raw = {
        "channels": draw(st.sampled_from(["as+bt", "as+bt", "as", "bt", "off"])),
        "grouping": grouping,
        "weighting": weighting,
        "lam": draw(st.sampled_from([1.0, 0.37, 1 / 3, 1e-9, 7.0, 0.0])),
        "reward_coef": draw(st.sampled_from([0.1, 1 / 3, -0.5])),
        "window": {
            "keep": draw(st.sampled_from(["all", "all", "first", "last"])),
            "fraction": draw(st.sampled_from([0.4, 0.3, 0.0, 1.0, 0.55])),
            "fill": draw(st.sampled_from([0, 1, -1])),
        },
        "noise": {
            "flip_prob": draw(st.sampled_from([0.0, 0.0, 0.1, 0.5, 1.0])),
            "neg_to_pos_prob": draw(st.sampled_from([0.0, 0.0, 0.3, 1.0])),
            "seed": draw(st.integers(0, 5)),
        },
    }
    if weighting == "step_abs_sum":
        raw["negatives"] = draw(st.sampled_from(["full", "prefix", "suffix"]))
    if grouping == "separate":
        raw["lam_as"] = draw(st.sampled_from([None, 2.0, 1 / 7, 0.0]))
        raw["lam_bt"] = draw(st.sampled_from([None, 5.0, 1 / 3]))
    start = draw(st.integers(0, 4))
    raw["schedule"] = {
        "start_step": start,
        "end_step": draw(st.sampled_from([None, start + 1, start + 3])),
        "warmup_steps": draw(st.integers(0, 3)),
    }
    return parse_config(raw)


def _tensor(rows, like: torch.Tensor) -> torch.Tensor:
    return torch.tensor(rows, dtype=like.dtype).reshape(like.shape)


# sums over decisions that the vectorised paths add in another order (torch's reductions)
_SUMS = ("arew/abs_coef_per_token", "arew/abs_coef_per_traj", "arew/intermediate_reward_per_traj")


def _same_stats(segments, stats, expected):
    """The reference's statistics, with the record counts it cannot know; sums up to rounding, the rest exactly."""
    expected = {**expected, "arew/records_dropped": float(segments.dropped_samples)}
    expected["arew/samples_without_records"] = float(segments.samples_without_records)
    assert stats.keys() == expected.keys()
    for key, value in stats.items():
        if key in _SUMS:
            assert math.isclose(value, expected[key], rel_tol=1e-12, abs_tol=1e-12), key
        else:
            assert value == expected[key], key
    return True


@SETTINGS
@given(
    data=batches(noise_keys=True),
    config=configs(),
    step=st.integers(1, 8),
    dtype=st.sampled_from([torch.float32, torch.float64]),
    seed=st.integers(0, 2**16),
)
def test_reweighting_equals_the_reference(data, config, step, dtype, seed):
    segments, mask = data
    base = torch.randn(mask.shape, generator=torch.Generator().manual_seed(seed)).to(dtype)
    result = reweight(base.clone(), mask, segments, config, step)
    batch = trajectories(segments, mask)
    precision = "float32" if dtype == torch.float32 else "float64"
    expected = ref.reweight(batch, base.tolist(), config, step, draw_order(segments), precision=precision)
    assert result.tensor.dtype == dtype and torch.equal(result.tensor, _tensor(expected.rows, base))
    assert result.labels.tolist() == flat(expected.labels)
    assert torch.equal(result.coefficients, torch.tensor(flat(expected.coefficients), dtype=torch.float64))
    assert _same_stats(segments, result.stats, expected.stats)
    plain, _ = reweight_advantages(base.clone(), mask, segments, config, step)
    assert torch.equal(plain, result.tensor)


@SETTINGS
@given(
    data=batches(noise_keys=True),
    config=configs(),
    step=st.integers(1, 8),
    dtype=st.sampled_from([torch.float32, torch.float64]),
    seed=st.integers(0, 2**16),
)
def test_reward_shaping_equals_the_reference(data, config, step, dtype, seed):
    segments, mask = data
    rewards = torch.randn(mask.shape, generator=torch.Generator().manual_seed(seed)).to(dtype)
    result = shape_rewards(rewards, mask, segments, config, step)
    precision = "float32" if dtype == torch.float32 else "float64"
    expected = ref.shape_rewards(trajectories(segments, mask), rewards.tolist(), config, step, draw_order(segments), precision)
    assert result.tensor.dtype == dtype and torch.equal(result.tensor, _tensor(expected.rows, rewards))
    assert result.labels.tolist() == flat(expected.labels)
    assert torch.equal(result.coefficients, torch.tensor(flat(expected.coefficients), dtype=torch.float64))
    assert _same_stats(segments, result.stats, expected.stats)


@SETTINGS
@given(
    data=batches(),
    grouping=st.sampled_from(["pooled", "separate"]),
    weighting=st.sampled_from(WEIGHTINGS),
    negatives=st.sampled_from(["full", "prefix", "suffix"]),
    lam_as=st.floats(0.0, 10.0, allow_subnormal=False),
    lam_bt=st.floats(0.0, 10.0, allow_subnormal=False),
)
def test_decision_coefficients_equal_the_reference(data, grouping, weighting, negatives, lam_as, lam_bt):
    segments, mask = data
    counts = token_counts(segments, mask)
    coef = decision_coefficients(segments.label, segments, grouping, weighting, (lam_as, lam_bt), counts, negatives)
    batch = trajectories(segments, mask)
    labels = [[d.label for d in traj.decisions] for traj in batch]
    expected = ref.decision_coefficients(batch, labels, grouping, weighting, {"as": lam_as, "bt": lam_bt}, negatives)
    assert torch.equal(coef, torch.tensor(flat(expected), dtype=torch.float64))


@SETTINGS
@given(data=batches(noise_keys=True), config=configs(), step=st.integers(1, 8))
def test_transforms_and_statistics_equal_the_reference(data, config, step):
    segments, mask = data
    label = transform_labels(segments, config, step)
    batch = trajectories(segments, mask)
    expected = ref.transform_labels(batch, config, step, draw_order(segments))
    assert label.tolist() == flat(expected)
    stats = critique_stats(segments, label, token_counts(segments, mask), float((mask > 0).sum()), config.grouping)
    expected_stats = ref.critique_stats(
        batch, expected, config.grouping, segments.dropped_samples, segments.samples_without_records
    )
    assert stats == expected_stats


@settings(max_examples=100, deadline=None)
@given(data=batches(noise_keys=True), config=configs(), step=st.integers(1, 8))
def test_noise_goes_with_the_samples_in_the_reference_too(data, config, step):
    """The reference draws by noise key: reversing the batch moves each sample's noise with it."""
    segments, mask = data
    if segments.noise_order is None:
        return
    batch = trajectories(segments, mask)
    order = draw_order(segments)
    labels = ref.transform_labels(batch, config, step, order)
    reverse = list(range(len(batch)))[::-1]
    back = ref.transform_labels([batch[i] for i in reverse], config, step, [reverse.index(i) for i in order])
    assert back[::-1] == labels


@settings(max_examples=300, deadline=None)
@given(data=batches(max_batch=4, max_length=25))
def test_span_counts_equal_the_reference(data):
    segments, mask = data
    model_mask = _model_mask(mask)
    counts = _span_model_tokens(model_mask, _run_bounds(segments, mask.shape[1], mask.numel()))
    batch = trajectories(segments, mask)
    assert counts.dtype == torch.long and counts.tolist() == flat(ref.policy_token_counts(batch))
    assert float(np.count_nonzero(model_mask)) == ref.model_tokens(batch)


@settings(max_examples=300, deadline=None)
@given(
    start=st.integers(0, 6),
    end=st.one_of(st.none(), st.integers(1, 12)),
    warmup=st.integers(0, 5),
    step=st.integers(1, 14),
)
def test_schedule_equals_the_reference(start, end, warmup, step):
    if end is not None and end <= start:
        end = None
    schedule = parse_config({"schedule": {"start_step": start, "end_step": end, "warmup_steps": warmup}}).schedule
    assert schedule_factor(schedule, step) == ref.schedule_factor(schedule, step)


@settings(max_examples=100, deadline=None)
@given(
    data=batches(odd_masks=False),
    grouping=st.sampled_from(["pooled", "separate"]),
    channels=st.sampled_from(["as+bt", "as"]),
    direction=st.sampled_from(["outcome", "increment"]),
    ema=st.sampled_from([0.0, 0.5, 0.9]),
    min_decisions=st.integers(1, 3),
    min_class_share=st.sampled_from([0.0, 0.05, 0.3]),
    enabled=st.booleans(),
    warmup=st.integers(0, 2),
    full_at=st.sampled_from([0.6, 0.7, 1.0]),
    flip=st.sampled_from([0.0, 0.3]),
    seed=st.integers(0, 2**16),
)
def test_quality_gating_equals_the_reference_over_steps(
    data, grouping, channels, direction, ema, min_decisions, min_class_share, enabled, warmup, full_at, flip, seed
):
    segments, mask = data
    config = parse_config(
        {
            "grouping": grouping,
            "channels": channels,
            "lam": 0.7,
            "noise": {"flip_prob": flip},
            "quality": {"ema": ema, "min_decisions": min_decisions, "min_class_share": min_class_share},
            "adaptive": {"enabled": enabled, "warmup_steps": warmup, "full_at": full_at},
        }
    )
    tracker = QualityTracker(config.quality, config.adaptive, config.enabled_channels, grouping, direction)
    state = ref.QualityState(config, direction)
    batch = trajectories(segments, mask)
    for step in (1, 2, 3, 4):
        base = dyadic_advantages(seed + step, mask.shape)
        result = reweight(base, mask, segments, config, step, tracker)
        expected = ref.reweight(batch, base.tolist(), config, step, quality=state)
        assert torch.equal(result.tensor, _tensor(expected.rows, base)), step
        assert torch.equal(result.coefficients, torch.tensor(flat(expected.coefficients), dtype=torch.float64)), step
        for name in (*CHANNELS, ref.POOLED):
            assert tracker.states[name].sums.tolist() == state.sums[name], (step, name)
        assert tracker.factors() == tuple(state.factors()[name] for name in CHANNELS)
        per_sign = ref.accuracy_sums(batch, expected.labels, _estimates(direction, batch, base))["as"]
        assert result.stats["arew/as/accuracy_decisions"] == per_sign[0][2] + per_sign[1][2]
        accuracy = ref.balanced_accuracy(per_sign, config.quality.min_class_share)
        assert (math.isnan(result.stats["arew/as/accuracy"]) and accuracy is None) or result.stats["arew/as/accuracy"] == accuracy


def _estimates(direction, batch, base):
    if direction == "increment":
        return ref.decision_increments(batch, base.tolist())
    return ref.span_mean_advantages(batch, base.tolist())


@st.composite
def synact_batches(draw):
    """GRPO groups whose rollouts share a few states and actions, some without keys."""
    groups = draw(st.integers(1, 3))
    per_group = draw(st.integers(1, 4))
    size = groups * per_group
    decisions = [draw(st.integers(0, 4)) for _ in range(size)]
    records, raw_keys = [], []
    for n in decisions:
        channels = [draw(st.sampled_from(CHANNELS)) for _ in range(n)]
        labels = [draw(st.sampled_from([-1, 0, 0, 1])) for _ in range(n)]
        records.append(make_record([(p, p + 1) for p in range(n)], channels, labels))
        state = [draw(st.integers(0, 2)) for _ in range(n)]
        action = [draw(st.integers(0, 2)) for _ in range(n)]
        raw_keys.append(None if draw(st.integers(0, 5)) == 0 else {"state": state, "action": action})
    segments = collect_segments(records, [max(n, 1) for n in decisions])
    group = np.repeat(np.arange(groups), per_group)
    outcome = np.array([draw(st.sampled_from([0.0, 1.0, 0.5, -2.0, 0.1, 0.2, 0.3, 0.7])) for _ in range(size)])
    return segments, raw_keys, group, outcome, draw(st.integers(2, 3))


@settings(max_examples=150, deadline=None)
@given(data=synact_batches(), mode=st.sampled_from(["off", "only", "fill"]))
def test_synact_critiques_equal_the_reference(data, mode):
    segments, raw_keys, group, outcome, min_rollouts = data
    result = synact(segments, collect_decision_keys(raw_keys, segments), group, outcome, min_rollouts)
    mask = torch.ones(segments.batch_size, int(segments.end.max()) if len(segments.end) else 1)
    batch = trajectories(segments, mask)
    keys = [None if k is None else list(zip(k["state"], k["action"])) for k in raw_keys]
    labels, points = ref.synact_critiques(batch, keys, group.tolist(), outcome.tolist(), min_rollouts)
    assert result.labels.tolist() == flat(labels)
    assert result.mi.tolist() == pytest.approx([point.mi for point in points], rel=1e-12, abs=1e-15)
    members = per_decision(segments, torch.from_numpy(result.point))
    for index, point in enumerate(points):
        assert all(members[i][k] == index for i, k in point.members)
    applied, _ = apply_synact(segments, result, mode)
    expected = ref.apply_synact(batch, labels, mode)
    assert applied.label.tolist() == [d.label for traj in expected for d in traj.decisions]


@pytest.mark.parametrize("outcome", [[0.7, 0.7, 0.7], [0.2, 0.3, 0.1], [0.3, 0.2, 0.1], [1.0, 0.0, 0.5]])
def test_outcome_classes_equal_the_reference_where_the_group_mean_rounds(outcome):
    groups = np.zeros(len(outcome), dtype=np.int64)
    classes = outcome_classes(groups, np.array(outcome))
    assert classes.tolist() == ref.outcome_classes(groups.tolist(), outcome)
    if len(set(outcome)) == 1:
        assert classes.tolist() == [0] * len(outcome)  # equal outcomes are one class, however the mean rounds


def test_nothing_to_add_returns_the_base_advantages():
    segments = collect_segments([make_record([(0, 2), (2, 4)], ["as", "bt"], [1, 1])], [4])
    base = torch.randn(1, 4)
    out, _ = reweight_advantages(base, torch.ones(1, 4), segments, parse_config({}), 0)
    assert out is base


def test_numpy_numbers_are_read_like_python_ones():
    record = {"start": np.array([0, 3]), "end": [np.int64(3), 5], "channel": ["as", "bt"], "label": [np.int8(1), -1]}
    segments = collect_segments([record], [5])
    assert segments.start.tolist() == [0, 3] and segments.end.tolist() == [3, 5] and segments.label.tolist() == [1, -1]
