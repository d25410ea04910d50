"""The batch-at-once validation fast path: whenever it answers, the per-record path gives the same Segments."""

from collections import OrderedDict

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from arew.core import CritiqueRecordError, collect_segments, make_record
from arew.core import records as records_module
from arew.core.records import CHANNELS, _fast_segments

FIELDS = ("sample", "start", "end", "channel", "label")


class _Str(str):
    pass


def _slow(monkeypatch, *args, **kwargs):
    with monkeypatch.context() as patch:
        patch.setattr(records_module, "_fast_segments", lambda *_: None)
        try:
            return collect_segments(*args, **kwargs)
        except CritiqueRecordError as error:
            return str(error)


def _outcome(*args, **kwargs):
    try:
        return collect_segments(*args, **kwargs)
    except CritiqueRecordError as error:
        return str(error)


def _same(a, b):
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype == torch.long and torch.equal(x, y), name
    assert (a.batch_size, a.dropped_samples, a.samples_without_records) == (b.batch_size, b.dropped_samples, b.samples_without_records)
    assert (a.noise_order is None) == (b.noise_order is None)
    assert a.noise_order is None or torch.equal(a.noise_order, b.noise_order)
    return True


# ways to spoil a valid record, or to write it with other (still valid or not) types
_SPOILERS = [
    lambda r: r,
    lambda r: {**r, "label": [2] + r["label"][1:]},
    lambda r: {**r, "label": [True] + r["label"][1:]},
    lambda r: {**r, "label": [np.int8(-1)] + r["label"][1:]},
    lambda r: {**r, "start": [np.int64(r["start"][0])] + r["start"][1:]},
    lambda r: {**r, "start": [float(r["start"][0])] + r["start"][1:]},
    lambda r: {**r, "start": [-1] + r["start"][1:]},
    lambda r: {**r, "start": [2**53 + 1] + r["start"][1:]},
    lambda r: {**r, "end": [2**63] + r["end"][1:]},
    lambda r: {**r, "end": [r["end"][0] + 50] + r["end"][1:]},
    lambda r: {**r, "end": [r["start"][0]] + r["end"][1:]},
    lambda r: {**r, "start": r["start"][::-1], "end": r["end"][::-1]},
    lambda r: {**r, "start": [r["start"][0]] * len(r["start"])},
    lambda r: {**r, "channel": ["xx"] + r["channel"][1:]},
    lambda r: {**r, "channel": [_Str("as")] + r["channel"][1:]},
    lambda r: {**r, "channel": [np.str_("bt")] + r["channel"][1:]},
    lambda r: {**r, "channel": [["as"]] + r["channel"][1:]},
    lambda r: {**r, "label": tuple(r["label"])},
    lambda r: {**r, "start": np.array(r["start"])},
    lambda r: {**r, "label": r["label"][:-1]},
    lambda r: {**r, "extra": r["label"]},
    lambda r: {k: v for k, v in r.items() if k != "channel"},
    lambda r: OrderedDict(r),
    lambda r: "junk",
]


@st.composite
def batches(draw):
    length = draw(st.integers(1, 40))
    batch = draw(st.integers(1, 6))
    records = []
    for _ in range(batch):
        if draw(st.integers(0, 5)) == 0:
            records.append(None)
            continue
        cuts = sorted(draw(st.sets(st.integers(0, length), max_size=8)))
        spans = [(a, b) for a, b in zip(cuts, cuts[1:]) if draw(st.booleans())]
        record = make_record(
            spans, [draw(st.sampled_from(CHANNELS)) for _ in spans], [draw(st.sampled_from([-1, 0, 1])) for _ in spans]
        )
        if spans and draw(st.integers(0, 3)) == 0:
            record = draw(st.sampled_from(_SPOILERS))(record)
        elif spans and draw(st.integers(0, 2)) == 0:  # nudge one number: off by one or two, either way
            key = draw(st.sampled_from(["start", "end", "label"]))
            k = draw(st.integers(0, len(spans) - 1))
            record[key][k] += draw(st.sampled_from([-2, -1, 1, 2]))
        records.append(record)
    lengths = [draw(st.integers(0, length)) if draw(st.integers(0, 9)) == 0 else length for _ in range(batch)]
    return records, lengths


@settings(max_examples=600, deadline=None)
@given(data=batches(), on_invalid=st.sampled_from(["raise", "drop"]), keyed=st.booleans())
def test_fast_path_agrees_with_the_per_record_path(data, on_invalid, keyed):
    records, lengths = data
    monkeypatch = pytest.MonkeyPatch()
    kwargs = {"on_invalid": on_invalid, "sample_names": [f"s{i}" for i in range(len(records))]}
    if keyed:
        kwargs["noise_keys"] = [f"k{(7 * i) % 5}-{i}" for i in range(len(records))]
    assert _same(_outcome(records, lengths, **kwargs), _slow(monkeypatch, records, lengths, **kwargs))


def test_ordinary_batches_take_the_fast_path():
    records = [make_record([(0, 2), (2, 5), (7, 8)], ["as", "bt", "as"], [1, -1, 0]), None, make_record([], [], [])]
    records.append(make_record([(1, 8)], ["bt"], [1]))
    lengths = torch.tensor([8, 8, 8, 8])
    fast = _fast_segments(records, lengths, len(records), None)
    assert fast is not None
    assert fast.sample.tolist() == [0, 0, 0, 3] and fast.channel.tolist() == [0, 1, 0, 1]
    assert fast.start.tolist() == [0, 2, 7, 1] and fast.end.tolist() == [2, 5, 8, 8] and fast.label.tolist() == [1, -1, 0, 1]
    assert fast.samples_without_records == 1 and fast.dropped_samples == 0


@pytest.mark.parametrize(
    "record",
    [
        make_record([(0, 2)], ["as"], [2]),  # fails an element check: the per-record path words the error
        {"start": [0.0], "end": [2], "channel": ["as"], "label": [1]},  # a float: array("q") refuses it
        {"start": [0], "end": [2], "channel": [_Str("as")], "label": [1]},  # not exactly a str
        OrderedDict(make_record([(0, 2)], ["as"], [1])),
    ],
)
def test_anything_unusual_leaves_the_fast_path(record):
    assert _fast_segments([record], torch.tensor([10]), 1, None) is None


def test_an_all_empty_batch_matches_the_per_record_path(monkeypatch):
    records = [None, make_record([], [], []), None]
    _same(collect_segments(records, [3, 3, 3]), _slow(monkeypatch, records, [3, 3, 3]))


def test_channel_names_suit_the_first_letter_lookup():
    assert all(name.isascii() for name in CHANNELS)
    assert len({len(name) for name in CHANNELS}) == 1 and len({name[0] for name in CHANNELS}) == len(CHANNELS)
