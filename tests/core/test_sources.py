"""Each critique source's labels lined up with the batch's decisions, counted and scored (arew.core.sources)."""

from __future__ import annotations

import math

import torch

from arew.core import collect_segments, make_record
from arew.core.quality import SourceScores
from arew.core.sources import collect_source_labels


def _segments():
    records = [
        make_record([(0, 2), (2, 4), (4, 6)], ["as", "bt", "as"], [1, 0, -1]),
        None,  # no decisions
        make_record([(1, 3)], ["bt"], [1]),
        make_record([(0, 1), (1, 2)], ["as", "as"], [0, 0]),
    ]
    return collect_segments(records, [8, 8, 8, 8])


def test_labels_line_up_with_the_segments_and_a_malformed_entry_only_loses_its_own():
    raw = [
        {"rules": [1, 0, -1], "judge": [-1, 1, -1]},
        {"rules": []},  # a sample without decisions: ignored
        {"rules": [1], "judge": [2]},  # not a label: this sample's source labels are lost, counted
        {"rules": [0, 0], "judge": [1, -1]},
    ]
    labels, malformed = collect_source_labels(raw, _segments())
    assert malformed == 1
    assert labels["rules"].tolist() == [1, 0, -1, 0, 0, 0] and labels["judge"].tolist() == [-1, 1, -1, 0, 1, -1]
    short = [{"judge": [1, 1]}, None, None, {"judge": "+1 +1"}]
    labels, malformed = collect_source_labels(short, _segments())
    assert malformed == 2 and labels["judge"].tolist() == [0] * 6


def test_scores_count_each_channel_and_match_the_balanced_accuracy_by_hand():
    scores = SourceScores(ema=0.9, min_class_share=0.0)
    channel = torch.tensor([0, 0, 0, 0, 1, 1])
    advantage = torch.tensor([2.0, -1.0, 1.0, -3.0, 1.0, 1.0])
    stats = scores.update({"judge": torch.tensor([1, -1, -1, 0, 1, 1])}, channel, advantage)
    assert (stats["arew/source/judge/as/pos"], stats["arew/source/judge/as/zero"], stats["arew/source/judge/as/neg"]) == (1, 1, 2)
    # +1 class: the one +1 agrees (mass 2 of 2); -1 class: agrees on a=-1 (1), not on a=+1 (1): 1/2
    assert stats["arew/source/judge/as/accuracy"] == 0.5 * (1.0 + 0.5)
    assert stats["arew/source/judge/as/accuracy_ema"] == stats["arew/source/judge/as/accuracy"]
    assert math.isnan(stats["arew/source/judge/bt/accuracy"])  # one sign only: no estimate
