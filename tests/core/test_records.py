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


@pytest.mark.parametrize(
    "record, message",
    [
        ({"start": [10**400], "end": [2], "channel": ["as"], "label": [1]}, "non-numeric"),  # too large for a float
        ({"start": [0], "end": [2], "channel": [["as"]], "label": [1]}, "unknown channel"),  # unhashable
        ({"start": [[0], [2]], "end": [[2], [4]], "channel": ["as", "bt"], "label": [[1], [1]]}, "non-numeric"),
        ({**GOOD, "weight": [1, 1]}, r"unknown keys \['weight'\]"),
    ],
)
@pytest.mark.parametrize("on_invalid", ["raise", "drop"])
def test_shapes_that_used_to_escape_both_modes(record, message, on_invalid):
    if on_invalid == "raise":
        with pytest.raises(CritiqueRecordError, match=message):
            collect_segments([GOOD, record], [10, 10])
    else:
        segments = collect_segments([GOOD, record], [10, 10], on_invalid="drop")
        assert segments.dropped_samples == 1 and segments.sample.tolist() == [0, 0]


def _garbage():
    from hypothesis import strategies as st

    scalar = st.one_of(
        st.integers(min_value=-(10**400), max_value=10**400), st.floats(allow_nan=True, allow_infinity=True),
        st.booleans(), st.none(), st.text(max_size=3), st.sampled_from(["as", "bt"]),
    )  # fmt: skip
    value = st.recursive(scalar, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=2), max_leaves=6)
    field = st.one_of(value, st.lists(scalar, max_size=4), st.lists(st.lists(scalar, min_size=1, max_size=1), max_size=3))
    record = st.one_of(
        value,
        st.fixed_dictionaries({k: field for k in ("start", "end", "channel", "label")}),
        st.builds(lambda r, k, v: {**r, k: v}, st.just(GOOD), st.sampled_from(["start", "end", "channel", "label", "x"]), field),
    )  # fmt: skip
    return st.lists(st.one_of(st.none(), st.just(GOOD), record), min_size=1, max_size=4)


def test_no_record_shape_escapes_the_documented_errors():
    from hypothesis import given, settings

    @settings(max_examples=400, deadline=None, derandomize=True)
    @given(_garbage())
    def check(records):
        lengths = [10] * len(records)
        try:
            collect_segments(records, lengths)
        except CritiqueRecordError:
            pass
        segments = collect_segments(records, lengths, on_invalid="drop")
        good = sum(r is GOOD for r in records)
        assert segments.dropped_samples + segments.samples_without_records + good <= len(records)

    check()
