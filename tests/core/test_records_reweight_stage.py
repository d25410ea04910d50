"""The reweighting stage's (B, L) passes over the flattened records: token counts, painting, dtypes, aliasing."""

import pytest
import torch

from arew.core import collect_segments, make_record, parse_config, reweight_advantages
from arew.core import reference as ref
from arew.core.coefficients import decision_coefficients
from arew.core.reweight import _model_mask, _run_bounds, _span_model_tokens
from core_helpers import per_decision, token_counts, trajectories

# (the span counts on random batches: tests/core/test_vectorised_paths.py, against arew.core.reference)


def _counts(segments, mask):
    model_mask = _model_mask(mask)
    return _span_model_tokens(model_mask, _run_bounds(segments, mask.shape[1], mask.numel()))


@pytest.mark.parametrize("length", [2**16 - 1, 2**16, 70_000])
def test_span_counts_of_long_rows(length):
    spans = [(0, length // 3), (length // 3, length - 1), (length - 1, length)]
    segments = collect_segments([make_record(spans, ["as", "bt", "as"], [1, -1, 1]), None], [length, length])
    mask = torch.ones(2, length)
    mask[0, 5] = 0
    assert _counts(segments, mask).tolist() == [length // 3 - 1, length - 1 - length // 3, 1]


@pytest.mark.parametrize(
    "dtype, mask_dtype",
    [(torch.float32, torch.bool), (torch.float64, torch.int64), (torch.bfloat16, torch.bfloat16), (torch.float16, torch.float32)],
)
def test_every_dtype_gets_base_plus_the_float32_coefficient(dtype, mask_dtype):
    records = [make_record([(0, 3), (3, 5), (6, 8)], ["as", "as", "bt"], [1, -1, 1]), make_record([(1, 4)], ["bt"], [-1])]
    segments = collect_segments(records, [8, 8])
    mask = torch.tensor([[1, 1, 0, 1, 1, 1, 1, 1], [0, 1, 1, 1, 1, 0, 0, 1]]).to(mask_dtype)
    config = parse_config({"grouping": "separate", "lam_as": 1 / 3, "lam_bt": 0.7})
    coef = decision_coefficients(
        segments.label, segments, config.grouping, config.weighting, config.channel_lambdas(), token_counts(segments, mask)
    )
    base = torch.randn(2, 8).to(dtype)
    batch = trajectories(segments, mask)
    # A + the float32 coefficient (0 off the spans' policy tokens) in A's dtype
    values = torch.tensor(ref.token_values(batch, per_decision(segments, coef)), dtype=torch.float32)
    expected = base + values.to(dtype)
    out, _ = reweight_advantages(base, mask, segments, config, 0)
    assert out.dtype == dtype and torch.equal(out, expected)


def test_strided_and_grad_requiring_advantages():
    segments = collect_segments([make_record([(0, 2), (2, 4)], ["as", "as"], [1, -1])] * 3, [4] * 3)
    mask = torch.ones(3, 4)
    base = torch.randn(4, 3).t()  # not contiguous
    out, _ = reweight_advantages(base, mask, segments, parse_config({"lam": 0.5}), 0)
    assert torch.equal(out, base + torch.tensor([0.5, 0.5, -0.5, -0.5]))
    leaf = base.clone().requires_grad_()
    out, _ = reweight_advantages(leaf, mask, segments, parse_config({"lam": 0.5}), 0)
    assert out.requires_grad and torch.equal(out.detach(), base + torch.tensor([0.5, 0.5, -0.5, -0.5]))


def test_the_result_shares_memory_with_nothing():
    """GRPO's base returns one tensor as advantages and returns; neither may change, and no buffer is reused."""
    segments = collect_segments([make_record([(0, 2), (2, 4)], ["as", "bt"], [1, -1])] * 2, [6, 6])
    mask = torch.ones(2, 6)
    config = parse_config({"grouping": "pooled"})
    advantages = torch.randn(2, 6)
    returns = advantages  # what verl's GRPO hands back
    kept = advantages.clone()
    first, _ = reweight_advantages(advantages, mask, segments, config, 0)
    second, _ = reweight_advantages(advantages, mask, segments, config, 0)
    assert torch.equal(advantages, kept) and torch.equal(returns, kept)
    assert torch.equal(first, second) and not torch.equal(first, kept)
    pointers = {t.untyped_storage().data_ptr() for t in (first, second, advantages, mask)}
    assert len(pointers) == 4
    first.zero_()
    assert torch.equal(second, reweight_advantages(advantages, mask, segments, config, 0)[0])


def test_reweight_and_shape_rewards_report_what_each_decision_got():
    from arew.core import reweight, shape_rewards

    records = [make_record([(0, 2), (3, 5), (6, 8)], ["as", "bt", "as"], [1, -1, 0]), make_record([(1, 4)], ["as"], [-1])]
    segments = collect_segments(records, torch.tensor([8, 8]))
    mask = torch.ones(2, 8)
    mask[0, 1] = 0  # an environment token inside the first span
    config = parse_config({"noise": {"flip_prob": 0.5, "seed": 1}})
    base = torch.zeros(2, 8)
    result = reweight(base, mask, segments, config, step=1)
    assert result.labels.shape == (4,) and result.coefficients.shape == (4,)
    for k in range(4):
        row, start, end = int(segments.sample[k]), int(segments.start[k]), int(segments.end[k])
        on_model = mask[row, start:end] > 0
        assert torch.all(result.tensor[row, start:end][on_model] == float(result.coefficients[k]))
    assert torch.equal(torch.sign(result.coefficients).long(), result.labels * (result.coefficients != 0))
    shaped = shape_rewards(torch.zeros(2, 8), mask, segments, parse_config({"mode": "intermediate_reward", "reward_coef": 0.5}), 1)
    assert torch.equal(shaped.labels, segments.label)
    assert shaped.coefficients.tolist() == [0.5, -0.5, 0.0, -0.5]
    assert shaped.tensor[0, 0] == 0.5 and shaped.tensor[0, 4] == -0.5 and shaped.tensor[1, 3] == -0.5
