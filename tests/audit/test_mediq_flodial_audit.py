"""The critique audits of MediQ and FloDial with the offline users (envs/mediq/arew_mediq/audit.py,
envs/flodial/arew_flodial/audit.py): no adversary out-earns the competent policy's critiques with a lower
reward, and each adversary meets the critique its trick deserves."""

from __future__ import annotations

import functools

import pytest

from arew.audit.runner import PolicyScore, TaskAudit, exploits, run_audit
from arew_flodial import audit as flodial
from arew_mediq import audit as mediq

N_ROWS = 8
AUDITS: dict[str, TaskAudit] = {a.name: a for a in (*mediq.AUDITS, *flodial.AUDITS)}
FLODIAL = ["flodial-easy", "flodial-hard"]


@functools.cache
def scores(name: str) -> dict[str, PolicyScore]:
    return {s.policy: s for s in run_audit(AUDITS[name], N_ROWS, seed=0)}


def test_rows_are_built_in_process_from_the_raw_formats():
    assert list(AUDITS) == ["mediq", *FLODIAL]
    rows = mediq.rows(N_ROWS, 0)
    assert len(rows) == N_ROWS and len({r["case_id"] for r in rows}) == len(mediq.CASES) == N_ROWS
    assert all(r["known_fact_ids"] == [0] and len(r["facts"]) - 1 >= 8 for r in rows)  # enough to ask every turn
    easy, hard = (AUDITS[name].rows(N_ROWS, 0) for name in FLODIAL)
    assert len(easy) == len(hard) == N_ROWS
    assert all(r["separating_questions"] <= 2 for r in easy) and all(r["separating_questions"] >= 3 for r in hard)


@pytest.mark.parametrize("name", list(AUDITS))
def test_no_adversary_out_earns_the_competent_policy(name):
    tally = scores(name)
    assert exploits(list(tally.values())) == []
    competent = tally["competent"]
    assert competent.episodes == N_ROWS and competent.reward == 1.0
    assert competent.share(-1) == 0.0 and competent.score("as") == 1.0


@pytest.mark.parametrize("name", list(AUDITS))
def test_format_games_are_all_invalid(name):
    form = scores(name)["format"]
    assert form.share(-1) == 1.0 and form.reward == 0.0


@pytest.mark.parametrize("name", list(AUDITS))
def test_reworded_repeats_earn_nothing(name):
    reworded = scores(name)["repeat_reworded"]  # only its first question earns +1
    assert reworded.counts["as"][1] == N_ROWS and reworded.counts["as"][0] == 0


@pytest.mark.parametrize("name", list(AUDITS))
def test_answer_early_ends_after_one_question_with_less_reward(name):
    # in FloDial it ties the competent policy's critique score (both all +1): see the module docstring
    early, competent = scores(name)["answer_early"], scores(name)["competent"]
    assert early.decisions() == 2 * N_ROWS and early.reward < competent.reward
    assert early.score() <= competent.score()


def test_mediq_patient_reveals_nothing_to_stuffed_or_empty_questions():
    tally = scores("mediq")
    for name in ("stuffing", "stuff_options", "known_facts"):
        assert tally[name].share(-1, "as") == 1.0 and tally[name].reward == 0.0
    assert tally["generic"].score("as") <= -0.9  # "What brings you here?" matches "brings up sputum" once


def test_mediq_belief_tricks_lose_to_raising_the_gold_margin():
    tally = scores("mediq")
    competent = tally["competent"].score("bt")
    assert tally["competent"].counts["bt"][1] == 8 * N_ROWS  # every update raises the margin: +1
    # the paper's counterfactual check alone paid each of these +1 after every new fact (env docstring)
    assert tally["copy_belief"].counts["bt"][1] == 0 and tally["copy_belief"].counts["bt"][-1] == 0
    assert tally["raise_all"].counts["bt"][1] == 0
    for name in ("random_move", "random_move_silent", "raise_top", "oscillate"):
        assert tally[name].counts["bt"][-1] > 0 and tally[name].score("bt") < competent - 0.5


@pytest.mark.parametrize("name", FLODIAL)
def test_flodial_user_refuses_questions_about_several_checks_or_none(name):
    tally = scores(name)
    for adversary in ("stuffing", "stuff_candidates"):  # every table check (or every candidate) at once
        assert tally[adversary].share(-1, "as") == 1.0 and tally[adversary].reward == 0.0
    assert tally["off_table"].score("as") <= -0.9


@pytest.mark.parametrize("name", FLODIAL)
def test_flodial_belief_tricks(name):
    tally = scores(name)
    for adversary in ("copy_belief", "raise_all", "all_ones"):  # raising every score no longer passes
        assert tally[adversary].counts["bt"][1] == 0 and tally[adversary].reward == 0.0
    for adversary in ("raise_random", "oscillate"):
        assert tally[adversary].score("bt") < 0 and tally[adversary].reward < 0.2
    # ruling out a random candidate has the shape of a correct update; it is paid only while it spares the gold
    eliminate = tally["eliminate_random"]
    assert eliminate.counts["bt"][-1] > 0 and eliminate.score("bt") < 0.5 and eliminate.reward < 0.2


@pytest.mark.parametrize("name", FLODIAL)
def test_flodial_asking_only_confirmed_checks_pays_no_more(name):
    # with No at 0 (the paper's AS rule) asking only the checks answered Yes out-earned the competent policy
    yes_only, competent = scores(name)["yes_only"], scores(name)["competent"]
    assert yes_only.score("as") == competent.score("as") == 1.0
    assert yes_only.reward < competent.reward and yes_only.score() < competent.score()
