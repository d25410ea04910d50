"""The judge critique source against a real vLLM server (vLLM's CPU build) serving a scripted judge model, on its
own and through ``main_ppo``. The server runs under the judge's default model name, so a run turns the judge on
with two keys and a URL, as docs/guides/critique-sources.md says."""

from __future__ import annotations

import pytest

from arew.critiques.judge import JudgeConfig
from arew.critiques.settings import CritiqueSettings
from arew.envs.registry import make_env
from arew.episodes import EpisodeCritiques, EpisodeLog, play
from arew.schema import parse_section
from arew.verl_plugin import smoke
from arew_preference.data import build_rows
from fakes import ScriptedAgent

pytestmark = pytest.mark.vllm

JUDGE_REPLY = "CRITIQUE: -1"  # a bigram model's reply: no token may repeat before its end


@pytest.fixture(scope="module")
def judge_server(launch_vllm, scripted_model_dir):
    with launch_vllm(scripted_model_dir(JUDGE_REPLY), JudgeConfig.model) as server:
        yield server


async def _play_pe(critiques: dict) -> EpisodeLog:
    row = build_rows("pe-g-s2", 2, 1, 1, seed=3)["train"][0]["extra_info"]
    half = ", ".join(["0.5"] * 6)
    texts = ["<interact>1, 2 | 1, 2</interact>", f"<interact>{half}</interact>", "<interact>3, 4 | 2, 3</interact>",
             f"<interact>{half}</interact>", f"<answer>{half}</answer>"]  # fmt: skip
    plan = parse_section(CritiqueSettings, critiques, "arew_agent.critiques").for_task(row["task"])
    env = make_env(row["task"], row, row["seed"])
    log = EpisodeLog()
    await play(env, ScriptedAgent(texts), log, critiques=EpisodeCritiques(plan, row["task"], row, tuple(env.initial_messages()), "train:0:0"))
    return log


async def test_the_judge_labels_every_decision_of_a_real_episode(judge_server, vllm_kit):
    before = vllm_kit.finished_requests(judge_server.url)
    log = await _play_pe({"source": "judge", "options": {"url": judge_server.url, "timeout": 120.0, "cache_size": 0}})
    assert log.labels == [-1] * 5 and log.by_source["judge"] == [-1] * 5 and log.by_source["rules"] != [-1] * 5
    counts = log.critique_counts
    assert counts["judge_requests"] == 5 and counts["missing"] == 0 and counts["judge_unreadable"] == 0
    assert vllm_kit.wait_finished(judge_server.url, before + 5) == before + 5


async def test_a_model_that_does_not_number_its_lines_gives_no_critique_per_episode(judge_server):
    """mode=episode asks for 'D<n>: ...' lines; the scripted judge writes one CRITIQUE line: every decision keeps its rule label, counted."""
    log = await _play_pe({"source": "judge", "on_missing": "rule", "options": {"url": judge_server.url, "mode": "episode", "timeout": 120.0}})
    assert log.labels == log.by_source["rules"] and log.by_source["judge"] == [0] * 5
    assert log.critique_counts["judge_requests"] == 1 and log.critique_counts["missing"] == 5 and log.critique_counts["judge_unreadable"] == 5


def test_main_ppo_trains_with_the_judge_turned_on_by_two_keys_and_a_url(judge_server, tmp_path):
    judge = ["arew_agent.critiques.source=judge", f"+arew_agent.critiques.options.url={judge_server.url}"]
    result = smoke.run(out=tmp_path / "judge", steps=1, timeout=900, overrides=judge)
    assert result.returncode == 0, f"main_ppo failed, log tail:\n{result.log_path.read_text()[-6000:]}"
    [step] = result.steps
    assert step["episode/critique_judge_requests/mean"] > 0 and step["episode/critique_missing/mean"] == 0
    assert step["episode/critique_judge_request_failures/mean"] == 0 and step["episode/failed/count"] == 0
    # replace: the judge's -1 on every decision trains (the smoke's false-positive noise, neg_to_pos_prob=0.5, turns
    # some into +1 after the source, as it would the rules'); the rules' own labels are counted and scored beside it
    for ch in ("as", "bt"):
        judged = step[f"arew/source/judge/{ch}/neg"]
        assert step[f"arew/source/judge/{ch}/pos"] == step[f"arew/source/judge/{ch}/zero"] == 0
        assert step[f"arew/{ch}/neg"] + step[f"arew/{ch}/pos"] == judged and step[f"arew/{ch}/pos"] == step[f"arew/{ch}/changed_by_transforms"]
        assert sum(step[f"arew/source/rules/{ch}/{word}"] for word in ("pos", "zero", "neg")) == judged
        assert f"arew/source/judge/{ch}/accuracy" in step and f"arew/source/rules/{ch}/accuracy_ema" in step
    assert step["arew/as/neg"] + step["arew/bt/neg"] > 0
