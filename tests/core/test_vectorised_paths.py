"""The vectorised token and statistics paths against straightforward per-decision loops, bit for bit."""

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from arew.core import collect_segments, make_record, parse_config, reweight_advantages
from arew.core.coefficients import decision_coefficients, model_mask_of, model_token_counts, paint_spans, span_totals
from arew.core.config import WEIGHTINGS
from arew.core.records import CHANNELS
from arew.core.stats import critique_stats
from arew.core.transforms import transform_labels


@st.composite
def batches(draw):
    """Spans that often touch, also across rows, and masks with odd values, sometimes 1 on every span token."""
    batch = draw(st.integers(1, 5))
    length = draw(st.integers(1, 30))
    spans_are_model_tokens = draw(st.booleans())
    records, mask = [], []
    for _ in range(batch):
        cuts = sorted(draw(st.sets(st.integers(0, length), max_size=10)))
        spans = [(a, b) for a, b in zip(cuts, cuts[1:]) if draw(st.integers(0, 3))]
        labels = [draw(st.sampled_from([-1, 0, 1])) for _ in spans]
        channels = [draw(st.sampled_from(CHANNELS)) for _ in spans]
        records.append(make_record(spans, channels, labels) if spans or draw(st.booleans()) else None)
        row = [draw(st.sampled_from([0.0, 1.0, 1.0, 2.5, -1.0])) for _ in range(length)]
        for start, end in spans if spans_are_model_tokens else []:
            row[start:end] = [1.0] * (end - start)
        mask.append(row)
    return collect_segments(records, [length] * batch), torch.tensor(mask)


def _decisions(segments):
    return zip(*(getattr(segments, f).tolist() for f in ("sample", "start", "end", "channel", "label")))


def _reference_reweight(base, per_decision, segments, mask):
    out = base.clone()
    for k, (b, start, end, _, _) in enumerate(_decisions(segments)):
        for t in range(start, end):
            if mask[b, t] > 0:
                out[b, t] = base[b, t] + per_decision[k].float().to(base.dtype)
    return out


@settings(max_examples=300, deadline=None)
@given(
    data=batches(),
    dtype=st.sampled_from([torch.float32, torch.float64]),
    lam=st.sampled_from([0.37, 1 / 3, 1e-9, 7.0]),
    weighting=st.sampled_from(WEIGHTINGS),
)
def test_reweighting_matches_a_per_token_loop_exactly(data, dtype, lam, weighting):
    segments, mask = data
    config = parse_config({"grouping": "separate", "weighting": weighting, "lam_as": lam, "lam_bt": 1 / 7})
    counts = model_token_counts(segments, (mask > 0).float())
    coef = decision_coefficients(segments.label, segments, "separate", weighting, config.channel_lambdas(), counts)
    base = torch.randn(mask.shape, dtype=dtype)
    expected = _reference_reweight(base, coef, segments, mask)
    out, _ = reweight_advantages(base.clone(), mask, segments, config, 0)
    assert out.dtype == dtype and torch.equal(out, expected)


@settings(max_examples=100, deadline=None)
@given(data=batches())
def test_painting_writes_each_value_on_its_whole_span(data):
    segments, mask = data
    values = torch.randn(len(segments.sample), dtype=torch.float64)
    painted = paint_spans(values, segments, out=torch.full(mask.shape, float("nan")))
    expected = torch.zeros(mask.shape)
    for k, (b, start, end, _, _) in enumerate(_decisions(segments)):
        expected[b, start:end] = values[k].float()
    assert torch.equal(painted, expected)


@settings(max_examples=300, deadline=None)
@given(data=batches())
def test_token_totals_match_counting_by_hand(data):
    segments, mask = data
    model_mask = model_mask_of(mask)
    assert torch.equal(model_mask, (mask > 0).float())
    counts, total = span_totals(segments, model_mask.cumsum(dim=1))
    expected = [int(model_mask[b, start:end].sum()) for b, start, end, _, _ in _decisions(segments)]
    assert counts.tolist() == expected
    assert total == float((mask > 0).sum())


def _reference_stats(segments, label, counts, model_mask, grouping):
    batch = max(segments.batch_size, 1)
    rows = list(_decisions(segments))
    stats = {
        "arew/records_dropped": float(segments.dropped_samples),
        "arew/samples_without_records": float(segments.samples_without_records),
        "arew/decisions": float(len(rows)),
    }
    signs = {}  # P/N set -> labels in it
    for k, (b, _, _, c, _) in enumerate(rows):
        signs.setdefault((b, c), set()).add(int(label[k]))
        signs.setdefault(b, set()).add(int(label[k]))
    for c, name in enumerate(CHANNELS):
        mine = [k for k, row in enumerate(rows) if row[3] == c]
        for sign, value in (("pos", 1), ("zero", 0), ("neg", -1)):
            stats[f"arew/{name}/{sign}"] = float(sum(int(label[k]) == value for k in mine))
        stats[f"arew/{name}/changed_by_transforms"] = float(sum(int(label[k]) != rows[k][4] for k in mine))
        two_sided = sum({1, -1} <= signs.get((b, c), set()) for b in range(segments.batch_size))
        stats[f"arew/{name}/both_signs_frac"] = two_sided / batch
    if grouping == "pooled":
        active = sum({1, -1} <= signs.get(b, set()) for b in range(segments.batch_size))
    else:
        active = sum(any({1, -1} <= signs.get((b, c), set()) for c in range(len(CHANNELS))) for b in range(segments.batch_size))
    stats["arew/both_signs_frac"] = active / batch
    pos = float(sum(int(counts[k]) for k in range(len(rows)) if int(label[k]) == 1))
    neg = float(sum(int(counts[k]) for k in range(len(rows)) if int(label[k]) == -1))
    stats["arew/pos_tokens"], stats["arew/neg_tokens"] = pos, neg
    if neg > 0:
        stats["arew/pos_neg_token_ratio"] = pos / neg
    stats["arew/critiqued_token_frac"] = (pos + neg) / max(float(model_mask.sum()), 1.0)
    return stats


@settings(max_examples=200, deadline=None)
@given(data=batches(), grouping=st.sampled_from(["pooled", "separate"]), flip=st.sampled_from([0.0, 0.5]))
def test_statistics_match_counting_by_hand(data, grouping, flip):
    segments, mask = data
    model_mask = (mask > 0).float()
    label = transform_labels(segments, parse_config({"grouping": grouping, "noise": {"flip_prob": flip}}), 3)
    counts, total = span_totals(segments, model_mask.cumsum(dim=1))
    stats = critique_stats(segments, label, counts, total, grouping)
    assert stats == _reference_stats(segments, label, counts, model_mask, grouping)


def test_nothing_to_add_returns_the_base_advantages():
    segments = collect_segments([make_record([(0, 2), (2, 4)], ["as", "bt"], [1, 1])], [4])
    base = torch.randn(1, 4)
    out, _ = reweight_advantages(base, torch.ones(1, 4), segments, parse_config({}), 0)
    assert out is base


def test_numpy_numbers_are_read_like_python_ones():
    record = {"start": np.array([0, 3]), "end": [np.int64(3), 5], "channel": ["as", "bt"], "label": [np.int8(1), -1]}
    segments = collect_segments([record], [5])
    assert segments.start.tolist() == [0, 3] and segments.end.tolist() == [3, 5] and segments.label.tolist() == [1, -1]
