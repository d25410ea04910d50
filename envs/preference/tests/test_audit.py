"""The critique audits of the four PE variants (envs/preference/arew_preference/audit.py): no adversary out-earns the
competent policy's critiques with a lower reward, and each adversary meets the critique its trick
deserves."""

from __future__ import annotations

import functools

import pytest

from arew.audit.runner import PolicyScore, exploits, run_audit
from arew_preference.audit import AUDITS

N_ROWS = 8
NAMES = [audit.name for audit in AUDITS]


@functools.cache
def scores(name: str) -> dict[str, PolicyScore]:
    audit = next(a for a in AUDITS if a.name == name)
    return {s.policy: s for s in run_audit(audit, N_ROWS, seed=0)}


def test_one_audit_per_variant_with_every_adversary():
    assert NAMES == ["pe-g-s2", "pe-g-s3", "pe-f-d6", "pe-f-d8"]
    assert all(len(a.rows(N_ROWS, 0)) == N_ROWS for a in AUDITS)


@pytest.mark.parametrize("name", NAMES)
def test_no_adversary_out_earns_the_competent_policy(name):
    tally = scores(name)
    assert exploits(list(tally.values())) == []
    competent = tally["competent"]
    assert competent.episodes == N_ROWS and competent.reward > 0.99 and competent.score() == 1.0


@pytest.mark.parametrize("name", NAMES)
def test_honest_bayesian_learner_is_paid_more_than_belief_tricks(name):
    tally = scores(name)
    bayes = tally["bayes_mean"].score("bt")
    assert bayes > 0 and tally["bayes_mean"].reward > 0
    # a tiny step in the direction the answer favours no longer out-earns a real update (env: the
    # guess must predict the answer just given; the paper's rule alone paid it more than the posterior)
    assert tally["timid"].score("bt") < bayes
    assert tally["oscillate"].score("bt") < 0 and tally["random_belief"].score("bt") < 0
    copy = tally["copy_belief"]  # the 0.5 start is never judged closer or farther: 0, and no reward
    assert copy.counts["bt"][1] == copy.counts["bt"][-1] == 0 and copy.reward == 0.0


@pytest.mark.parametrize("name", NAMES)
def test_privileged_creep_is_punished_for_ignoring_answers(name):
    creep = scores(name)["creep"]  # 1% towards w* per update: closer every time, answers unabsorbed
    assert creep.counts["bt"][-1] > 0 and creep.score("bt") < 0.6
    assert creep.reward < scores(name)["competent"].reward


@pytest.mark.parametrize("name", NAMES)
def test_a_learner_that_absorbs_every_answer_is_rarely_punished(name):
    project = scores(name)["project"]
    assert project.share(-1, "bt") < 0.05 and project.score("bt") > 0.3 and project.reward > 0.25


@pytest.mark.parametrize("name", NAMES)
def test_uninformative_and_repeated_queries(name):
    tally = scores(name)
    dominated = tally["dominated"]
    assert dominated.score("as") <= -0.9 and dominated.reward < 0.1
    swapped = tally["repeat_swapped"]  # every second query is the previous one swapped: -1 each time
    assert swapped.counts["as"][-1] == swapped.counts["as"][1] > 0
    reworded = tally["repeat_reworded"]  # only its first spelling earns +1
    assert reworded.counts["as"][1] == N_ROWS and reworded.counts["as"][0] == 0


@pytest.mark.parametrize("name", NAMES)
def test_redundant_queries_are_a_known_gap_of_the_as_rule(name):
    # queries whose answer the earlier ones nearly imply still earn AS +1 (the paper's rule is static
    # informativeness); they cost the reward instead, and stay below the competent policy
    tally = scores(name)
    redundant = tally["redundant"]
    assert redundant.score("as") == 1.0
    assert redundant.reward < tally["bayes_mean"].reward and redundant.score() < tally["competent"].score()


@pytest.mark.parametrize("name", NAMES)
def test_answer_early_and_format_games(name):
    tally = scores(name)
    early = tally["answer_early"]
    assert early.decisions() == 2 * N_ROWS and early.reward < tally["competent"].reward
    form = tally["format"]
    assert form.share(-1) == 1.0 and form.reward == 0.0
