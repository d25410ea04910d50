"""The paper's coefficients (Eq. 1) and the reference's token balancing, by hand and by property."""

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from arew.core import collect_segments, make_record, parse_config, reweight_advantages
from arew.core.coefficients import decision_coefficients
from core_helpers import token_counts


def _reweight(records, lengths, mask, advantages=None, step=0, **config):
    segments = collect_segments(records, lengths)
    advantages = torch.zeros(mask.shape) if advantages is None else advantages
    return reweight_advantages(advantages, mask, segments, parse_config(config), step)


def test_per_step_hand_computed():
    # decisions: +1 (3 tokens), -1 (2), +1 (2), 0 (2), -1 (1): |P| = 2, |N| = 2, lambda = 0.5
    record = make_record([(0, 3), (3, 5), (5, 7), (7, 9), (9, 10)], ["as", "bt", "as", "bt", "as"], [1, -1, 1, 0, -1])
    mask = torch.ones(1, 12)
    out, stats = _reweight([record], [12], mask, lam=0.5)
    expected = torch.tensor([[0.25] * 3 + [-0.25] * 2 + [0.25] * 2 + [0.0] * 2 + [-0.25] + [0.0] * 2])
    torch.testing.assert_close(out, expected)
    assert stats["arew/both_signs_frac"] == 1.0
    assert stats["arew/as/pos"] == 2 and stats["arew/as/neg"] == 1 and stats["arew/bt/neg"] == 1


def test_unequal_counts_follow_one_over_set_size():
    # |P| = 3, |N| = 1 -> u = +1/3 on each positive, -1 on the negative
    record = make_record([(0, 1), (1, 2), (2, 3), (3, 4)], ["as"] * 4, [1, 1, 1, -1])
    out, _ = _reweight([record], [4], torch.ones(1, 4), lam=1.0)
    torch.testing.assert_close(out, torch.tensor([[1 / 3, 1 / 3, 1 / 3, -1.0]]))


def test_one_sided_trajectory_gets_nothing_and_base_advantage_kept():
    record = make_record([(0, 2), (2, 4)], ["as", "bt"], [1, 1])
    base = torch.tensor([[0.7, 0.7, 0.7, 0.7]])
    out, stats = _reweight([record], [4], torch.ones(1, 4), advantages=base.clone())
    torch.testing.assert_close(out, base)
    assert stats["arew/both_signs_frac"] == 0.0


def test_environment_tokens_never_change():
    record = make_record([(0, 4), (4, 8)], ["as", "bt"], [1, -1])
    mask = torch.tensor([[1, 1, 0, 0, 1, 0, 1, 1]], dtype=torch.float32)
    base = torch.full((1, 8), 0.3) * mask
    out, _ = _reweight([record], [8], mask, advantages=base.clone())
    assert torch.equal(out[mask == 0], base[mask == 0])
    torch.testing.assert_close(out[0, [0, 1, 4, 6, 7]], torch.tensor([1.3, 1.3, -0.7, -0.7, -0.7]))


def test_separate_channels_use_their_own_sets_and_strengths():
    # AS: one + and one -; BT: only + (one-sided -> nothing on BT when separate)
    record = make_record([(0, 1), (1, 2), (2, 3), (3, 4)], ["as", "bt", "as", "bt"], [1, 1, -1, 1])
    mask = torch.ones(1, 4)
    pooled, _ = _reweight([record], [4], mask, lam=1.0)
    separate, _ = _reweight([record], [4], mask, grouping="separate", lam_as=2.0, lam_bt=5.0)
    torch.testing.assert_close(pooled, torch.tensor([[1 / 3, 1 / 3, -1.0, 1 / 3]]))
    torch.testing.assert_close(separate, torch.tensor([[2.0, 0.0, -2.0, 0.0]]))


def test_minority_fixed_matches_reference_token_balancing():
    # + decision of 4 tokens, - decisions of 1 and 1 token: T+ = 4, T- = 2 -> minority is negative
    record = make_record([(0, 4), (4, 5), (5, 6)], ["as", "bt", "as"], [1, -1, -1])
    out, _ = _reweight([record], [6], torch.ones(1, 6), weighting="minority_fixed", lam=0.2)
    torch.testing.assert_close(out, torch.tensor([[0.1] * 4 + [-0.2, -0.2]]))
    assert abs(float(out.sum())) < 1e-6


def test_minority_fixed_equals_per_step_with_scaled_lambda_on_equal_turns():
    labels = [1, -1, -1, 1, -1, 0]
    spans = [(3 * i, 3 * i + 3) for i in range(len(labels))]
    record = make_record(spans, ["as", "bt"] * 3, labels)
    mask = torch.ones(1, 18)
    scale = 0.5
    minority, _ = _reweight([record], [18], mask, weighting="minority_fixed", lam=scale)
    per_step, _ = _reweight([record], [18], mask, lam=scale * min(2, 3))
    torch.testing.assert_close(minority, per_step)


