"""``arew eval``'s runner and tables with in-process scripted chat models: resume, failures, ablation, figures."""

from __future__ import annotations

import json
import math

import pytest

from arew.envs.registry import prepare_task
from arew.envs.rows import read_rows
from arew.eval.model import Completion, GenerationError, GenerationParams
from arew.eval.results import ablation_drop, mean_ci, summarize, write_tables
from arew.eval.runner import EPISODES_FILE, EvalConfig, evaluate, read_episodes

QUESTION = "<scratch>ask</scratch><interact>Do you have a fever?</interact>"
SCORES = "<scratch>update</scratch><interact>0.1, 0.7, 0.1, 0.1</interact>"
ANSWER = "<answer>0.1, 0.7, 0.1, 0.1</answer>"


class ScriptedChat:
    """Answers the k-th agent turn of a conversation with ``script[k]`` (the last one after that)."""

    name = "scripted"

    def __init__(self, script, fail_rows=()):
        self.script, self.fail_rows = list(script), set(fail_rows)
        self.calls: list[list[dict[str, str]]] = []
        self.params: list[GenerationParams] = []

    async def complete(self, messages, params):
        self.calls.append(list(messages))
        self.params.append(params)
        if any(f"row {r}" in messages[-1]["content"] for r in self.fail_rows):
            raise GenerationError("scripted failure")
        k = sum(m["role"] == "assistant" for m in messages)
        return Completion(self.script[min(k, len(self.script) - 1)])


@pytest.fixture(scope="module")
def mediq_rows(tmp_path_factory, mediq_source):
    folder = tmp_path_factory.mktemp("mediq")
    return read_rows(prepare_task("mediq", folder / "data", 32, 4, 4, seed=0, source=str(mediq_source))["test"])


@pytest.fixture(scope="module")
def pe_rows(tmp_path_factory):
    return read_rows(prepare_task("pe-g-s2", tmp_path_factory.mktemp("pe"), 1, 1, 3, seed=0)["test"])


def _config(**overrides):
    return EvalConfig(**{"env_options": {"user": "offline"}, "response_length": 4096, "max_tokens_per_turn": 128, **overrides})


async def test_every_episode_is_recorded_with_its_turns_and_critiques(mediq_rows, tmp_path):
    model = ScriptedChat([QUESTION, SCORES, ANSWER])
    records = await evaluate(model, mediq_rows[:2], _config(n=2), tmp_path)
    assert [r["name"] for r in records] == [f"test:{r['extra_info']['index']}:{s}" for r in mediq_rows[:2] for s in (0, 1)]
    for record in records:
        assert record["failed"] is None and record["reward"] == 1.0  # B is the gold option
        assert [t["channel"] for t in record["turns"]] == ["as", "bt", "bt"]
        assert record["turns"][0]["agent"] == QUESTION and "fever" in record["turns"][0]["feedback"].lower()
        assert record["turns"][0]["critique"] == 1  # an informative question
        assert record["info"]["decisions"] == 3 and record["info"]["generations"] == 3
        assert record["info"]["proxy_facts_revealed"] >= 1
    assert len((tmp_path / EPISODES_FILE).read_text().splitlines()) == 4
    assert all(p.stop == ("</interact>", "</answer>") and p.max_tokens <= 128 and p.temperature == 0 for p in model.params)


async def test_a_rerun_resumes_without_replaying_finished_episodes(mediq_rows, tmp_path):
    first = ScriptedChat([QUESTION, SCORES, ANSWER])
    await evaluate(first, mediq_rows[:2], _config(n=2), tmp_path)
    lines = (tmp_path / EPISODES_FILE).read_text().splitlines()
    (tmp_path / EPISODES_FILE).write_text("\n".join(lines[:3]) + "\n" + lines[3][:20])  # interrupted mid-write
    again = ScriptedChat([QUESTION, SCORES, ANSWER])
    records = await evaluate(again, mediq_rows[:2], _config(n=2), tmp_path)
    assert len(again.calls) == len(first.calls) // 4  # only the torn episode was played again
    assert len(records) == 4 and len(read_episodes(tmp_path)) == 4
    untouched = ScriptedChat([QUESTION])
    await evaluate(untouched, mediq_rows[:2], _config(n=2), tmp_path)
    assert untouched.calls == []


