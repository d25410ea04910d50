"""Robustness transforms: exact structure, statistical rates, reproducibility."""

import torch

from arew.core import collect_segments, make_record, parse_config
from arew.core.transforms import transform_labels


def _segments(labels_per_sample, channels=None):
    records = []
    for labels in labels_per_sample:
        spans = [(i, i + 1) for i in range(len(labels))]
        chans = channels or ["as", "bt"] * (len(labels) // 2 + 1)
        records.append(make_record(spans, chans[: len(labels)], labels))
    return collect_segments(records, [max(len(x), 1) for x in labels_per_sample])


def test_window_first_last_and_fill():
    seg = _segments([[1, -1, 1, -1, 1], [1, 1]])
    # ceil(0.4 * 5) = 2, ceil(0.4 * 2) = 1
    first = transform_labels(seg, parse_config({"window": {"keep": "first"}}), 0)
    assert first.tolist() == [1, -1, 0, 0, 0, 1, 0]
    last = transform_labels(seg, parse_config({"window": {"keep": "last", "fill": -1}}), 0)
    assert last.tolist() == [-1, -1, -1, -1, 1, -1, 1]


def test_channel_selection():
    seg = _segments([[1, -1, -1, 1]])
    assert transform_labels(seg, parse_config({"channels": "as"}), 0).tolist() == [1, 0, -1, 0]
    assert transform_labels(seg, parse_config({"channels": "bt"}), 0).tolist() == [0, -1, 0, 1]
    assert transform_labels(seg, parse_config({"channels": "off"}), 0).tolist() == [0, 0, 0, 0]


def test_flip_rate_and_zeros_untouched():
    labels = [[1, -1, 0] * 1000]
    seg = _segments(labels)
    out = transform_labels(seg, parse_config({"noise": {"flip_prob": 0.3}}), step=5)
    raw = seg.label
    nonzero = raw != 0
    rate = float((out[nonzero] != raw[nonzero]).double().mean())
    assert abs(rate - 0.3) < 0.03  # 2000 draws: std ~ 0.01
    assert torch.equal(out[~nonzero], raw[~nonzero])
    assert torch.equal(out.abs(), raw.abs())


def test_negative_to_positive_rate_only_touches_negatives():
    seg = _segments([[1, -1] * 1500])
    out = transform_labels(seg, parse_config({"noise": {"neg_to_pos_prob": 0.5}}), step=1)
    raw = seg.label
    assert torch.equal(out[raw == 1], raw[raw == 1])
    rate = float((out[raw == -1] == 1).double().mean())
    assert abs(rate - 0.5) < 0.04


def test_noise_is_reproducible_per_seed_and_step():
    seg = _segments([[1, -1] * 200])
    config = parse_config({"noise": {"flip_prob": 0.5, "seed": 3}})
    a = transform_labels(seg, config, step=7)
    assert torch.equal(a, transform_labels(seg, config, step=7))
    assert not torch.equal(a, transform_labels(seg, config, step=8))
    other_seed = parse_config({"noise": {"flip_prob": 0.5, "seed": 4}})
    assert not torch.equal(a, transform_labels(seg, other_seed, step=7))