def test_schedule_reads_the_step():
    record = make_record([(0, 1), (1, 2)], ["as", "bt"], [1, -1])
    config = dict(lam=1.0, schedule=dict(start_step=10, end_step=20, warmup_steps=4))
    values = [float(_reweight([record], [2], torch.ones(1, 2), step=s, **config)[0][0, 0]) for s in (9, 10, 11, 13, 19, 20)]
    assert values == [0.0, 0.25, 0.5, 1.0, 1.0, 0.0]


def test_channels_off_is_vanilla():
    record = make_record([(0, 1), (1, 2)], ["as", "bt"], [1, -1])
    base = torch.tensor([[0.5, 0.5]])
    out, _ = _reweight([record], [2], torch.ones(1, 2), advantages=base.clone(), channels="off")
    torch.testing.assert_close(out, base)


@st.composite
def batches(draw):
    batch = draw(st.integers(1, 6))
    length = draw(st.integers(1, 40))
    records, masks = [], []
    for _ in range(batch):
        cuts = sorted(draw(st.sets(st.integers(0, length), min_size=0, max_size=12)))
        spans = [(a, b) for a, b in zip(cuts, cuts[1:]) if draw(st.booleans())]
        labels = [draw(st.sampled_from([-1, 0, 1])) for _ in spans]
        channels = [draw(st.sampled_from(["as", "bt"])) for _ in spans]
        records.append(make_record(spans, channels, labels) if spans or draw(st.booleans()) else None)
        masks.append([draw(st.sampled_from([0, 1, 1])) for _ in range(length)])
    return records, torch.tensor(masks, dtype=torch.float32), length


@settings(max_examples=300, deadline=None)
@given(
    data=batches(),
    grouping=st.sampled_from(["pooled", "separate"]),
    # step_abs_sum, whose neutral decisions can stand in for a missing side, has its own in test_weighting_modes.py
    weighting=st.sampled_from(["per_step", "minority_fixed", "fixed_pos", "fixed_neg", "abs_sum"]),
    lam=st.floats(0.0, 10.0),
)
def test_properties_over_random_label_patterns(data, grouping, weighting, lam):
    records, mask, length = data
    segments = collect_segments(records, [length] * len(records))
    config = parse_config(dict(grouping=grouping, weighting=weighting, lam=lam))
    base = torch.randn(mask.shape) * mask
    out, stats = reweight_advantages(base.clone(), mask, segments, config, step=0)
    delta = out - base
    assert torch.isfinite(out).all()
    assert torch.equal(delta[mask == 0], torch.zeros_like(delta[mask == 0]))  # env tokens untouched
    counts = token_counts(segments, mask)
    coef = decision_coefficients(segments.label, segments, grouping, weighting, config.channel_lambdas(), counts)
    groups = segments.sample if grouping == "pooled" else segments.sample * 2 + segments.channel
    for g in torch.unique(groups).tolist():
        members = groups == g
        labels = segments.label[members]
        if weighting == "per_step":
            # zero sum in step space
            assert math.isclose(float(coef[members].sum()), 0.0, abs_tol=1e-9)
        else:
            # zero sum over tokens
            assert math.isclose(float((coef[members] * counts[members]).sum()), 0.0, abs_tol=1e-6 * (1 + lam))
        one_sided = not ((labels == 1).any() and (labels == -1).any())
        if one_sided:
            assert torch.all(coef[members] == 0)
        else:
            signs = torch.sign(coef[members])
            assert torch.all((signs == labels) | (labels == 0) | (coef[members] == 0))
    assert 0.0 <= stats["arew/both_signs_frac"] <= 1.0


@settings(max_examples=100, deadline=None)
@given(data=batches())
def test_pooled_and_separate_agree_when_each_trajectory_uses_one_channel(data):
    records, mask, length = data
    single = [
        None if r is None else make_record(list(zip(r["start"], r["end"])), ["bt"] * len(r["start"]), r["label"])
        for r in records
    ]
    segments = collect_segments(single, [length] * len(single))
    pooled, _ = reweight_advantages(torch.zeros(mask.shape), mask, segments, parse_config({}), 0)
    separate, _ = reweight_advantages(torch.zeros(mask.shape), mask, segments, parse_config({"grouping": "separate"}), 0)
    torch.testing.assert_close(pooled, separate)


def test_model_tokens_outside_every_decision_stay_exactly_unchanged_after_touching_spans():
    # touching spans with awkward coefficients (1/3, -1/7 ...) then model tokens outside any span
    labels = [1, 1, 1, -1, -1, -1, -1, -1, -1, -1]
    record = make_record([(i, i + 1) for i in range(10)], ["as", "bt"] * 5, labels)
    mask = torch.ones(1, 16)
    out, _ = _reweight([record], [16], mask, lam=0.37)
    assert torch.equal(out[0, 10:], torch.zeros(6))  # a float-only paint leaves about -3.7e-9 here
    torch.testing.assert_close(out[0, :3], torch.full((3,), 0.37 / 3))
