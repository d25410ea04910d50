"""SynAct's mutual information on hand-made GRPO groups: decision points, MI, critiques, statistics."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from arew.core import collect_segments, make_record, parse_config
from arew.core import reference as ref
from arew.core.config import AReWConfigError
from arew.core.synact import (
    DecisionKeyError,
    apply_synact,
    collect_decision_keys,
    group_ids,
    outcome_classes,
    synact,
)
from core_helpers import flat, trajectories


def _batch(channels_per_sample, labels=None):
    """Segments with one token per decision; each sample's channels as given."""
    records = []
    for i, channels in enumerate(channels_per_sample):
        spans = [(p, p + 1) for p in range(len(channels))]
        row = [0] * len(channels) if labels is None else labels[i]
        records.append(make_record(spans, channels, row))
    lengths = [max(len(c), 1) for c in channels_per_sample]
    return collect_segments(records, lengths)


def _keys(segments, per_sample):
    return collect_decision_keys(
        [None if k is None else {"state": list(k[0]), "action": list(k[1])} for k in per_sample], segments
    )


def test_action_that_decides_the_outcome_has_mi_log2_and_signed_critiques():
    # one group of four rollouts; all start in state 1; actions 10, 10, 20, 20; the 20s succeed
    segments = _batch([["as"]] * 4)
    keys = _keys(segments, [([1], [10]), ([1], [10]), ([1], [20]), ([1], [20])])
    result = synact(segments, keys, np.zeros(4, dtype=np.int64), np.array([0.0, 0.0, 1.0, 1.0]))
    assert result.mi.tolist() == pytest.approx([math.log(2)])
    assert result.labels.tolist() == [-1, -1, 1, 1]
    assert result.stats["arew/synact/as/decision_points"] == 1.0
    assert result.stats["arew/synact/as/mi"] == pytest.approx(math.log(2))
    assert result.stats["arew/synact/as/outcome_constant_share"] == 0.0
    assert result.stats["arew/synact/bt/decision_points"] == 0.0


def test_partial_dependence_gives_the_plug_in_value():
    # arm a: outcomes 1, 1, 0; arm b: 0 -> I = H(O) - H(O|A) with O = (2 of 4 positive)
    segments = _batch([["as"]] * 4)
    keys = _keys(segments, [([5], [1]), ([5], [1]), ([5], [1]), ([5], [2])])
    result = synact(segments, keys, np.zeros(4, dtype=np.int64), np.array([1.0, 1.0, 0.0, 0.0]))
    h_o = math.log(2)
    h_o_given_a = 0.75 * -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3))
    assert result.mi[0] == pytest.approx(h_o - h_o_given_a)
    # arm a's mean class 2/3 > the point's 1/2: +1; arm b's 0: -1
    assert result.labels.tolist() == [1, 1, 1, -1]


def test_outcome_constant_point_has_zero_mi_and_no_critiques():
    segments = _batch([["as"]] * 4)
    keys = _keys(segments, [([1], [10]), ([1], [20]), ([1], [30]), ([1], [40])])
    result = synact(segments, keys, np.zeros(4, dtype=np.int64), np.ones(4))
    assert result.mi.tolist() == [0.0]
    assert result.labels.tolist() == [0, 0, 0, 0]
    assert result.stats["arew/synact/as/outcome_constant_share"] == 1.0


def test_a_state_reached_by_one_rollout_is_no_point_and_groups_do_not_mix():
    # samples 0, 1 in group 0 share state 1; sample 2 (group 1) also has state 1 but another prompt
    segments = _batch([["as", "bt"], ["as", "bt"], ["as", "bt"]])
    keys = _keys(segments, [([1, 2], [10, 11]), ([1, 3], [20, 11]), ([1, 4], [10, 11])])
    result = synact(segments, keys, np.array([0, 0, 1]), np.array([0.0, 1.0, 1.0]))
    assert result.stats["arew/synact/as/decision_points"] == 1.0  # (group 0, state 1) only
    assert result.stats["arew/synact/bt/decision_points"] == 0.0  # states 2, 3, 4: one rollout each
    assert result.point.tolist() == [0, -1, 0, -1, -1, -1]
    assert result.labels.tolist() == [-1, 0, 1, 0, 0, 0]
    # the same batch with min_rollouts=3 has no point at all
    assert synact(segments, keys, np.array([0, 0, 1]), np.array([0.0, 1.0, 1.0]), min_rollouts=3).stats[
        "arew/synact/as/decision_points"
    ] == 0.0


def test_per_turn_shares():
    # two rollouts: turn 1 (as, bt) shared, turn 2 as shared; turn 1's AS action separates, turn 2's does not
    segments = _batch([["as", "bt", "as", "bt"]] * 2)
    keys = _keys(segments, [([1, 2, 3, 4], [10, 0, 30, 0]), ([1, 5, 3, 6], [20, 0, 30, 0])])
    result = synact(segments, keys, np.zeros(2, dtype=np.int64), np.array([1.0, 0.0]))
    stats = result.stats
    assert stats["arew/synact/as/decision_points"] == 2.0
    assert stats["arew/synact/as/turn1/outcome_constant_share"] == 0.0
    assert stats["arew/synact/as/turn2/outcome_constant_share"] == 1.0
    assert stats["arew/synact/as/outcome_constant_share"] == 0.5
    assert "arew/synact/as/turn3/outcome_constant_share" not in stats


