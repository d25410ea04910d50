"""Robustness transforms: exact structure, statistical rates, reproducibility."""

import torch

from arew.core import collect_segments, make_record, parse_config
from arew.core.transforms import apply_window, transform_labels, turn_index


def _segments(labels_per_sample, channels=None):
    records = []
    for labels in labels_per_sample:
        spans = [(i, i + 1) for i in range(len(labels))]
        chans = channels or ["as", "bt"] * (len(labels) // 2 + 1)
        records.append(make_record(spans, chans[: len(labels)], labels))
    return collect_segments(records, [max(len(x), 1) for x in labels_per_sample])


def test_window_first_last_and_fill():
    # channels as, bt, as, bt, as: turns 1, 1, 2, 2, 3; the second sample (as, bt) is one turn
    seg = _segments([[1, -1, 1, -1, 1], [1, 1]])
    # ceil(0.4 * 3) = 2 turns, ceil(0.4 * 1) = 1 turn
    first = transform_labels(seg, parse_config({"window": {"keep": "first"}}), 0)
    assert first.tolist() == [1, -1, 1, -1, 0, 1, 1]
    last = transform_labels(seg, parse_config({"window": {"keep": "last", "fill": -1}}), 0)
    assert last.tolist() == [-1, -1, 1, -1, 1, 1, 1]


def _ten_turns():
    # 10 turns of (action, update) and the final answer (BT): 21 decisions, all +1
    return _segments([[1] * 21], ["as", "bt"] * 10 + ["bt"])


def test_window_counts_turns_not_decisions():
    seg = _ten_turns()
    turn, n_turns = turn_index(seg)
    assert turn.tolist() == [t for t in range(1, 11) for _ in (0, 1)] + [10]
    assert n_turns.tolist() == [10] * 21
    # the paper's 40% of 10 turns: 4 turns either way (by decisions it was 9 of 21: turns 1-5 / 7-10)
    first = apply_window(seg, "first", 0.4, 0)
    assert first.tolist() == [1] * 8 + [0] * 13  # turns 1-4
    last = apply_window(seg, "last", 0.4, 0)
    assert last.tolist() == [0] * 12 + [1] * 9  # turns 7-10, the final answer included


def test_window_fill_replaces_everything_outside():
    seg = _segments([[0, 1, -1, 0, 1, -1, 0]], ["as", "bt"] * 3 + ["bt"])  # 3 turns, ceil(1.2) = 2
    assert apply_window(seg, "last", 0.4, 1).tolist() == [1, 1, -1, 0, 1, -1, 0]
    assert apply_window(seg, "first", 0.4, -1).tolist() == [0, 1, -1, 0, -1, -1, -1]
    assert apply_window(seg, "all", 0.4, 1).tolist() == [0, 1, -1, 0, 1, -1, 0]


def test_window_action_only_every_decision_is_a_turn():
    seg = _segments([[1, -1, 1, -1, 1, -1, 1, -1, 1, -1], [1, 1, 1]], ["as"] * 10)  # tau2: AS only
    assert turn_index(seg)[0].tolist() == list(range(1, 11)) + [1, 2, 3]
    # ceil(0.3 * 10) = 3 (not 4 from 3.0000000000000004), ceil(0.3 * 3) = 1
    assert apply_window(seg, "first", 0.3, 0).tolist() == [1, -1, 1] + [0] * 7 + [1, 0, 0]
    assert apply_window(seg, "last", 0.3, 0).tolist() == [0] * 7 + [-1, 1, -1] + [0, 0, 1]


def test_window_updates_before_the_first_action_join_turn_one():
    seg = _segments([[1, 1, 1, 1, 1], [], [1, 1]], ["bt", "as", "bt", "as", "bt"])
    turn, n_turns = turn_index(seg)
    assert turn.tolist() == [1, 1, 1, 2, 2, 1, 1]
    assert n_turns.tolist() == [2] * 5 + [1, 1]  # the last sample (bt, as) is one turn
    assert apply_window(seg, "first", 0.5, 0).tolist() == [1, 1, 1, 0, 0, 1, 1]
    assert apply_window(seg, "last", 0.5, 0).tolist() == [0, 0, 0, 1, 1, 1, 1]
    assert apply_window(seg, "last", 0.0, 0).tolist() == [0] * 7


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


def test_noise_follows_the_samples_not_the_batch_order():
    """A resumed run receives its batch in another order: each sample must keep its own noise."""
    rows = [[1, -1, 1], [-1, -1], [1, 1, -1, -1], [-1]]
    names = ["train:3:0", "train:1:1", "train:1:0", "train:7:0"]
    config = parse_config({"noise": {"flip_prob": 0.5, "neg_to_pos_prob": 0.5, "seed": 2}})

    def per_sample(order):
        records = [make_record([(i, i + 1) for i in range(len(rows[j]))], ["as"] * len(rows[j]), rows[j]) for j in order]
        seg = collect_segments(records, [len(rows[j]) for j in order], noise_keys=[names[j] for j in order])
        out = transform_labels(seg, config, step=4)
        return {names[j]: out[seg.sample == i].tolist() for i, j in enumerate(order)}

    reference = per_sample([0, 1, 2, 3])
    assert per_sample([2, 0, 3, 1]) == reference and per_sample([3, 2, 1, 0]) == reference
    flat = [z for name in names for z in reference[name]]
    assert flat != [z for row in rows for z in row]  # the noise did act