async def test_a_failing_generation_fails_its_episode_only_and_can_be_retried(mediq_rows, tmp_path):
    bad_row = mediq_rows[1]["extra_info"]["index"]
    failing = ScriptedChat([QUESTION, SCORES, ANSWER], fail_rows=[bad_row])
    failing_marker = f"row {bad_row}"
    rows = [dict(r, prompt=[*r["prompt"][:-1], {"role": "user", "content": r["prompt"][-1]["content"] + f" (row {r['extra_info']['index']})"}]) for r in mediq_rows[:3]]
    records = await evaluate(failing, rows, _config(), tmp_path)
    failed = [r for r in records if r["failed"]]
    assert len(failed) == 1 and failed[0]["row"] == bad_row and failed[0]["failed"]["reason"] == "generation"
    assert "scripted failure" in failed[0]["failed"]["error"] and failed[0]["reward"] == 0.0
    assert all(r["reward"] == 1.0 for r in records if not r["failed"])
    summary = summarize(records)
    assert summary["failed"]["generation"] == 1 and summary["rows"]["reward"]["mean"] == pytest.approx(2 / 3)
    healed = ScriptedChat([QUESTION, SCORES, ANSWER])
    records = await evaluate(healed, rows, _config(retry_failed=True), tmp_path)
    assert all(not r["failed"] for r in records) and healed.calls
    assert all(failing_marker in call[1]["content"] for call in healed.calls)  # only the failed episode was replayed


async def test_feedback_ablation_changes_only_what_the_user_says(mediq_rows, tmp_path):
    normal = await evaluate(ScriptedChat([QUESTION, SCORES, ANSWER]), mediq_rows[:2], _config(), tmp_path / "normal")
    ablated = await evaluate(
        ScriptedChat([QUESTION, SCORES, ANSWER]), mediq_rows[:2], _config(env_options={"user": "offline", "feedback_ablation": True}), tmp_path / "ablation"
    )
    for a, b in zip(normal, ablated):
        assert [t["agent"] for t in a["turns"]] == [t["agent"] for t in b["turns"]]
        assert [t["critique"] for t in a["turns"]] == [t["critique"] for t in b["turns"]]  # critiques see the truth
        assert "fever" in a["turns"][0]["feedback"].lower() and "unknown" in b["turns"][0]["feedback"].lower()
        assert a["turns"][1]["feedback"] == b["turns"][1]["feedback"]  # only the user's answers differ
    drop = ablation_drop(summarize(normal), summarize(ablated))
    assert drop["reward"]["drop"] == 0.0  # the scripted agent ignores what it hears


async def test_the_budget_asks_for_the_answer_when_no_round_fits(pe_rows, tmp_path):
    class AsksUntilTold(ScriptedChat):
        async def complete(self, messages, params):
            self.params.append(params)
            if "length budget" in messages[-1]["content"]:
                return Completion("<answer>0.5, 0.5, 0.5, 0.5, 0.5, 0.5</answer>")
            k = sum(m["role"] == "assistant" for m in messages)
            return Completion(["<interact>1, 2 | 1, 2</interact>", "<interact>0.5, 0.5, 0.5, 0.5, 0.5, 0.5</interact>"][k % 2])

    model = AsksUntilTold([])
    # a round needs 16 + 16 + 100 tokens; when it no longer fits, 90 or more are left: the notice and an answer fit
    config = _config(response_length=400, max_tokens_per_turn=16, feedback_reserve_tokens=100, env_options={})
    (record,) = await evaluate(model, pe_rows[:1], config, tmp_path)
    assert record["failed"] is None and record["info"]["forced_answer"] == 1.0
    assert record["info"]["response_tokens"] <= config.response_length
    assert all(p.max_tokens <= 16 for p in model.params)


async def test_sampled_episodes_get_their_own_seed_per_call(pe_rows, tmp_path):
    model = ScriptedChat(["<answer>0.5, 0.5, 0.5, 0.5, 0.5, 0.5</answer>"])
    await evaluate(model, pe_rows[:2], _config(n=2, temperature=1.0, env_options={}), tmp_path)
    seeds = [p.seed for p in model.params]
    assert len(set(seeds)) == 4 and all(p.temperature == 1.0 for p in model.params)