def test_outcome_classes_are_above_the_group_mean():
    groups = np.array([0, 0, 0, 1, 1])
    assert outcome_classes(groups, np.array([0.2, 0.5, 0.8, 3.0, 3.0])).tolist() == [0, 0, 1, 0, 0]
    assert group_ids(np.array(["b", "a", "b"], dtype=object)).tolist() == [1, 0, 1]


def test_only_replaces_and_fill_fills_the_rule_zeros():
    segments = _batch([["as"]] * 4, labels=[[1], [0], [0], [-1]])
    keys = _keys(segments, [([1], [10]), ([1], [10]), ([1], [20]), ([1], [20])])
    result = synact(segments, keys, np.zeros(4, dtype=np.int64), np.array([0.0, 0.0, 1.0, 1.0]))
    only, only_counts = apply_synact(segments, result, "only")
    assert only.label.tolist() == [-1, -1, 1, 1]
    assert (only_counts["arew/synact/as/critique_pos"], only_counts["arew/synact/as/critique_neg"]) == (2.0, 2.0)
    fill, fill_counts = apply_synact(segments, result, "fill")
    assert fill.label.tolist() == [1, -1, 1, -1]
    assert (fill_counts["arew/synact/as/critique_pos"], fill_counts["arew/synact/as/critique_neg"]) == (1.0, 1.0)
    off, off_counts = apply_synact(segments, result, "off")
    assert off is segments and off_counts == {}


def test_garbage_keys_raise_naming_the_sample_or_are_dropped_and_counted():
    segments = _batch([["as", "bt"]] * 3)
    good = {"state": [1, 2], "action": [3, 4]}
    for bad, words in (
        ({"state": [1], "action": [3]}, "1 entries but the sample has 2"),
        ({"state": [1, 2]}, "exactly the keys"),
        ("nonsense", "expected a dict"),
        ({"state": [1, "x"], "action": [3, 4]}, "integers in [0, 2**63)"),
        ({"state": [1, 2], "action": [3, 4.5]}, "integers in [0, 2**63)"),
        ({"state": [1, -2], "action": [3, 4]}, "integers in [0, 2**63)"),
        ({"state": [1, 2**70], "action": [3, 4]}, "integers in [0, 2**63)"),
        ({"state": [1, [2]], "action": [3, 4]}, "integers in [0, 2**63)"),
        ({"state": (1, 2), "action": [3, 4]}, "must be a list"),
    ):
        raw = [good, bad, good]
        with pytest.raises(DecisionKeyError, match="sample 'b'.*row 1") as error:
            collect_decision_keys(raw, segments, sample_names=["a", "b", "c"])
        assert words in str(error.value)
        keys = collect_decision_keys(raw, segments, on_invalid="drop")
        assert keys.dropped_samples == 1
        assert keys.known.tolist() == [True, True, False, False, True, True]
        # the dropped sample's decisions take part in no point
        result = synact(segments, keys, np.zeros(3, dtype=np.int64), np.array([0.0, 1.0, 1.0]))
        assert (result.point[2:4] == -1).all()


def test_missing_keys_are_no_error_and_no_point():
    segments = _batch([["as"], ["as"]])
    keys = collect_decision_keys([None, None], segments)
    result = synact(segments, keys, np.zeros(2, dtype=np.int64), np.array([0.0, 1.0]))
    assert result.stats["arew/synact/as/decision_points"] == 0.0 and keys.dropped_samples == 0


def test_config_section_defaults_and_errors_name_the_key():
    config = parse_config({})
    assert (config.synact.monitor, config.synact.critiques, config.synact.min_rollouts) == (True, "off", 2)
    assert parse_config({"synact": {"critiques": False}}).synact.critiques == "off"  # YAML's bare off
    for raw, key in (
        ({"critiques": "sometimes"}, "algorithm.arew.synact.critiques"),
        ({"min_rollouts": 1}, "algorithm.arew.synact.min_rollouts"),
        ({"monitor": "yes"}, "algorithm.arew.synact.monitor"),
        ({"threshold": 0.1}, "algorithm.arew.synact.threshold"),
    ):
        with pytest.raises(AReWConfigError, match=key.replace(".", r"\.")):
            parse_config({"synact": raw})


def test_many_groups_match_the_reference():
    """The vectorised MI equals the reference's count per point on a larger batch (random ones: test_vectorised_paths)."""
    rng = np.random.default_rng(0)
    groups, per_group, decisions = 8, 4, 6
    channels = [["as", "bt"] * (decisions // 2)] * (groups * per_group)
    segments = _batch(channels)
    state = rng.integers(0, 3, size=(groups * per_group, decisions))
    action = rng.integers(0, 2, size=(groups * per_group, decisions))
    keys = _keys(segments, [(s.tolist(), a.tolist()) for s, a in zip(state, action)])
    group = np.repeat(np.arange(groups), per_group)
    outcome = rng.integers(0, 2, size=groups * per_group).astype(float)
    result = synact(segments, keys, group, outcome)
    batch = trajectories(segments, torch.ones(groups * per_group, decisions))
    pairs = [list(zip(s.tolist(), a.tolist())) for s, a in zip(state, action)]
    labels, points = ref.synact_critiques(batch, pairs, group.tolist(), outcome.tolist())
    assert result.mi.tolist() == pytest.approx([point.mi for point in points])
    assert result.labels.tolist() == flat(labels)
    assert len(points) == sum(result.stats[f"arew/synact/{c}/decision_points"] for c in ("as", "bt"))
