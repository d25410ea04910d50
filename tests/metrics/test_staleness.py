"""Per-decision weight versions and the staleness logged from them (arew.metrics.staleness)."""

import pytest

from arew.metrics.staleness import decision_staleness_metrics, decision_versions

PREFIX = "arew/off_policy"


def test_staleness_counts_each_decision_against_the_policy_being_trained():
    entries = [decision_versions([4, 5], [5, 5]), decision_versions([3], [3])]
    metrics = decision_staleness_metrics(entries, [2, 1], step=6)  # step 6 trains version 5
    assert metrics[f"{PREFIX}/decisions"] == 3 and metrics[f"{PREFIX}/spanning_decisions"] == 1
    assert metrics[f"{PREFIX}/decision_staleness/max"] == 2 and metrics[f"{PREFIX}/decision_staleness/min"] == 0
    assert metrics[f"{PREFIX}/decision_staleness/mean"] == pytest.approx(2 / 3)
    assert metrics[f"{PREFIX}/decision_staleness_worst/max"] == 2
    assert metrics[f"{PREFIX}/decision_staleness_worst/mean"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    "entry",
    [
        "garbage",
        {"min": [1, 2]},
        {"min": [1], "max": [1, 2]},
        {"min": [True], "max": [1]},
        {"min": ["1"], "max": [1]},
        {"min": [1, 1], "max": [1, 1]},  # two versions for the sample's one decision
    ],
)
def test_a_malformed_entry_is_counted_and_adds_no_decision(entry):
    metrics = decision_staleness_metrics([entry, decision_versions([2], [2])], [1, 1], step=3)
    assert metrics[f"{PREFIX}/malformed_samples"] == 1 and metrics[f"{PREFIX}/decisions"] == 1
    assert metrics[f"{PREFIX}/decision_staleness/mean"] == 0


def test_decisions_without_a_version_are_counted_apart_and_nothing_known_logs_no_staleness():
    metrics = decision_staleness_metrics([decision_versions([None, None], [None, None]), None], [2, 0], step=1)
    assert metrics[f"{PREFIX}/decisions_without_version"] == 2 and metrics[f"{PREFIX}/decisions"] == 0
    assert metrics[f"{PREFIX}/malformed_samples"] == 0  # a sample with no entry is not malformed
    assert f"{PREFIX}/decision_staleness/mean" not in metrics
    with pytest.raises(ValueError, match="2 oldest versions for 1 decisions"):
        decision_versions([1, 2], [2])
