"""The record contract: malformed records fail naming the sample, or are dropped and counted."""

import math

import pytest

from arew.core import CritiqueRecordError, collect_segments, make_record

GOOD = make_record([(0, 2), (2, 5)], ["as", "bt"], [1, -1])


@pytest.mark.parametrize(
    "record, message",
    [
        ({"start": [0], "end": [2], "channel": ["as"]}, "missing keys ['label']"),
        ({"start": [0, 1], "end": [2], "channel": ["as"], "label": [1]}, "different lengths"),
        (make_record([(0, 2)], ["xx"], [1]), "unknown channel"),
        (make_record([(0, 2)], ["as"], [2]), "label 2"),
        (make_record([(3, 3)], ["as"], [1]), "outside response"),
        (make_record([(0, 11)], ["as"], [1]), "outside response of length 10"),
        (make_record([(-1, 2)], ["as"], [1]), "outside response"),
        (make_record([(0, 4), (3, 6)], ["as", "bt"], [1, 1]), "overlap"),
        (make_record([(5, 6), (0, 2)], ["as", "bt"], [1, 1]), "increasing order"),
        ({"start": [0.5], "end": [2], "channel": ["as"], "label": [1]}, "non-integer"),
        ({"start": [0], "end": [2], "channel": ["as"], "label": [math.nan]}, "NaN"),
        ({"start": ["a"], "end": [2], "channel": ["as"], "label": [1]}, "non-numeric"),
        ("not a dict", "expected a dict"),
        ({"start": "0", "end": [2], "channel": ["as"], "label": [1]}, "must be a list"),
    ],
)
def test_invalid_records_raise_naming_the_sample(record, message):
    with pytest.raises(CritiqueRecordError, match="sample 'uid-7_0_0'") as info:
        collect_segments([GOOD, record], [10, 10], sample_names=["uid-3_0_0", "uid-7_0_0"])
    assert message in str(info.value)


def test_drop_mode_counts_and_keeps_the_rest():
    bad = make_record([(0, 4), (3, 6)], ["as", "bt"], [1, 1])
    segments = collect_segments([GOOD, bad, None, "junk"], [10, 10, 10, 10], on_invalid="drop")
    assert segments.dropped_samples == 2
    assert segments.samples_without_records == 1
    assert segments.sample.tolist() == [0, 0]
    assert segments.label.tolist() == [1, -1]


def test_flattening_order_rank_and_count():
    records = [GOOD, None, make_record([(1, 2), (2, 3), (4, 9)], ["bt", "as", "bt"], [0, 1, -1])]
    segments = collect_segments(records, [5, 0, 9])
    assert segments.sample.tolist() == [0, 0, 2, 2, 2]
    assert segments.rank.tolist() == [0, 1, 0, 1, 2]
    assert segments.count.tolist() == [2, 2, 3, 3, 3]
    assert segments.channel.tolist() == [0, 1, 1, 0, 1]


def test_wrong_lengths_shape_is_rejected():
    with pytest.raises(ValueError, match="response_lengths"):
        collect_segments([GOOD], [10, 10])