def test_config_errors_name_the_setting():
    with pytest.raises(ValueError, match="response_length"):
        EvalConfig(response_length=100, max_tokens_per_turn=64, feedback_reserve_tokens=0)
    with pytest.raises(ValueError, match="overflow"):
        EvalConfig(overflow="truncate")


def test_figures_mean_at_n_pass_at_n_and_intervals(tmp_path):
    records = [{"data_source": "d", "row": row, "reward": reward, "info": {"decisions": 4.0, "invalid_turns": invalid}}
               for row, reward, invalid in [(0, 1.0, 0.0), (0, 0.0, 2.0), (1, 0.0, 1.0), (1, 0.0, 0.0)]]  # fmt: skip
    summary = summarize(records)
    rows = summary["rows"]
    assert rows["reward"]["mean"] == 0.25 and rows["mean@2"]["mean"] == 0.25 and rows["pass@2"]["mean"] == 0.5
    assert rows["invalid_rate"]["mean"] == pytest.approx(3 / 16)
    assert rows["pass^1"]["mean"] == 0.25 and rows["pass^2"]["mean"] == 0.0  # row 0: 1 of 2 succeed
    three = summarize([{"data_source": "d", "row": 0, "reward": r} for r in (1.0, 1.0, 0.0)])["rows"]
    assert three["pass^2"]["mean"] == pytest.approx(1 / 3) and three["pass^3"]["mean"] == 0.0  # C(2,2)/C(3,2)
    mean, ci = mean_ci([1.0, 0.0, 0.0, 0.0])
    assert mean == 0.25 and ci == pytest.approx(1.96 * math.sqrt(0.25 / 4))
    assert math.isnan(mean_ci([1.0])[1]) and math.isnan(mean_ci([])[0])
    paths = write_tables(summary, tmp_path, "t")
    assert "| pass@2 | 0.5 |" in paths["md"].read_text()
    assert json.loads(paths["json"].read_text())["rows"]["reward"]["n"] == 4
    assert paths["csv"].read_text().splitlines()[0] == "metric,mean,ci95,n"


@pytest.mark.parametrize("task", ["pe-g-s2", "pe-g-s3", "pe-f-d6", "pe-f-d8"])
async def test_every_preference_task_plays_to_a_record(task, tmp_path):
    rows = read_rows(prepare_task(task, tmp_path / "data", 1, 1, 2, seed=0)["test"])
    model = ScriptedChat(["<interact>1, 2</interact>", "garbage", "<answer>0.5</answer>"])
    records = await evaluate(model, rows, _config(env_options={}), tmp_path / "out")
    assert len(records) == 2 and all(r["failed"] is None and r["task"] == task for r in records)
    assert all(r["info"]["decisions"] == 3 and r["info"]["invalid_turns"] >= 2 and r["reward"] == 0.0 for r in records)


@pytest.mark.parametrize("task", ["tau2-solo", "tau2-dual"])
async def test_tau2_episodes_play_to_a_record(task, tmp_path):
    """Action rounds only; the solo agent's answer or the dual-control customer's goodbye ends the episode."""
    pytest.importorskip("tau2")
    rows = read_rows(prepare_task(task, tmp_path / "data", 1, 1, 2, seed=0)["test"])
    if task == "tau2-solo":
        script = ['<interact>{"name": "check_sim_status"}</interact>', "<answer>Your SIM is fine. Goodbye.</answer>"]
    else:
        script = ["<interact>Hello, how can I help you?</interact>", "<interact>Thank you, goodbye!</interact>"]
    records = await evaluate(ScriptedChat(script), rows, _config(env_options={}), tmp_path / "out")
    assert len(records) == 2 and all(r["failed"] is None and r["task"] == task for r in records)
    for record in records:
        info = record["info"]
        assert info["decisions"] == 2 and info["bt_pos"] + info["bt_zero"] + info["bt_neg"] == 0
        ended = info["ended_by_environment"] if task == "tau2-dual" else info["answered"]
        assert ended == 1.0 and info["proxy_turns"] == (2 if task == "tau2-dual" else 1), info
